package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/wait"
)

// WebhookReady waits until an admission webhook really answers: configuration present, CA
// bundle injected, Service endpoints ready, and (with a probe) a server-side dry-run create that
// the webhook answered. Pod-ready is not webhook-serving; only a call through the API server
// proves it.
type WebhookReady struct{}

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
	Probe                          map[string]any `pulumi:"probe,optional" provider:"replaceOnChanges"`
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

func (g *WebhookReady) Annotate(a infer.Annotator) {
	a.Describe(g, "Waits until an admission webhook serves, so the resources it validates can be created without "+
		"`failed calling webhook ... service not found / connection refused`. Target exactly one of "+
		"`validatingWebhookConfiguration`, `mutatingWebhookConfiguration` or `service`. For service-backed webhooks: the "+
		"caBundle is injected, the Service has ready endpoints for the webhook's port. With `probe`: a server-side dry-run "+
		"create of that object succeeds or is denied by the webhook itself, twice in a row (nothing is ever persisted). "+
		"URL-backed webhooks are gated by the probe alone.")
}

func (a *WebhookReadyArgs) Annotate(an infer.Annotator) {
	an.Describe(&a.ValidatingWebhookConfiguration, "The ValidatingWebhookConfiguration's name.")
	an.Describe(&a.MutatingWebhookConfiguration, "The MutatingWebhookConfiguration's name.")
	an.Describe(&a.Service, "A webhook Service to wait for directly (no configuration).")
	an.Describe(&a.Webhooks, "Names of the webhooks inside the configuration to check (default: all).")
	an.Describe(&a.MinReadyEndpoints, "Ready endpoints the webhook Service needs (default 1).")
	an.Describe(&a.Probe, "A Kubernetes object, as a manifest map, that the webhook intercepts. The gate dry-run creates it: "+
		"success or a denial by the webhook proves it answers.")
}

func (s *WebhookReadyState) Annotate(a infer.Annotator) {
	a.Describe(&s.ConfigurationName, "The configuration checked (empty with `service`).")
	a.Describe(&s.WebhookNames, "The webhooks checked.")
	a.Describe(&s.ServiceName, "The backing Service as namespace/name:port (empty for URL webhooks).")
	a.Describe(&s.ReadyEndpoints, "Ready endpoints of the backing Service.")
	a.Describe(&s.CABundleSha256, "SHA-256 of the caBundle, to detect re-injection.")
	a.Describe(&s.Probed, "Whether a dry-run probe proved the webhook answers.")
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
				if msg := nameProblem(*f.v); msg != "" {
					failures = append(failures, p.CheckFailure{Property: f.key, Reason: msg})
				}
			}
		}
		if args.Service != nil && isKnown(req.NewInputs, "service") {
			failures = append(failures, nameFailures(req.NewInputs, "service.name", args.Service.Name, "service.namespace", &args.Service.Namespace)...)
			if args.Service.Namespace == "" {
				failures = append(failures, p.CheckFailure{Property: "service.namespace", Reason: "must not be empty"})
			}
		}
		if args.MinReadyEndpoints != nil && *args.MinReadyEndpoints < 1 {
			failures = append(failures, p.CheckFailure{Property: "minReadyEndpoints", Reason: "must be at least 1"})
		}
		if args.Probe != nil && isKnown(req.NewInputs, "probe") {
			pr := &unstructured.Unstructured{Object: args.Probe}
			if _, err := schema.ParseGroupVersion(pr.GetAPIVersion()); err != nil || pr.GetAPIVersion() == "" || pr.GetKind() == "" {
				failures = append(failures, p.CheckFailure{Property: "probe", Reason: "the probe must be a manifest with apiVersion and kind"})
			}
		}
		return failures
	})
}

func (g *WebhookReady) Create(ctx context.Context, req infer.CreateRequest[WebhookReadyArgs]) (infer.CreateResponse[WebhookReadyState], error) {
	return createGate(ctx, req.DryRun, req.Inputs.GateArgs, WebhookReadyState{WebhookReadyArgs: req.Inputs}, "webhook", webhookBuilder(req.Inputs))
}

func (g *WebhookReady) Read(ctx context.Context, req infer.ReadRequest[WebhookReadyArgs, WebhookReadyState]) (infer.ReadResponse[WebhookReadyArgs, WebhookReadyState], error) {
	return readGate(ctx, req, webhookBuilder(req.Inputs))
}

func webhookBuilder(a WebhookReadyArgs) builder[WebhookReadyState] {
	return func(r *run) (evaluation, func(*WebhookReadyState), error) {
		e := &webhookEval{r: r, args: a, minEndpoints: 1}
		if a.MinReadyEndpoints != nil {
			e.minEndpoints = *a.MinReadyEndpoints
		}
		if a.Probe != nil {
			e.probe = &prober{r: r, obj: &unstructured.Unstructured{Object: a.Probe}}
		}
		return e, e.fill, nil
	}
}

type webhookEval struct {
	r            *run
	args         WebhookReadyArgs
	minEndpoints int
	probe        *prober
	// deriveProbeIn, when set, derives a probe from the configuration's rules (a minimal object
	// of the first concrete CREATE rule) in that namespace, when no probe was given.
	deriveProbeIn string

	configName, serviceName, caSum, policy string
	names                                  []string
	endpoints                              int
	warnedIgnore                           bool
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

func (e *webhookEval) check(ctx context.Context) wait.Result {
	e.policy = "Fail"
	if e.args.Service != nil {
		port := 443
		if e.args.Service.Port != nil {
			port = *e.args.Service.Port
		}
		if res := e.serviceReady(e.args.Service.Namespace, e.args.Service.Name, port); !res.Ready {
			return res
		}
		return e.probeStep(ctx)
	}
	kind, name := "ValidatingWebhookConfiguration", deref(e.args.ValidatingWebhookConfiguration)
	if e.args.MutatingWebhookConfiguration != nil {
		kind, name = "MutatingWebhookConfiguration", *e.args.MutatingWebhookConfiguration
	}
	objs, pending := e.r.objects(target{gvk: schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: kind}, name: name})
	if pending != nil {
		return *pending
	}
	if len(objs) == 0 {
		return wait.Result{Message: kind + " not found (not created yet)", Hint: "is the chart that registers the webhook part of the stack?"}
	}
	cfg := objs[0]
	e.configName = name
	if e.probe == nil && e.deriveProbeIn != "" {
		if obj := e.deriveProbe(cfg); obj != nil {
			e.probe = &prober{r: e.r, obj: obj}
		}
	}
	hooks, _, _ := unstructured.NestedSlice(cfg.Object, "webhooks")
	selected := map[string]bool{}
	for _, w := range e.args.Webhooks {
		selected[w] = true
	}
	e.names = nil
	var sums []string
	for _, h := range hooks {
		hm, _ := h.(map[string]any)
		hn, _ := hm["name"].(string)
		if len(selected) > 0 && !selected[hn] {
			continue
		}
		e.names = append(e.names, hn)
		if fp, _ := hm["failurePolicy"].(string); fp == "Ignore" {
			e.policy = "Ignore"
		}
		cc, _ := hm["clientConfig"].(map[string]any)
		ca, _ := cc["caBundle"].(string)
		if svc, ok := cc["service"].(map[string]any); ok {
			if ca == "" {
				why := "caBundle is empty"
				if inj := injectionAnnotation(cfg); inj != "" {
					why = "caBundle not injected yet (" + inj + ")"
				}
				return wait.Result{Message: fmt.Sprintf("webhook %s: %s", hn, why),
					Hint: "is cert-manager's cainjector (or the chart's certificate job) running?"}
			}
			port := 443
			if p, ok := svc["port"]; ok {
				port = int(toInt(p))
			}
			ns, _ := svc["namespace"].(string)
			sn, _ := svc["name"].(string)
			if res := e.serviceReady(ns, sn, port); !res.Ready {
				res.Message = fmt.Sprintf("webhook %s: %s", hn, res.Message)
				return res
			}
		}
		sums = append(sums, ca)
	}
	if len(e.names) == 0 {
		return wait.Result{Message: fmt.Sprintf("none of the webhooks %v is in %s %s yet", e.args.Webhooks, kind, name)}
	}
	sum := sha256.Sum256([]byte(strings.Join(sums, "\n")))
	e.caSum = hex.EncodeToString(sum[:])
	if e.policy == "Ignore" && !e.warnedIgnore {
		e.warnedIgnore = true
		e.r.log.Warningf("%s has failurePolicy: Ignore: the API server admits objects even when it does not answer, so this gate protects less", e.what())
	}
	return e.probeStep(ctx)
}

func injectionAnnotation(cfg *unstructured.Unstructured) string {
	for _, k := range []string{"cert-manager.io/inject-ca-from", "cert-manager.io/inject-ca-from-secret", "cert-manager.io/inject-apiserver-ca"} {
		if v, ok := cfg.GetAnnotations()[k]; ok {
			return k + ": " + v
		}
	}
	return ""
}

// serviceReady checks the webhook Service has ready endpoints for the port the webhook uses.
func (e *webhookEval) serviceReady(ns, name string, port int) wait.Result {
	svcs, pending := e.r.objects(target{gvk: serviceGVK, namespace: ns, name: name})
	if pending != nil {
		return *pending
	}
	if len(svcs) == 0 {
		return wait.Result{Message: fmt.Sprintf("service %s/%s not found", ns, name), Hint: "the webhook's Service is not created yet"}
	}
	targetPort := strconv.Itoa(port)
	ports, _, _ := unstructured.NestedSlice(svcs[0].Object, "spec", "ports")
	for _, p := range ports {
		pm, _ := p.(map[string]any)
		if int(toInt(pm["port"])) == port {
			if tp, ok := pm["targetPort"]; ok {
				targetPort = fmt.Sprint(tp)
			}
		}
	}
	ep := &endpointsEval{r: e.r, namespace: ns, name: name, port: targetPort, min: e.minEndpoints}
	res := ep.check(context.Background())
	e.serviceName, e.endpoints = fmt.Sprintf("%s/%s:%d", ns, name, port), ep.ready
	return res
}

func (e *webhookEval) probeStep(ctx context.Context) wait.Result {
	if e.probe == nil {
		return wait.Result{Ready: true}
	}
	return e.probe.step(ctx)
}

func (e *webhookEval) fill(s *WebhookReadyState) {
	s.ConfigurationName, s.WebhookNames, s.ServiceName = e.configName, e.names, e.serviceName
	if s.WebhookNames == nil {
		s.WebhookNames = []string{}
	}
	s.ReadyEndpoints, s.CABundleSha256, s.Probed, s.FailurePolicy = e.endpoints, e.caSum, e.probe != nil, e.policy
}

func toInt(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	case int:
		return int64(n)
	case string:
		i, _ := strconv.ParseInt(n, 10, 64)
		return i
	}
	return 0
}

var vwcResource = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"}

// Update applies a new timeout without waiting again (see updateGate); other changes replace.
func (*WebhookReady) Update(_ context.Context, req infer.UpdateRequest[WebhookReadyArgs, WebhookReadyState]) (infer.UpdateResponse[WebhookReadyState], error) {
	return updateGate(req, func(s *WebhookReadyState, in WebhookReadyArgs) { s.WebhookReadyArgs = in })
}

// maxBackoff keeps probing at least every 250 ms: a webhook that starts listening is then
// detected within a few hundred milliseconds, at the cost of a cheap dry-run request.
func (e *webhookEval) maxBackoff() time.Duration { return 250 * time.Millisecond }

func unstructuredOf(m map[string]any) *unstructured.Unstructured {
	return (&unstructured.Unstructured{Object: m}).DeepCopy()
}

// deriveProbe builds a minimal object that the configuration's first concrete CREATE rule
// intercepts; nil when every rule uses wildcards or subresources.
func (e *webhookEval) deriveProbe(cfg *unstructured.Unstructured) *unstructured.Unstructured {
	hooks, _, _ := unstructured.NestedSlice(cfg.Object, "webhooks")
	for _, h := range hooks {
		hm, _ := h.(map[string]any)
		rules, _ := hm["rules"].([]any)
		for _, rl := range rules {
			rm, _ := rl.(map[string]any)
			ops, groups, versions, resources := stringList(rm["operations"]), stringList(rm["apiGroups"]), stringList(rm["apiVersions"]), stringList(rm["resources"])
			if !containsAny(ops, "CREATE", "*") || len(groups) == 0 || len(versions) == 0 || len(resources) == 0 ||
				groups[0] == "*" || resources[0] == "*" || strings.Contains(resources[0], "/") {
				continue
			}
			version := versions[0]
			if version == "*" {
				version = "" // the preferred version
			}
			gvk, err := e.r.clients.Mapper.KindFor(schema.GroupVersionResource{Group: groups[0], Version: version, Resource: resources[0]})
			if err != nil {
				continue
			}
			obj := &unstructured.Unstructured{}
			obj.SetGroupVersionKind(gvk)
			obj.SetGenerateName("readiness-probe-")
			obj.SetNamespace(e.deriveProbeIn)
			return obj
		}
	}
	return nil
}

func stringList(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func containsAny(list []string, want ...string) bool {
	for _, w := range want {
		if contains(list, w) {
			return true
		}
	}
	return false
}
