package provider

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/rest"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/kube"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/wait"
)

// prober proves a webhook answers with server-side dry-run creates (nothing is persisted) and,
// for webhooks the API server may skip (failurePolicy Ignore), with a direct call. Two
// consecutive answers are required so a flapping webhook does not pass.
//
// It keeps its own schedule (wait.Result.RetryIn): a change of what the gate watches (an
// EndpointSlice turning ready, a caBundle injected, the configuration changing) probes at once
// and restarts the backoff; any other wake-up before the next probe is due reuses the last
// answer, so unrelated events in a busy namespace cost the API server nothing; the confirming
// probe follows the first good one after confirmDelay, not after a backoff step.
type prober struct {
	r   *run
	obj *unstructured.Unstructured
	// derived says the probe was derived from the configuration's rules, not given by the user.
	derived bool
	// expect must hold on the admitted probe's dry-run result; holding, it proves a mutating
	// Ignore webhook (see creditsMutation). mutators are every mutating webhook in the cluster,
	// the candidates for its mutation; set with expect.
	expect   *mutationExpect
	mutators []*admissionHook

	// Set by the evaluation before each step.
	target ProbeTarget
	// hooks are the checked webhooks (a configuration's, or those a `service` target backs):
	// each needs its own proof (see unproven).
	hooks []*admissionHook
	// nsLabels are the labels of the probe's namespace when a webhook's namespaceSelector needs
	// them; nsErr says why they are unknown.
	nsLabels map[string]string
	nsErr    string

	good    int
	seen    string // the watched state the last probe ran in
	next    time.Time
	backoff time.Duration
	last    wait.Result
}

const (
	probesNeeded = 2
	// confirmDelay separates the two good probes: long enough that both are separate real
	// answers, short enough that a webhook that just started serving is detected without a
	// backoff step, and that a gate whose target already serves returns within ~25 ms.
	confirmDelay    = 20 * time.Millisecond
	probeMinBackoff = 100 * time.Millisecond
	probeMaxBackoff = 250 * time.Millisecond
	// afterEventBackoff is the first retry after what the gate watches changed.
	afterEventBackoff = 25 * time.Millisecond
)

// ProbeTarget describes the webhooks a probe must reach.
type ProbeTarget struct {
	// What names the target in messages: "ValidatingWebhookConfiguration x".
	What string
	// Webhooks are the target's webhook names: a denial proves the target answered only when it
	// names one of them. Nil when unknown.
	Webhooks []string
	// Mutating says the target's webhooks are mutating ones, which run before schema validation.
	Mutating bool
	// Ignore lists the target's webhooks with failurePolicy Ignore: the API server admits
	// without them when they are down, so an admitted dry-run proves nothing about them.
	Ignore []string
}

func (t ProbeTarget) owns(name string) bool { return contains(t.Webhooks, name) }

// reset forgets a good probe: the state it was judged in no longer holds.
func (p *prober) reset() { p.good = 0 }

// step probes when due (state is a fingerprint of what the gate watches) and judges the answer.
func (p *prober) step(ctx context.Context, state string) wait.Result {
	now := time.Now()
	if state != p.seen {
		// The webhook may be up now: probe at once. The API server learns of a changed
		// configuration or endpoint a few milliseconds after the gate does, so retry soon at
		// first (25, 50 ms), then back off as usual.
		p.backoff = probeMinBackoff / 2
		if p.seen != "" {
			p.backoff = afterEventBackoff / 2
		}
		p.seen = state
		if p.good == 0 {
			p.next = time.Time{} // a confirming probe keeps its confirmDelay
		}
	}
	if now.Before(p.next) {
		r := p.last
		r.RetryIn = p.next.Sub(now)
		return r
	}
	res := p.judge(ctx)
	if res.Failed == nil && !res.Ready {
		delay := confirmDelay
		if !res.Confirming {
			p.backoff = min(p.backoff*2, probeMaxBackoff)
			delay = p.backoff
		}
		p.next = time.Now().Add(delay)
		res.Poll, res.RetryIn = true, delay
	}
	p.last = res
	return res
}

func (p *prober) judge(ctx context.Context) wait.Result {
	o := p.once(ctx)
	// The wait ended during this probe (or client-go's rate limiter refused to start one that
	// could not finish before the deadline): its own deadline is not the webhook's answer.
	if (ctx.Err() != nil || strings.Contains(o.Why, "would exceed context deadline")) && p.last.Message != "" {
		return p.last
	}
	if o.Terminal != nil {
		return wait.Result{Failed: o.Terminal}
	}
	if o.Blocked {
		if res := p.proveBlocked(ctx, &o); res != nil {
			return *res
		}
	}
	if o.Answered && !o.Direct {
		needs, credited, err := p.unproven(o)
		if err != nil {
			o.Answered, o.Why = false, err.Error()
		}
		for _, c := range credited {
			o.Why += fmt.Sprintf("; the result satisfies expect, which proves mutating webhook %s (failurePolicy Ignore, the only mutating webhook intercepting the probe)", c)
		}
		for _, n := range needs {
			ok, why, terminal := p.callDirect(ctx, n.hook, n.why, n.remedy)
			if ctx.Err() != nil && p.last.Message != "" {
				return p.last
			}
			if terminal != nil {
				return wait.Result{Failed: terminal}
			}
			if !ok {
				o.Answered = false
				o.Why = n.why + "; calling it directly: " + why
				break
			}
			o.Why += "; " + n.hook.name + " answered a direct call"
		}
	}
	if !o.Answered {
		p.good = 0
		hint := "kubectl get pods,endpointslices -n <webhook namespace>; the webhook's logs"
		if o.Hint != "" {
			hint = o.Hint + "; " + hint
		}
		return wait.Result{Message: "dry-run probe: " + o.Why, Hint: hint}
	}
	p.good++
	if p.good < probesNeeded {
		return wait.Result{Message: fmt.Sprintf("dry-run probe answered (%s); confirming", o.Why), Confirming: true}
	}
	return wait.Result{Ready: true, Message: "dry-run probe answered: " + o.Why}
}

// proveBlocked: a policy that denies the probe before the target (a policy engine's mutating
// webhook, a ValidatingAdmissionPolicy) may deny it forever, so the target's webhooks are proven
// the way an Ignore webhook is: each must answer a direct AdmissionReview for the probe. o
// becomes answered when all do; it stays unanswered, saying which did not, otherwise. With
// `expect`, no direct answer shows the mutation, so the gate keeps waiting for an admitted probe.
// Non-nil: the wait ended during a call, or a call may not be made (terminal).
func (p *prober) proveBlocked(ctx context.Context, o *ProbeOutcome) *wait.Result {
	if len(p.hooks) == 0 || p.expect != nil {
		return nil
	}
	var answered []string
	for _, h := range p.hooks {
		need := fmt.Sprintf("the probe never reaches webhook %s (%s)", h.name, o.Why)
		ok, why, terminal := p.callDirect(ctx, h, need, "give a `probe` the policy admits")
		if ctx.Err() != nil && p.last.Message != "" {
			return &p.last
		}
		if terminal != nil {
			return &wait.Result{Failed: terminal}
		}
		if !ok {
			o.Why += fmt.Sprintf("; calling webhook %s directly instead: %s", h.name, why)
			return nil
		}
		answered = append(answered, h.name)
	}
	o.Answered, o.Blocked, o.Direct = true, false, true
	o.Why += "; instead, " + strings.Join(answered, ", ") + " answered a direct call"
	return nil
}

// directNeed is a checked webhook that the dry-run's answer does not prove, why, and what the
// user can do when the gate may not call it directly either.
type directNeed struct {
	hook        *admissionHook
	why, remedy string
}

// unproven lists the checked webhooks the answered dry-run o does not prove, each to be called
// directly, and the Ignore webhooks proven by the mutation `expect` sees (credited). Proven: the webhook whose denial o is; a failurePolicy Fail webhook the API server
// provably called for the probe (its rules, namespaceSelector and objectSelector match it, it has
// no matchConditions) when the probe was admitted, since the API server admits only with its
// answer; for a mutating target denied by one of its webhooks, the webhooks before that one (the
// API server calls them in order). Not proven: a failurePolicy Ignore webhook (the API server
// admits without it when it is down) unless the result satisfies expect and creditsMutation
// credits it with the mutation, a webhook the probe is not provably intercepted by, and,
// when one webhook denied the probe, the others of a validating configuration (called in
// parallel: the denial is one answer, not theirs).
func (p *prober) unproven(o ProbeOutcome) (needs []directNeed, credited []string, err error) {
	if p.hooks == nil {
		return nil, nil, nil
	}
	q, err := p.request()
	if err != nil {
		return nil, nil, err
	}
	q.nsLabels, q.nsErr = p.nsLabels, p.nsErr
	if q.gvr == namespacesResource {
		q.nsLabels, q.nsErr = p.obj.GetLabels(), ""
	}
	deniedAt := -1
	for i, h := range p.hooks {
		if h.name == o.DeniedBy {
			deniedAt = i
		}
	}
	for i, h := range p.hooks {
		if h.name == o.DeniedBy {
			continue // its denial is its answer
		}
		reason := h.matchErr
		if reason == "" {
			reason = h.match.notReached(q)
		}
		switch {
		case reason != "":
			needs = append(needs, directNeed{hook: h,
				why:    fmt.Sprintf("the probe is not intercepted by webhook %q: %s, so an admitted dry-run proves nothing about it", h.name, reason),
				remedy: "give a probe it intercepts, or list only the webhooks you need in `webhooks`"})
		case h.policy == "Ignore":
			why := fmt.Sprintf("webhook %s has failurePolicy Ignore, so the API server admits the dry-run without it", h.name)
			if o.ExpectHeld && h.mutating {
				not := creditsMutation(p.expect, p.obj, h, interceptors(p.mutators, q))
				if not == "" {
					credited = append(credited, h.name)
					continue
				}
				why += "; the result satisfies expect, but " + not
			}
			needs = append(needs, directNeed{hook: h, why: why,
				remedy: "set failurePolicy: Fail on the webhook, or leave it out of `webhooks`"})
		case o.DeniedBy != "" && !(p.target.Mutating && i < deniedAt):
			needs = append(needs, directNeed{hook: h,
				why:    fmt.Sprintf("the probe was denied by webhook %q, which does not show that webhook %q answered", o.DeniedBy, h.name),
				remedy: fmt.Sprintf("give a probe that webhook %q admits, or list only the webhooks you need in `webhooks`", o.DeniedBy)})
		}
	}
	return needs, credited, nil
}

// interceptors are the hooks the API server may call for q (see hookMatch.excludes); one whose
// match cannot be read may.
func interceptors(hooks []*admissionHook, q probeRequest) []*admissionHook {
	var out []*admissionHook
	for _, h := range hooks {
		if h.matchErr != "" || h.match.excludes(q) == "" {
			out = append(out, h)
		}
	}
	return out
}

// request is the probe's dry-run create as the API server matches webhooks against it.
func (p *prober) request() (probeRequest, error) {
	m, err := p.r.clients.Mapping(p.obj.GroupVersionKind())
	if err != nil {
		return probeRequest{}, err
	}
	return requestFor(p.r, p.obj, m, false), nil
}

// requestFor is the request of a dry-run create (or, with update, apply) of obj, as the API
// server matches webhooks against it: its resource at every served version, namespace, labels.
func requestFor(r *run, obj *unstructured.Unstructured, m *meta.RESTMapping, update bool) probeRequest {
	q := probeRequest{gvr: m.Resource, labels: obj.GetLabels(), update: update}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		q.namespace = obj.GetNamespace()
		if q.namespace == "" {
			q.namespace = r.clients.Namespace
		}
	}
	if all, err := r.clients.Mapper.RESTMappings(obj.GroupVersionKind().GroupKind()); err == nil {
		for _, o := range all {
			if o.Resource != q.gvr && o.Resource.Group == q.gvr.Group && o.Resource.Resource == q.gvr.Resource {
				q.equivalents = append(q.equivalents, o.Resource)
			}
		}
	}
	return q
}

// once dry-run creates the probe and says whether the target webhooks answered.
func (p *prober) once(ctx context.Context) ProbeOutcome {
	obj := p.obj.DeepCopy()
	m, err := p.r.clients.Mapping(obj.GroupVersionKind())
	if err != nil {
		var nk *kube.NoKindError
		if errors.As(err, &nk) {
			return ProbeOutcome{Why: nk.Error()}
		}
		return ProbeOutcome{Why: err.Error()}
	}
	if obj.GetName() == "" && obj.GetGenerateName() == "" {
		obj.SetGenerateName("readiness-probe-")
	}
	ri := p.r.clients.Dynamic.Resource(m.Resource)
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	where := ""
	var out *unstructured.Unstructured
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if obj.GetNamespace() == "" {
			obj.SetNamespace(p.r.clients.Namespace)
		}
		where = " in namespace " + obj.GetNamespace()
		out, err = ri.Namespace(obj.GetNamespace()).Create(ctx, obj, dryRun)
	} else {
		obj.SetNamespace("") // a derived probe of a cluster-scoped kind
		out, err = ri.Create(ctx, obj, dryRun)
	}
	if err != nil && (apierrors.IsUnauthorized(err) || (apierrors.IsForbidden(err) && strings.Contains(err.Error(), "cannot create resource"))) {
		res := m.Resource.Resource
		if m.Resource.Group != "" {
			res += "." + m.Resource.Group
		}
		return ProbeOutcome{Terminal: fmt.Errorf("the provider may not dry-run create the probe %s%s: %s; grant verb `create` on resource %q%s "+
			"to the provider's identity (a dry-run persists nothing)", obj.GetKind(), where, p.stable(obj, err.Error()), res, where)}
	}
	o := ClassifyProbe(err, p.target)
	if err != nil && isSecret(obj) {
		// A webhook's answer may quote the Secret probe in any escaping: keep only its verdict.
		o.Why = strings.ReplaceAll(o.Why, err.Error(), "(the API server's message is not shown: the probe is a Secret)")
	}
	o.Why = p.stable(obj, o.Why)
	if o.Invalid {
		why := "give a `probe` that passes schema validation"
		if p.derived {
			why = fmt.Sprintf("the %s derived from the webhook's rules is rejected by schema validation; give `probe` (an object the webhook intercepts that is valid for its schema)", obj.GetKind())
		}
		o.Terminal = fmt.Errorf("%s: %s", o.Why, why)
	}
	if p.expect != nil && o.Answered {
		p.judgeExpect(&o, obj, out, err)
	}
	return o
}

// judgeExpect requires expect to hold on the admitted probe's dry-run result out; the result is
// dropped afterwards, and never quoted for a Secret.
func (p *prober) judgeExpect(o *ProbeOutcome, obj, out *unstructured.Unstructured, err error) {
	if err != nil || out == nil {
		o.Answered = false
		o.Why = "expect needs an admitted dry-run result, and there is none: " + o.Why
		o.Hint = "give a `probe` the webhooks admit (generateName: a fixed name that exists already is not created)"
		return
	}
	v := p.expect.judge(obj, out)
	switch {
	case v.terminal != "":
		o.Terminal = errors.New(v.terminal)
	case !v.held:
		o.Answered, o.Why, o.Hint = false, "admitted, but "+p.stable(obj, v.why), v.hint
	default:
		o.ExpectHeld, o.Why = true, "admitted, and the result satisfies expect"
	}
}

// stable strips the name the API server generated for the probe (it changes with every
// dry-run), so the message stays the same while the state does.
func (p *prober) stable(obj *unstructured.Unstructured, msg string) string {
	gen := obj.GetGenerateName()
	if gen == "" || obj.GetName() != "" {
		return msg
	}
	return regexp.MustCompile(regexp.QuoteMeta(gen)+`[a-z0-9]{5}\b`).ReplaceAllString(msg, gen+"*")
}

// ProbeOutcome is what one dry-run create says about the target webhooks.
type ProbeOutcome struct {
	// Answered: the API server called the target and it answered (or, for Fail-policy webhooks,
	// admitted the object, which it cannot do without their answer).
	Answered bool
	// Why spells out the cause, as cmctl does.
	Why string
	// DeniedBy is the target's webhook that denied the probe (which is its answer).
	DeniedBy string
	// Invalid: schema validation rejected the probe before it reached the target.
	Invalid bool
	// Terminal is set when no amount of waiting changes the outcome.
	Terminal error
	// ExpectHeld: the probe was admitted and its dry-run result satisfies expect.
	ExpectHeld bool
	// Hint says what to check, when the outcome has a better idea than the usual one.
	Hint string
	// Blocked: another webhook or an admission policy denied the probe, so the API server never
	// called the target (see prober.proveBlocked).
	Blocked bool
	// Direct: every checked webhook answered a direct call (see prober.proveBlocked).
	Direct bool
}

var deniedRE = regexp.MustCompile(`admission webhook "([^"]+)" denied the request`)
var failedCallRE = regexp.MustCompile(`failed calling webhook "([^"]+)"`)

// deniedBy returns the webhook a dry-run's denial names ("" when it is not a webhook denial).
func deniedBy(err error) string {
	if err == nil {
		return ""
	}
	if m := deniedRE.FindStringSubmatch(err.Error()); m != nil {
		return m[1]
	}
	return ""
}

// ClassifyProbe maps a dry-run create's outcome to "did the target webhooks answer?". A denial
// proves it only when it names one of the target's webhooks: a policy engine's mutating webhook
// or a ValidatingAdmissionPolicy that denies the probe stops it before it reaches the target.
func ClassifyProbe(err error, t ProbeTarget) ProbeOutcome {
	what := t.What
	if what == "" {
		what = "the target webhook"
	}
	if err == nil {
		return ProbeOutcome{Answered: true, Why: "admitted"}
	}
	msg := err.Error()
	if name := deniedBy(err); name != "" {
		if t.owns(name) {
			return ProbeOutcome{Answered: true, DeniedBy: name, Why: "denied by the webhook (it answered): " + msg}
		}
		if t.Webhooks == nil {
			return ProbeOutcome{Why: fmt.Sprintf("probe denied by webhook %q, which cannot be told apart from %s: %s", name, what, msg)}
		}
		return ProbeOutcome{Blocked: true, Why: fmt.Sprintf("probe denied by policy webhook %q before reaching %s: %s", name, what, msg)}
	}
	if m := failedCallRE.FindStringSubmatch(msg); m != nil && t.Webhooks != nil && !t.owns(m[1]) {
		return ProbeOutcome{Why: fmt.Sprintf("the API server could not call webhook %q, which runs before %s: %s", m[1], what, msg)}
	}
	switch {
	case strings.Contains(msg, "ValidatingAdmissionPolicy") || strings.Contains(msg, "MutatingAdmissionPolicy"):
		return ProbeOutcome{Blocked: true, Why: fmt.Sprintf("probe denied by an admission policy before reaching %s: %s", what, msg)}
	case apierrors.IsAlreadyExists(err):
		return ProbeOutcome{Answered: true, Why: "admitted (the object already exists)"}
	// An Invalid answer is judged by its reason, before any text match: its message may well
	// mention a Certificate kind or a timeoutSeconds field.
	case apierrors.IsInvalid(err) && t.Mutating && len(t.Webhooks) > len(t.Ignore):
		// Schema validation runs after the mutating webhooks: a Fail-policy one that did not
		// answer would have failed the request before.
		return ProbeOutcome{Answered: true, Why: "admitted by the mutating webhooks, then rejected by schema validation: " + msg}
	case apierrors.IsInvalid(err):
		return ProbeOutcome{Invalid: true, Why: fmt.Sprintf("the probe object is invalid: schema validation rejects it before it reaches %s: %s", what, msg)}
	case strings.Contains(msg, "no endpoints available for service"):
		return ProbeOutcome{Why: "no ready pods behind the webhook Service: " + msg}
	case strings.Contains(msg, "connection refused"):
		return ProbeOutcome{Why: "connection refused (pod up, webhook server not listening yet): " + msg}
	case strings.Contains(msg, "x509") || strings.Contains(msg, "certificate"):
		return ProbeOutcome{Why: "TLS error (caBundle not injected yet, or the serving certificate is wrong): " + msg}
	case strings.Contains(msg, "context deadline exceeded") || strings.Contains(msg, "Timeout") || strings.Contains(msg, "timeout"):
		return ProbeOutcome{Why: "the webhook did not answer in time: " + msg}
	case strings.Contains(msg, "service \"") && strings.Contains(msg, "not found"):
		return ProbeOutcome{Why: "the webhook Service is not created yet: " + msg}
	case strings.Contains(msg, "failed calling webhook"):
		return ProbeOutcome{Why: "the API server could not call the webhook: " + msg}
	}
	return ProbeOutcome{Why: msg}
}

// admissionHook is one webhook of a configuration, as the API server calls it.
type admissionHook struct {
	name, policy string
	// config is the configuration holding it (Kind/name); mutating says it is a
	// MutatingWebhookConfiguration's.
	config   string
	mutating bool
	url      string // clientConfig.url; empty for a Service-backed webhook
	// externalName is the external name of an ExternalName Service the webhook is behind,
	// which the API server dials (at svcPort) instead of a ClusterIP; set by WebhookReady.
	externalName string
	svcNamespace string
	svcName      string
	svcPort      int
	path         string
	caBundle     []byte
	versions     []string // admissionReviewVersions
	timeout      time.Duration
	// match decides whether the API server calls it for a request; matchErr says why it could
	// not be read (then it is never taken as called).
	match    hookMatch
	matchErr string
}

// directURL is where the gate calls the webhook itself, as the API server does: its URL, or
// for a webhook behind an ExternalName Service, the external name at the webhook's port with
// the TLS server name <service>.<namespace>.svc (the API server's service proxy cannot reach an
// ExternalName Service: it has no endpoints). "" for any other Service (the service proxy).
func (h *admissionHook) directURL() (u, serverName string) {
	switch {
	case h.url != "":
		return h.url, ""
	case h.externalName != "":
		return "https://" + net.JoinHostPort(h.externalName, strconv.Itoa(h.svcPort)) + h.path, h.svcName + "." + h.svcNamespace + ".svc"
	}
	return "", ""
}

func (h *admissionHook) endpoint() string {
	if h.url != "" {
		return h.url
	}
	return fmt.Sprintf("service %s/%s:%d%s", h.svcNamespace, h.svcName, h.svcPort, h.path)
}

// callDirect sends the webhook an AdmissionReview for a dry-run create of the probe, the way the
// API server would: to its URL trusting only the configuration's caBundle, or, for a Service,
// through the API server's service proxy. A valid AdmissionReview answering this request's uid
// (allowed or denied) is proof that it serves; anything else is not. need says why the call is
// needed and remedy what else the user can do, for when the service proxy is forbidden.
func (p *prober) callDirect(ctx context.Context, h *admissionHook, need, remedy string) (ok bool, why string, terminal error) {
	return callDirect(ctx, p.r, p.obj, h, need, remedy)
}

// callDirect sends webhook h an AdmissionReview for a dry-run create of obj (see
// prober.callDirect): WebhookReady's probe, or one of AdmissionReady's objects.
func callDirect(ctx context.Context, r *run, in *unstructured.Unstructured, h *admissionHook, need, remedy string) (ok bool, why string, terminal error) {
	obj := in.DeepCopy()
	if obj.GetName() == "" && obj.GetGenerateName() == "" {
		obj.SetGenerateName("readiness-probe-")
	}
	m, err := r.clients.Mapping(obj.GroupVersionKind())
	if err != nil {
		return false, err.Error(), nil
	}
	if m.Scope.Name() != meta.RESTScopeNameNamespace {
		obj.SetNamespace("")
	} else if obj.GetNamespace() == "" {
		obj.SetNamespace(r.clients.Namespace)
	}
	body, uid, err := admissionReview(obj, m.Resource, h.versions)
	if err != nil {
		return false, "", fmt.Errorf("webhook %s: building the AdmissionReview: %w", h.name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	var status int
	var answer []byte
	if u, serverName := h.directURL(); u != "" {
		status, answer, err = postURL(ctx, u, serverName, h.caBundle, body)
		if err != nil {
			return false, "POST " + u + ": " + err.Error(), nil
		}
	} else {
		// Made by hand (as HttpReady's): the exact status and body tell the API server's own
		// answers (Forbidden, no endpoints) from the webhook's.
		rc, ok := r.clients.Typed.CoreV1().RESTClient().(*rest.RESTClient)
		if !ok || rc.Client == nil {
			return false, "", errors.New("no HTTP client for the Kubernetes API")
		}
		u, err := proxyURLBelow(rc, h.svcNamespace, fmt.Sprintf("https:%s:%d", h.svcName, h.svcPort), h.path)
		if err != nil {
			return false, "", fmt.Errorf("webhook %s: %w", h.name, err)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
		if err != nil {
			return false, "", err
		}
		req.Header.Set("Content-Type", "application/json")
		status, answer, err = readAnswer(rc.Client.Do(req))
		if err != nil {
			return false, "through the API server's service proxy: " + err.Error(), nil
		}
		if st, ok := apiServerAnswer(answer); ok {
			if st.Code == http.StatusUnauthorized || st.Code == http.StatusForbidden && strings.Contains(st.Message, "services/proxy") {
				return false, "", fmt.Errorf("%s, and calling it through the API server's service proxy is forbidden: %s; "+
					"grant verb `create` on resource \"services/proxy\" in namespace %s to the provider's identity, or %s", need, st.Message, h.svcNamespace, remedy)
			}
			if st.Code == http.StatusServiceUnavailable || st.Code == http.StatusNotFound {
				// No endpoints (or no Endpoints object): an ExternalName Service has none, and the
				// proxy cannot reach it.
				if ext := externalNameFor(ctx, r, h); ext != "" {
					eh := *h
					eh.externalName = ext
					return callDirect(ctx, r, in, &eh, need, remedy)
				}
			}
			return false, fmt.Sprintf("through the API server's service proxy: HTTP %d: %s", st.Code, st.Message), nil
		}
	}
	return checkReview(answer, status, uid)
}

// externalNameFor reads webhook h's Service once per gate (a GET, for callers that do not watch
// it) and returns its external name when it is an ExternalName Service; "" otherwise, or when it
// cannot be read.
func externalNameFor(ctx context.Context, r *run, h *admissionHook) string {
	key := h.svcNamespace + "/" + h.svcName
	if ext, ok := r.externalNames[key]; ok {
		return ext
	}
	svc, err := r.clients.Dynamic.Resource(schema.GroupVersionResource{Version: "v1", Resource: "services"}).
		Namespace(h.svcNamespace).Get(ctx, h.svcName, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	if r.externalNames == nil {
		r.externalNames = map[string]string{}
	}
	r.externalNames[key] = externalNameOf(svc)
	return r.externalNames[key]
}

// admissionReview encodes the AdmissionReview the API server would send for a dry-run create of
// obj, in the first version the webhook accepts (v1 unless it only takes v1beta1), with a fresh uid.
func admissionReview(obj *unstructured.Unstructured, gvr schema.GroupVersionResource, versions []string) ([]byte, types.UID, error) {
	raw, err := obj.MarshalJSON()
	if err != nil {
		return nil, "", err
	}
	apiVersion := "admission.k8s.io/v1"
	if len(versions) > 0 && !contains(versions, "v1") && contains(versions, "v1beta1") {
		apiVersion = "admission.k8s.io/v1beta1"
	}
	gvk := obj.GroupVersionKind()
	kind := metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind}
	res := metav1.GroupVersionResource{Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource}
	opts, _ := json.Marshal(metav1.CreateOptions{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "CreateOptions"}, DryRun: []string{metav1.DryRunAll}})
	dryRun := true
	uid := uuid.NewUUID()
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: apiVersion, Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: uid, Kind: kind, Resource: res, RequestKind: &kind, RequestResource: &res,
			Name: obj.GetName(), Namespace: obj.GetNamespace(), Operation: admissionv1.Create,
			UserInfo: authenticationv1.UserInfo{Username: "readiness-probe"},
			Object:   runtime.RawExtension{Raw: raw}, DryRun: &dryRun, Options: runtime.RawExtension{Raw: opts},
		},
	}
	body, err := json.Marshal(review)
	return body, uid, err
}

// postURL posts body to a webhook URL the way the API server does: TLS trusting only the
// configuration's caBundle (the system roots when it has none), no proxy, no redirects.
func postURL(ctx context.Context, url, serverName string, caBundle, body []byte) (int, []byte, error) {
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if len(caBundle) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caBundle) {
			return 0, nil, errors.New("the configuration's caBundle holds no PEM certificate")
		}
		tlsCfg.RootCAs = pool
	}
	client := &http.Client{
		Transport:     &http.Transport{TLSClientConfig: tlsCfg, DisableKeepAlives: true, Proxy: nil},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, answer, err
}

// checkReview says whether answer is a webhook's AdmissionReview response to the request uid.
// The answer's content is never quoted: whatever answers there is not ours to print.
func checkReview(answer []byte, status int, uid types.UID) (bool, string, error) {
	if status != http.StatusOK {
		return false, fmt.Sprintf("answered HTTP %d, not an AdmissionReview (%d bytes)", status, len(answer)), nil
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(answer, &review); err != nil || review.Kind != "AdmissionReview" ||
		(review.APIVersion != "admission.k8s.io/v1" && review.APIVersion != "admission.k8s.io/v1beta1") || review.Response == nil {
		return false, fmt.Sprintf("answered HTTP 200 with something that is not an AdmissionReview response (%d bytes): not a webhook", len(answer)), nil
	}
	if review.Response.UID != uid {
		return false, "answered an AdmissionReview for another request (uid mismatch): not an answer to this one", nil
	}
	if review.Response.Allowed {
		return true, "allowed", nil
	}
	return true, "denied", nil
}
