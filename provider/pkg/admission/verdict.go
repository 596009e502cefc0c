package admission

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Verdict is the API server's answer to one object's dry-run, judged: Terminal is a verdict (the
// object will not be admitted), Why a transient reason to wait; both empty: admitted. Denier
// names the webhook or policy that denied the object or could not be called; Unanswered says
// the webhook could not be called (it did not answer, so waiting may fix it).
type Verdict struct {
	Terminal, Why, Hint string
	Denier              string
	Unanswered          bool
}

var policyRE = regexp.MustCompile(`(ValidatingAdmissionPolicy|MutatingAdmissionPolicy) '([^']+)'`)

// ClassifyAdmission maps a dry-run's refusal to a verdict or a reason to wait. Verdicts: RBAC,
// a webhook's or an admission policy's denial, the object invalid or malformed, any other
// Forbidden. Everything else is transient; ClassifyProbe spells out why (the webhook Service
// missing, no endpoints, connection refused, x509, a timeout).
func ClassifyAdmission(err error, verb string, gvr schema.GroupVersionResource, where string) Verdict {
	msg := err.Error()
	if apierrors.IsUnauthorized(err) || (apierrors.IsForbidden(err) && strings.Contains(msg, "cannot "+verb+" resource")) {
		res := gvr.Resource
		if gvr.Group != "" {
			res += "." + gvr.Group
		}
		return Verdict{Terminal: fmt.Sprintf("the provider may not dry-run %s it%s: %s; grant verb `%s` on resource %q%s to the provider's identity "+
			"(a dry-run persists nothing)", verb, where, msg, verb, res, where)}
	}
	if name := DeniedBy(err); name != "" {
		return Verdict{Denier: name, Terminal: fmt.Sprintf("denied by admission webhook %q: %s", name, msg)}
	}
	if m := policyRE.FindStringSubmatch(msg); m != nil {
		if strings.Contains(msg, "failed to configure binding") || strings.Contains(msg, "no params found") {
			return Verdict{Denier: m[2], Why: fmt.Sprintf("%s %q cannot be evaluated yet: %s", m[1], m[2], msg),
				Hint: "is the policy's parameter object created?"}
		}
		return Verdict{Denier: m[2], Terminal: fmt.Sprintf("denied by %s %q: %s", m[1], m[2], msg)}
	}
	if name := FailedCall(err); name != "" {
		return Verdict{Denier: name, Unanswered: true, Why: ClassifyProbe(err, ProbeTarget{What: "webhook " + name}).Why,
			Hint: "kubectl get pods,endpointslices -n <webhook namespace>; the webhook's logs"}
	}
	switch {
	case apierrors.IsInvalid(err):
		return Verdict{Terminal: "invalid (rejected by the API server's validation): " + msg}
	case apierrors.IsBadRequest(err):
		return Verdict{Terminal: "rejected as malformed: " + msg}
	case apierrors.IsRequestEntityTooLargeError(err):
		return Verdict{Terminal: "too large for the API server (its request size limit; it is refused on every try): " + msg}
	case apierrors.IsForbidden(err) && (strings.Contains(msg, "being terminated") || strings.Contains(msg, "exceeded quota") ||
		strings.Contains(msg, "error looking up service account")):
		return Verdict{Why: msg}
	case apierrors.IsForbidden(err):
		denier := "the API server"
		if strings.Contains(msg, "PodSecurity") {
			denier = "PodSecurity"
		}
		return Verdict{Denier: denier, Terminal: fmt.Sprintf("forbidden by %s: %s", denier, msg)}
	case apierrors.IsNotFound(err) && strings.Contains(msg, "namespaces"):
		return Verdict{Why: "the namespace does not exist yet: " + msg, Hint: "is the namespace part of the stack?"}
	}
	return Verdict{Why: ClassifyProbe(err, ProbeTarget{What: "the object's admission"}).Why}
}

// RefusalKind is "Invalid, HTTP 422", or just "HTTP 403" when the API server gave no reason.
func RefusalKind(err error) string {
	if reason := apierrors.ReasonForError(err); reason != metav1.StatusReasonUnknown {
		return fmt.Sprintf("%s, HTTP %d", reason, StatusCode(err))
	}
	return fmt.Sprintf("HTTP %d", StatusCode(err))
}

// CauseFields names the fields a refusal's causes point at ("; on fields spec.x, data[key]"):
// field paths hold names, never values, so they can be shown even for a Secret.
func CauseFields(err error) string {
	var fields []string
	if st, ok := err.(apierrors.APIStatus); ok && st.Status().Details != nil {
		for _, c := range st.Status().Details.Causes {
			if c.Field != "" && !slices.Contains(fields, c.Field) {
				fields = append(fields, c.Field)
			}
		}
	}
	if len(fields) == 0 {
		return ""
	}
	return "; on field(s) " + strings.Join(fields, ", ")
}

// StatusCode is the HTTP status of an API error (0 when it carries none).
func StatusCode(err error) int32 {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return st.Status().Code
	}
	return 0
}
