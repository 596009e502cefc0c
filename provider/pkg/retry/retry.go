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
// call ("" when the API server itself could not be reached), and why, for a log line (never the
// failure's text: it may quote the object).
type Verdict struct {
	Retry   bool
	Webhook string
	Why     string
}

// notRetried are the registrations whose failed step a retry cannot mend: a Release's failed
// install stays recorded as a failed release (a second create is refused: the name is in use),
// and a component's children are retried one by one.
var notRetried = map[string]string{
	"kubernetes:helm.sh/v3:Release":     "a Release's failed install is recorded by Helm as a failed release; run `up` again",
	"kubernetes:helm.sh/v3:Chart":       "a component: its objects are retried one by one",
	"kubernetes:helm.sh/v4:Chart":       "a component: its objects are retried one by one",
	"kubernetes:kustomize:Directory":    "a component: its objects are retried one by one",
	"kubernetes:kustomize/v2:Directory": "a component: its objects are retried one by one",
}

// Decide judges a failed step of a registration of type typ: only a Kubernetes object's create or
// update, and only as Classify says. A delete is not retried: a webhook that cannot be called on a
// delete is met again by `destroy`, which runs no program.
func Decide(typ, operation string, errs []string) Verdict {
	switch {
	case !kubernetesObject(typ):
		return Verdict{Why: "not retried: not a Kubernetes object"}
	case notRetried[typ] != "":
		return Verdict{Why: "not retried: " + notRetried[typ]}
	case operation != "create" && operation != "update":
		return Verdict{Why: fmt.Sprintf("not retried: a failed %s is not retried", operation)}
	}
	return Classify(errs)
}

// Retryable says a failed create of a registration of type typ may be retried (Decide, given a
// transport failure): a Kubernetes object's, not a Release's or a component's.
func Retryable(typ string) bool { return kubernetesObject(typ) && notRetried[typ] == "" }

func kubernetesObject(typ string) bool {
	return strings.HasPrefix(typ, "kubernetes:") && !strings.HasPrefix(typ, "kubernetes:yaml") && typ != "pulumi:providers:kubernetes"
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
		return apiServerUnreachable(errs)
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
	return Verdict{Retry: true, Webhook: m[1], Why: fmt.Sprintf("the API server could not call webhook %q (%s): retried once its admission is proven again", m[1], cause)}
}

// unreachable are the failures of a request that did not reach an API server able to answer it:
// the API server restarting (its port closed, its connections dropped) or not serving yet. A
// request cut off on its way back (EOF) may have been stored: its retry sends the same object,
// and an "already exists" then is not retried.
var unreachable = []struct{ marker, what string }{
	{"connect: connection refused", "its port is closed"},
	{"the server is currently unable to handle the request", "it is not serving yet"},
	{"http2: client connection lost", "the connection was lost"},
	{"connection reset by peer", "the connection was reset"},
	{"unexpected EOF", "the connection was closed"},
	{": EOF", "the connection was closed"},
	{"server sent GOAWAY", "it is shutting down"},
	{"TLS handshake timeout", "the TLS handshake timed out"},
	{"etcdserver: request timed out", "etcd did not answer"},
	{"etcdserver: leader changed", "etcd changed leader"},
}

// apiServerUnreachable: the newest failure never reached an API server that could answer; the
// object's own admission proof then needs that API server serving again.
func apiServerUnreachable(errs []string) Verdict {
	newest := errs[0]
	for _, u := range unreachable {
		if !strings.Contains(newest, u.marker) {
			continue
		}
		if len(errs) >= MaxAttempts {
			return Verdict{Why: fmt.Sprintf("not retried: %d tries could not reach the API server (%s)", len(errs), u.what)}
		}
		return Verdict{Retry: true, Why: fmt.Sprintf("the API server could not be reached (%s): retried once it admits the object again", u.what)}
	}
	return Verdict{Why: "not retried: not a failed webhook call, and the API server answered"}
}
