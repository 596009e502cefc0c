package wait

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/verdict"
)

// TestWindows replays evaluations at given instants (no real clock) through stableFor and
// failureGrace: near misses (a flap one tick before the window closes, a failure that recovers
// inside its grace) must keep waiting.
func TestWindows(t *testing.T) {
	denied := errors.New("denied")
	ready, notReady, failing := verdict.Result{Ready: true}, verdict.Result{Message: "pending"}, verdict.Result{Failed: denied, Hint: "h", Poll: true}
	type step struct {
		at      time.Duration // since the wait began
		r       verdict.Result
		want    outcome
		closeIn time.Duration // the window's time left, 0 outside one
		msg     string        // the reported message contains it
	}
	for name, tc := range map[string]struct {
		stableFor, failureGrace time.Duration
		steps                   []step
	}{
		"no windows: ready passes at once": {0, 0, []step{{0, notReady, keepWaiting, 0, "pending"}, {time.Second, ready, passed, 0, ""}}},
		"no windows: failed fails at once": {0, 0, []step{{0, failing, failed, 0, ""}}},
		"stableFor: passes once it held": {10 * time.Second, 0, []step{
			{0, ready, keepWaiting, 10 * time.Second, "must hold for stableFor 10s"},
			{4 * time.Second, ready, keepWaiting, 6 * time.Second, ""},
			{10 * time.Second, ready, passed, 0, ""},
		}},
		"stableFor: a flap just before the end restarts it": {10 * time.Second, 0, []step{
			{0, ready, keepWaiting, 10 * time.Second, ""},
			{9*time.Second + 999*time.Millisecond, notReady, keepWaiting, 0, "pending"},
			{10 * time.Second, ready, keepWaiting, 10 * time.Second, "interrupted 1 times so far"},
			{19 * time.Second, ready, keepWaiting, time.Second, ""},
			{20 * time.Second, ready, passed, 0, ""},
		}},
		"stableFor: a failure interrupts it too": {10 * time.Second, 0, []step{
			{0, ready, keepWaiting, 10 * time.Second, ""},
			{5 * time.Second, failing, failed, 0, ""},
		}},
		"failureGrace: fails once it persisted": {0, 30 * time.Second, []step{
			{0, failing, keepWaiting, 30 * time.Second, "within failureGrace 30s: denied"},
			{29 * time.Second, failing, keepWaiting, time.Second, ""},
			{30 * time.Second, failing, failed, 0, ""},
		}},
		"failureGrace: any other state forgives it": {0, 30 * time.Second, []step{
			{0, failing, keepWaiting, 30 * time.Second, ""},
			{29 * time.Second, notReady, keepWaiting, 0, "pending"},
			{30 * time.Second, failing, keepWaiting, 30 * time.Second, ""},
			{59 * time.Second, failing, keepWaiting, time.Second, ""},
		}},
		"failureGrace: ready within it passes": {0, 30 * time.Second, []step{
			{0, failing, keepWaiting, 30 * time.Second, ""},
			{time.Second, ready, passed, 0, ""},
		}},
		"both: a failure inside stableFor restarts it": {10 * time.Second, 30 * time.Second, []step{
			{0, ready, keepWaiting, 10 * time.Second, ""},
			{9 * time.Second, failing, keepWaiting, 30 * time.Second, ""},
			{10 * time.Second, ready, keepWaiting, 10 * time.Second, "interrupted 1 times"},
			{20 * time.Second, ready, passed, 0, ""},
		}},
	} {
		t.Run(name, func(t *testing.T) {
			start := time.Date(2026, 11, 24, 4, 0, 0, 0, time.UTC)
			w := windows{stableFor: tc.stableFor, failureGrace: tc.failureGrace}
			for i, s := range tc.steps {
				got, v, closeIn := w.judge(s.r, start.Add(s.at))
				if v != s.want || closeIn != s.closeIn || !strings.Contains(got.Message, s.msg) {
					t.Fatalf("step %d (at %s): verdict %v, closes in %s, message %q; want %v, %s, containing %q",
						i, s.at, v, closeIn, got.Message, s.want, s.closeIn, s.msg)
				}
				if v == failed && !errors.Is(got.Failed, denied) {
					t.Errorf("step %d: the failure %v does not wrap the gate's", i, got.Failed)
				}
				if v == keepWaiting && s.r.Failed != nil && (got.Failed != nil || got.Hint != "h" || !got.Poll) {
					t.Errorf("step %d: inside failureGrace the result must wait, keeping hint and poll: %+v", i, got)
				}
			}
		})
	}
}

func TestWindowsFailureGraceSaysHowLongItFailed(t *testing.T) {
	start := time.Now()
	w := windows{failureGrace: 30 * time.Second}
	w.judge(verdict.Result{Failed: errors.New("denied")}, start)
	got, v, _ := w.judge(verdict.Result{Failed: errors.New("denied")}, start.Add(31*time.Second))
	if v != failed || !strings.Contains(got.Failed.Error(), "failing without interruption for 31s, failureGrace 30s") {
		t.Errorf("%v %v", v, got.Failed)
	}
}

func TestWindowsTimedOutSaysHowCloseStableForCame(t *testing.T) {
	start := time.Now()
	w := windows{stableFor: 10 * time.Second}
	if note := w.timedOut(start); note != "" {
		t.Errorf("never held, yet: %q", note)
	}
	for _, s := range []struct {
		at time.Duration
		r  verdict.Result
	}{{0, verdict.Result{Ready: true}}, {3 * time.Second, verdict.Result{}}, {4 * time.Second, verdict.Result{Ready: true}}, {11 * time.Second, verdict.Result{}},
		{12 * time.Second, verdict.Result{Ready: true}}} {
		w.judge(s.r, start.Add(s.at))
	}
	if note, want := w.timedOut(start.Add(13*time.Second)), "the condition held 3 times, at most 7s, never the stableFor 10s"; note != want {
		t.Errorf("timedOut = %q, want %q", note, want)
	}
}
