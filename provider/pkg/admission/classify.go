package admission

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ProbeTarget describes the webhooks a probe must reach.
type ProbeTarget struct {
	// What names the target in messages: "ValidatingWebhookConfiguration x".
	What string
	// Webhooks are the target's webhook names: a denial proves the target answered only when it
	// names one of them. Nil when unknown.
	Webhooks []string
	// Mutating says the target's webhooks are mutating ones, which run before schema validation.
	Mutating bool
	// Ignore lists the target's webhooks with failurePolicy Ignore: the API server admits
	// without them when they are down, so an admitted dry-run proves nothing about them.
	Ignore []string
}

// Owns says whether name is one of the target's webhooks.
func (t ProbeTarget) Owns(name string) bool { return slices.Contains(t.Webhooks, name) }

// ProbeOutcome is what one dry-run create says about the target webhooks.
type ProbeOutcome struct {
	// Answered: the API server called the target and it answered (or, for Fail-policy webhooks,
	// admitted the object, which it cannot do without their answer).
	Answered bool
	// Why spells out the cause, as cmctl does.
	Why string
	// DeniedBy is the target's webhook that denied the probe (which is its answer).
	DeniedBy string
	// Invalid: schema validation rejected the probe before it reached the target.
	Invalid bool
	// Terminal is set when no amount of waiting changes the outcome.
	Terminal error
	// ExpectHeld: the probe was admitted and its dry-run result satisfies expect.
	ExpectHeld bool
	// Hint says what to check, when the outcome has a better idea than the usual one.
	Hint string
	// Blocked: another webhook or an admission policy denied the probe, so the API server never
	// called the target (the prober then calls the target's webhooks directly).
	Blocked bool
	// Direct: every checked webhook answered a direct call (set by the prober, not by ClassifyProbe).
	Direct bool
}

var (
	deniedRE     = regexp.MustCompile(`admission webhook "([^"]+)" denied the request`)
	failedCallRE = regexp.MustCompile(`failed calling webhook "([^"]+)"`)
)

// DeniedBy returns the admission webhook an API server's refusal names as the one that denied
// the request ("" when it is not a webhook's denial, or err is nil).
func DeniedBy(err error) string {
	if err == nil {
		return ""
	}
	if m := deniedRE.FindStringSubmatch(err.Error()); m != nil {
		return m[1]
	}
	return ""
}

// FailedCall returns the admission webhook an API server's error says it could not call
// ("failed calling webhook ..."; "" when it names none, or err is nil).
func FailedCall(err error) string {
	if err == nil {
		return ""
	}
	if m := failedCallRE.FindStringSubmatch(err.Error()); m != nil {
		return m[1]
	}
	return ""
}

// ClassifyProbe maps a dry-run create's outcome to "did the target webhooks answer?". A denial
// proves it only when it names one of the target's webhooks: a policy engine's mutating webhook
// or a ValidatingAdmissionPolicy that denies the probe stops it before it reaches the target.
func ClassifyProbe(err error, t ProbeTarget) ProbeOutcome {
	what := t.What
	if what == "" {
		what = "the target webhook"
	}
	if err == nil {
		return ProbeOutcome{Answered: true, Why: "admitted"}
	}
	msg := err.Error()
	if name := DeniedBy(err); name != "" {
		if t.Owns(name) {
			return ProbeOutcome{Answered: true, DeniedBy: name, Why: "denied by the webhook (it answered): " + msg}
		}
		if t.Webhooks == nil {
			return ProbeOutcome{Why: fmt.Sprintf("probe denied by webhook %q, which cannot be told apart from %s: %s", name, what, msg)}
		}
		return ProbeOutcome{Blocked: true, Why: fmt.Sprintf("probe denied by policy webhook %q before reaching %s: %s", name, what, msg)}
	}
	if name := FailedCall(err); name != "" && t.Webhooks != nil && !t.Owns(name) {
		return ProbeOutcome{Why: fmt.Sprintf("the API server could not call webhook %q, which runs before %s: %s", name, what, msg)}
	}
	switch {
	case strings.Contains(msg, "ValidatingAdmissionPolicy") || strings.Contains(msg, "MutatingAdmissionPolicy"):
		return ProbeOutcome{Blocked: true, Why: fmt.Sprintf("probe denied by an admission policy before reaching %s: %s", what, msg)}
	case apierrors.IsAlreadyExists(err):
		return ProbeOutcome{Answered: true, Why: "admitted (the object already exists)"}
	// An Invalid answer is judged by its reason, before any text match: its message may well
	// mention a Certificate kind or a timeoutSeconds field.
	case apierrors.IsInvalid(err) && t.Mutating && len(t.Webhooks) > len(t.Ignore):
		// Schema validation runs after the mutating webhooks: a Fail-policy one that did not
		// answer would have failed the request before.
		return ProbeOutcome{Answered: true, Why: "admitted by the mutating webhooks, then rejected by schema validation: " + msg}
	case apierrors.IsInvalid(err):
		return ProbeOutcome{Invalid: true, Why: fmt.Sprintf("the probe object is invalid: schema validation rejects it before it reaches %s: %s", what, msg)}
	case strings.Contains(msg, "no endpoints available for service"):
		return ProbeOutcome{Why: "no ready pods behind the webhook Service: " + msg}
	case strings.Contains(msg, "connection refused"):
		return ProbeOutcome{Why: "connection refused (pod up, webhook server not listening yet): " + msg}
	case strings.Contains(msg, "x509") || strings.Contains(msg, "certificate"):
		return ProbeOutcome{Why: "TLS error (caBundle not injected yet, or the serving certificate is wrong): " + msg}
	case strings.Contains(msg, "context deadline exceeded") || strings.Contains(msg, "Timeout") || strings.Contains(msg, "timeout"):
		return ProbeOutcome{Why: "the webhook did not answer in time: " + msg}
	case strings.Contains(msg, "service \"") && strings.Contains(msg, "not found"):
		return ProbeOutcome{Why: "the webhook Service is not created yet: " + msg}
	case strings.Contains(msg, "failed calling webhook"):
		return ProbeOutcome{Why: "the API server could not call the webhook: " + msg}
	}
	return ProbeOutcome{Why: msg}
}

// StripGeneratedNames replaces in msg each name the API server generated from prefix (the
// prefix and five characters, as generateName makes them) with prefix*: such a name changes
// with every dry-run, and a message should stay the same while the state does.
func StripGeneratedNames(msg, prefix string) string {
	return regexp.MustCompile(regexp.QuoteMeta(prefix)+`[a-z0-9]{5}\b`).ReplaceAllString(msg, prefix+"*")
}

// StableMessage strips from msg the name the API server generated for obj, when it has
// generateName and no name (see StripGeneratedNames).
func StableMessage(obj *unstructured.Unstructured, msg string) string {
	gen := obj.GetGenerateName()
	if gen == "" || obj.GetName() != "" {
		return msg
	}
	return StripGeneratedNames(msg, gen)
}
