package wait

import (
	"fmt"
	"time"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/verdict"
)

// outcome is what one evaluation means for the wait once stableFor and failureGrace apply.
type outcome int

const (
	keepWaiting outcome = iota
	passed
	failed
)

// windows holds the stableFor and failureGrace windows of one wait: how long Ready must hold,
// and how long Failed must persist, before either counts.
type windows struct {
	stableFor, failureGrace time.Duration
	stable, failing         window
}

// judge applies the windows to an evaluation made at now. It returns the result to report (inside
// a window: a message saying since when, and for how long it must hold), the outcome, and, inside
// an open window, how long until it closes (0 otherwise): the loop evaluates again by then. Pure
// apart from the windows it updates; the clock is the caller's.
func (w *windows) judge(r verdict.Result, now time.Time) (verdict.Result, outcome, time.Duration) {
	switch {
	case r.Failed != nil && w.failureGrace > 0:
		w.stable.reset(now)
		if w.failing.hold(now) >= w.failureGrace {
			r.Failed = fmt.Errorf("%w (failing without interruption for %s, failureGrace %s)", r.Failed, w.failing.held(now).Round(time.Millisecond), w.failureGrace)
			return r, failed, 0
		}
		return verdict.Result{Message: fmt.Sprintf("failing since %s, within failureGrace %s: %v", w.failing.since.Format(time.TimeOnly), w.failureGrace, r.Failed),
			Hint: r.Hint, Poll: r.Poll, RetryIn: r.RetryIn}, keepWaiting, w.failureGrace - w.failing.held(now)
	case r.Failed != nil:
		return r, failed, 0
	case r.Ready && w.stableFor > 0:
		w.failing.reset(now)
		if w.stable.hold(now) >= w.stableFor {
			return r, passed, 0
		}
		msg := fmt.Sprintf("ready since %s, must hold for stableFor %s", w.stable.since.Format(time.TimeOnly), w.stableFor)
		if w.stable.runs > 1 {
			msg += fmt.Sprintf(" (interrupted %d times so far)", w.stable.runs-1)
		}
		return verdict.Result{Message: msg, Hint: "what makes the condition flap (restarts, probes failing, a controller fighting another)"},
			keepWaiting, w.stableFor - w.stable.held(now)
	case r.Ready:
		return r, passed, 0
	}
	w.stable.reset(now)
	w.failing.reset(now)
	return r, keepWaiting, 0
}

// timedOut ends the windows at now and says how close stableFor came, if the condition held at
// all ("" otherwise), for the timeout error.
func (w *windows) timedOut(now time.Time) string {
	if w.stable.runs == 0 {
		return ""
	}
	w.stable.reset(now)
	return fmt.Sprintf("the condition held %d times, at most %s, never the stableFor %s",
		w.stable.runs, w.stable.longest.Round(time.Millisecond), w.stableFor)
}

// window tracks one uninterrupted run of a state (ready, or failing) across evaluations.
type window struct {
	since   time.Time
	runs    int           // how many runs began during this wait
	longest time.Duration // the longest run that ended
}

// hold marks the state seen now and returns how long it has held.
func (w *window) hold(now time.Time) time.Duration {
	if w.since.IsZero() {
		w.since = now
		w.runs++
	}
	return now.Sub(w.since)
}

func (w *window) held(now time.Time) time.Duration { return now.Sub(w.since) }

// reset ends a run at now: the state was interrupted.
func (w *window) reset(now time.Time) {
	if !w.since.IsZero() {
		w.longest = max(w.longest, now.Sub(w.since))
	}
	w.since = time.Time{}
}
