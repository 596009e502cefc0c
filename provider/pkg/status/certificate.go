package status

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
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

// CertificateMatches judges a Secret's leaf certificate against its Certificate, in this order:
//
//  1. it is the one cert-manager reports (same notAfter as status.notAfter, so a stale Secret
//     from an earlier issuance does not pass);
//  2. the Secret was issued for this Certificate and its issuer, when it says so (cert-manager's
//     SecretIssuerAnnotationsMismatch and SecretCertificateNameAnnotationsMismatch);
//  3. it names what the spec asks for (NamesDiffer: cert-manager's check of an issued certificate
//     against the spec), so a Secret issued for an earlier spec does not pass before
//     cert-manager re-issues;
//  4. it is valid already (notBefore <= now), and then not expired and valid for minValidity.
//
// Only 4's expiry and minValidity are ones that only a renewal fixes (Match.OnlyRenewalFixes).
func CertificateMatches(cert *x509.Certificate, want Expected) Match {
	if want.StatusNotAfter != "" {
		w, err := time.Parse(time.RFC3339, want.StatusNotAfter)
		if err == nil && !cert.NotAfter.UTC().Truncate(time.Second).Equal(w.UTC().Truncate(time.Second)) {
			return Match{Message: fmt.Sprintf("the Secret's certificate (notAfter %s) is not the one the Certificate reports (notAfter %s): a stale Secret from an earlier issuance",
				cert.NotAfter.UTC().Format(time.RFC3339), w.UTC().Format(time.RFC3339))}
		}
	}
	if m, differ := annotationsDiffer(want); differ {
		return m
	}
	if got, asked, differ := NamesDiffer(cert, want.Spec); differ {
		return Match{
			Message: fmt.Sprintf("Secret %s holds a certificate for %s, the Certificate asks for %s; cert-manager has not re-issued it for the current spec yet", want.SecretName, got, asked),
			Hint: fmt.Sprintf("kubectl describe certificate %s -n %s (Issuing=True: it is re-issuing for the changed spec; if not, does another Certificate or a tool write Secret %s?)",
				want.Spec.Name, want.Spec.Namespace, want.SecretName),
		}
	}
	now := want.Now
	// No clock skew is allowed either way, as crypto/x509's Verify allows none (a TLS client
	// rejects a certificate before its notBefore and after its notAfter) and cert-manager adds
	// none (its CA issuer signs with notBefore = its own now). A certificate not valid yet only
	// needs time, so the gate looks again at notBefore: the cost of no skew is a wait as long as
	// the skew, never a pass that a client with this clock would refuse.
	if now.Before(cert.NotBefore) {
		return Match{
			Message: fmt.Sprintf("the certificate is not valid yet: notBefore %s is %s from now; a TLS client rejects it until then",
				cert.NotBefore.UTC().Format(time.RFC3339), cert.NotBefore.Sub(now).Round(time.Second)),
			Hint:    "the gate looks again at notBefore; a notBefore in the future usually means this machine's clock is behind the issuer's (or the issuer post-dates its certificates)",
			RetryIn: cert.NotBefore.Sub(now),
		}
	}
	if now.After(cert.NotAfter) {
		return Match{Message: fmt.Sprintf("the certificate expired at %s", cert.NotAfter.UTC().Format(time.RFC3339)), OnlyRenewalFixes: true}
	}
	if want.MinValidity > 0 && cert.NotAfter.Sub(now) < want.MinValidity {
		return Match{Message: fmt.Sprintf("the certificate is valid until %s, less than minValidity %s from now", cert.NotAfter.UTC().Format(time.RFC3339), want.MinValidity),
			OnlyRenewalFixes: true}
	}
	return Match{OK: true, Message: fmt.Sprintf("issued, valid until %s", cert.NotAfter.UTC().Format(time.RFC3339))}
}

// Expected is what CertificateMatches judges a Secret's certificate against.
type Expected struct {
	// SecretName and SecretAnnotations are the Secret's (its data is never quoted).
	SecretName        string
	SecretAnnotations map[string]string
	// StatusNotAfter is the Certificate's status.notAfter ("" before cert-manager reports one).
	StatusNotAfter string
	Spec           CertificateSpec
	// Now is when the certificate is judged; MinValidity how long it must stay valid from then.
	Now         time.Time
	MinValidity time.Duration
}

// Match is CertificateMatches's judgement: OK, or a message (and a hint) saying what differs.
type Match struct {
	OK            bool
	Message, Hint string
	// RetryIn is set when only time makes the certificate acceptable (not valid yet): no watch
	// event would come.
	RetryIn time.Duration
	// OnlyRenewalFixes says that only a new issuance can make the certificate acceptable (it is
	// the one reported, and has expired or is valid for less than minValidity); a stale or
	// mismatched Secret is not, as cert-manager rewrites or re-issues it without the refused
	// renewal.
	OnlyRenewalFixes bool
}

// CertificateSpec is what a Certificate asks of the certificate in its Secret, as far as
// cert-manager checks an issued certificate against it.
type CertificateSpec struct {
	Name, Namespace string
	CommonName      string
	// LiteralSubject, when set, is the whole subject (spec.commonName is then empty).
	LiteralSubject                              string
	DNSNames, IPAddresses, URIs, EmailAddresses []string
	IssuerName, IssuerKind, IssuerGroup         string
}

// CertificateSpecOf reads a Certificate's spec.
func CertificateSpecOf(cert *unstructured.Unstructured) CertificateSpec {
	str := func(f ...string) string { v, _, _ := unstructured.NestedString(cert.Object, f...); return v }
	strs := func(f string) []string { v, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", f); return v }
	return CertificateSpec{
		Name: cert.GetName(), Namespace: cert.GetNamespace(),
		CommonName: str("spec", "commonName"), LiteralSubject: str("spec", "literalSubject"),
		DNSNames: strs("dnsNames"), IPAddresses: strs("ipAddresses"), URIs: strs("uris"), EmailAddresses: strs("emailAddresses"),
		IssuerName: str("spec", "issuerRef", "name"), IssuerKind: str("spec", "issuerRef", "kind"), IssuerGroup: str("spec", "issuerRef", "group"),
	}
}

// The annotations cert-manager writes on a Secret it issued.
const (
	issuerNameAnnotation      = "cert-manager.io/issuer-name"
	issuerKindAnnotation      = "cert-manager.io/issuer-kind"
	issuerGroupAnnotation     = "cert-manager.io/issuer-group"
	certificateNameAnnotation = "cert-manager.io/certificate-name"
)

// issuerRef formats an issuer reference as cert-manager does (Kind.group/name), with its
// defaults: kind Issuer, group cert-manager.io.
func issuerRef(name, kind, group string) string {
	if kind == "" {
		kind = "Issuer"
	}
	if group == "" {
		group = "cert-manager.io"
	}
	return fmt.Sprintf("%s.%s/%s", kind, group, name)
}

// annotationsDiffer checks the Secret's cert-manager annotations against the Certificate: those
// that are present must name its issuer (kind and group defaulted) and the Certificate itself.
// A Secret without any of them (created by hand or by another tool) is not judged by them:
// cert-manager re-issues such a Secret when the ref's kind or group is not the default one
// (it compares the missing kind as Issuer), and until it has, its Ready is not True for the
// generation; the gate judges what a Secret that cert-manager accepted holds, its names above
// all, rather than second-guess which annotations it had to carry.
func annotationsDiffer(want Expected) (Match, bool) {
	a := want.SecretAnnotations
	name, hasName := a[issuerNameAnnotation]
	kind, hasKind := a[issuerKindAnnotation]
	group, hasGroup := a[issuerGroupAnnotation]
	if hasName || hasKind || hasGroup {
		got, asked := issuerRef(name, kind, group), issuerRef(want.Spec.IssuerName, want.Spec.IssuerKind, want.Spec.IssuerGroup)
		if got != asked {
			return Match{
				Message: fmt.Sprintf("Secret %s was issued by %s (its cert-manager.io/issuer-* annotations), the Certificate asks for %s; cert-manager has not re-issued it for the current issuer yet", want.SecretName, got, asked),
				Hint:    fmt.Sprintf("kubectl describe certificate %s -n %s (is the issuer %s present and ready?)", want.Spec.Name, want.Spec.Namespace, asked),
			}, true
		}
	}
	if owner, ok := a[certificateNameAnnotation]; ok && owner != want.Spec.Name {
		return Match{
			Message: fmt.Sprintf("Secret %s was issued for Certificate %q (its cert-manager.io/certificate-name annotation), not for %q", want.SecretName, owner, want.Spec.Name),
			Hint:    fmt.Sprintf("do two Certificates in %s name Secret %s? kubectl get certificates -n %s", want.Spec.Namespace, want.SecretName, want.Spec.Namespace),
		}, true
	}
	return Match{}, false
}

// NamesDiffer compares the names a certificate carries with those its Certificate's spec asks
// for, as cert-manager does for an issued certificate (pki.FuzzyX509AltNamesMatchSpec, which
// its policies use when no CertificateRequest is left to compare with):
//
//   - commonName and dnsNames together, as one set: an issuer may promote a DNS name to the
//     common name or the common name to a DNS name (ACME, Vault), so neither is a difference;
//     a spec without commonName accepts a certificate whose common name is one of its DNS
//     names, and one with no common name;
//   - ipAddresses (compared as addresses, so 10.0.0.1 and ::ffff:10.0.0.1 are one), uris and
//     emailAddresses, each as a set; an unset field asks for none.
//
// Sets, where cert-manager compares lists regardless of order: a name repeated in the spec is
// not a name the certificate lacks. Subject fields other than the common name, and otherNames,
// are not compared (cert-manager compares them only with the CertificateRequest, since issuers
// override them). With spec.literalSubject, the certificate's common name comes from it and is
// left out. got and asked say what differs, field by field, in the certificate's and the
// spec's own order.
func NamesDiffer(cert *x509.Certificate, spec CertificateSpec) (got, asked string, differ bool) {
	var gotParts, askedParts []string
	certCN := cert.Subject.CommonName
	if spec.LiteralSubject != "" {
		certCN = ""
	}
	expected := setOf(append(append([]string{}, spec.DNSNames...), nonEmpty(spec.CommonName)...))
	all := setOf(append(append([]string{}, cert.DNSNames...), nonEmpty(certCN)...))
	if !sameSet(all, expected) {
		if (spec.CommonName != "" && !all[spec.CommonName]) || (certCN != "" && !expected[certCN]) {
			gotParts, askedParts = append(gotParts, commonName(certCN)), append(askedParts, commonName(spec.CommonName))
		}
		if !hasAll(all, spec.DNSNames) || !hasAll(expected, cert.DNSNames) {
			gotParts, askedParts = append(gotParts, list("DNS names", cert.DNSNames)), append(askedParts, list("DNS names", spec.DNSNames))
		}
	}
	var certIPs, specIPs []string
	for _, ip := range cert.IPAddresses {
		certIPs = append(certIPs, ip.String())
	}
	for _, s := range spec.IPAddresses {
		if ip := net.ParseIP(s); ip != nil {
			s = ip.String() // one form per address, as the certificate's
		}
		specIPs = append(specIPs, s)
	}
	var certURIs []string
	for _, u := range cert.URIs {
		certURIs = append(certURIs, u.String())
	}
	for _, f := range []struct {
		what       string
		got, asked []string
	}{
		{"IP addresses", certIPs, specIPs},
		{"URIs", certURIs, spec.URIs},
		{"email addresses", cert.EmailAddresses, spec.EmailAddresses},
	} {
		if !sameSet(setOf(f.got), setOf(f.asked)) {
			gotParts, askedParts = append(gotParts, list(f.what, f.got)), append(askedParts, list(f.what, f.asked))
		}
	}
	if len(gotParts) == 0 {
		return "", "", false
	}
	return strings.Join(gotParts, " and "), strings.Join(askedParts, " and "), true
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

func setOf(xs []string) map[string]bool {
	m := make(map[string]bool, len(xs))
	for _, x := range xs {
		m[x] = true
	}
	return m
}

func sameSet(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for x := range a {
		if !b[x] {
			return false
		}
	}
	return true
}

func hasAll(set map[string]bool, xs []string) bool {
	for _, x := range xs {
		if !set[x] {
			return false
		}
	}
	return true
}

func commonName(cn string) string {
	if cn == "" {
		return "no commonName"
	}
	return fmt.Sprintf("commonName %q", cn)
}

// list quotes names (never anything of the Secret's data but the certificate's names), each
// once, in their order.
func list(what string, xs []string) string {
	var uniq []string
	seen := map[string]bool{}
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			uniq = append(uniq, x)
		}
	}
	if len(uniq) == 0 {
		return "no " + what
	}
	return fmt.Sprintf("%s [%s]", what, strings.Join(uniq, " "))
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
