package provider

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/readiness-io/pulumi-readiness/provider/internal/probe"
	"github.com/readiness-io/pulumi-readiness/provider/internal/session"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/admission"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/autogate"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/kube"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/status"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/verdict"
)

// AdmissionReady proves that exactly the given objects will be admitted: every round
// server-side dry-runs each of them (nothing is persisted), and the gate passes after
// `consecutive` rounds in a row in which the API server admitted all of them.
type AdmissionReady struct {
	gate[AdmissionReadyArgs, AdmissionReadyState]
}

type AdmissionReadyArgs struct {
	Objects     []map[string]any `pulumi:"objects" provider:"replaceOnChanges,secret"`
	Expect      *string          `pulumi:"expect,optional" provider:"replaceOnChanges"`
	Consecutive *int             `pulumi:"consecutive,optional" provider:"replaceOnChanges"`
	Retried     *bool            `pulumi:"retried,optional" provider:"replaceOnChanges"`
	GateArgs
}

type AdmissionReadyState struct {
	AdmissionReadyArgs
	Admitted int      `pulumi:"admitted"`
	Mutated  []string `pulumi:"mutated"`
	Deniers  []string `pulumi:"deniers"`
}

//go:embed descriptions/admission_ready.md
var admissionReadyDoc string

func (g *AdmissionReady) Annotate(a infer.Annotator) {
	a.Describe(g, markdown(admissionReadyDoc))
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
	an.Describe(&a.Retried, "Each object's create is retried by the program's error hook (`autoGate`, `autoRetry`) when the API server "+
		"could not call a webhook (docs/retry.md). Then, unless `consecutive` is set, one admitting round passes where every webhook "+
		"that may intercept the objects has failurePolicy Fail: a flap fails the create visibly and the hook proves admission again "+
		"before it tries again. Where a failurePolicy Ignore webhook may intercept an object, two rounds still: its flap lets the "+
		"create through without it, which no retry sees. autoGate sets it on the gates in front of an object's own create.")
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
				if msg := admission.ManifestProblem(o, true); msg != "" {
					failures = append(failures, p.CheckFailure{Property: fmt.Sprintf("objects[%d]", i), Reason: fmt.Sprintf("objects[%d]: %s", i, msg)})
				}
			}
		}
		if args.Consecutive != nil && *args.Consecutive < 1 {
			failures = append(failures, p.CheckFailure{Property: "consecutive", Reason: "must be at least 1"})
		}
		if args.Expect != nil && isKnown(req.NewInputs, "expect") {
			if _, err := admission.CompileExpect(args.Expect); err != nil {
				failures = append(failures, p.CheckFailure{Property: "expect", Reason: err.Error()})
			}
		}
		return failures
	})
}

func (g *AdmissionReady) Create(ctx context.Context, req infer.CreateRequest[AdmissionReadyArgs]) (infer.CreateResponse[AdmissionReadyState], error) {
	if !req.DryRun {
		if h := adoptHeadStart(ctx, req.Inputs); h != nil {
			session.Trace(h.what, "create of %s adopted the head start begun %dus before it (passed %dus after it began)",
				req.Name, time.Since(h.began).Microseconds(), h.passed.Sub(h.began).Microseconds())
			state := h.state
			state.AdmissionReadyArgs = req.Inputs
			return infer.CreateResponse[AdmissionReadyState]{ID: gateID("admission", h.what), Output: state}, nil
		}
	}
	return createGate(ctx, req.Name, req.DryRun, req.Inputs.GateArgs, AdmissionReadyState{AdmissionReadyArgs: req.Inputs}, "admission", admissionBuilder(req.Inputs))
}

func (g *AdmissionReady) Read(ctx context.Context, req infer.ReadRequest[AdmissionReadyArgs, AdmissionReadyState]) (infer.ReadResponse[AdmissionReadyArgs, AdmissionReadyState], error) {
	return readGate(ctx, req, admissionBuilder(req.Inputs))
}

func admissionBuilder(a AdmissionReadyArgs) builder[AdmissionReadyState] {
	return func(r *session.Run) (evaluation, func(*AdmissionReadyState), error) {
		e := &admissionEval{r: r, need: defaultConsecutive, deniers: map[string]bool{}}
		if a.Consecutive != nil {
			e.need = *a.Consecutive
		} else {
			e.retried = deref(a.Retried)
		}
		if e.need < 1 {
			return nil, nil, fmt.Errorf("consecutive: must be at least 1")
		}
		if len(a.Objects) == 0 {
			return nil, nil, fmt.Errorf("objects: give at least one object")
		}
		for i, o := range a.Objects {
			if msg := admission.ManifestProblem(o, true); msg != "" {
				return nil, nil, fmt.Errorf("objects[%d]: %s", i, msg)
			}
			e.objs = append(e.objs, &unstructured.Unstructured{Object: o})
		}
		x, err := admission.CompileExpect(a.Expect)
		if err != nil {
			return nil, nil, fmt.Errorf("expect: %w", err)
		}
		e.expect = x
		return e, e.fill, nil
	}
}

// readyNotAnswering is how long, after a webhook's Service came to have ready endpoints, rounds
// that are not admitted stay at probe.HotBackoff: a server whose pod is Ready answers within
// seconds (ingress-nginx's 10 s after Ready, as field report 002 measured; External Secrets' 3 s),
// with no event of its own when it does, and every 40 ms costs one dry run per object batch.
const readyNotAnswering = 30 * time.Second

// admissionEval runs the rounds. It has nothing to watch: it keeps its own schedule with
// verdict.Result.RetryIn (a capped backoff while an object is not admitted, probe.ConfirmDelay between
// good rounds).
type admissionEval struct {
	r      *session.Run
	objs   []*unstructured.Unstructured
	expect *admission.Expect
	need   int
	// retried: the objects' creates are retried after a failed webhook call (admission.Round.Retried).
	retried bool

	// Of the current round: every webhook in the cluster, and the answers of the failurePolicy
	// Ignore ones called directly (by configuration/name: "" answered, else why not).
	hooks   []*admission.Hook
	answers map[string]string
	// configs fingerprints the webhook configurations: a change (a caBundle injected, a webhook
	// registered) retries soon and opens a hot window, as the prober does.
	configs  string
	hotUntil time.Time
	// readySince is when a Service of a webhook that may intercept the objects last came to have
	// ready endpoints (zero while none has): see readyNotAnswering.
	readySince time.Time
	// wakeHooks are the webhooks whose rules cover an object (mayIntercept), for the state of
	// the configurations wakeFor names.
	wakeHooks []*admission.Hook
	wakeFor   string

	// unanswered are the webhooks that could not answer an object in the latest round judged
	// (session.Run.WaitOnWebhooks: gates waiting on one webhook poll it together).
	unanswered []string

	good    int
	backoff time.Duration
	next    time.Time // when the next round is due (kept only while confirming)
	last    verdict.Result
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
	return min(probe.MaxBackoff*time.Duration(max(1, len(e.objs)/4)), 2*time.Second)
}

func (e *admissionEval) maxBackoff() time.Duration { return e.roundCap() }

func (e *admissionEval) check(ctx context.Context) verdict.Result {
	if now := time.Now(); e.good > 0 && now.Before(e.next) {
		// A wake-up while confirming: the confirming round keeps its probe.ConfirmDelay.
		r := e.last
		r.RetryIn = e.next.Sub(now)
		return r
	}
	res := e.round(ctx)
	// The wait ended during this round (or client-go's rate limiter refused a request that could
	// not finish before the deadline): its deadline is not the API server's answer.
	if probe.EndedByDeadline(ctx, res.Message) && e.last.Message != "" && res.Failed == nil && !res.Ready {
		return e.last
	}
	waitingOn := 0
	if res.Failed == nil && !res.Ready && !res.Confirming {
		waitingOn = e.r.WaitOnWebhooks(e.unanswered)
	} else {
		e.r.WaitOnWebhooks(nil)
	}
	if res.Failed == nil && !res.Ready {
		delay := probe.ConfirmDelay
		if !res.Confirming {
			if e.backoff == 0 {
				e.backoff = probe.MinBackoff / 2
			}
			e.backoff = min(e.backoff*2, e.roundCap())
			if now := time.Now(); now.Before(e.hotUntil) || (!e.readySince.IsZero() && now.Sub(e.readySince) < readyNotAnswering) {
				e.backoff = min(e.backoff, probe.HotBackoff*time.Duration(max(1, len(e.objs)/4)))
			}
			delay = session.SharedDelay(e.backoff, waitingOn)
		} else {
			e.backoff = 0
		}
		res.Poll, res.RetryIn = true, delay
		e.next = time.Now().Add(delay)
	}
	e.last = res
	return res
}

// round dry-runs every object once (gather) and judges the answers (admission.Decide). Every
// object is tried in every round, so a verdict on any of them fails the gate at once and the
// message names everything still pending.
func (e *admissionEval) round(ctx context.Context) verdict.Result {
	if res := e.webhooks(); res != nil {
		return *res
	}
	e.watchNamespaces()
	// The dry runs take tens of milliseconds: prove meanwhile what a pass of this round judges.
	e.r.ProveAhead()
	e.answers = map[string]string{}
	in := admission.Round{Total: len(e.objs), Good: e.good, Need: e.need, Retried: e.retried}
	var unanswered []string
	for i, o := range e.objs {
		a, pending := e.admit(ctx, o)
		a.Label = fmt.Sprintf("objects[%d] (%s %s)", i, o.GetKind(), inputName(o))
		if a.Denier != "" {
			e.deniers[a.Denier] = true
		}
		if pending != nil {
			return *pending // a watch cache loading: the round cannot judge yet
		}
		if a.Unanswered && a.Terminal == "" && !slices.Contains(unanswered, a.Denier) {
			unanswered = append(unanswered, a.Denier)
		}
		in.Answers = append(in.Answers, a)
		if a.Terminal != "" {
			break // a verdict: the round is decided
		}
	}
	e.unanswered = unanswered
	d := admission.Decide(in)
	if d.Result.Failed == nil {
		e.good = d.Good
	}
	if d.Good > 0 {
		e.admitted, e.mutated = len(e.objs), d.Mutated
	}
	return d.Result
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

// admit dry-runs one object: a create, or, when it exists, a forced server-side apply (the
// update the program will make). The result is compared and evaluated here and then dropped:
// it is never kept, so a Secret's data never outlives this call. pending: the answer cannot be
// judged yet (a watch cache loading).
func (e *admissionEval) admit(ctx context.Context, in *unstructured.Unstructured) (a admission.Answer, pending *verdict.Result) {
	red := admission.SecretRedactor(in)
	obj := in.DeepCopy()
	m, err := e.r.Clients.Mapping(obj.GroupVersionKind())
	if err != nil {
		var nk *kube.NoKindError
		if errors.As(err, &nk) && len(nk.Served) > 0 && !strings.Contains(nk.GVK.Group, ".") {
			return verdictOnly(admission.Verdict{Terminal: red(nk.Error())}) // a built-in kind at a wrong apiVersion: no CRD adds it
		}
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			return verdictOnly(admission.Verdict{Terminal: red("discovery refused: " + err.Error())})
		}
		why := err.Error()
		if nk != nil {
			// Watch CRDs, so the CRD's creation and its Established condition start a round at
			// once; without the RBAC to watch them, the backoff alone notices.
			if res := e.r.KindPending(nk.GVK, nk); res != nil && res.Failed == nil && !res.Unsynced && res.Message != "" {
				why = res.Message
			}
		}
		return verdictOnly(admission.Verdict{Why: red(why), Hint: "is the CRD that defines the kind installed (or installing)?"})
	}
	ri := e.r.Clients.Dynamic.Resource(m.Resource)
	var client interface {
		Create(context.Context, *unstructured.Unstructured, metav1.CreateOptions, ...string) (*unstructured.Unstructured, error)
		Apply(context.Context, string, *unstructured.Unstructured, metav1.ApplyOptions, ...string) (*unstructured.Unstructured, error)
	} = ri
	where := ""
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if obj.GetNamespace() == "" {
			obj.SetNamespace(e.r.Clients.Namespace)
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
		v := admission.ClassifyAdmission(err, verb, m.Resource, where)
		v.Terminal, v.Why = red(v.Terminal), red(v.Why)
		if v.Terminal != "" && admission.IsSecret(in) {
			// A verdict's text (a webhook's denial, a field error) may quote the Secret in any
			// escaping; name who refused it and why, never what it said.
			by := ""
			if v.Denier != "" {
				by = fmt.Sprintf(" by %q", v.Denier)
			}
			v.Terminal = fmt.Sprintf("%s was refused%s (%s)%s; the message is not shown, as it may quote the Secret's values",
				admittedName(obj, obj), by, admission.RefusalKind(err), admission.CauseFields(err))
		}
		return verdictOnly(v)
	}
	a = admission.Answer{Name: admittedName(obj, out), Mutated: admission.MutatedBy(in, out, update)}
	if e.expect != nil {
		v := e.expect.Judge(in, out)
		if v.Terminal != "" || !v.Held {
			a.Terminal, a.Why, a.Hint = v.Terminal, "admitted, but "+v.Why, v.Hint
			if v.Terminal != "" {
				a.Why = ""
			}
			return a, nil
		}
	}
	return e.ignoreWebhooks(ctx, a, in, obj, m, update)
}

// verdictOnly is an object's answer that is only a verdict.
func verdictOnly(v admission.Verdict) (admission.Answer, *verdict.Result) {
	return admission.Answer{Verdict: v}, nil
}

// webhooks reads every webhook in the cluster for this round, through cluster-wide watches of
// both configuration kinds; non-nil while they load or when the gate may not read them.
func (e *admissionEval) webhooks() *verdict.Result {
	e.hooks = nil
	var fp strings.Builder
	kinds := []schema.GroupVersionKind{session.MWCGVK, session.VWCGVK}
	all, which, pending := e.r.ObjectsOf(session.Target{GVK: kinds[0]}, session.Target{GVK: kinds[1]})
	if pending != nil {
		if pending.Failed != nil {
			pending.Failed = fmt.Errorf("%w: AdmissionReady reads every %s to find the failurePolicy Ignore webhooks that intercept "+
				"the objects (the API server admits without them while they are down); grant verbs list, watch on it cluster-wide",
				pending.Failed, kinds[which].Kind)
		}
		return pending
	}
	for i, gvk := range kinds {
		for _, cfg := range all[i] {
			fmt.Fprintf(&fp, "%s/%s@%s;", gvk.Kind, cfg.GetName(), cfg.GetResourceVersion())
			e.hooks = append(e.hooks, admission.WebhooksOf(gvk.Kind, cfg)...)
		}
	}
	if f := fp.String(); f != e.wakeFor {
		// The webhooks whose rules cover an object, once per state of the configurations: every
		// round would otherwise match each of them against each object.
		e.wakeFor, e.wakeHooks = f, nil
		for _, h := range e.hooks {
			if e.mayIntercept(h) {
				e.wakeHooks = append(e.wakeHooks, h)
			}
		}
	}
	endpointsReady := false
	for _, h := range e.wakeHooks {
		if h.URL != "" {
			// No EndpointSlice tells when it starts serving: a connect does (see session.Run.Listening).
			fmt.Fprintf(&fp, "reach %s=%t;", h.URL, e.r.Listening(h.URL))
		} else if h.SvcName != "" && h.ExternalName == "" {
			// Its Service's ready endpoints: the webhook's pod turning Ready is the moment it is
			// about to answer, and wakes the gate (a hint: it schedules rounds, never passes one;
			// without the RBAC to watch EndpointSlices the backoff alone notices).
			sl, pending := e.r.Objects(session.Target{GVK: endpointSliceGVK, Namespace: h.SvcNamespace, Hint: true,
				Selector: labels.SelectorFromSet(labels.Set{"kubernetes.io/service-name": h.SvcName})})
			if pending == nil {
				n, _ := status.ReadyEndpoints(sl, "")
				fmt.Fprintf(&fp, "endpoints %s/%s=%d;", h.SvcNamespace, h.SvcName, n)
				endpointsReady = endpointsReady || n > 0
			}
		}
	}
	switch {
	case !endpointsReady:
		e.readySince = time.Time{}
	case e.readySince.IsZero():
		e.readySince = time.Now()
	}
	if fp.String() != e.configs {
		if e.configs != "" {
			// The API server learns of the change a few milliseconds after the gate: if this
			// round is too early, retry after 25 ms, then back off as usual.
			e.backoff = probe.AfterEventBackoff / 2
		}
		e.configs = fp.String()
		e.hotUntil = time.Now().Add(probe.HotWindow)
	}
	return nil
}

// watchNamespaces starts, from the first round, the watches of the objects' namespaces whose
// labels a webhook's namespaceSelector needs (session.Run.NamespaceLabels): they are read once an
// object is admitted, and loading them only then held the first admitted round by one list.
func (e *admissionEval) watchNamespaces() {
	for _, o := range e.objs {
		ns := o.GetNamespace()
		if ns == "" {
			m, err := e.r.Clients.Mapping(o.GroupVersionKind())
			if err != nil || m.Scope.Name() != meta.RESTScopeNameNamespace {
				continue
			}
			ns = e.r.Clients.Namespace
		}
		_, _, _, _ = e.r.NamespaceLabels(ns, e.hooks)
	}
}

// mayIntercept says whether h's rules cover one of the objects' resources (selectors aside):
// the webhooks worth a wake-up when they start listening.
func (e *admissionEval) mayIntercept(h *admission.Hook) bool {
	for _, o := range e.objs {
		m, err := e.r.Clients.Mapping(o.GroupVersionKind())
		if err != nil {
			continue
		}
		q := admission.Request{GVR: m.Resource, Namespace: o.GetNamespace()}
		if m.Scope.Name() == meta.RESTScopeNameNamespace && q.Namespace == "" {
			q.Namespace = e.r.Clients.Namespace
		}
		if h.Match.RulesMatch(q) || h.Match.RulesMatch(admission.Request{GVR: m.Resource, Namespace: q.Namespace, Update: true}) {
			return true
		}
	}
	return false
}

// ignoreWebhooks requires, of an admitted object, an answer from every failurePolicy Ignore
// webhook that may intercept it (see admission.NeedDirect): each is called directly, one
// AdmissionReview per round whatever the number of objects it intercepts.
func (e *admissionEval) ignoreWebhooks(ctx context.Context, a admission.Answer, in, obj *unstructured.Unstructured, m *meta.RESTMapping, update bool) (admission.Answer, *verdict.Result) {
	q := probe.RequestFor(e.r, obj, m, update)
	if q.GVR == admission.NamespacesResource {
		q.NSLabels = obj.GetLabels()
	} else if q.Namespace != "" {
		lbls, nsErr, _, pending := e.r.NamespaceLabels(q.Namespace, e.hooks)
		if pending != nil {
			return a, pending
		}
		q.NSLabels, q.NSErr = lbls, nsErr
	}
	interceptors := admission.Interceptors(e.hooks, q)
	a.Ignored = slices.ContainsFunc(interceptors, func(h *admission.Hook) bool { return h.Policy != "Fail" })
	for _, h := range admission.NeedDirect(interceptors, e.expect, in) {
		key := h.Config + "/" + h.Name
		why, done := e.answers[key]
		if !done {
			need := fmt.Sprintf("webhook %s has failurePolicy Ignore, so the API server admits without it while it is down", h.Name)
			ok, w, terminal := probe.CallDirect(ctx, e.r, obj, h, need, "set failurePolicy: Fail on the webhook")
			if terminal != nil {
				a.Terminal = terminal.Error()
				return a, nil
			}
			why = ""
			if !ok {
				why = "calling it directly: " + w
			}
			e.answers[key] = why
		}
		if why != "" {
			a.Denier, a.Unanswered = h.Name, true
			a.Why = fmt.Sprintf("admitted, but webhook %s (failurePolicy Ignore) intercepts it and the API server admits without it while it is down; %s", h.Name, why)
			a.Hint = "is the webhook's server running (kubectl get pods,endpointslices -n <webhook namespace>; its logs)? " +
				"with `expect`, the mutation of the only mutating webhook intercepting an object is its proof"
			return a, nil
		}
	}
	if q.NSErr == "" {
		// Every webhook that intercepts it answered (the API server called the Fail ones, the Ignore
		// ones answered directly): autoGate's plan takes that as the proof for another object they
		// intercept a moment later (discoveryCluster.Admits). Only with the namespace's labels known:
		// a webhook its namespaceSelector may not call is not said to have answered.
		ids, names := make([]string, 0, len(interceptors)), make([]string, 0, len(interceptors))
		for _, h := range interceptors {
			kind, cfg, _ := strings.Cut(h.Config, "/")
			ids, names = append(ids, autogate.WebhookID(kind, cfg, h.Name)), append(names, h.Name)
		}
		noteAnswered(e.r.Clients, ids, time.Now())
		e.r.WebhooksAnswered(names) // the other gates waiting on them try at once
	}
	return a, nil
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
