// Package wait is the one wait loop every gate runs: evaluate, then sleep until a watch event
// (or, for checks with nothing to watch, a capped backoff) says the state may have changed,
// report progress whenever the observed state changes, and fail with what was last seen.
package wait

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/verdict"
)

// Spec describes one wait.
type Spec struct {
	// What names the thing waited for: "CRD certificates.cert-manager.io".
	What string
	// Timeout bounds the wait; the context's own deadline (Pulumi's customTimeouts) still applies.
	Timeout time.Duration
	// Wake is poked by the gate's watch subscriptions whenever something it reads changed.
	Wake <-chan struct{}
	// Check evaluates the current state; it must be cheap when it only reads watch caches.
	Check func(ctx context.Context) verdict.Result
	// Progress receives a status line whenever the message changes, and at most every
	// ProgressEvery while it does not.
	Progress      func(msg string)
	ProgressEvery time.Duration
	// MaxBackoff caps the retry interval of Poll results (default 1 s). Probes whose answer
	// changes the moment a server starts listening use a lower cap.
	MaxBackoff time.Duration
	// StableFor, when set, makes Ready count only once it has held without interruption for
	// that long (health that flaps right after a rollout). Any not-ready evaluation restarts it.
	StableFor time.Duration
	// FailureGrace, when set, makes Failed count only once it has persisted that long
	// (controllers that report Failed for a moment while they retry). Any other evaluation
	// forgives it.
	FailureGrace time.Duration
	// Recheck is how often a probed state is evaluated again inside those windows when no watch
	// event arrives (a webhook that stops answering sends no event). Zero: only on watch events
	// and when the window ends, unless the wait has already had to poll (then MaxBackoff).
	Recheck time.Duration
}

// TimeoutError says a wait ran out of time, with the last state it saw.
type TimeoutError struct {
	What    string
	Waited  time.Duration
	Last    string
	Hint    string
	Context []string // extra evidence gathered at timeout (recent Warning events, ...)
}

func (e *TimeoutError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "timed out after %s waiting for %s; last seen: %s", e.Waited.Round(time.Millisecond), e.What, e.Last)
	for _, c := range e.Context {
		b.WriteString("; " + c)
	}
	if e.Hint != "" {
		b.WriteString("; check: " + e.Hint)
	}
	return b.String()
}

// ErrCancelled wraps a wait stopped by the caller (Ctrl-C, pulumi cancel).
var ErrCancelled = errors.New("cancelled")

const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = time.Second
)

// Until evaluates spec.Check until it reports Ready (nil), Failed (that error), the timeout
// (*TimeoutError) or cancellation (wrapping ErrCancelled). It never sleeps to poll a state that
// a watch reports: between evaluations it blocks on spec.Wake.
func Until(ctx context.Context, spec Spec) (verdict.Result, error) {
	start := time.Now()
	parent := ctx
	var cancel context.CancelFunc
	if spec.Timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, spec.Timeout)
		defer cancel()
	}
	every := spec.ProgressEvery
	if every <= 0 {
		every = 5 * time.Second
	}
	progress := spec.Progress
	if progress == nil {
		progress = func(string) {}
	}
	heartbeat := time.NewTicker(every)
	defer heartbeat.Stop()
	var retry *time.Timer
	defer func() {
		if retry != nil {
			retry.Stop()
		}
	}()
	backoff := minBackoff
	maxB := spec.MaxBackoff
	if maxB <= 0 {
		maxB = maxBackoff
	}

	var last verdict.Result
	lastReported := ""
	ws := windows{stableFor: spec.StableFor, failureGrace: spec.FailureGrace}
	polled := false
	for {
		r := spec.Check(ctx)
		polled = polled || r.Poll || r.RetryIn > 0
		r, v, windowEnd := ws.judge(r, time.Now())
		switch v {
		case passed:
			return r, nil
		case failed:
			return r, r.Failed
		}
		if windowEnd > 0 {
			// Inside a window: wake when it closes, and recheck a probed state meanwhile.
			recheck := spec.Recheck
			if recheck <= 0 && polled {
				recheck = maxB
			}
			if r.RetryIn > 0 {
				recheck = r.RetryIn
			}
			if recheck <= 0 || recheck > windowEnd {
				recheck = windowEnd
			}
			r.Poll, r.RetryIn = false, recheck
		}
		if r.Message != lastReported {
			progress(fmt.Sprintf("waiting for %s: %s", spec.What, r.Message))
			lastReported = r.Message
			heartbeat.Reset(every)
			backoff = minBackoff
		}
		last = r

		var retryC <-chan time.Time
		if r.Poll || r.RetryIn > 0 {
			d := r.RetryIn
			if d <= 0 {
				d = backoff
				backoff = min(backoff*2, maxB)
			}
			if retry == nil {
				retry = time.NewTimer(d)
			} else {
				retry.Reset(d)
			}
			retryC = retry.C
		}
	wait:
		select {
		case <-ctx.Done():
			if parent.Err() != nil && errors.Is(parent.Err(), context.Canceled) {
				return last, fmt.Errorf("%w while waiting for %s; last seen: %s", ErrCancelled, spec.What, last.Message)
			}
			te := &TimeoutError{What: spec.What, Waited: time.Since(start), Last: last.Message, Hint: last.Hint}
			if note := ws.timedOut(time.Now()); note != "" {
				te.Context = append(te.Context, note)
			}
			return last, te
		case <-spec.Wake:
		case <-retryC:
		case <-heartbeat.C:
			progress(fmt.Sprintf("waiting for %s (%s): %s", spec.What, time.Since(start).Round(time.Second), last.Message))
			goto wait
		}
		if retry != nil && !r.Poll && r.RetryIn <= 0 {
			retry.Stop()
		}
	}
}

// EffectiveTimeout is the shorter of the gate's own timeout and the time left before ctx's
// deadline (Pulumi's customTimeouts arrive that way).
func EffectiveTimeout(ctx context.Context, own time.Duration) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl); left < own {
			return left
		}
	}
	return own
}

// RefusedByRateLimiter says a call's error message (msg) is client-go's rate limiter refusing
// to start a request that could not begin before the context's deadline ("rate: Wait(n=1) would
// exceed context deadline"), while the context itself is still live: the wait's own deadline,
// never the answer of what the gate calls.
func RefusedByRateLimiter(msg string) bool {
	return strings.Contains(msg, "would exceed context deadline")
}
