package status

import (
	"fmt"
	"regexp"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/admission"
)

// ConversionVerdict is what one read or dry-run create through a CRD version says about its
// conversion webhook.
type ConversionVerdict int

const (
	// Converted: the request succeeded, so every conversion it needed succeeded.
	Converted ConversionVerdict = iota
	// NotYet: the conversion webhook (or something before it) did not do its part yet: it is not
	// listening, not trusted, too slow, answers as something else, or refuses some version. Waiting
	// may fix it.
	NotYet
	// NoProof: the request was refused before any conversion ran (schema validation, an admission
	// webhook or policy denying the object): it says nothing about the conversion webhook, and
	// sending the same object again changes nothing.
	NoProof
	// Refused: the provider may not make the request (RBAC).
	Refused
)

// ConversionOutcome is a classified answer: Verdict, and Why spelled out for progress messages.
type ConversionOutcome struct {
	Verdict ConversionVerdict
	Why     string
}

var conversionFailedRE = regexp.MustCompile(`conversion webhook for [^ ]+(?:, Kind=[A-Za-z0-9]+)? (?:failed|returned)`)

// ClassifyConversion maps the API server's answer to a read (list, get) or a server-side dry-run
// create of a custom resource through one version to what it proves about the CRD's conversion
// webhook. The API server reports a failed conversion as a 500 InternalError whose message starts
// "conversion webhook for <group/version, Kind=...> failed: ..." (the call failed: refused, TLS,
// timeout, a non-ConversionReview answer, another request's uid, or the webhook's own failed
// result, quoted) or "... returned ..." (a bad converted object).
func ClassifyConversion(err error) ConversionOutcome {
	if err == nil {
		return ConversionOutcome{Verdict: Converted, Why: "converted"}
	}
	msg := err.Error()
	if conversionFailedRE.MatchString(msg) {
		return ConversionOutcome{Verdict: NotYet, Why: conversionWhy(msg)}
	}
	// An admission webhook's answer is judged by its name before any loose text match: its
	// message is its own and may say anything.
	if name := admission.DeniedBy(err); name != "" {
		return ConversionOutcome{Verdict: NoProof, Why: fmt.Sprintf("admission webhook %q denied the dry-run object before any conversion: %s", name, Trim(msg, 400))}
	}
	if name := admission.FailedCall(err); name != "" {
		return ConversionOutcome{Verdict: NotYet, Why: fmt.Sprintf("admission webhook %q does not answer, so the dry-run object never reaches conversion: %s", name, Trim(msg, 400))}
	}
	switch {
	case strings.Contains(msg, "conversion webhook"):
		return ConversionOutcome{Verdict: NotYet, Why: conversionWhy(msg)}
	case strings.Contains(msg, "ValidatingAdmissionPolicy") || strings.Contains(msg, "MutatingAdmissionPolicy"):
		return ConversionOutcome{Verdict: NoProof, Why: "an admission policy denied the dry-run object before any conversion: " + msg}
	case apierrors.IsInvalid(err):
		return ConversionOutcome{Verdict: NoProof, Why: "schema validation rejected the dry-run object before any conversion: " + msg}
	case apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err):
		return ConversionOutcome{Verdict: Refused, Why: msg}
	case apierrors.IsNotFound(err) && strings.Contains(msg, "namespaces \""):
		return ConversionOutcome{Verdict: NotYet, Why: "the dry-run object's namespace does not exist: " + msg}
	case apierrors.IsNotFound(err):
		// The version is not served yet, or the object read was deleted meanwhile: read again.
		return ConversionOutcome{Verdict: NotYet, Why: "not found (the version is not served yet, or the object was just deleted): " + msg}
	}
	return ConversionOutcome{Verdict: NotYet, Why: msg}
}

// conversionWhy names the likely cause of a conversion webhook failure, as cmctl does for
// admission webhooks, keeping the API server's text.
func conversionWhy(msg string) string {
	cause := ""
	switch {
	case strings.Contains(msg, "connection refused"):
		cause = "the conversion webhook is not listening (connection refused)"
	case strings.Contains(msg, "no endpoints available for service"):
		cause = "no ready pods behind the conversion webhook's Service"
	case strings.Contains(msg, "service \"") && strings.Contains(msg, "not found"):
		cause = "the conversion webhook's Service does not exist"
	case strings.Contains(msg, "x509") || strings.Contains(msg, "tls:") || strings.Contains(msg, "certificate"):
		cause = "TLS: the caBundle is not injected yet, or the webhook's certificate is not the one it trusts"
	case strings.Contains(msg, "context deadline exceeded") || strings.Contains(msg, "Client.Timeout") || strings.Contains(msg, "i/o timeout"):
		cause = "the conversion webhook did not answer in time"
	case strings.Contains(msg, "expected response.uid"):
		cause = "something answered with a ConversionReview for another request (uid mismatch): not this CRD's conversion webhook"
	case strings.Contains(msg, "expected webhook response of") || strings.Contains(msg, "unrecognized response type") ||
		strings.Contains(msg, "Object 'Kind' is missing") || strings.Contains(msg, "couldn't get version/kind"):
		cause = "something answered that is not a ConversionReview: not a conversion webhook"
	case strings.Contains(msg, "an error on the server") || strings.Contains(msg, "Internal Server Error") || strings.Contains(msg, "500"):
		cause = "the conversion webhook answered with an HTTP error"
	case strings.Contains(msg, "returned invalid converted object") || strings.Contains(msg, "objects, expected") || strings.Contains(msg, "no objects returned"):
		cause = "the conversion webhook returned a wrong converted object"
	default:
		cause = "the conversion webhook failed to convert"
	}
	return cause + ": " + Trim(msg, 400)
}

// Trim shortens s to at most n bytes (on a rune boundary), marking the cut.
func Trim(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && (s[cut]&0xC0) == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}
