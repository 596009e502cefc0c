package probe

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/readiness-io/pulumi-readiness/provider/internal/session"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/admission"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/verdict"
)

// Webhook proves a webhook answers with server-side dry-run creates (nothing is persisted) and,
// for webhooks the API server may skip (failurePolicy Ignore), with a direct call. Two
// consecutive answers are required so a flapping webhook does not pass.
//
// It keeps its own schedule (verdict.Result.RetryIn): a change of what the gate watches (an
// EndpointSlice turning ready, a caBundle injected, the configuration changing) probes at once
// and restarts the backoff; any other wake-up before the next probe is due reuses the last
// answer, so unrelated events in a busy namespace cost the API server nothing; the confirming
// probe follows the first good one after ConfirmDelay, not after a backoff step.
type Webhook struct {
	r   *session.Run
	obj *unstructured.Unstructured
	// Derived says the probe was derived from the configuration's rules, not given by the user.
	Derived bool
	// Expect must hold on the admitted probe's dry-run result; holding, it proves a mutating
	// Ignore webhook (see admission.CreditsMutation). Mutators are every mutating webhook in the cluster,
	// the candidates for its mutation; set with Expect.
	Expect   *admission.Expect
	Mutators []*admission.Hook

	// Set by the evaluation before each step.
	Target admission.ProbeTarget
	// Hooks are the checked webhooks (a configuration's, or those a `service` target backs):
	// each needs its own proof (see unproven).
	Hooks []*admission.Hook
	// NSLabels are the labels of the probe's namespace when a webhook's namespaceSelector needs
	// them; NSErr says why they are unknown.
	NSLabels map[string]string
	NSErr    string

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
	// async probes in the background (a composite gate's, see async.go); runs are the
	// probes running (a second is sent beside a slow first one).
	async bool
	runs  []*probeRun
}

const (
	Needed = 2
	// ConfirmDelay separates the two good probes: long enough that both are separate real
	// answers, short enough that a webhook that just started serving is detected without a
	// backoff step, and that a gate whose target already serves returns within ~15 ms.
	ConfirmDelay = 10 * time.Millisecond
	MinBackoff   = 100 * time.Millisecond
	// MaxBackoff is the probe cap of every gate that probes webhooks (WebhookReady,
	// HelmReleaseReady, ChartReady; AdmissionReady's rounds start from it): a webhook that starts
	// listening is detected within a few hundred milliseconds, at the cost of a cheap dry-run.
	MaxBackoff = 250 * time.Millisecond
	// AfterEventBackoff is the first retry after what the gate watches changed.
	AfterEventBackoff = 25 * time.Millisecond
	// HotWindow and HotBackoff: after what the gate watches changed, a webhook that is about to
	// serve usually does so within seconds (its pod Ready, its endpoints published, its
	// caBundle injected, kube-proxy's rules and the API server's view catching up), often with
	// no event of its own; a service-backed webhook's pod cannot be dialed from outside the
	// cluster, so no TCP connect wakes the gate (as one does for a URL webhook). Meanwhile the
	// gate probes at least every HotBackoff. Measured on a real node (External Secrets v0.11:
	// its webhook answers 3 s after its last Deployment is available): with MaxBackoff
	// alone HelmReleaseReady returned ~160 ms after the webhook first admitted.
	HotWindow  = 5 * time.Second
	HotBackoff = 40 * time.Millisecond
	// ProofReuse is a composite gate's Webhook.reuse: the probe cap, so that a proof it passes on
	// is no older than one a standalone gate's backoff would have made, and was given under the
	// configuration, Service, endpoints and namespace labels it sees now.
	ProofReuse = MaxBackoff
)

// backoffCap is the longest wait between probes at now: HotBackoff inside the hot window
// that ends at hotUntil, else MaxBackoff.
func backoffCap(now, hotUntil time.Time) time.Duration {
	if now.Before(hotUntil) {
		return HotBackoff
	}
	return MaxBackoff
}

// NewWebhook is the prober of obj on run r. A composite gate's (HelmReleaseReady, ChartReady)
// reuses a fresh proof and probes in the background (see Webhook.reuse and Webhook.async).
func NewWebhook(r *session.Run, obj *unstructured.Unstructured, composite bool) *Webhook {
	if composite {
		return &Webhook{r: r, obj: obj, reuse: ProofReuse, async: true}
	}
	return &Webhook{r: r, obj: obj}
}

// Reset forgets a good probe: the state it was judged in no longer holds.
func (p *Webhook) Reset() { p.good = 0 }

// Step probes when due (state is a fingerprint of what the gate watches) and judges the answer.
// An async prober takes the answer of its background probe here, and starts the next one.
func (p *Webhook) Step(ctx context.Context, state string) verdict.Result {
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
		p.backoff = MinBackoff / 2
		if p.seen != "" {
			p.backoff = AfterEventBackoff / 2
			p.hotUntil = now.Add(HotWindow)
		}
		p.seen = state
		if p.good == 0 {
			p.next = time.Time{} // a confirming probe keeps its ConfirmDelay
		}
	}
	if len(p.runs) > 0 {
		if len(p.runs) < maxRuns && now.Sub(p.runs[0].began) >= hedge {
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
func (p *Webhook) settle(res verdict.Result, now time.Time) verdict.Result {
	if res.Failed == nil && !res.Ready {
		delay := ConfirmDelay
		if !res.Confirming {
			p.backoff = min(p.backoff*2, backoffCap(now, p.hotUntil))
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
