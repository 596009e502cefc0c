// Package issuance decides CertificateReady's verdict from what the gate gathered: the
// Certificate, its Secret (as the Secret check judged it) and the namespace's
// CertificateRequests. It never touches a cluster, so the order of its rules is table-tested on
// YAML fixtures (testdata/) without one; the gate in the provider root only reads and calls
// Decide.
package issuance

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/status"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/verdict"
)

// Input is everything one evaluation read, once the Certificate's read answered (see Unread).
// The Secret check's result is a value here, so that a decision over it is as testable as one
// over objects.
type Input struct {
	Namespace, Name string
	// Certificate is the Certificate; nil when it does not exist (the rest is then empty).
	Certificate *unstructured.Unstructured
	// Secret is the Secret check's result for spec.secretName (presence, required keys), settled:
	// a read that gave no answer is returned by the gather step itself. When it Failed,
	// Requests were not read.
	Secret verdict.Result
	// SecretObject is the Secret, set when Secret is Ready.
	SecretObject *unstructured.Unstructured
	// Requests are the namespace's CertificateRequests; nil when they could not be read (they
	// only add to a verdict).
	Requests []*unstructured.Unstructured
	// Now is when the Secret's certificate is judged; MinValidity how long it must stay valid.
	Now         time.Time
	MinValidity time.Duration
}

// Verdict is Decide's answer: its Result, and when Ready the objects the gate's outputs are read
// from.
type Verdict struct {
	Result      verdict.Result
	Certificate *unstructured.Unstructured
	Secret      *unstructured.Unstructured
	// Revision is the issuance's revision when the gate passed ahead of cert-manager's status
	// (issuedAhead: status.revision may not be written yet); 0 otherwise.
	Revision int64
}

func (in Input) what() string { return fmt.Sprintf("Certificate %s/%s", in.Namespace, in.Name) }

// Unread is CertificateReady's verdict when the Certificate's read gave no answer (a kind not
// served yet, a watch cache loading, RBAC): the gather step returns it and Decide is not called.
// It is the read's own result, but a kind not served at all names cert-manager's CRDs.
func Unread(read verdict.Result) verdict.Result {
	if strings.Contains(read.Message, "no matches for kind") {
		read.Message = "cert-manager's CRDs are not installed: " + read.Message
		read.Hint = "install cert-manager (with its CRDs) before this gate, and make the gate depend on it"
	}
	return read
}

// Decide applies CertificateReady's rules in order: the Certificate exists, its Secret may be
// read, no refused request fails it, Ready=True, the Secret has the keys, and its certificate is
// the one reported, issued for this Certificate's issuer and spec (its names), valid already and
// for long enough (status.CertificateMatches). Before Ready=True, the Secret may prove the
// issuance itself (issuedAhead).
func Decide(in Input) Verdict {
	if in.Certificate == nil {
		return Verdict{Result: verdict.Result{Message: "Certificate not found (not created yet)", Hint: "is the Certificate part of the stack, in this namespace?"}}
	}
	cert := in.Certificate
	if in.Secret.Failed != nil {
		return Verdict{Result: in.Secret} // RBAC on the Secret fails at once, not after issuance
	}
	revision, _, _ := unstructured.NestedInt64(cert.Object, "status", "revision")
	crNote, refused := "", ""
	if cr := status.NewestCertificateRequest(in.Requests, in.Name, revision+1); cr != nil {
		fails, summary := status.RequestFails(cert, cr)
		if fails {
			return Verdict{Result: verdict.Result{Failed: fmt.Errorf("%s: %s", in.what(), summary)}}
		}
		if summary != "" {
			crNote = "; " + summary
		}
		if terminal, _ := status.CertificateRequestVerdict(cr); terminal {
			refused = summary
		}
	}
	ready, readyMsg := status.ConditionHolds(cert, "Ready", "True")
	if !ready {
		if v, ok := issuedAhead(in); ok {
			return v
		}
		msg := readyMsg
		if c, ok := status.FindCondition(cert, "Issuing"); ok {
			msg += ", " + c.String()
		}
		return Verdict{Result: verdict.Result{Message: msg + crNote,
			Hint: "kubectl describe certificate " + in.Name + " -n " + in.Namespace + " (issuer present and ready? CertificateRequest approved?)"}}
	}
	if !in.Secret.Ready {
		res := in.Secret
		res.Message = "Ready=True, but " + res.Message
		return Verdict{Result: res}
	}
	secretName, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	data, _, _ := unstructured.NestedMap(in.SecretObject.Object, "data")
	crtB64, _ := data["tls.crt"].(string)
	leaf, err := status.LeafCertificate(crtB64)
	if err != nil {
		return Verdict{Result: verdict.Result{Message: fmt.Sprintf("Ready=True, but secret %q: %v", secretName, err)}}
	}
	notAfter, _, _ := unstructured.NestedString(cert.Object, "status", "notAfter")
	m := status.CertificateMatches(leaf, status.Expected{SecretName: secretName, SecretAnnotations: in.SecretObject.GetAnnotations(),
		StatusNotAfter: notAfter, Spec: status.CertificateSpecOf(cert), Now: in.Now, MinValidity: in.MinValidity})
	if !m.OK && refused != "" && m.OnlyRenewalFixes {
		// Only a renewal could fix this, and it was refused for good (Denied, InvalidRequest).
		return Verdict{Result: verdict.Result{Failed: fmt.Errorf("%s: %s, and %s", in.what(), m.Message, refused)}}
	}
	if !m.OK {
		return Verdict{Result: verdict.Result{Message: m.Message + crNote, Hint: m.Hint, RetryIn: m.RetryIn}}
	}
	return Verdict{Result: verdict.Result{Ready: true, Message: m.Message + crNote}, Certificate: cert, Secret: in.SecretObject}
}
