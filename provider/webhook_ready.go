package provider

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/restmapper"

	"github.com/readiness-io/pulumi-readiness/provider/internal/probe"
	"github.com/readiness-io/pulumi-readiness/provider/internal/session"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/admission"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/status"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/verdict"
)

// WebhookReady waits until an admission webhook really answers: configuration present, CA
// bundle injected, Service endpoints ready, and (with a probe) a server-side dry-run create that
// the webhook answered. Pod-ready is not webhook-serving; only a call through the API server
// proves it.
type WebhookReady struct {
	gate[WebhookReadyArgs, WebhookReadyState]
}

type ServiceRef struct {
	Namespace string `pulumi:"namespace"`
	Name      string `pulumi:"name"`
	Port      *int   `pulumi:"port,optional"`
}

func (s *ServiceRef) Annotate(a infer.Annotator) {
	a.Describe(&s.Namespace, "The Service's namespace.")
	a.Describe(&s.Name, "The Service's name.")
	a.Describe(&s.Port, "The Service port the webhook is served on (default 443).")
}

type WebhookReadyArgs struct {
	ValidatingWebhookConfiguration *string        `pulumi:"validatingWebhookConfiguration,optional" provider:"replaceOnChanges"`
	MutatingWebhookConfiguration   *string        `pulumi:"mutatingWebhookConfiguration,optional" provider:"replaceOnChanges"`
	Service                        *ServiceRef    `pulumi:"service,optional" provider:"replaceOnChanges"`
	Webhooks                       []string       `pulumi:"webhooks,optional" provider:"replaceOnChanges"`
	MinReadyEndpoints              *int           `pulumi:"minReadyEndpoints,optional" provider:"replaceOnChanges"`
	Probe                          map[string]any `pulumi:"probe,optional" provider:"replaceOnChanges,secret"`
	Expect                         *string        `pulumi:"expect,optional" provider:"replaceOnChanges"`
	GateArgs
}

type WebhookReadyState struct {
	WebhookReadyArgs
	ConfigurationName string   `pulumi:"configurationName"`
	WebhookNames      []string `pulumi:"webhookNames"`
	ServiceName       string   `pulumi:"serviceName"`
	ReadyEndpoints    int      `pulumi:"readyEndpoints"`
	CABundleSha256    string   `pulumi:"caBundleSha256"`
	Probed            bool     `pulumi:"probed"`
	FailurePolicy     string   `pulumi:"failurePolicy"`
}

//go:embed descriptions/webhook_ready.md
var webhookReadyDoc string

func (g *WebhookReady) Annotate(a infer.Annotator) {
	a.Describe(g, markdown(webhookReadyDoc))
}

func (a *WebhookReadyArgs) Annotate(an infer.Annotator) {
	an.Describe(&a.ValidatingWebhookConfiguration, "The ValidatingWebhookConfiguration's name.")
	an.Describe(&a.MutatingWebhookConfiguration, "The MutatingWebhookConfiguration's name.")
	an.Describe(&a.Service, "A webhook Service to wait for directly (no configuration named): its endpoints are checked, then the webhooks that point at it in any Validating- or MutatingWebhookConfiguration are found and each must be proven, as for a configuration (with `probe`, or one derived from their rules); while none points at it, the gate waits.")
	an.Describe(&a.Webhooks, "Names of the webhooks inside the configuration to check (default: all); every one must exist.")
	an.Describe(&a.MinReadyEndpoints, "Ready endpoints the webhook Service needs (default 1).")
	an.Describe(&a.Probe, "A Kubernetes object, as a manifest map, that the webhook intercepts. The gate dry-run creates it: "+
		"admission, or a denial naming one of the target's webhooks, proves it answers. Without it, the gate derives a minimal object "+
		"of a served kind the webhooks' rules cover (in the provider's default namespace when namespaced); give it when the rules "+
		"cover no served kind (the gate waits, asking for it) or schema validation rejects that minimal object (it fails, saying so).")
	an.Describe(&a.Expect, "A CEL expression over the probe's dry-run result, `object` (the probe as the API server would store it, "+
		"after every mutating webhook), that must return bool, such as `object.spec.containers.exists(c, c.name == 'istio-proxy')`: "+
		"evidence that a mutating webhook (an injector) served. Needs `probe`; not with `validatingWebhookConfiguration` (validating "+
		"webhooks do not mutate). While it is false, or fails to evaluate (no such key), the gate waits: a down injector with "+
		"failurePolicy Ignore lets the probe through unmutated. Holding on two probes in a row, it proves a `failurePolicy: Ignore` "+
		"mutating webhook without a direct call when that webhook is the only mutating webhook in the cluster that intercepts the "+
		"probe (rules, namespaceSelector, objectSelector; matchConditions count as matching) and `expect` is false on the probe as "+
		"given; otherwise that webhook must also answer a direct AdmissionReview. Write it for what only the target adds (its "+
		"container's name). Compiled at preview with the cost limits of ResourceReady's `cel`. A Secret probe's "+
		"result is never quoted.")
}

func (s *WebhookReadyState) Annotate(a infer.Annotator) {
	a.Describe(&s.ConfigurationName, "The configuration checked (empty with `service`).")
	a.Describe(&s.WebhookNames, "The webhooks checked.")
	a.Describe(&s.ServiceName, "The backing Service as namespace/name:port (empty for URL webhooks).")
	a.Describe(&s.ReadyEndpoints, "Ready endpoints of the backing Service.")
	a.Describe(&s.CABundleSha256, "SHA-256 of the caBundle, to detect re-injection.")
	a.Describe(&s.Probed, "Whether a probe (given or derived) proved the webhooks answer; always true once created.")
	a.Describe(&s.FailurePolicy, "`Fail`, or `Ignore` when any checked webhook ignores failures: such a webhook never blocks creation, so the gate protects less.")
}

var (
	_ = (infer.CustomCheck[WebhookReadyArgs])((*WebhookReady)(nil))
	_ = (infer.CustomRead[WebhookReadyArgs, WebhookReadyState])((*WebhookReady)(nil))
)

func (*WebhookReady) Check(ctx context.Context, req infer.CheckRequest) (infer.CheckResponse[WebhookReadyArgs], error) {
	return checkGate(ctx, req, func(args WebhookReadyArgs, failures []p.CheckFailure) []p.CheckFailure {
		n := 0
		for _, set := range []bool{args.ValidatingWebhookConfiguration != nil, args.MutatingWebhookConfiguration != nil, args.Service != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			failures = append(failures, p.CheckFailure{Property: "validatingWebhookConfiguration",
				Reason: "give exactly one of validatingWebhookConfiguration, mutatingWebhookConfiguration or service"})
		}
		for _, f := range []struct {
			key string
			v   *string
		}{{"validatingWebhookConfiguration", args.ValidatingWebhookConfiguration}, {"mutatingWebhookConfiguration", args.MutatingWebhookConfiguration}} {
			if f.v != nil && isKnown(req.NewInputs, f.key) {
				if msg := admission.NameProblem(*f.v); msg != "" {
					failures = append(failures, p.CheckFailure{Property: f.key, Reason: msg})
				}
			}
		}
		if args.Service != nil && isKnown(req.NewInputs, "service") {
			failures = append(failures, nameFailures(req.NewInputs, "service.name", args.Service.Name, "service.namespace", &args.Service.Namespace)...)
			if args.Service.Namespace == "" {
				failures = append(failures, p.CheckFailure{Property: "service.namespace", Reason: "must not be empty"})
			}
			if args.Service.Port != nil {
				if msg := portProblem(strconv.Itoa(*args.Service.Port)); msg != "" {
					failures = append(failures, p.CheckFailure{Property: "service.port", Reason: msg})
				}
			}
		}
		if args.MinReadyEndpoints != nil && *args.MinReadyEndpoints < 1 {
			failures = append(failures, p.CheckFailure{Property: "minReadyEndpoints", Reason: "must be at least 1"})
		}
		if args.Probe != nil && isKnown(req.NewInputs, "probe") {
			if msg := admission.ManifestProblem(args.Probe, false); msg != "" {
				failures = append(failures, p.CheckFailure{Property: "probe", Reason: "the probe must be a manifest the API server can create: " + msg})
			}
		}
		if args.Expect != nil && isKnown(req.NewInputs, "expect") {
			failures = append(failures, webhookExpectFailures(args, isKnown(req.NewInputs, "probe"))...)
		}
		return failures
	})
}

// webhookExpectFailures checks `expect`: it needs a probe (a derived one's shape is unknown to the
// user), a target that can mutate, valid CEL, and must not already hold on the probe as given
// (then it shows no mutation).
func webhookExpectFailures(args WebhookReadyArgs, probeKnown bool) []p.CheckFailure {
	fail := func(reason string) []p.CheckFailure { return []p.CheckFailure{{Property: "expect", Reason: reason}} }
	if args.Probe == nil {
		return fail("expect needs `probe`: it is evaluated on the probe's dry-run result, so give the object the injector mutates " +
			"(such as a Pod in a namespace it injects into)")
	}
	if args.ValidatingWebhookConfiguration != nil {
		return fail("expect proves a mutating webhook by its mutation; the webhooks of a ValidatingWebhookConfiguration do not mutate " +
			"(target the MutatingWebhookConfiguration, or leave expect out)")
	}
	x, err := admission.CompileExpect(args.Expect)
	if err != nil {
		return fail(err.Error())
	}
	if probeKnown && x.HoldsOn(args.Probe) {
		return fail(fmt.Sprintf("expect %q already holds on the probe as given, so it cannot show that a webhook mutated it; "+
			"test for what only the webhook adds (an injected container, a label)", x.Source()))
	}
	return nil
}

func (g *WebhookReady) Create(ctx context.Context, req infer.CreateRequest[WebhookReadyArgs]) (infer.CreateResponse[WebhookReadyState], error) {
	return createGate(ctx, req.Name, req.DryRun, req.Inputs.GateArgs, WebhookReadyState{WebhookReadyArgs: req.Inputs}, "webhook", webhookBuilder(req.Inputs))
}

func (g *WebhookReady) Read(ctx context.Context, req infer.ReadRequest[WebhookReadyArgs, WebhookReadyState]) (infer.ReadResponse[WebhookReadyArgs, WebhookReadyState], error) {
	return readGate(ctx, req, webhookBuilder(req.Inputs))
}

func webhookBuilder(a WebhookReadyArgs) builder[WebhookReadyState] {
	return func(r *session.Run) (evaluation, func(*WebhookReadyState), error) {
		e := &webhookEval{r: r, args: a, minEndpoints: 1}
		if a.MinReadyEndpoints != nil {
			e.minEndpoints = *a.MinReadyEndpoints
		}
		if a.Expect != nil {
			if fs := webhookExpectFailures(a, true); len(fs) > 0 {
				return nil, nil, fmt.Errorf("expect: %s", fs[0].Reason)
			}
		}
		if a.Probe != nil {
			e.probe = e.newProber(&unstructured.Unstructured{Object: a.Probe})
			x, _ := admission.CompileExpect(a.Expect)
			e.probe.Expect = x
		}
		return e, e.fill, nil
	}
}

type webhookEval struct {
	r            *session.Run
	args         WebhookReadyArgs
	minEndpoints int
	probe        *probe.Webhook
	// deriveProbeIn, when set, derives a probe from the configuration's rules (see
	// deriveProbe) in that namespace, when no probe was given; rediscovered is when discovery
	// was last refreshed for lack of a kind to derive it from.
	deriveProbeIn string
	rediscovered  time.Time
	// composite: a HelmReleaseReady's or ChartReady's, whose prober reuses a fresh proof and
	// probes in the background (probe.Webhook.reuse, probe.Webhook.async).
	composite bool
	// external maps the checked ExternalName Services (namespace/name) to their external names.
	external map[string]string

	configName, serviceName, caSum, policy string
	names                                  []string
	hooks                                  []*admission.Hook
	// ambiguous names webhooks (of a `service` target) whose name another webhook also has.
	ambiguous    map[string]bool
	endpoints    int
	warnedIgnore bool
	// state fingerprints what the gate watches (the configuration's and Services' versions,
	// ready endpoint counts): a change probes at once.
	state strings.Builder
}

func (e *webhookEval) what() string {
	switch {
	case e.args.ValidatingWebhookConfiguration != nil:
		return "ValidatingWebhookConfiguration " + *e.args.ValidatingWebhookConfiguration
	case e.args.MutatingWebhookConfiguration != nil:
		return "MutatingWebhookConfiguration " + *e.args.MutatingWebhookConfiguration
	default:
		return "webhook service " + e.args.Service.Namespace + "/" + e.args.Service.Name
	}
}

func (e *webhookEval) check(ctx context.Context) verdict.Result {
	e.state.Reset()
	res := e.checkObjects()
	if !res.Ready {
		if e.probe != nil {
			e.probe.Reset() // a good probe counts only while everything else holds
		}
		return res
	}
	return e.probeStep(ctx)
}

// checkObjects checks what the watch caches show: configuration, webhooks, caBundle, endpoints.
func (e *webhookEval) checkObjects() verdict.Result {
	e.policy = "Fail"
	e.external = map[string]string{}
	if e.args.Service != nil {
		port := 443
		if e.args.Service.Port != nil {
			port = *e.args.Service.Port
		}
		if res := e.serviceReady(e.args.Service.Namespace, e.args.Service.Name, port); !res.Ready {
			return res
		}
		// Ready endpoints show pods, not a webhook that answers: the webhooks pointing at the
		// Service are proven by the probe (derived when not given), as for a configuration.
		return e.serviceHooks(e.args.Service.Namespace, e.args.Service.Name, port)
	}
	gvk, name := session.VWCGVK, deref(e.args.ValidatingWebhookConfiguration)
	if e.args.MutatingWebhookConfiguration != nil {
		gvk, name = session.MWCGVK, *e.args.MutatingWebhookConfiguration
	}
	snap, pending := e.gatherConfiguration(gvk, name)
	if pending != nil {
		return *pending
	}
	c := admission.CheckConfiguration(snap)
	e.names, e.hooks, e.policy = c.Names, c.Hooks, c.Policy
	if !c.Result.Ready {
		return c.Result
	}
	for _, h := range e.hooks {
		if h.URL == "" {
			h.ExternalName = e.external[h.SvcNamespace+"/"+h.SvcName]
		}
	}
	if res := e.deriveIfNeeded(); res != nil {
		return *res
	}
	e.checked(c.CABundles)
	return verdict.Result{Ready: true}
}

// gatherConfiguration reads, from the watch caches, the configuration and the Service of each
// of its checked webhooks (see admission.CheckConfiguration, which decides over them).
func (e *webhookEval) gatherConfiguration(gvk schema.GroupVersionKind, name string) (admission.Configuration, *verdict.Result) {
	snap := admission.Configuration{Kind: gvk.Kind, Name: name, Want: e.args.Webhooks, Services: map[string]verdict.Result{}}
	objs, pending := e.r.Objects(session.Target{GVK: gvk, Name: name})
	if pending != nil {
		return snap, pending
	}
	if len(objs) == 0 {
		return snap, nil
	}
	snap.Object = objs[0]
	e.configName = name
	fmt.Fprintf(&e.state, "%s@%s", name, snap.Object.GetResourceVersion())
	for _, h := range admission.Selected(admission.WebhooksOf(gvk.Kind, snap.Object), e.args.Webhooks) {
		if h.URL != "" {
			// No EndpointSlice tells when it starts serving: a connect does (see session.Run.Listening).
			fmt.Fprintf(&e.state, ";reach %s=%t", h.URL, e.r.Listening(h.URL))
			continue
		}
		key := admission.ServiceKey(h.SvcNamespace, h.SvcName, h.SvcPort)
		if _, done := snap.Services[key]; !done && len(h.CABundle) > 0 {
			res := e.serviceReady(h.SvcNamespace, h.SvcName, h.SvcPort)
			if res.Unsynced || res.Poll {
				// The Service's read gave no answer yet: nothing to decide over.
				res.Message = fmt.Sprintf("webhook %s: %s", h.Name, res.Message)
				return snap, &res
			}
			snap.Services[key] = res
		}
	}
	return snap, nil
}

// newProber is the prober of obj for this gate.
func (e *webhookEval) newProber(obj *unstructured.Unstructured) *probe.Webhook {
	return probe.NewWebhook(e.r, obj, e.composite)
}

// deriveIfNeeded derives a probe from the checked webhooks' rules when none was given: a
// caBundle and ready endpoints (or a URL) do not show that a webhook answers, only a call does.
// Namespaced kinds are derived in deriveProbeIn (HelmReleaseReady: the release's namespace), or
// else the provider's default namespace. Without a kind to derive from, the gate waits for `probe`.
func (e *webhookEval) deriveIfNeeded() *verdict.Result {
	if e.probe != nil {
		return nil
	}
	ns := e.deriveProbeIn
	if ns == "" {
		ns = e.r.Clients.Namespace
	}
	obj, why := e.deriveProbe(e.hooks, ns)
	if obj == nil {
		return &verdict.Result{Message: why, Poll: true,
			Hint: "give `probe`: an object the webhooks intercept (their caBundle and endpoints alone do not show they answer)"}
	}
	e.probe = e.newProber(obj)
	e.probe.Derived = true
	return nil
}

// servedKinds lists the creatable top-level resources of groups (discovery's answer), the
// preferred version of each group first. Create-only resources (reviews, bindings) and the
// admission configuration kinds (never sent to webhooks) are left out.
func servedKinds(groups []*restmapper.APIGroupResources) []admission.ServedKind {
	var out []admission.ServedKind
	for _, g := range groups {
		if g.Group.Name == session.MWCGVK.Group {
			continue
		}
		versions := []string{g.Group.PreferredVersion.Version}
		for _, v := range g.Group.Versions {
			if v.Version != g.Group.PreferredVersion.Version {
				versions = append(versions, v.Version)
			}
		}
		for _, v := range versions {
			for _, r := range g.VersionedResources[v] {
				if strings.Contains(r.Name, "/") || r.Kind == "" || !slices.Contains(r.Verbs, "create") || !slices.Contains(r.Verbs, "get") {
					continue
				}
				out = append(out, admission.ServedKind{GVR: schema.GroupVersionResource{Group: g.Group.Name, Version: v, Resource: r.Name},
					Kind: r.Kind, Namespaced: r.Namespaced, Preferred: v == g.Group.PreferredVersion.Version})
			}
		}
	}
	return out
}

// rediscoverEvery bounds how often a gate that finds no served kind for a webhook's rules asks
// the API server's discovery again (a CRD of the same release may not be served yet).
const rediscoverEvery = 2 * time.Second

// deriveProbe builds a minimal object that one of hooks' rules intercepts (see admission.PickProbeKind),
// in namespace ns when the kind is namespaced. Without one, why says so.
func (e *webhookEval) deriveProbe(hooks []*admission.Hook, ns string) (obj *unstructured.Unstructured, why string) {
	groups, err := restmapper.GetAPIGroupResources(e.r.Clients.Discovery)
	if err != nil && len(groups) == 0 {
		return nil, "reading the API server's discovery to derive a probe from the webhooks' rules: " + err.Error()
	}
	k, ok := admission.PickProbeKind(hooks, servedKinds(groups))
	if !ok {
		if time.Since(e.rediscovered) > rediscoverEvery {
			e.rediscovered = time.Now()
			e.r.Clients.Mapper.Reset() // a kind installed since is served on the next try
		}
		var rules []string
		for _, h := range hooks {
			rules = append(rules, fmt.Sprintf("%s: %s", h.Name, admission.RulesString(h.Match.Rules)))
		}
		return nil, fmt.Sprintf("no kind the API server serves matches the webhooks' rules (%s), so no probe can be derived "+
			"to show they answer", strings.Join(rules, "; "))
	}
	return admission.ProbeObject(k, ns, e.customKindSchema(k)), ""
}

// customKindSchema is the openAPIV3Schema of custom kind k's served version, read from its CRD
// (nil for a built-in kind, a kind with a probe spec of its own, or an aggregated API). One read,
// when the probe is derived: the watch caches keep CRDs without their schemas.
func (e *webhookEval) customKindSchema(k admission.ServedKind) map[string]any {
	if k.GVR.Group == "" || admission.HasProbeSpec(k) {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	crd, err := e.r.Clients.Dynamic.Resource(session.CRDResource).Get(ctx, k.GVR.Resource+"."+k.GVR.Group, metav1.GetOptions{})
	if err != nil {
		return nil // not a CRD's kind, or unreadable: the probe goes bare, and Invalid says why
	}
	return status.CRD(crd).Schemas[k.GVR.Version]
}

// checked records the checked webhooks' caBundles and warns once about failurePolicy Ignore.
func (e *webhookEval) checked(caBundles []string) {
	sum := sha256.Sum256([]byte(strings.Join(caBundles, "\n")))
	e.caSum = hex.EncodeToString(sum[:])
	if e.policy == "Ignore" && !e.warnedIgnore {
		e.warnedIgnore = true
		e.r.Log.Warningf("%s has failurePolicy: Ignore: the API server admits objects even when it does not answer, so this gate "+
			"proves it serves with a direct call, and it protects less afterwards", e.what())
	}
}

// serviceHooks finds, for a `service` target, the webhooks the Service backs in every
// Validating- and MutatingWebhookConfiguration (gathered through cluster-wide watches of both
// kinds; admission.CheckService decides): the probe must prove each of them exactly as for a
// configuration target (see probe.Webhook.unproven).
func (e *webhookEval) serviceHooks(ns, name string, port int) verdict.Result {
	snap := admission.ServiceTarget{Namespace: ns, Name: name, Port: port, Want: e.args.Webhooks}
	kinds := []schema.GroupVersionKind{session.MWCGVK, session.VWCGVK}
	all, which, pending := e.r.ObjectsOf(session.Target{GVK: kinds[0]}, session.Target{GVK: kinds[1]})
	if pending != nil {
		if pending.Failed != nil {
			pending.Failed = fmt.Errorf("%w: with `service`, the gate reads every %s to find the webhooks %s backs; "+
				"grant verbs list, watch on it cluster-wide", pending.Failed, kinds[which].Kind, e.what())
		}
		return *pending
	}
	for _, cfgs := range all {
		slices.SortFunc(cfgs, func(a, b *unstructured.Unstructured) int { return strings.Compare(a.GetName(), b.GetName()) })
	}
	snap.Mutating, snap.Validating = all[0], all[1]
	c := admission.CheckService(snap)
	e.names, e.hooks, e.ambiguous, e.policy = c.Names, c.Hooks, c.Ambiguous, c.Policy
	for _, s := range c.Seen {
		fmt.Fprintf(&e.state, ";%s", s)
	}
	if !c.Result.Ready {
		return c.Result
	}
	for _, h := range e.hooks {
		h.ExternalName = e.external[ns+"/"+name]
	}
	if res := e.deriveIfNeeded(); res != nil {
		return *res
	}
	e.checked(c.CABundles)
	return verdict.Result{Ready: true}
}

// serviceReady checks the webhook Service has ready endpoints for the Service port the webhook
// uses (see admission.SlicePort).
func (e *webhookEval) serviceReady(ns, name string, port int) verdict.Result {
	svcs, pending := e.r.Objects(session.Target{GVK: session.ServiceGVK, Namespace: ns, Name: name})
	if pending != nil {
		return *pending
	}
	if len(svcs) == 0 {
		return verdict.Result{Message: fmt.Sprintf("service %s/%s not found", ns, name), Hint: "the webhook's Service is not created yet"}
	}
	if ext := admission.ExternalNameOf(svcs[0]); ext != "" {
		// The API server dials the external name at the webhook's port: no endpoints to
		// count, only an answer shows it serves (the probe, derived when not given).
		e.serviceName, e.endpoints = fmt.Sprintf("%s/%s:%d", ns, name, port), 0
		e.external[ns+"/"+name] = ext
		fmt.Fprintf(&e.state, ";%s/%s@%s=external", ns, name, svcs[0].GetResourceVersion())
		return verdict.Result{Ready: true}
	}
	slicePort, found := admission.SlicePort(svcs[0], port)
	if !found {
		return verdict.Result{Message: fmt.Sprintf("service %s/%s has no port %d", ns, name, port),
			Hint: "the webhook's clientConfig.service.port must be one of the Service's ports"}
	}
	ep := &endpointsEval{r: e.r, namespace: ns, name: name, port: slicePort, min: e.minEndpoints}
	res := ep.check(context.Background())
	e.serviceName, e.endpoints = fmt.Sprintf("%s/%s:%d", ns, name, port), ep.ready
	fmt.Fprintf(&e.state, ";%s/%s@%s=%d", ns, name, svcs[0].GetResourceVersion(), ep.ready)
	return res
}

func (e *webhookEval) probeStep(ctx context.Context) verdict.Result {
	if e.probe == nil {
		// Unreachable (checkObjects derives one or waits): never pass without an answer.
		return verdict.Result{Message: e.what() + ": no probe to show the webhooks answer", Hint: "give `probe`"}
	}
	t := admission.ProbeTarget{What: e.what(), Mutating: e.args.MutatingWebhookConfiguration != nil}
	t.Webhooks = []string{}
	for _, h := range e.hooks {
		if !e.ambiguous[h.Name] {
			t.Webhooks = append(t.Webhooks, h.Name)
		}
		if h.Policy == "Ignore" {
			t.Ignore = append(t.Ignore, h.Name)
		}
	}
	e.probe.Hooks = e.hooks
	if e.probe.Expect != nil {
		// Every mutating webhook in the cluster is a candidate for the mutation expect sees.
		cfgs, pending := e.r.Objects(session.Target{GVK: session.MWCGVK})
		if pending != nil {
			if pending.Failed != nil {
				pending.Failed = fmt.Errorf("%w: with `expect`, the gate reads every MutatingWebhookConfiguration to tell whose mutation "+
					"it sees; grant verbs list, watch on it cluster-wide", pending.Failed)
			}
			return *pending
		}
		e.probe.Mutators = nil
		for _, cfg := range cfgs {
			fmt.Fprintf(&e.state, ";mutating/%s@%s", cfg.GetName(), cfg.GetResourceVersion())
			e.probe.Mutators = append(e.probe.Mutators, admission.WebhooksOf(session.MWCGVK.Kind, cfg)...)
		}
	}
	if res := e.namespaceLabels(); res != nil {
		return *res
	}
	e.probe.Target = t
	return e.probe.Step(ctx, e.state.String())
}

// namespaceLabels reads the labels of the probe's namespace when a checked webhook's (or, with
// expect, any mutating webhook's) namespaceSelector needs them (see run.namespaceLabels).
func (e *webhookEval) namespaceLabels() *verdict.Result {
	e.probe.NSLabels, e.probe.NSErr = nil, ""
	q, err := e.probe.Request()
	if err != nil || q.Namespace == "" {
		return nil // the probe's own answer says why (kind not served), or it has no namespace
	}
	lbls, nsErr, rv, pending := e.r.NamespaceLabels(q.Namespace, append(append([]*admission.Hook{}, e.hooks...), e.probe.Mutators...))
	if pending != nil {
		return pending
	}
	e.probe.NSLabels, e.probe.NSErr = lbls, nsErr
	if rv != "" {
		fmt.Fprintf(&e.state, ";namespace/%s@%s", q.Namespace, rv)
	}
	return nil
}

func (e *webhookEval) fill(s *WebhookReadyState) {
	s.ConfigurationName, s.WebhookNames, s.ServiceName = e.configName, e.names, e.serviceName
	if s.WebhookNames == nil {
		s.WebhookNames = []string{}
	}
	s.ReadyEndpoints, s.CABundleSha256, s.Probed, s.FailurePolicy = e.endpoints, e.caSum, e.probe != nil, e.policy
}

// maxBackoff: the webhook probe's cap (see probe.MaxBackoff).
func (e *webhookEval) maxBackoff() time.Duration { return probe.MaxBackoff }
