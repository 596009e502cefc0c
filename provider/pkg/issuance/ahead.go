package issuance

import (
	"bytes"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/status"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/verdict"
)

// Issued ahead of Ready. cert-manager's issuing controller writes the Secret from the
// CertificateRequest's certificate, then the Certificate's status.revision; its readiness
// controller sets Ready=True later, on a pass of its own queue (150-200 ms after the Secret on a
// real node, see BENCHMARKS.md). What a pod that mounts the Secret needs is the Secret: the gate
// passes once the Secret provably holds this Certificate's issuance, Ready or not.

// issuedAhead is that proof, every part of it needed:
//   - the Certificate's spec never changed (metadata.generation 1), so every request it owns was
//     made for this spec; cert-manager writes a Secret only from a request that matches the spec
//     of that moment (RequestMatchesSpec), and after a change only Ready says whether the
//     certificate still fits;
//   - a CertificateRequest owned by this very Certificate (its UID: not one of an earlier
//     Certificate of the same name, whose requests the garbage collector has not removed yet),
//     for the status's revision or the next one, Ready=True with a certificate;
//   - the Secret's tls.crt is that certificate, byte for byte, tls.key its private key, and
//     cert-manager's annotation names this Certificate (a temporary certificate, another writer,
//     or a request issued after this Secret was written all differ);
//   - and the certificate passes the Ready path's checks (names, annotations, valid now and for
//     minValidity), status.notAfter aside (it is written after the Secret).
//
// The requests are judged from a copy that may lag: a request is never un-issued, so a stale
// copy can only hold this pass back, not make it.
func issuedAhead(in Input) (Verdict, bool) {
	cert := in.Certificate
	if cert.GetGeneration() != 1 || !in.Secret.Ready || in.SecretObject == nil {
		return Verdict{}, false
	}
	data, _, _ := unstructured.NestedMap(in.SecretObject.Object, "data")
	crtB64, _ := data["tls.crt"].(string)
	keyB64, _ := data["tls.key"].(string)
	leaf, err := status.LeafCertificate(crtB64)
	if err != nil {
		return Verdict{}, false
	}
	cr := issuingRequest(in.Requests, cert, leaf.Raw)
	// The caches hold no private key: the trim judged the pair and left status.KeyPairsMarker.
	pairs := keyB64 == status.KeyPairsMarker || status.KeyPairs(keyB64, leaf) == nil
	if cr == nil || !pairs || in.SecretObject.GetAnnotations()[certificateNameAnnotation] != in.Name {
		return Verdict{}, false
	}
	secretName, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	m := status.CertificateMatches(leaf, status.Expected{SecretName: secretName, SecretAnnotations: in.SecretObject.GetAnnotations(),
		Spec: status.CertificateSpecOf(cert), Now: in.Now, MinValidity: in.MinValidity})
	if !m.OK {
		return Verdict{}, false
	}
	rev, _ := strconv.ParseInt(cr.GetAnnotations()[revisionAnnotation], 10, 64)
	return Verdict{Result: verdict.Result{Ready: true, Message: fmt.Sprintf("%s (Secret %s holds CertificateRequest %s's certificate; cert-manager's Ready condition is not set yet)",
		m.Message, secretName, cr.GetName())}, Certificate: cert, Secret: in.SecretObject, Revision: rev}, true
}

const (
	revisionAnnotation        = "cert-manager.io/certificate-revision"
	certificateNameAnnotation = "cert-manager.io/certificate-name"
)

// issuingRequest is the request owned by cert, for its status.revision or the next one, issued
// with the certificate whose DER is leaf; nil when there is none.
func issuingRequest(requests []*unstructured.Unstructured, cert *unstructured.Unstructured, leaf []byte) *unstructured.Unstructured {
	revision, _, _ := unstructured.NestedInt64(cert.Object, "status", "revision")
	for _, r := range requests {
		if !ownedBy(r, cert) {
			continue
		}
		rev, err := strconv.ParseInt(r.GetAnnotations()[revisionAnnotation], 10, 64)
		if err != nil || (rev != revision && rev != revision+1) {
			continue
		}
		if ok, _ := status.ConditionHolds(r, "Ready", "True"); !ok {
			continue
		}
		issued, _, _ := unstructured.NestedString(r.Object, "status", "certificate")
		if got, err := status.LeafCertificate(issued); err == nil && bytes.Equal(got.Raw, leaf) {
			return r
		}
	}
	return nil
}

// ownedBy reports whether r's controller is cert, by UID.
func ownedBy(r, cert *unstructured.Unstructured) bool {
	for _, o := range r.GetOwnerReferences() {
		if o.UID == cert.GetUID() && o.Kind == "Certificate" && cert.GetUID() != "" {
			return true
		}
	}
	return false
}
