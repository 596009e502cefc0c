package wait

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/verdict"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// script returns a Check that replays results in order, then repeats the last one.
func script(results ...verdict.Result) (func(context.Context) verdict.Result, *int) {
	n := 0
	return func(context.Context) verdict.Result {
		r := results[min(n, len(results)-1)]
		n++
		return r
	}, &n
}

type recorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) add(m string) { r.mu.Lock(); r.msgs = append(r.msgs, m); r.mu.Unlock() }

func TestUntilReturnsOnTheEventThatMakesItReady(t *testing.T) {
	wake := make(chan struct{}, 1)
	check, calls := script(verdict.Result{Message: "a"}, verdict.Result{Message: "b"}, verdict.Result{Ready: true})
	var rec recorder
	done := make(chan error)
	go func() {
		_, err := Until(context.Background(), Spec{What: "x", Timeout: time.Minute, Wake: wake, Check: check, Progress: rec.add})
		done <- err
	}()
	wake <- struct{}{}
	wake <- struct{}{}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if *calls != 3 {
		t.Errorf("evaluated %d times, want 3 (once per wake-up, no polling)", *calls)
	}
	if len(rec.msgs) != 2 || !strings.Contains(rec.msgs[0], "waiting for x: a") || !strings.Contains(rec.msgs[1], ": b") {
		t.Errorf("progress = %q", rec.msgs)
	}
}

func TestUntilDoesNotRepeatUnchangedProgress(t *testing.T) {
	wake := make(chan struct{}, 1)
	check, _ := script(verdict.Result{Message: "same"}, verdict.Result{Message: "same"}, verdict.Result{Message: "same"}, verdict.Result{Ready: true})
	var rec recorder
	done := make(chan error)
	go func() {
		_, err := Until(context.Background(), Spec{What: "x", Timeout: time.Minute, Wake: wake, Check: check, Progress: rec.add, ProgressEvery: time.Hour})
		done <- err
	}()
	for i := 0; i < 3; i++ {
		wake <- struct{}{}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(rec.msgs) != 1 {
		t.Errorf("progress repeated: %q", rec.msgs)
	}
}

func TestUntilTimesOutWithTheLastStateAndHint(t *testing.T) {
	check, _ := script(verdict.Result{Message: "first"}, verdict.Result{Message: "Ready=False (Pending: issuer missing)", Hint: "kubectl describe"})
	wake := make(chan struct{}, 1)
	wake <- struct{}{}
	_, err := Until(context.Background(), Spec{What: "Certificate default/web", Timeout: 200 * time.Millisecond, Wake: wake, Check: check})
	var te *TimeoutError
	if !errors.As(err, &te) {
		t.Fatalf("want a TimeoutError, got %v", err)
	}
	for _, want := range []string{"timed out after", "Certificate default/web", "Ready=False (Pending: issuer missing)", "check: kubectl describe"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
}

func TestUntilFailsFast(t *testing.T) {
	boom := errors.New("denied")
	check, calls := script(verdict.Result{Message: "pending"}, verdict.Result{Failed: boom})
	wake := make(chan struct{}, 1)
	wake <- struct{}{}
	_, err := Until(context.Background(), Spec{What: "x", Timeout: time.Hour, Wake: wake, Check: check})
	if !errors.Is(err, boom) || *calls != 2 {
		t.Fatalf("err=%v calls=%d", err, *calls)
	}
}

func TestUntilReturnsPromptlyOnCancel(t *testing.T) {
	check, _ := script(verdict.Result{Message: "pending"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := Until(ctx, Spec{What: "x", Timeout: time.Hour, Wake: make(chan struct{}), Check: check})
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, ErrCancelled) || !strings.Contains(err.Error(), "pending") {
			t.Fatalf("err = %v", err)
		}
	case <-time.After(time.Second):
		t.Fatal("Until did not return within 1s of cancellation")
	}
}

func TestUntilPollsWithBackoffOnlyWhenAsked(t *testing.T) {
	// Nothing ever wakes it: only Poll can bring the next evaluation.
	check, calls := script(verdict.Result{Message: "probe failed", Poll: true}, verdict.Result{Message: "probe failed", Poll: true}, verdict.Result{Ready: true})
	_, err := Until(context.Background(), Spec{What: "x", Timeout: 10 * time.Second, Wake: make(chan struct{}), Check: check})
	if err != nil || *calls != 3 {
		t.Fatalf("err=%v calls=%d", err, *calls)
	}
	check2, calls2 := script(verdict.Result{Message: "watching"})
	_, err = Until(context.Background(), Spec{What: "x", Timeout: 300 * time.Millisecond, Wake: make(chan struct{}), Check: check2})
	if err == nil || *calls2 != 1 {
		t.Fatalf("a watch-driven check was re-evaluated without an event: calls=%d err=%v", *calls2, err)
	}
}

func TestUntilRetryInOverridesTheBackoff(t *testing.T) {
	// Five retries on Poll's doubling backoff would take 100+200+400+800+1000 ms; RetryIn is the
	// probe's own schedule (a quick confirming probe) and is honoured as given.
	r := verdict.Result{Message: "confirming", Poll: true, RetryIn: time.Millisecond}
	check, calls := script(r, r, r, r, r, verdict.Result{Ready: true})
	_, err := Until(context.Background(), Spec{What: "x", Timeout: 1500 * time.Millisecond, Wake: make(chan struct{}), Check: check})
	if err != nil || *calls != 6 {
		t.Fatalf("err=%v calls=%d", err, *calls)
	}
}

func TestEffectiveTimeoutTakesTheShorter(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if d := EffectiveTimeout(ctx, time.Hour); d > 2*time.Second || d < time.Second {
		t.Errorf("EffectiveTimeout = %s, want about 2s (customTimeouts)", d)
	}
	if d := EffectiveTimeout(ctx, time.Second); d != time.Second {
		t.Errorf("EffectiveTimeout = %s, want the gate's own 1s", d)
	}
	if d := EffectiveTimeout(context.Background(), 10*time.Minute); d != 10*time.Minute {
		t.Errorf("EffectiveTimeout = %s", d)
	}
}

// TestUntilJudgesTheLatestStateNotTheEvent: readiness that flips true then false between
// two evaluations must not pass. The check reads the current state (as gates read their watch
// cache), so the wake-up that announced "ready" finds "not ready" and keeps waiting.
func TestUntilJudgesTheLatestStateNotTheEvent(t *testing.T) {
	var mu sync.Mutex
	ready := false
	check := func(context.Context) verdict.Result {
		mu.Lock()
		defer mu.Unlock()
		return verdict.Result{Ready: ready, Message: fmt.Sprint("ready=", ready)}
	}
	wake := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		_, err := Until(context.Background(), Spec{What: "x", Timeout: 700 * time.Millisecond, Wake: wake, Check: check})
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
	ready = true
	wake <- struct{}{} // the event that made it ready...
	ready = false      // ...and the state that replaced it before the gate looked
	mu.Unlock()
	if err := <-done; err == nil {
		t.Fatal("a gate passed on a state that was no longer current")
	}
}

// flipper is a state the test flips, waking the wait as a watch event would.
type flipper struct {
	mu    sync.Mutex
	state verdict.Result
	calls int
	wake  chan struct{}
}

func newFlipper(r verdict.Result) *flipper { return &flipper{state: r, wake: make(chan struct{}, 1)} }

func (f *flipper) set(r verdict.Result) {
	f.mu.Lock()
	f.state = r
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func (f *flipper) check(context.Context) verdict.Result {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return f.state
}

func TestStableForWaitsForAnUninterruptedWindow(t *testing.T) {
	const window = 300 * time.Millisecond
	f := newFlipper(verdict.Result{Ready: true})
	var rec recorder
	start := time.Now()
	done := make(chan time.Time)
	go func() {
		_, err := Until(context.Background(), Spec{What: "x", Timeout: time.Minute, Wake: f.wake, Check: f.check, Progress: rec.add, StableFor: window})
		if err != nil {
			t.Error(err)
		}
		done <- time.Now()
	}()
	// Flap: not ready for a moment, then ready again; the window restarts from the last ready.
	time.Sleep(100 * time.Millisecond)
	f.set(verdict.Result{Message: "replicas 1/2"})
	time.Sleep(50 * time.Millisecond)
	lastReady := time.Now()
	f.set(verdict.Result{Ready: true})
	end := <-done
	if held := end.Sub(lastReady); held < window {
		t.Errorf("passed %s after the condition came back, before it held for %s (started %s before)", held, window, end.Sub(start))
	}
	joined := strings.Join(rec.msgs, "\n")
	if !strings.Contains(joined, "must hold for stableFor 300ms") || !strings.Contains(joined, "interrupted 1 times") {
		t.Errorf("progress does not show the window and its interruption:\n%s", joined)
	}
}

func TestStableForTimesOutOnAFlappingStateSayingSo(t *testing.T) {
	f := newFlipper(verdict.Result{Ready: true})
	stop := make(chan struct{})
	defer close(stop)
	go func() { // flaps every 40 ms: never holds for 200 ms
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(40 * time.Millisecond):
			}
			if i%2 == 0 {
				f.set(verdict.Result{Message: "Available=False"})
			} else {
				f.set(verdict.Result{Ready: true})
			}
		}
	}()
	_, err := Until(context.Background(), Spec{What: "Deployment default/web", Timeout: 700 * time.Millisecond, Wake: f.wake, Check: f.check, StableFor: 200 * time.Millisecond})
	var te *TimeoutError
	if !errors.As(err, &te) {
		t.Fatalf("want a timeout, got %v", err)
	}
	if !strings.Contains(err.Error(), "never the stableFor 200ms") && !strings.Contains(err.Error(), "must hold for stableFor 200ms") {
		t.Errorf("timeout does not say the state flapped: %v", err)
	}
}

func TestStableForRechecksAProbedStateWithinTheWindow(t *testing.T) {
	f := newFlipper(verdict.Result{Ready: true})
	_, err := Until(context.Background(), Spec{What: "x", Timeout: time.Minute, Wake: f.wake, Check: f.check,
		StableFor: 250 * time.Millisecond, Recheck: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if f.calls < 4 {
		t.Errorf("a probed state was evaluated %d times within the window, want a recheck every 50ms", f.calls)
	}
	// Without Recheck and without events: once at the start, once when the window closes.
	g := newFlipper(verdict.Result{Ready: true})
	if _, err := Until(context.Background(), Spec{What: "x", Timeout: time.Minute, Wake: g.wake, Check: g.check, StableFor: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if g.calls != 2 {
		t.Errorf("a watched state was evaluated %d times, want 2 (no polling)", g.calls)
	}
}

func TestFailureGraceForgivesAMomentaryFailure(t *testing.T) {
	denied := errors.New(`admission webhook "v.example.com" denied the request: not yet`)
	f := newFlipper(verdict.Result{Failed: denied})
	done := make(chan error)
	var rec recorder
	go func() {
		_, err := Until(context.Background(), Spec{What: "x", Timeout: time.Minute, Wake: f.wake, Check: f.check, Progress: rec.add, FailureGrace: time.Minute})
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	f.set(verdict.Result{Ready: true})
	if err := <-done; err != nil {
		t.Fatalf("a failure that recovered within the grace failed the wait: %v", err)
	}
	if joined := strings.Join(rec.msgs, "\n"); !strings.Contains(joined, "within failureGrace 1m0s") || !strings.Contains(joined, "denied the request") {
		t.Errorf("progress does not say a failure is being forgiven:\n%s", joined)
	}
}

func TestFailureGraceFailsWhenTheFailurePersists(t *testing.T) {
	denied := errors.New("Job failed: BackoffLimitExceeded")
	f := newFlipper(verdict.Result{Failed: denied})
	start := time.Now()
	_, err := Until(context.Background(), Spec{What: "x", Timeout: time.Minute, Wake: f.wake, Check: f.check, FailureGrace: 150 * time.Millisecond})
	if !errors.Is(err, denied) {
		t.Fatalf("want the failure itself, got %v", err)
	}
	if took := time.Since(start); took < 150*time.Millisecond {
		t.Errorf("failed after %s, within the grace", took)
	}
	if !strings.Contains(err.Error(), "failureGrace 150ms") {
		t.Errorf("the error does not say the grace ran out: %v", err)
	}
}

func TestFailureGraceRestartsAfterARecovery(t *testing.T) {
	failed := errors.New("Failed")
	f := newFlipper(verdict.Result{Failed: failed})
	done := make(chan time.Time)
	go func() {
		_, err := Until(context.Background(), Spec{What: "x", Timeout: time.Minute, Wake: f.wake, Check: f.check, FailureGrace: 300 * time.Millisecond})
		if !errors.Is(err, failed) {
			t.Errorf("want the failure, got %v", err)
		}
		done <- time.Now()
	}()
	time.Sleep(200 * time.Millisecond)
	f.set(verdict.Result{Message: "Reconciling"})
	time.Sleep(50 * time.Millisecond)
	failedAgain := time.Now()
	f.set(verdict.Result{Failed: failed})
	if end := <-done; end.Sub(failedAgain) < 300*time.Millisecond {
		t.Errorf("failed %s after the failure came back: the earlier failing run was not forgiven", end.Sub(failedAgain))
	}
}

// Only client-go's rate limiter refusing to start a request is the wait's own deadline; the
// near misses are answers of what a gate calls and must not be taken for it.
func TestRefusedByRateLimiter(t *testing.T) {
	for _, c := range []struct {
		msg  string
		want bool
	}{
		{`client rate limiter Wait returned an error: rate: Wait(n=1) would exceed context deadline`, true},
		{`objects[0] (Widget default/w): client rate limiter Wait returned an error: rate: Wait(n=1) would exceed context deadline`, true},
		// A webhook that timed out: the API server's answer.
		{`Internal error occurred: failed calling webhook "w.example.com": failed to call webhook: Post "https://w.default.svc:443/validate?timeout=10s": context deadline exceeded`, false},
		{`failed calling webhook "w.example.com": dial tcp 10.0.0.7:443: connect: connection refused`, false},
		{``, false},
	} {
		if got := RefusedByRateLimiter(c.msg); got != c.want {
			t.Errorf("RefusedByRateLimiter(%q) = %v, want %v", c.msg, got, c.want)
		}
	}
}
