package status

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"sort"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// LeafCertificate decodes the first certificate of a Secret's base64 tls.crt value.
func LeafCertificate(b64 string) (*x509.Certificate, error) {
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("tls.crt is not base64: %v", err)
	}
	block, _ := pem.Decode(raw)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("tls.crt holds no PEM certificate")
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("tls.crt does not parse as X.509: %v", err)
	}
	return c, nil
}

// PublicCertificates keeps only the X.509 certificates of a PEM bundle, re-encoded: every block
// of another type (a PRIVATE KEY a tool appended to ca.crt, parameters) and any text between
// blocks is dropped, wherever it sits in the bundle. It is what may leave the cluster as an
// output; "" when the bundle holds no certificate.
func PublicCertificates(raw []byte) string {
	var out []byte
	for rest := raw; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			continue
		}
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: b.Bytes})...)
	}
	return string(out)
}

// CertificateMatches checks an issued leaf certificate against the Certificate's status: it
// must be the one cert-manager reports (same notAfter, so a stale Secret from an earlier
// issuance does not pass), not expired, and valid for at least minValidity from now.
func CertificateMatches(cert *x509.Certificate, statusNotAfter string, now time.Time, minValidity time.Duration) (bool, string) {
	if statusNotAfter != "" {
		want, err := time.Parse(time.RFC3339, statusNotAfter)
		if err == nil && !cert.NotAfter.UTC().Truncate(time.Second).Equal(want.UTC().Truncate(time.Second)) {
			return false, fmt.Sprintf("the Secret's certificate (notAfter %s) is not the one the Certificate reports (notAfter %s): a stale Secret from an earlier issuance",
				cert.NotAfter.UTC().Format(time.RFC3339), want.UTC().Format(time.RFC3339))
		}
	}
	if now.After(cert.NotAfter) {
		return false, fmt.Sprintf("the certificate expired at %s", cert.NotAfter.UTC().Format(time.RFC3339))
	}
	if minValidity > 0 && cert.NotAfter.Sub(now) < minValidity {
		return false, fmt.Sprintf("the certificate is valid until %s, less than minValidity %s from now", cert.NotAfter.UTC().Format(time.RFC3339), minValidity)
	}
	return true, fmt.Sprintf("issued, valid until %s", cert.NotAfter.UTC().Format(time.RFC3339))
}

// OnlyRenewalFixes reports whether cert, the one the Certificate reports (statusNotAfter), can be
// made acceptable only by a new issuance: it has expired or is valid for less than minValidity.
// A stale Secret (another certificate than the one reported) is not: cert-manager writes the
// Secret it issued without a new request.
func OnlyRenewalFixes(cert *x509.Certificate, statusNotAfter string, now time.Time, minValidity time.Duration) bool {
	if want, err := time.Parse(time.RFC3339, statusNotAfter); statusNotAfter != "" && (err != nil || !cert.NotAfter.UTC().Truncate(time.Second).Equal(want.UTC().Truncate(time.Second))) {
		return false
	}
	return now.After(cert.NotAfter) || (minValidity > 0 && cert.NotAfter.Sub(now) < minValidity)
}

// CertificateRequestVerdict reads the newest CertificateRequest of a Certificate's current
// issuance: terminal when Denied or InvalidRequest (a policy or the request itself refused it:
// the same request is refused again, so waiting cannot fix it), with a summary. A request that
// Failed (the issuer's error: ACME, Vault) is not terminal: cert-manager issues it again after a
// backoff, and the gate waits, quoting it.
func CertificateRequestVerdict(cr *unstructured.Unstructured) (terminal bool, summary string) {
	if cr == nil {
		return false, ""
	}
	if c, ok := FindCondition(cr, "Denied"); ok && c.Status == "True" {
		return true, fmt.Sprintf("CertificateRequest %s was denied: %s", cr.GetName(), c)
	}
	if c, ok := FindCondition(cr, "InvalidRequest"); ok && c.Status == "True" {
		return true, fmt.Sprintf("CertificateRequest %s is invalid: %s", cr.GetName(), c)
	}
	if c, ok := FindCondition(cr, "Ready"); ok && c.Status == "False" && (c.Reason == "Denied" || c.Reason == "InvalidRequest") {
		return true, fmt.Sprintf("CertificateRequest %s failed: %s", cr.GetName(), c)
	}
	if c, ok := FindCondition(cr, "Ready"); ok && c.Status == "False" && c.Reason == "Failed" {
		return false, fmt.Sprintf("CertificateRequest %s failed: %s (cert-manager retries after a backoff)", cr.GetName(), c)
	}
	return false, fmt.Sprintf("CertificateRequest %s: %s", cr.GetName(), SummarizeConditions(cr))
}

// NewestCertificateRequest picks, among requests, the newest one owned by certificate name for
// revision (cert-manager annotates both).
func NewestCertificateRequest(requests []*unstructured.Unstructured, certName string, revision int64) *unstructured.Unstructured {
	var mine []*unstructured.Unstructured
	for _, r := range requests {
		a := r.GetAnnotations()
		if a["cert-manager.io/certificate-name"] != certName {
			continue
		}
		if rev, err := strconv.ParseInt(a["cert-manager.io/certificate-revision"], 10, 64); err == nil && rev != revision {
			continue
		}
		mine = append(mine, r)
	}
	if len(mine) == 0 {
		return nil
	}
	sort.Slice(mine, func(i, j int) bool {
		return mine[i].GetCreationTimestamp().Time.Before(mine[j].GetCreationTimestamp().Time)
	})
	return mine[len(mine)-1]
}

// RequestFails decides whether the newest CertificateRequest fails a Certificate's gate. A
// terminal request (Denied, InvalidRequest) fails only while the Certificate is not
// Ready=True for its generation: a Ready Certificate still holds a valid certificate, and a
// refused renewal is cert-manager's to retry and its owner's to fix before notAfter, not a broken
// certificate, so it is returned as a note. A request for a changed spec leaves Ready stale or
// False, and then fails.
func RequestFails(cert, cr *unstructured.Unstructured) (fails bool, note string) {
	terminal, summary := CertificateRequestVerdict(cr)
	if !terminal {
		return false, summary
	}
	if ready, _ := ConditionHolds(cert, "Ready", "True"); ready {
		return false, "its renewal is refused (" + summary + "); the current certificate stays valid until it expires"
	}
	return true, summary
}
