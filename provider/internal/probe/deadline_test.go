package probe

import (
	"context"
	"testing"
)

// TestEndedByDeadline: what a gate keeps its last real answer for (its own deadline), and the
// near misses that are answers (a webhook's own timeout, a refused connection).
func TestEndedByDeadline(t *testing.T) {
	live := context.Background()
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	cases := []struct {
		name string
		ctx  context.Context
		msg  string
		want bool
	}{
		{"the rate limiter refused a call near the deadline", live,
			`objects[0] (Widget default/w): client rate limiter Wait returned an error: rate: Wait(n=1) would exceed context deadline`, true},
		{"the wait ended during the call", ended, "Post https://127.0.0.1:1/validate: context canceled", true},
		{"the wait ended, whatever the call said", ended, "connection refused", true},
		{"near miss: the webhook itself timed out (an answer)", live,
			`failed calling webhook "v.example.com": failed to call webhook: Post "https://svc.ns.svc:443/validate?timeout=10s": context deadline exceeded`, false},
		{"near miss: a refused connection (an answer)", live, "dial tcp 10.0.0.1:443: connect: connection refused", false},
		{"near miss: no message", live, "", false},
	}
	for _, tc := range cases {
		if got := EndedByDeadline(tc.ctx, tc.msg); got != tc.want {
			t.Errorf("%s: EndedByDeadline = %v, want %v", tc.name, got, tc.want)
		}
	}
}
