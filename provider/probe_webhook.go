package provider

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"github.com/readiness-io/pulumi-readiness/provider/internal/session"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/admission"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/kube"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/verdict"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/wait"
)

// prober proves a webhook answers with server-side dry-run creates (nothing is persisted) and,
// for webhooks the API server may skip (failurePolicy Ignore), with a direct call. Two
// consecutive answers are required so a flapping webhook does not pass.
//
// It keeps its own schedule (verdict.Result.RetryIn): a change of what the gate watches (an
// EndpointSlice turning ready, a caBundle injected, the configuration changing) probes at once
// and restarts the backoff; any other wake-up before the next probe is due reuses the last
// answer, so unrelated events in a busy namespace cost the API server nothing; the confirming
// probe follows the first good one after confirmDelay, not after a backoff step.
type prober struct {
	r   *session.Run
	obj *unstructured.Unstructured
	// derived says the probe was derived from the configuration's rules, not given by the user.
	derived bool
	// expect must hold on the admitted probe's dry-run result; holding, it proves a mutating
	// Ignore webhook (see admission.CreditsMutation). mutators are every mutating webhook in the cluster,
	// the candidates for its mutation; set with expect.
	expect   *admission.Expect
	mutators []*admission.Hook

	// Set by the evaluation before each step.
	target admission.ProbeTarget
	// hooks are the checked webhooks (a configuration's, or those a `service` target backs):
	// each needs its own proof (see unproven).
	hooks []*admission.Hook
	// nsLabels are the labels of the probe's namespace when a webhook's namespaceSelector needs
	// them; nsErr says why they are unknown.
	nsLabels map[string]string
	nsErr    string

	good     int
	seen     string // the watched state the last probe ran in
	next     time.Time
	backoff  time.Duration
	hotUntil time.Time // the end of the hot window the last change of seen opened (not its first value)
	last     verdict.Result

	// reuse is how long a proof stands while the state it was proven in holds (0: every step
	// probes again). A composite gate (HelmReleaseReady, ChartReady) checks all its objects at
	// every event of any of them: probing its proven webhooks again each time made each check
	// cost a dry-run per configuration, one after another (110-150 ms for External Secrets'
	// release under the soak's load), and the event that made the release ready waited for it.
	reuse    time.Duration
	provenAt time.Time
	// async probes in the background (a composite gate's, see probe_async.go); runs are the
	// probes running (a second is sent beside a slow first one).
	async bool
	runs  []*probeRun
}

const (
	probesNeeded = 2
	// confirmDelay separates the two good probes: long enough that both are separate real
	// answers, short enough that a webhook that just started serving is detected without a
	// backoff step, and that a gate whose target already serves returns within ~15 ms.
	confirmDelay    = 10 * time.Millisecond
	probeMinBackoff = 100 * time.Millisecond
	// probeMaxBackoff is the probe cap of every gate that probes webhooks (WebhookReady,
	// HelmReleaseReady, ChartReady; AdmissionReady's rounds start from it): a webhook that starts
	// listening is detected within a few hundred milliseconds, at the cost of a cheap dry-run.
	probeMaxBackoff = 250 * time.Millisecond
	// afterEventBackoff is the first retry after what the gate watches changed.
	afterEventBackoff = 25 * time.Millisecond
	// hotWindow and hotBackoff: after what the gate watches changed, a webhook that is about to
	// serve usually does so within seconds (its pod Ready, its endpoints published, its
	// caBundle injected, kube-proxy's rules and the API server's view catching up), often with
	// no event of its own; a service-backed webhook's pod cannot be dialed from outside the
	// cluster, so no TCP connect wakes the gate (as one does for a URL webhook). Meanwhile the
	// gate probes at least every hotBackoff. Measured on a real node (External Secrets v0.11:
	// its webhook answers 3 s after its last Deployment is available): with probeMaxBackoff
	// alone HelmReleaseReady returned ~160 ms after the webhook first admitted.
	hotWindow  = 5 * time.Second
	hotBackoff = 40 * time.Millisecond
	// proofReuse is a composite gate's prober.reuse: the probe cap, so that a proof it passes on
	// is no older than one a standalone gate's backoff would have made, and was given under the
	// configuration, Service, endpoints and namespace labels it sees now.
	proofReuse = probeMaxBackoff
)

// probeBackoffCap is the longest wait between probes at now: hotBackoff inside the hot window
// that ends at hotUntil, else probeMaxBackoff.
func probeBackoffCap(now, hotUntil time.Time) time.Duration {
	if now.Before(hotUntil) {
		return hotBackoff
	}
	return probeMaxBackoff
}

// reset forgets a good probe: the state it was judged in no longer holds.
func (p *prober) reset() { p.good = 0 }

// step probes when due (state is a fingerprint of what the gate watches) and judges the answer.
// An async prober takes the answer of its background probe here, and starts the next one.
func (p *prober) step(ctx context.Context, state string) verdict.Result {
	now := time.Now()
	if res, began, ok := p.collect(state); ok {
		return p.settle(res, began)
	}
	if state == p.seen && p.last.Ready && now.Sub(p.provenAt) < p.reuse {
		if p.async && len(p.runs) == 0 && now.Sub(p.provenAt) > p.reuse/2 {
			p.start(ctx, state) // renew the proof while it still stands
		}
		return p.last
	}
	if state != p.seen {
		// The webhook may be up now: probe at once. The API server learns of a changed
		// configuration or endpoint a few milliseconds after the gate does, so retry soon at
		// first (25, 50 ms), then back off as usual.
		p.backoff = probeMinBackoff / 2
		if p.seen != "" {
			p.backoff = afterEventBackoff / 2
			p.hotUntil = now.Add(hotWindow)
		}
		p.seen = state
		if p.good == 0 {
			p.next = time.Time{} // a confirming probe keeps its confirmDelay
		}
	}
	if len(p.runs) > 0 {
		if len(p.runs) < maxProbeRuns && now.Sub(p.runs[0].began) >= probeHedge {
			p.start(ctx, state) // the first is slow: send another beside it
		}
		return p.probing(now)
	}
	if now.Before(p.next) {
		r := p.last
		r.RetryIn = p.next.Sub(now)
		return r
	}
	if p.async {
		p.start(ctx, state)
		return p.probing(now)
	}
	return p.settle(p.judge(ctx), now)
}

// settle schedules the next probe after res, the answer of a probe begun at now, and keeps res
// as the last answer (a proof stands from when its probe began).
func (p *prober) settle(res verdict.Result, now time.Time) verdict.Result {
	if res.Failed == nil && !res.Ready {
		delay := confirmDelay
		if !res.Confirming {
			p.backoff = min(p.backoff*2, probeBackoffCap(now, p.hotUntil))
			delay = p.backoff
		}
		p.next = time.Now().Add(delay)
		res.Poll, res.RetryIn = true, delay
	}
	if res.Ready {
		p.provenAt = now
	}
	p.last = res
	return res
}

// endedByDeadline says a call's outcome (msg) is the gate's own deadline, not the answer of
// what it called: the wait ended during the call, or the rate limiter refused to start it.
// A webhook that timed out ("context deadline exceeded" from the API server) is an answer.
func endedByDeadline(ctx context.Context, msg string) bool {
	return ctx.Err() != nil || wait.RefusedByRateLimiter(msg)
}

func (p *prober) judge(ctx context.Context) verdict.Result {
	o := p.once(ctx)
	// The wait ended during this probe (or client-go's rate limiter refused to start one that
	// could not finish before the deadline): its own deadline is not the webhook's answer.
	if endedByDeadline(ctx, o.Why) && p.last.Message != "" {
		return p.last
	}
	if o.Terminal != nil {
		return verdict.Result{Failed: o.Terminal}
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
				return verdict.Result{Failed: terminal}
			}
			if !ok {
				o.Answered = false
				o.Why = n.why + "; calling it directly: " + why
				break
			}
			o.Why += "; " + n.hook.Name + " answered a direct call"
		}
	}
	if !o.Answered {
		p.good = 0
		hint := "kubectl get pods,endpointslices -n <webhook namespace>; the webhook's logs"
		if o.Hint != "" {
			hint = o.Hint + "; " + hint
		}
		return verdict.Result{Message: "dry-run probe: " + o.Why, Hint: hint}
	}
	p.good++
	if p.good < probesNeeded {
		return verdict.Result{Message: fmt.Sprintf("dry-run probe answered (%s); confirming", o.Why), Confirming: true}
	}
	return verdict.Result{Ready: true, Message: "dry-run probe answered: " + o.Why}
}

// proveBlocked: a policy that denies the probe before the target (a policy engine's mutating
// webhook, a ValidatingAdmissionPolicy) may deny it forever, so the target's webhooks are proven
// the way an Ignore webhook is: each must answer a direct AdmissionReview for the probe. o
// becomes answered when all do; it stays unanswered, saying which did not, otherwise. With
// `expect`, no direct answer shows the mutation, so the gate keeps waiting for an admitted probe.
// Non-nil: the wait ended during a call, or a call may not be made (terminal).
func (p *prober) proveBlocked(ctx context.Context, o *admission.ProbeOutcome) *verdict.Result {
	if len(p.hooks) == 0 || p.expect != nil {
		return nil
	}
	var answered []string
	for _, h := range p.hooks {
		need := fmt.Sprintf("the probe never reaches webhook %s (%s)", h.Name, o.Why)
		ok, why, terminal := p.callDirect(ctx, h, need, "give a `probe` the policy admits")
		if ctx.Err() != nil && p.last.Message != "" {
			return &p.last
		}
		if terminal != nil {
			return &verdict.Result{Failed: terminal}
		}
		if !ok {
			o.Why += fmt.Sprintf("; calling webhook %s directly instead: %s", h.Name, why)
			return nil
		}
		answered = append(answered, h.Name)
	}
	o.Answered, o.Blocked, o.Direct = true, false, true
	o.Why += "; instead, " + strings.Join(answered, ", ") + " answered a direct call"
	return nil
}

// directNeed is a checked webhook that the dry-run's answer does not prove, why, and what the
// user can do when the gate may not call it directly either.
type directNeed struct {
	hook        *admission.Hook
	why, remedy string
}

// unproven lists the checked webhooks the answered dry-run o does not prove, each to be called
// directly, and the Ignore webhooks proven by the mutation `expect` sees (credited). Proven: the webhook whose denial o is; a failurePolicy Fail webhook the API server
// provably called for the probe (its rules, namespaceSelector and objectSelector match it, it has
// no matchConditions) when the probe was admitted, since the API server admits only with its
// answer; for a mutating target denied by one of its webhooks, the webhooks before that one (the
// API server calls them in order). Not proven: a failurePolicy Ignore webhook (the API server
// admits without it when it is down) unless the result satisfies expect and admission.CreditsMutation
// credits it with the mutation, a webhook the probe is not provably intercepted by, and,
// when one webhook denied the probe, the others of a validating configuration (called in
// parallel: the denial is one answer, not theirs).
func (p *prober) unproven(o admission.ProbeOutcome) (needs []directNeed, credited []string, err error) {
	if p.hooks == nil {
		return nil, nil, nil
	}
	q, err := p.request()
	if err != nil {
		return nil, nil, err
	}
	q.NSLabels, q.NSErr = p.nsLabels, p.nsErr
	if q.GVR == admission.NamespacesResource {
		q.NSLabels, q.NSErr = p.obj.GetLabels(), ""
	}
	deniedAt := -1
	for i, h := range p.hooks {
		if h.Name == o.DeniedBy {
			deniedAt = i
		}
	}
	for i, h := range p.hooks {
		if h.Name == o.DeniedBy {
			continue // its denial is its answer
		}
		reason := h.MatchErr
		if reason == "" {
			reason = h.Match.NotReached(q)
		}
		switch {
		case reason != "":
			needs = append(needs, directNeed{hook: h,
				why:    fmt.Sprintf("the probe is not intercepted by webhook %q: %s, so an admitted dry-run proves nothing about it", h.Name, reason),
				remedy: "give a probe it intercepts, or list only the webhooks you need in `webhooks`"})
		case h.Policy == "Ignore":
			why := fmt.Sprintf("webhook %s has failurePolicy Ignore, so the API server admits the dry-run without it", h.Name)
			if o.ExpectHeld && h.Mutating {
				not := admission.CreditsMutation(p.expect, p.obj, h, admission.Interceptors(p.mutators, q))
				if not == "" {
					credited = append(credited, h.Name)
					continue
				}
				why += "; the result satisfies expect, but " + not
			}
			needs = append(needs, directNeed{hook: h, why: why,
				remedy: "set failurePolicy: Fail on the webhook, or leave it out of `webhooks`"})
		case o.DeniedBy != "" && !(p.target.Mutating && i < deniedAt):
			needs = append(needs, directNeed{hook: h,
				why:    fmt.Sprintf("the probe was denied by webhook %q, which does not show that webhook %q answered", o.DeniedBy, h.Name),
				remedy: fmt.Sprintf("give a probe that webhook %q admits, or list only the webhooks you need in `webhooks`", o.DeniedBy)})
		}
	}
	return needs, credited, nil
}

// request is the probe's dry-run create as the API server matches webhooks against it.
func (p *prober) request() (admission.Request, error) {
	m, err := p.r.Clients.Mapping(p.obj.GroupVersionKind())
	if err != nil {
		return admission.Request{}, err
	}
	return requestFor(p.r, p.obj, m, false), nil
}

// requestFor is the request of a dry-run create (or, with update, apply) of obj, as the API
// server matches webhooks against it: its resource at every served version, namespace, labels.
func requestFor(r *session.Run, obj *unstructured.Unstructured, m *meta.RESTMapping, update bool) admission.Request {
	q := admission.Request{GVR: m.Resource, Labels: obj.GetLabels(), Update: update}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		q.Namespace = obj.GetNamespace()
		if q.Namespace == "" {
			q.Namespace = r.Clients.Namespace
		}
	}
	if all, err := r.Clients.Mapper.RESTMappings(obj.GroupVersionKind().GroupKind()); err == nil {
		for _, o := range all {
			if o.Resource != q.GVR && o.Resource.Group == q.GVR.Group && o.Resource.Resource == q.GVR.Resource {
				q.Equivalents = append(q.Equivalents, o.Resource)
			}
		}
	}
	return q
}

// once dry-run creates the probe and says whether the target webhooks answered.
func (p *prober) once(ctx context.Context) admission.ProbeOutcome {
	obj := p.obj.DeepCopy()
	m, err := p.r.Clients.Mapping(obj.GroupVersionKind())
	if err != nil {
		var nk *kube.NoKindError
		if errors.As(err, &nk) {
			return admission.ProbeOutcome{Why: nk.Error()}
		}
		return admission.ProbeOutcome{Why: err.Error()}
	}
	if obj.GetName() == "" && obj.GetGenerateName() == "" {
		obj.SetGenerateName("readiness-probe-")
	}
	ri := p.r.Clients.Dynamic.Resource(m.Resource)
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	where := ""
	var out *unstructured.Unstructured
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if obj.GetNamespace() == "" {
			obj.SetNamespace(p.r.Clients.Namespace)
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
		return admission.ProbeOutcome{Terminal: fmt.Errorf("the provider may not dry-run create the probe %s%s: %s; grant verb `create` on resource %q%s "+
			"to the provider's identity (a dry-run persists nothing)", obj.GetKind(), where, admission.StableMessage(obj, err.Error()), res, where)}
	}
	o := admission.ClassifyProbe(err, p.target)
	if err != nil && admission.IsSecret(obj) {
		// A webhook's answer may quote the Secret probe in any escaping: keep only its verdict.
		o.Why = strings.ReplaceAll(o.Why, err.Error(), "(the API server's message is not shown: the probe is a Secret)")
	}
	o.Why = admission.StableMessage(obj, o.Why)
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
func (p *prober) judgeExpect(o *admission.ProbeOutcome, obj, out *unstructured.Unstructured, err error) {
	if err != nil || out == nil {
		o.Answered = false
		o.Why = "expect needs an admitted dry-run result, and there is none: " + o.Why
		o.Hint = "give a `probe` the webhooks admit (generateName: a fixed name that exists already is not created)"
		return
	}
	v := p.expect.Judge(obj, out)
	switch {
	case v.Terminal != "":
		o.Terminal = errors.New(v.Terminal)
	case !v.Held:
		o.Answered, o.Why, o.Hint = false, "admitted, but "+admission.StableMessage(obj, v.Why), v.Hint
	default:
		o.ExpectHeld, o.Why = true, "admitted, and the result satisfies expect"
	}
}

// callDirect sends the webhook an AdmissionReview for a dry-run create of the probe, the way the
// API server would: to its URL trusting only the configuration's caBundle, or, for a Service,
// through the API server's service proxy. A valid AdmissionReview answering this request's uid
// (allowed or denied) is proof that it serves; anything else is not. need says why the call is
// needed and remedy what else the user can do, for when the service proxy is forbidden.
func (p *prober) callDirect(ctx context.Context, h *admission.Hook, need, remedy string) (ok bool, why string, terminal error) {
	return callDirect(ctx, p.r, p.obj, h, need, remedy)
}

// callDirect sends webhook h an AdmissionReview for a dry-run create of obj (see
// prober.callDirect): WebhookReady's probe, or one of AdmissionReady's objects.
func callDirect(ctx context.Context, r *session.Run, in *unstructured.Unstructured, h *admission.Hook, need, remedy string) (ok bool, why string, terminal error) {
	obj := in.DeepCopy()
	if obj.GetName() == "" && obj.GetGenerateName() == "" {
		obj.SetGenerateName("readiness-probe-")
	}
	m, err := r.Clients.Mapping(obj.GroupVersionKind())
	if err != nil {
		return false, err.Error(), nil
	}
	if m.Scope.Name() != meta.RESTScopeNameNamespace {
		obj.SetNamespace("")
	} else if obj.GetNamespace() == "" {
		obj.SetNamespace(r.Clients.Namespace)
	}
	body, uid, err := admission.Review(obj, m.Resource, h.Versions)
	if err != nil {
		return false, "", fmt.Errorf("webhook %s: building the AdmissionReview: %w", h.Name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, h.Timeout)
	defer cancel()
	var status int
	var answer []byte
	if u, serverName := h.DirectURL(); u != "" {
		status, answer, err = postURL(ctx, u, serverName, h.CABundle, body)
		if err != nil {
			return false, "POST " + u + ": " + err.Error(), nil
		}
	} else {
		// Made by hand (as HttpReady's): the exact status and body tell the API server's own
		// answers (Forbidden, no endpoints) from the webhook's.
		rc, ok := r.Clients.Typed.CoreV1().RESTClient().(*rest.RESTClient)
		if !ok || rc.Client == nil {
			return false, "", errors.New("no HTTP client for the Kubernetes API")
		}
		u, err := proxyURLBelow(rc, h.SvcNamespace, fmt.Sprintf("https:%s:%d", h.SvcName, h.SvcPort), h.Path)
		if err != nil {
			return false, "", fmt.Errorf("webhook %s: %w", h.Name, err)
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
					"grant verb `create` on resource \"services/proxy\" in namespace %s to the provider's identity, or %s", need, st.Message, h.SvcNamespace, remedy)
			}
			if st.Code == http.StatusServiceUnavailable || st.Code == http.StatusNotFound {
				// No endpoints (or no Endpoints object): an ExternalName Service has none, and the
				// proxy cannot reach it.
				if ext := r.ExternalName(ctx, h); ext != "" {
					eh := *h
					eh.ExternalName = ext
					return callDirect(ctx, r, in, &eh, need, remedy)
				}
			}
			return false, fmt.Sprintf("through the API server's service proxy: HTTP %d: %s", st.Code, st.Message), nil
		}
	}
	return admission.CheckReview(answer, status, uid)
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
