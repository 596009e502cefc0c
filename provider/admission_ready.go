package provider

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/kube"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/wait"
)

// AdmissionReady proves that exactly the given objects will be admitted: every round
// server-side dry-runs each of them (nothing is persisted), and the gate passes after
// `consecutive` rounds in a row in which the API server admitted all of them.
type AdmissionReady struct{}

type AdmissionReadyArgs struct {
	Objects     []map[string]any `pulumi:"objects" provider:"replaceOnChanges,secret"`
	Expect      *string          `pulumi:"expect,optional" provider:"replaceOnChanges"`
	Consecutive *int             `pulumi:"consecutive,optional" provider:"replaceOnChanges"`
	GateArgs
}

type AdmissionReadyState struct {
	AdmissionReadyArgs
	Admitted int      `pulumi:"admitted"`
	Mutated  []string `pulumi:"mutated"`
	Deniers  []string `pulumi:"deniers"`
}

func (g *AdmissionReady) Annotate(a infer.Annotator) {
	a.Describe(g, "Waits until the API server admits exactly these objects: each round dry-run creates every one of them "+
		"(server-side, `dryRun: All`: every admission webhook and policy runs, nothing is persisted), and the gate passes after "+
		"`consecutive` rounds in a row in which all were admitted (and `expect` held). An object that already exists is dry-run "+
		"applied instead (server-side apply, forced), which is the update the program will make. It waits while the answer is "+
		"transient: the kind is not served yet (CRD installing), the namespace does not exist yet, `failed calling webhook` "+
		"(connection refused, no endpoints, x509, timeout), the API server unavailable, `expect` false, and a `failurePolicy: Ignore` "+
		"webhook that may intercept an object (its rules, namespaceSelector and objectSelector match) not answering an AdmissionReview "+
		"sent to it directly: the API server admits without such a webhook while it is down, so an admission says nothing about it "+
		"(a mutating one is proven by `expect` instead when it is the only mutating webhook that may intercept the object). It fails at once on a "+
		"verdict, quoting it and naming the denier: a webhook denying the object, a ValidatingAdmissionPolicy, the object invalid "+
		"(schema, immutable field), Forbidden. Data of a Secret object is never kept, logged or output.")
}

func (a *AdmissionReadyArgs) Annotate(an infer.Annotator) {
	an.Describe(&a.Objects, "The manifests, as maps: the same values the program passes to pulumi-kubernetes. Each needs apiVersion, kind "+
		"and metadata.name (or generateName); a namespaced kind without metadata.namespace goes to the provider's default namespace.")
	an.Describe(&a.Expect, "A CEL expression over each dry-run result, `object` (the object as the API server would store it, after "+
		"mutating webhooks), that must return bool, such as `object.spec.containers.exists(c, c.name == 'istio-proxy')`. "+
		"While it is false (or fails to evaluate, such as no such key) the gate waits. Holding on an object's result and false on the "+
		"object as given, it proves a `failurePolicy: Ignore` mutating webhook without a direct call when that webhook is the only "+
		"mutating webhook that may intercept the object. Compiled at preview with the cost limits of ResourceReady's `cel`.")
	an.Describe(&a.Consecutive, "How many rounds in a row must admit every object (default 2): a webhook that flaps does not pass.")
}

func (s *AdmissionReadyState) Annotate(a infer.Annotator) {
	a.Describe(&s.Admitted, "How many objects the final round admitted.")
	a.Describe(&s.Mutated, "Objects (`Kind/namespace/name`, `Kind/name` when cluster-scoped) whose dry-run result differs from the "+
		"input in a value the input sets (spec and other top-level fields, labels, annotations) or gained labels or annotations: "+
		"a mutating webhook changed them. Defaults the API server fills in for fields the input leaves out do not count.")
	a.Describe(&s.Deniers, "Webhooks and admission policies that denied an object or could not be called while the gate waited "+
		"(deduplicated, sorted), even if they admitted it later.")
}

var (
	_ = (infer.CustomCheck[AdmissionReadyArgs])((*AdmissionReady)(nil))
	_ = (infer.CustomRead[AdmissionReadyArgs, AdmissionReadyState])((*AdmissionReady)(nil))
)

const defaultConsecutive = 2

// admissionObjectProblem says what is wrong with one manifest of `objects`, or "".
func admissionObjectProblem(m map[string]any) string { return manifestProblem(m, true) }

// maxManifestBytes is the API server's default limit on a request body (3 MiB): a larger object
// is refused with "Request entity too large" on every try.
const maxManifestBytes = 3 << 20

// manifestProblem says what is wrong with a manifest the gate will dry-run create (AdmissionReady's
// objects, a probe), or "": what the API server would refuse on every try, so waiting cannot help.
// needName: a probe may leave out its name (it gets generateName). Never quotes a value that
// could be data (only apiVersion, kind, names and namespaces, which are not).
func manifestProblem(m map[string]any, needName bool) string {
	u := &unstructured.Unstructured{Object: m}
	av, _ := m["apiVersion"].(string)
	if av == "" {
		return "apiVersion is missing (or not a string)"
	}
	if _, err := schema.ParseGroupVersion(av); err != nil {
		return fmt.Sprintf("%q is not an apiVersion such as v1, apps/v1 or external-secrets.io/v1beta1", av)
	}
	k, _ := m["kind"].(string)
	switch {
	case k == "":
		return "kind is missing (or not a string)"
	case strings.ContainsAny(k, " /."):
		return fmt.Sprintf("%q is not a kind such as ConfigMap", k)
	case k == "List" || (strings.HasSuffix(k, "List") && m["items"] != nil):
		return fmt.Sprintf("%s is a list of objects, which cannot be created as one: give each object on its own", k)
	}
	md, hasMD := m["metadata"]
	mdMap, ok := md.(map[string]any)
	if hasMD && !ok {
		return "metadata must be an object (a map with name, namespace, labels, ...)"
	}
	if needName && !hasMD {
		return "metadata is missing (it needs name or generateName)"
	}
	for _, f := range []string{"name", "generateName", "namespace"} {
		if v, ok := mdMap[f]; ok {
			if _, isStr := v.(string); !isStr {
				return fmt.Sprintf("metadata.%s must be a string", f)
			}
		}
	}
	// Names are not all DNS names (RBAC's "system:..."), but each becomes one segment of an API path.
	if errs := path.IsValidPathSegmentName(u.GetName()); len(errs) > 0 {
		return fmt.Sprintf("metadata.name %q %s", u.GetName(), strings.Join(errs, "; "))
	}
	if errs := path.IsValidPathSegmentPrefix(u.GetGenerateName()); len(errs) > 0 {
		return fmt.Sprintf("metadata.generateName %q %s", u.GetGenerateName(), strings.Join(errs, "; "))
	}
	if needName && u.GetName() == "" && u.GetGenerateName() == "" {
		return "metadata.name (or metadata.generateName) is missing"
	}
	if ns := u.GetNamespace(); ns != "" {
		if msg := namespaceProblem(ns); msg != "" {
			return "metadata.namespace: " + msg
		}
	}
	if b, err := json.Marshal(m); err != nil {
		return "it cannot be encoded as JSON"
	} else if len(b) > maxManifestBytes {
		return fmt.Sprintf("it is %d bytes as JSON, over the API server's default request limit of %d (it would be refused "+
			"with \"Request entity too large\" on every try)", len(b), maxManifestBytes)
	}
	return ""
}

func (*AdmissionReady) Check(ctx context.Context, req infer.CheckRequest) (infer.CheckResponse[AdmissionReadyArgs], error) {
	return checkGate(ctx, req, func(args AdmissionReadyArgs, failures []p.CheckFailure) []p.CheckFailure {
		raw, _ := req.NewInputs.GetOk("objects")
		switch {
		case raw.HasComputed() && !raw.IsArray():
			// an output of another resource: judged when known
		case len(args.Objects) == 0:
			failures = append(failures, p.CheckFailure{Property: "objects", Reason: "give at least one object (a manifest with apiVersion, kind and metadata.name)"})
		default:
			for i, o := range args.Objects {
				if raw.IsArray() && i < raw.AsArray().Len() && raw.AsArray().Get(i).HasComputed() {
					continue
				}
				if msg := admissionObjectProblem(o); msg != "" {
					failures = append(failures, p.CheckFailure{Property: fmt.Sprintf("objects[%d]", i), Reason: fmt.Sprintf("objects[%d]: %s", i, msg)})
				}
			}
		}
		if args.Consecutive != nil && *args.Consecutive < 1 {
			failures = append(failures, p.CheckFailure{Property: "consecutive", Reason: "must be at least 1"})
		}
		if args.Expect != nil && isKnown(req.NewInputs, "expect") {
			if _, err := compileExpect(args.Expect); err != nil {
				failures = append(failures, p.CheckFailure{Property: "expect", Reason: err.Error()})
			}
		}
		return failures
	})
}

func (g *AdmissionReady) Create(ctx context.Context, req infer.CreateRequest[AdmissionReadyArgs]) (infer.CreateResponse[AdmissionReadyState], error) {
	return createGate(ctx, req.DryRun, req.Inputs.GateArgs, AdmissionReadyState{AdmissionReadyArgs: req.Inputs}, "admission", admissionBuilder(req.Inputs))
}

func (g *AdmissionReady) Read(ctx context.Context, req infer.ReadRequest[AdmissionReadyArgs, AdmissionReadyState]) (infer.ReadResponse[AdmissionReadyArgs, AdmissionReadyState], error) {
	return readGate(ctx, req, admissionBuilder(req.Inputs))
}

// Update applies a new timeout without waiting again (see updateGate); other changes replace.
func (*AdmissionReady) Update(_ context.Context, req infer.UpdateRequest[AdmissionReadyArgs, AdmissionReadyState]) (infer.UpdateResponse[AdmissionReadyState], error) {
	return updateGate(req, func(s *AdmissionReadyState, in AdmissionReadyArgs) { s.AdmissionReadyArgs = in })
}

func admissionBuilder(a AdmissionReadyArgs) builder[AdmissionReadyState] {
	return func(r *run) (evaluation, func(*AdmissionReadyState), error) {
		e := &admissionEval{r: r, need: defaultConsecutive, deniers: map[string]bool{}}
		if a.Consecutive != nil {
			e.need = *a.Consecutive
		}
		if e.need < 1 {
			return nil, nil, fmt.Errorf("consecutive: must be at least 1")
		}
		if len(a.Objects) == 0 {
			return nil, nil, fmt.Errorf("objects: give at least one object")
		}
		for i, o := range a.Objects {
			if msg := admissionObjectProblem(o); msg != "" {
				return nil, nil, fmt.Errorf("objects[%d]: %s", i, msg)
			}
			e.objs = append(e.objs, &unstructured.Unstructured{Object: o})
		}
		x, err := compileExpect(a.Expect)
		if err != nil {
			return nil, nil, fmt.Errorf("expect: %w", err)
		}
		e.expect = x
		return e, e.fill, nil
	}
}

// admissionEval runs the rounds. It has nothing to watch: it keeps its own schedule with
// wait.Result.RetryIn (a capped backoff while an object is not admitted, confirmDelay between
// good rounds).
type admissionEval struct {
	r      *run
	objs   []*unstructured.Unstructured
	expect *mutationExpect
	need   int

	// Of the current round: every webhook in the cluster, and the answers of the failurePolicy
	// Ignore ones called directly (by configuration/name: "" answered, else why not).
	hooks   []*admissionHook
	answers map[string]string
	// configs fingerprints the webhook configurations: a change (a caBundle injected, a webhook
	// registered) retries soon, as the prober does.
	configs string

	good    int
	backoff time.Duration
	next    time.Time // when the next round is due (kept only while confirming)
	last    wait.Result
	deniers map[string]bool
	// Of the last good round.
	admitted int
	mutated  []string
}

func (e *admissionEval) what() string {
	names := make([]string, 0, 3)
	for i, o := range e.objs {
		if i == 3 {
			names = append(names, fmt.Sprintf("and %d more", len(e.objs)-3))
			break
		}
		names = append(names, o.GetKind()+" "+inputName(o))
	}
	return "admission of " + strings.Join(names, ", ")
}

// inputName is an input object's name as the user wrote it: namespace/name, or the
// generateName prefix followed by *.
func inputName(o *unstructured.Unstructured) string {
	n := o.GetName()
	if n == "" {
		n = o.GetGenerateName() + "*"
	}
	if ns := o.GetNamespace(); ns != "" {
		return ns + "/" + n
	}
	return n
}

// roundCap is the backoff cap between rounds that did not admit everything: each round costs
// one request per object, so a long list backs off further.
func (e *admissionEval) roundCap() time.Duration {
	return min(probeMaxBackoff*time.Duration(max(1, len(e.objs)/4)), 2*time.Second)
}

func (e *admissionEval) maxBackoff() time.Duration { return e.roundCap() }

func (e *admissionEval) check(ctx context.Context) wait.Result {
	if now := time.Now(); e.good > 0 && now.Before(e.next) {
		// A wake-up while confirming: the confirming round keeps its confirmDelay.
		r := e.last
		r.RetryIn = e.next.Sub(now)
		return r
	}
	res := e.round(ctx)
	if ctx.Err() != nil && e.last.Message != "" && res.Failed == nil && !res.Ready {
		return e.last // the wait ended during this round: its deadline is not the API server's answer
	}
	if res.Failed == nil && !res.Ready {
		delay := confirmDelay
		if !res.Confirming {
			if e.backoff == 0 {
				e.backoff = probeMinBackoff / 2
			}
			e.backoff = min(e.backoff*2, e.roundCap())
			delay = e.backoff
		} else {
			e.backoff = 0
		}
		res.Poll, res.RetryIn = true, delay
		e.next = time.Now().Add(delay)
	}
	e.last = res
	return res
}

// round dry-runs every object once. Every object is tried in every round, so a verdict on any
// of them fails the gate at once and the message names everything still pending.
func (e *admissionEval) round(ctx context.Context) wait.Result {
	if res := e.webhooks(); res != nil {
		return *res
	}
	e.answers = map[string]string{}
	var pending, hints []string
	var mutated []string
	for i, o := range e.objs {
		v := e.admit(ctx, o)
		label := fmt.Sprintf("objects[%d] (%s %s)", i, o.GetKind(), inputName(o))
		if v.denier != "" {
			e.deniers[v.denier] = true
		}
		if v.terminal != "" {
			return wait.Result{Failed: fmt.Errorf("%s: %s", label, v.terminal)}
		}
		if v.pending != nil {
			return *v.pending
		}
		if v.why != "" {
			pending = append(pending, label+": "+v.why)
			if v.hint != "" && !contains(hints, v.hint) {
				hints = append(hints, v.hint)
			}
			continue
		}
		if v.mutated {
			mutated = append(mutated, v.name)
		}
	}
	if len(pending) > 0 {
		e.good = 0
		return wait.Result{Message: fmt.Sprintf("%d of %d admitted; %s", len(e.objs)-len(pending), len(e.objs), strings.Join(pending, "; ")),
			Hint: strings.Join(hints, "; ")}
	}
	e.good++
	sort.Strings(mutated)
	e.admitted, e.mutated = len(e.objs), mutated
	if e.good < e.need {
		return wait.Result{Message: fmt.Sprintf("all %d admitted in %d of %d consecutive rounds; confirming", len(e.objs), e.good, e.need), Confirming: true}
	}
	return wait.Result{Ready: true, Message: fmt.Sprintf("all %d admitted in %d consecutive rounds", len(e.objs), e.good)}
}

func (e *admissionEval) fill(s *AdmissionReadyState) {
	s.Admitted = e.admitted
	s.Mutated = append([]string{}, e.mutated...)
	s.Deniers = []string{}
	for d := range e.deniers {
		s.Deniers = append(s.Deniers, d)
	}
	sort.Strings(s.Deniers)
}

// admission is the API server's answer for one object in one round.
type admission struct {
	// terminal is a verdict (the object will not be admitted); why a transient reason to wait.
	// Both empty: admitted.
	terminal, why, hint string
	// denier names the webhook or policy that denied the object or could not be called.
	denier string
	// name is the object's Kind/namespace/name as admitted; mutated says a webhook changed it.
	name    string
	mutated bool
	// pending: the round cannot judge yet (a watch cache loading).
	pending *wait.Result
}

// admit dry-runs one object: a create, or, when it exists, a forced server-side apply (the
// update the program will make). The result is compared and evaluated here and then dropped:
// it is never kept, so a Secret's data never outlives this call.
func (e *admissionEval) admit(ctx context.Context, in *unstructured.Unstructured) admission {
	red := secretRedactor(in)
	obj := in.DeepCopy()
	m, err := e.r.clients.Mapping(obj.GroupVersionKind())
	if err != nil {
		var nk *kube.NoKindError
		if errors.As(err, &nk) && len(nk.Served) > 0 && !strings.Contains(nk.GVK.Group, ".") {
			return admission{terminal: red(nk.Error())} // a built-in kind at a wrong apiVersion: no CRD adds it
		}
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			return admission{terminal: red("discovery refused: " + err.Error())}
		}
		why := err.Error()
		if nk != nil {
			// Watch CRDs, so the CRD's creation and its Established condition start a round at
			// once; without the RBAC to watch them, the backoff alone notices.
			if res := e.r.kindPending(nk.GVK, nk); res != nil && res.Failed == nil && !res.Unsynced && res.Message != "" {
				why = res.Message
			}
		}
		return admission{why: red(why), hint: "is the CRD that defines the kind installed (or installing)?"}
	}
	ri := e.r.clients.Dynamic.Resource(m.Resource)
	var client interface {
		Create(context.Context, *unstructured.Unstructured, metav1.CreateOptions, ...string) (*unstructured.Unstructured, error)
		Apply(context.Context, string, *unstructured.Unstructured, metav1.ApplyOptions, ...string) (*unstructured.Unstructured, error)
	} = ri
	where := ""
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if obj.GetNamespace() == "" {
			obj.SetNamespace(e.r.clients.Namespace)
		}
		client = ri.Namespace(obj.GetNamespace())
		where = " in namespace " + obj.GetNamespace()
	} else {
		obj.SetNamespace("") // a cluster-scoped kind carries none
	}
	verb, update := "create", false
	out, err := client.Create(ctx, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if apierrors.IsAlreadyExists(err) && obj.GetName() != "" {
		verb, update = "patch", true
		out, err = client.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{DryRun: []string{metav1.DryRunAll}, Force: true, FieldManager: "readiness-admission-probe"})
	}
	if err != nil {
		a := classifyAdmission(err, verb, m.Resource, where)
		a.terminal, a.why = red(a.terminal), red(a.why)
		if a.terminal != "" && isSecret(in) {
			// A verdict's text (a webhook's denial, a field error) may quote the Secret in any
			// escaping; name who refused it and why, never what it said.
			by := ""
			if a.denier != "" {
				by = fmt.Sprintf(" by %q", a.denier)
			}
			a.terminal = fmt.Sprintf("%s was refused%s (%s)%s; the message is not shown, as it may quote the Secret's values",
				admittedName(obj, obj), by, refusalKind(err), causeFields(err))
		}
		return a
	}
	a := admission{name: admittedName(obj, out), mutated: mutatedBy(in, out, update)}
	if e.expect != nil {
		v := e.expect.judge(in, out)
		if v.terminal != "" || !v.held {
			a.terminal, a.why, a.hint = v.terminal, "admitted, but "+v.why, v.hint
			if v.terminal != "" {
				a.why = ""
			}
			return a
		}
	}
	return e.ignoreWebhooks(ctx, a, in, obj, m, update)
}

var (
	mwcGVK = schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "MutatingWebhookConfiguration"}
	vwcGVK = schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingWebhookConfiguration"}
)

// webhooks reads every webhook in the cluster for this round, through cluster-wide watches of
// both configuration kinds; non-nil while they load or when the gate may not read them.
func (e *admissionEval) webhooks() *wait.Result {
	e.hooks = nil
	var fp strings.Builder
	for _, gvk := range []schema.GroupVersionKind{mwcGVK, vwcGVK} {
		cfgs, pending := e.r.objects(target{gvk: gvk})
		if pending != nil {
			if pending.Failed != nil {
				pending.Failed = fmt.Errorf("%w: AdmissionReady reads every %s to find the failurePolicy Ignore webhooks that intercept "+
					"the objects (the API server admits without them while they are down); grant verbs list, watch on it cluster-wide",
					pending.Failed, gvk.Kind)
			}
			return pending
		}
		for _, cfg := range cfgs {
			fmt.Fprintf(&fp, "%s/%s@%s;", gvk.Kind, cfg.GetName(), cfg.GetResourceVersion())
			e.hooks = append(e.hooks, webhooksOf(gvk.Kind, cfg)...)
		}
	}
	for _, h := range e.hooks {
		if h.url != "" && e.mayIntercept(h) {
			// No EndpointSlice tells when it starts serving: a connect does (see url_wake.go).
			fmt.Fprintf(&fp, "reach %s=%t;", h.url, e.r.listening(h.url))
		}
	}
	if fp.String() != e.configs {
		if e.configs != "" {
			// The API server learns of the change a few milliseconds after the gate: if this
			// round is too early, retry after 25 ms, then back off as usual.
			e.backoff = afterEventBackoff / 2
		}
		e.configs = fp.String()
	}
	return nil
}

// mayIntercept says whether h's rules cover one of the objects' resources (selectors aside):
// the webhooks worth a wake-up when they start listening.
func (e *admissionEval) mayIntercept(h *admissionHook) bool {
	for _, o := range e.objs {
		m, err := e.r.clients.Mapping(o.GroupVersionKind())
		if err != nil {
			continue
		}
		q := probeRequest{gvr: m.Resource, namespace: o.GetNamespace()}
		if m.Scope.Name() == meta.RESTScopeNameNamespace && q.namespace == "" {
			q.namespace = e.r.clients.Namespace
		}
		if h.match.rulesMatch(q) || h.match.rulesMatch(probeRequest{gvr: m.Resource, namespace: q.namespace, update: true}) {
			return true
		}
	}
	return false
}

// ignoreWebhooks requires, of an admitted object, an answer from every failurePolicy Ignore
// webhook that may intercept it: the API server admits without such a webhook while it is down,
// so the admission shows nothing about it. Each is called directly (one AdmissionReview per round,
// whatever the number of objects it intercepts), except a mutating one that the mutation `expect`
// sees is credited to (see creditsMutation).
func (e *admissionEval) ignoreWebhooks(ctx context.Context, a admission, in, obj *unstructured.Unstructured, m *meta.RESTMapping, update bool) admission {
	q := requestFor(e.r, obj, m, update)
	if q.gvr == namespacesResource {
		q.nsLabels = obj.GetLabels()
	} else if q.namespace != "" {
		lbls, nsErr, _, pending := e.r.namespaceLabels(q.namespace, e.hooks)
		if pending != nil {
			a.pending = pending
			return a
		}
		q.nsLabels, q.nsErr = lbls, nsErr
	}
	inter := interceptors(e.hooks, q)
	for _, h := range inter {
		if h.policy != "Ignore" {
			continue
		}
		if h.mutating && e.expect != nil && creditsMutation(e.expect, in, h, inter) == "" {
			continue // the mutation expect sees is its answer
		}
		key := h.config + "/" + h.name
		why, done := e.answers[key]
		if !done {
			need := fmt.Sprintf("webhook %s has failurePolicy Ignore, so the API server admits without it while it is down", h.name)
			ok, w, terminal := callDirect(ctx, e.r, obj, h, need, "set failurePolicy: Fail on the webhook")
			if terminal != nil {
				a.terminal = terminal.Error()
				return a
			}
			why = ""
			if !ok {
				why = "calling it directly: " + w
			}
			e.answers[key] = why
		}
		if why != "" {
			a.denier = h.name
			a.why = fmt.Sprintf("admitted, but webhook %s (failurePolicy Ignore) intercepts it and the API server admits without it while it is down; %s", h.name, why)
			a.hint = "is the webhook's server running (kubectl get pods,endpointslices -n <webhook namespace>; its logs)? " +
				"with `expect`, the mutation of the only mutating webhook intercepting an object is its proof"
			return a
		}
	}
	return a
}

var policyRE = regexp.MustCompile(`(ValidatingAdmissionPolicy|MutatingAdmissionPolicy) '([^']+)'`)

// classifyAdmission maps a dry-run's refusal to a verdict or a reason to wait. Verdicts: RBAC,
// a webhook's or an admission policy's denial, the object invalid or malformed, any other
// Forbidden. Everything else is transient; ClassifyProbe spells out why (the webhook Service
// missing, no endpoints, connection refused, x509, a timeout).
func classifyAdmission(err error, verb string, gvr schema.GroupVersionResource, where string) admission {
	msg := err.Error()
	if apierrors.IsUnauthorized(err) || (apierrors.IsForbidden(err) && strings.Contains(msg, "cannot "+verb+" resource")) {
		res := gvr.Resource
		if gvr.Group != "" {
			res += "." + gvr.Group
		}
		return admission{terminal: fmt.Sprintf("the provider may not dry-run %s it%s: %s; grant verb `%s` on resource %q%s to the provider's identity "+
			"(a dry-run persists nothing)", verb, where, msg, verb, res, where)}
	}
	if name := deniedBy(err); name != "" {
		return admission{denier: name, terminal: fmt.Sprintf("denied by admission webhook %q: %s", name, msg)}
	}
	if m := policyRE.FindStringSubmatch(msg); m != nil {
		if strings.Contains(msg, "failed to configure binding") || strings.Contains(msg, "no params found") {
			return admission{denier: m[2], why: fmt.Sprintf("%s %q cannot be evaluated yet: %s", m[1], m[2], msg),
				hint: "is the policy's parameter object created?"}
		}
		return admission{denier: m[2], terminal: fmt.Sprintf("denied by %s %q: %s", m[1], m[2], msg)}
	}
	if m := failedCallRE.FindStringSubmatch(msg); m != nil {
		return admission{denier: m[1], why: ClassifyProbe(err, ProbeTarget{What: "webhook " + m[1]}).Why,
			hint: "kubectl get pods,endpointslices -n <webhook namespace>; the webhook's logs"}
	}
	switch {
	case apierrors.IsInvalid(err):
		return admission{terminal: "invalid (rejected by the API server's validation): " + msg}
	case apierrors.IsBadRequest(err):
		return admission{terminal: "rejected as malformed: " + msg}
	case apierrors.IsRequestEntityTooLargeError(err):
		return admission{terminal: "too large for the API server (its request size limit; it is refused on every try): " + msg}
	case apierrors.IsForbidden(err) && (strings.Contains(msg, "being terminated") || strings.Contains(msg, "exceeded quota") ||
		strings.Contains(msg, "error looking up service account")):
		return admission{why: msg}
	case apierrors.IsForbidden(err):
		denier := "the API server"
		if strings.Contains(msg, "PodSecurity") {
			denier = "PodSecurity"
		}
		return admission{denier: denier, terminal: fmt.Sprintf("forbidden by %s: %s", denier, msg)}
	case apierrors.IsNotFound(err) && strings.Contains(msg, "namespaces"):
		return admission{why: "the namespace does not exist yet: " + msg, hint: "is the namespace part of the stack?"}
	}
	return admission{why: ClassifyProbe(err, ProbeTarget{What: "the object's admission"}).Why}
}

// refusalKind is "Invalid, HTTP 422", or just "HTTP 403" when the API server gave no reason.
func refusalKind(err error) string {
	if reason := apierrors.ReasonForError(err); reason != metav1.StatusReasonUnknown {
		return fmt.Sprintf("%s, HTTP %d", reason, statusCode(err))
	}
	return fmt.Sprintf("HTTP %d", statusCode(err))
}

// causeFields names the fields a refusal's causes point at ("; on fields spec.x, data[key]"):
// field paths hold names, never values, so they can be shown even for a Secret.
func causeFields(err error) string {
	var fields []string
	if st, ok := err.(apierrors.APIStatus); ok && st.Status().Details != nil {
		for _, c := range st.Status().Details.Causes {
			if c.Field != "" && !slices.Contains(fields, c.Field) {
				fields = append(fields, c.Field)
			}
		}
	}
	if len(fields) == 0 {
		return ""
	}
	return "; on field(s) " + strings.Join(fields, ", ")
}

// admittedName is Kind/namespace/name of the dry-run result (the server's name for a
// generateName object is a new one each round, so the input's prefix with * is used).
func admittedName(obj, out *unstructured.Unstructured) string {
	name := obj.GetName()
	if name == "" {
		name = obj.GetGenerateName() + "*"
	}
	if ns := out.GetNamespace(); ns != "" {
		return obj.GetKind() + "/" + ns + "/" + name
	}
	return obj.GetKind() + "/" + name
}

func isSecret(o *unstructured.Unstructured) bool {
	return o.GetKind() == "Secret" && o.GroupVersionKind().Group == ""
}

// secretRedactor replaces the values of a Secret's data and stringData (as given, and in their
// other encoding) in a message; for any other kind it returns the message unchanged. A webhook's
// denial may quote the object.
func secretRedactor(o *unstructured.Unstructured) func(string) string {
	if !isSecret(o) {
		return func(s string) string { return s }
	}
	var vals []string
	add := func(v string) {
		if len(v) >= 3 {
			vals = append(vals, v)
		}
	}
	data, _, _ := unstructured.NestedMap(o.Object, "data")
	for _, v := range data {
		if s, ok := v.(string); ok {
			add(s)
			if d, err := base64.StdEncoding.DecodeString(s); err == nil {
				add(string(d))
			}
		}
	}
	sd, _, _ := unstructured.NestedMap(o.Object, "stringData")
	for _, v := range sd {
		if s, ok := v.(string); ok {
			add(s)
			add(base64.StdEncoding.EncodeToString([]byte(s)))
		}
	}
	sort.Slice(vals, func(i, j int) bool { return len(vals[i]) > len(vals[j]) })
	return func(s string) string {
		for _, v := range vals {
			s = strings.ReplaceAll(s, v, "<redacted>")
		}
		return s
	}
}

// systemLabels are added by the API server itself, not by a webhook.
var systemLabels = map[string]bool{"kubernetes.io/metadata.name": true}

// mutatedBy says whether the dry-run result out differs from the input in: a value the input
// sets (every top-level field but apiVersion, kind, metadata and status; a list must keep its
// length and each element its values), or its labels and annotations (changed or, for a create,
// added). Fields the input leaves out are the API server's defaults and do not count; for an
// update, labels and annotations the existing object has are not the webhook's either. A
// Secret's stringData is compared as the data the API server turns it into.
func mutatedBy(in, out *unstructured.Unstructured, update bool) bool {
	want := in.Object
	if isSecret(in) {
		if sd, ok := want["stringData"].(map[string]any); ok {
			want = make(map[string]any, len(in.Object))
			for k, v := range in.Object {
				want[k] = v
			}
			data := map[string]any{}
			if d, ok := in.Object["data"].(map[string]any); ok {
				for k, v := range d {
					data[k] = v
				}
			}
			for k, v := range sd {
				if s, ok := v.(string); ok {
					data[k] = base64.StdEncoding.EncodeToString([]byte(s))
				}
			}
			delete(want, "stringData")
			want["data"] = data
		}
	}
	for k, v := range want {
		switch k {
		case "apiVersion", "kind", "metadata", "status":
			continue
		}
		if !subsetOf(v, out.Object[k]) {
			return true
		}
	}
	for _, field := range []string{"labels", "annotations"} {
		have, _, _ := unstructured.NestedStringMap(in.Object, "metadata", field)
		got, _, _ := unstructured.NestedStringMap(out.Object, "metadata", field)
		for k, v := range have {
			if g, ok := got[k]; !ok || g != v {
				return true
			}
		}
		if update {
			continue
		}
		for k := range got {
			if _, ok := have[k]; !ok && !(field == "labels" && systemLabels[k]) {
				return true
			}
		}
	}
	return false
}

// subsetOf says whether every value want sets is in got: maps by key (got may have more keys:
// defaults), lists element by element with the same length, scalars equal (numbers by value,
// quantities such as "500m" and "0.5" by amount). An empty map or list, or null, in want
// matches a missing value (the API server drops empty fields).
func subsetOf(want, got any) bool {
	switch w := want.(type) {
	case nil:
		return true
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return len(w) == 0 && got == nil
		}
		for k, v := range w {
			if !subsetOf(v, g[k]) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok {
			return len(w) == 0 && got == nil
		}
		if len(w) != len(g) {
			return false
		}
		for i := range w {
			if !subsetOf(w[i], g[i]) {
				return false
			}
		}
		return true
	case string:
		g, ok := got.(string)
		if !ok {
			return false
		}
		if w == g {
			return true
		}
		qw, err1 := resource.ParseQuantity(w)
		qg, err2 := resource.ParseQuantity(g)
		return err1 == nil && err2 == nil && qw.Cmp(qg) == 0
	}
	if wn, ok := number(want); ok {
		gn, ok := number(got)
		return ok && wn == gn
	}
	return want == got
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case int64:
		return float64(n), true
	}
	return 0, false
}

// statusCode is the HTTP status of an API error (0 when it carries none).
func statusCode(err error) int32 {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return st.Status().Code
	}
	return 0
}

func (*AdmissionReady) Diff(_ context.Context, r infer.DiffRequest[AdmissionReadyArgs, AdmissionReadyState]) (infer.DiffResponse, error) {
	return diffGate(r.State.AdmissionReadyArgs, r.Inputs), nil
}
