// Package retry decides whether a create, update or delete that failed after its gates passed
// may be tried again once their proof holds again (issue 50): only when the API server could not
// call an admission webhook (a transport failure: the webhook's pod restarted, its Service lost
// its endpoints, its serving certificate rotated), never on a verdict (a webhook's denial, an
// invalid object, a quota or RBAC refusal), and at most MaxAttempts times. Pure: the SDKs' error
// hooks send the engine's errors through the provider, which calls Classify and then waits for
// the gates' proof before answering "retry".
package retry

import (
	"fmt"
	"regexp"
	"strings"
)

// MaxAttempts bounds the tries of one operation (the engine's own bound is 100).
const MaxAttempts = 5

// Verdict is whether the newest failure may be retried, the webhook the API server could not
// call, and why, for a log line (never the failure's text: it may quote the object).
type Verdict struct {
	Retry   bool
	Webhook string
	Why     string
}

var failedCallRE = regexp.MustCompile(`failed calling webhook "([^"]+)"`)

// verdicts are the API server's answers no wait changes: retrying them would create what was
// refused, or fail the same way.
var verdicts = []struct{ marker, what string }{
	{"denied the request", "a webhook denied it"},
	{"admission policy", "an admission policy denied it"},
	{"ValidatingAdmissionPolicy", "an admission policy denied it"},
	{" is invalid", "the object is invalid"},
	{"is forbidden", "the request is forbidden (RBAC)"},
	{"exceeded quota", "a quota refused it"},
	{"Unauthorized", "the credentials were refused"},
	{"already exists", "the object already exists"},
}

// transports are the causes of a failed webhook call that end once the webhook serves again.
var transports = []struct{ marker, what string }{
	{"connection refused", "connection refused"},
	{"no endpoints available for service", "no ready endpoints"},
	{"context deadline exceeded", "timed out"},
	{"i/o timeout", "timed out"},
	{"Client.Timeout", "timed out"},
	{"x509:", "TLS certificate not trusted"},
	{"tls:", "TLS handshake failed"},
	{"connection reset by peer", "connection reset"},
	{"EOF", "connection closed"},
	{"no route to host", "no route to host"},
	{"not found", "its Service not found"},
}

// Classify judges errs, the operation's failures newest first (as the engine's error hook
// receives them): retry only when the newest is a transport failure calling a webhook and fewer
// than MaxAttempts tries were made.
func Classify(errs []string) Verdict {
	if len(errs) == 0 {
		return Verdict{Why: "no failure to judge"}
	}
	newest := errs[0]
	for _, v := range verdicts {
		if strings.Contains(newest, v.marker) {
			return Verdict{Why: "not retried: " + v.what}
		}
	}
	m := failedCallRE.FindStringSubmatch(newest)
	if m == nil {
		return Verdict{Why: "not retried: not a failed webhook call"}
	}
	cause := ""
	for _, t := range transports {
		if strings.Contains(newest, t.marker) {
			cause = t.what
			break
		}
	}
	if cause == "" {
		return Verdict{Webhook: m[1], Why: fmt.Sprintf("not retried: the API server could not call webhook %q for a reason not known to pass", m[1])}
	}
	if len(errs) >= MaxAttempts {
		return Verdict{Webhook: m[1], Why: fmt.Sprintf("not retried: %d tries failed calling webhook %q (%s)", len(errs), m[1], cause)}
	}
	return Verdict{Retry: true, Webhook: m[1], Why: fmt.Sprintf("the API server could not call webhook %q (%s): retried once its gate's proof holds again", m[1], cause)}
}
