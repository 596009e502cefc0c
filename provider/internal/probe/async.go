package probe

import (
	"context"
	"time"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/verdict"
)

// A composite gate (HelmReleaseReady, ChartReady) checks all its objects in one check, at every
// event of any of them. A probe can take seconds: in the soak, a dry-run sent as External
// Secrets' webhook pod became reachable was held by the API server for 3 s, until its call to
// the webhook timed out, while a call made a moment later answered at once; the check waiting
// on it held back the news of every other object, and the release's own answer. So its probers
// are async: a check starts the probe in the background and returns; the answer wakes the gate,
// whose next check takes it (collect). A probe still running after hedge gets a second one
// beside it (a hedged request: the API server calls the webhook anew); the first answer counts.

const (
	hedge   = 100 * time.Millisecond
	maxRuns = 2
)

// probeRun is a probe running in the background.
type probeRun struct {
	state  string // the watched state it was started in: its answer counts only in that state
	began  time.Time
	cancel context.CancelFunc
	done   chan probeDone // buffered: the probe never blocks on a gate that ended
}

// probeDone is a background probe's verdict and the count of good probes after it.
type probeDone struct {
	res  verdict.Result
	good int
}

// start judges in the background, on a copy of the prober (the checks meanwhile set its inputs
// anew), and wakes the gate when the answer is in.
func (p *Webhook) start(ctx context.Context, state string) {
	pctx, cancel := context.WithCancel(ctx)
	run := &probeRun{state: state, began: time.Now(), cancel: cancel, done: make(chan probeDone, 1)}
	q := *p
	q.runs = nil
	// No earlier answer to fall back on: a probe cut short is no answer (judge keeps p.last for
	// the gate's own end, which a background probe's caller never needs).
	q.last = verdict.Result{}
	wake := p.r.Wake
	go func() {
		defer cancel()
		res := q.judge(pctx)
		run.done <- probeDone{res: res, good: q.good}
		select {
		case wake <- struct{}{}:
		default:
		}
	}()
	p.runs = append(p.runs, run)
}

// collect takes a background probe's answer, given in state (the state the gate sees now), and
// when it began. Probes begun in another state are cancelled: their answers would not count.
// An answer that the webhook answered wins; one that it did not waits while another probe runs.
func (p *Webhook) collect(state string) (verdict.Result, time.Time, bool) {
	var keep []*probeRun
	var got *probeDone
	var began time.Time
	for _, run := range p.runs {
		if run.state != state {
			run.cancel()
			continue
		}
		select {
		case d := <-run.done:
			if got == nil || (!answered(*got) && answered(d)) {
				got, began = &d, run.began
			}
		default:
			keep = append(keep, run)
		}
	}
	if got == nil || (!answered(*got) && len(keep) > 0) {
		p.runs = keep
		return verdict.Result{}, time.Time{}, false
	}
	for _, run := range keep {
		run.cancel()
	}
	p.runs = nil
	p.good = got.good
	return got.res, began, true
}

// answered says a probe's verdict is the webhook's answer (or a terminal failure), not a lack of one.
func answered(d probeDone) bool {
	return d.res.Ready || d.res.Confirming || d.res.Failed != nil
}

// probing is the verdict while a background probe runs: the last answer, never ready, with a
// proof under way (Confirming: a refresh waits for it), checked again when a second probe would
// be sent (the answer wakes the gate sooner).
func (p *Webhook) probing(now time.Time) verdict.Result {
	r := p.last
	if r.Ready || r.Message == "" {
		r = verdict.Result{Message: "dry-run probe: under way"}
	}
	r.Poll, r.Confirming = true, true
	r.RetryIn = max(p.runs[0].began.Add(hedge).Sub(now), time.Millisecond)
	if len(p.runs) >= maxRuns {
		r.RetryIn = MaxBackoff // each answer wakes the gate
	}
	return r
}
