package probe

import (
	"context"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/wait"
)

// EndedByDeadline says a call's outcome (msg) is the gate's own deadline, not the answer of
// what it called: the wait ended during the call, or the rate limiter refused to start it.
// A webhook that timed out ("context deadline exceeded" from the API server) is an answer.
func EndedByDeadline(ctx context.Context, msg string) bool {
	return ctx.Err() != nil || wait.RefusedByRateLimiter(msg)
}
