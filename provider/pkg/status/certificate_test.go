package status

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"
)

func selfSigned(t *testing.T, cn string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

func TestPublicCertificates(t *testing.T) {
	ca1, key1 := selfSigned(t, "ca one")
	ca2, _ := selfSigned(t, "ca two")
	pkcs8 := []byte("-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg\n-----END PRIVATE KEY-----\n")
	bogus := []byte("-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n")
	join := func(parts ...[]byte) []byte {
		var out []byte
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	tests := map[string]struct {
		in   []byte
		want string
	}{
		"one certificate":                        {ca1, string(ca1)},
		"a certificate then a PRIVATE KEY":       {join(ca1, pkcs8), string(ca1)},
		"a key first, then two certificates":     {join(key1, ca1, ca2), string(ca1) + string(ca2)},
		"a key between two certificates":         {join(ca1, key1, ca2), string(ca1) + string(ca2)},
		"text around the blocks":                 {join([]byte("# bundle\n"), ca1, []byte("trailer\n")), string(ca1)},
		"a CERTIFICATE block that is not X.509":  {join(bogus, ca1), string(ca1)},
		"only a key":                             {key1, ""},
		"not PEM":                                {[]byte("hello"), ""},
		"block headers on a certificate dropped": {pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Headers: map[string]string{"Proc-Type": "x"}, Bytes: mustDER(t, ca1)}), string(ca1)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := PublicCertificates(tc.in)
			if got != tc.want {
				t.Errorf("PublicCertificates = %q, want %q", got, tc.want)
			}
			if strings.Contains(got, "PRIVATE KEY") {
				t.Error("output holds a private key")
			}
		})
	}
}

func mustDER(t *testing.T, certPEM []byte) []byte {
	b, _ := pem.Decode(certPEM)
	if b == nil {
		t.Fatal("no PEM")
	}
	return b.Bytes
}

func TestRequestFails(t *testing.T) {
	const denied = `
apiVersion: cert-manager.io/v1
kind: CertificateRequest
metadata: {name: web-2}
status: {conditions: [{type: Denied, status: "True", reason: PolicyDenied, message: "not allowed"}, {type: Ready, status: "False", reason: Denied}]}`
	const failed = `
apiVersion: cert-manager.io/v1
kind: CertificateRequest
metadata: {name: web-2}
status: {conditions: [{type: Approved, status: "True"}, {type: Ready, status: "False", reason: Failed, message: "ACME order failed"}]}`
	const invalid = `
apiVersion: cert-manager.io/v1
kind: CertificateRequest
metadata: {name: web-2}
status: {conditions: [{type: InvalidRequest, status: "True", reason: BadCSR, message: "the CSR is malformed"}]}`
	const pending = `
apiVersion: cert-manager.io/v1
kind: CertificateRequest
metadata: {name: web-2}
status: {conditions: [{type: Ready, status: "False", reason: Pending}]}`
	cert := func(ready string, gen, observed int) string {
		return fmt.Sprintf(`
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: web, generation: %d}
status: {conditions: [{type: Ready, status: %q, observedGeneration: %d}]}`, gen, ready, observed)
	}
	for name, tc := range map[string]struct {
		cert, cr string
		fails    bool
		note     string
	}{
		"a refused renewal of a Ready certificate is a note":                     {cert("True", 1, 1), denied, false, "renewal is refused"},
		"near miss: Denied while not Ready (first issuance) fails":               {cert("False", 1, 1), denied, true, "denied"},
		"near miss: Denied for a changed spec (Ready is stale)":                  {cert("True", 2, 1), denied, true, "denied"},
		"a failed renewal (the issuer's error) of a Ready certificate is a note": {cert("True", 1, 1), failed, false, "ACME order failed"},
		"a failed first issuance waits: cert-manager retries it":                 {cert("False", 1, 1), failed, false, "retries"},
		"near miss: an invalid request while not Ready fails":                    {cert("False", 1, 1), invalid, true, "invalid"},
		"a pending request is a note":                                            {cert("False", 1, 1), pending, false, "Pending"},
	} {
		t.Run(name, func(t *testing.T) {
			fails, note := RequestFails(fromYAML(t, tc.cert), fromYAML(t, tc.cr))
			if fails != tc.fails || !strings.Contains(note, tc.note) {
				t.Errorf("RequestFails = %v, %q; want %v, containing %q", fails, note, tc.fails, tc.note)
			}
		})
	}
}

// TestOnlyRenewalFixes: a refused renewal fails a gate at once only when nothing but a renewal
// could make the certificate acceptable; a stale Secret is cert-manager's to rewrite, one for
// another spec its to re-issue, and one not valid yet only needs time.
func TestOnlyRenewalFixes(t *testing.T) {
	now := time.Now()
	at := func(d time.Duration) *x509.Certificate {
		return &x509.Certificate{NotBefore: now.Add(-48 * time.Hour), NotAfter: now.Add(d).Truncate(time.Second), DNSNames: []string{"web.example.test"}}
	}
	rfc := func(d time.Duration) string { return now.Add(d).Truncate(time.Second).UTC().Format(time.RFC3339) }
	spec := CertificateSpec{Name: "web", Namespace: "apps", DNSNames: []string{"web.example.test"}}
	other := CertificateSpec{Name: "web", Namespace: "apps", DNSNames: []string{"www.example.test"}}
	notYet := at(time.Hour)
	notYet.NotBefore = now.Add(time.Minute)
	for name, tc := range map[string]struct {
		cert        *x509.Certificate
		status      string
		spec        CertificateSpec
		minValidity time.Duration
		want        bool
	}{
		"expired, the one reported":                        {at(-time.Hour), rfc(-time.Hour), spec, 0, true},
		"below minValidity, the one reported":              {at(time.Hour), rfc(time.Hour), spec, 2 * time.Hour, true},
		"near miss: below minValidity, but a stale Secret": {at(time.Hour), rfc(48 * time.Hour), spec, 2 * time.Hour, false},
		"near miss: expired, but a stale Secret":           {at(-time.Hour), rfc(48 * time.Hour), spec, 0, false},
		"near miss: expired, but issued for another spec":  {at(-time.Hour), rfc(-time.Hour), other, 0, false},
		"near miss: below minValidity, but not valid yet":  {notYet, rfc(time.Hour), spec, 2 * time.Hour, false},
		"valid for long enough":                            {at(48 * time.Hour), rfc(48 * time.Hour), spec, 2 * time.Hour, false},
		"no notAfter reported, expired":                    {at(-time.Hour), "", spec, 0, true},
	} {
		m := CertificateMatches(tc.cert, Expected{SecretName: "web-tls", StatusNotAfter: tc.status, Spec: tc.spec, Now: now, MinValidity: tc.minValidity})
		if m.OnlyRenewalFixes != tc.want || m.OnlyRenewalFixes && m.OK {
			t.Errorf("%s: CertificateMatches = %+v, want OnlyRenewalFixes %v", name, m, tc.want)
		}
	}
}

// TestNamesDiffer: cert-manager's comparison of an issued certificate with the spec
// (FuzzyX509AltNamesMatchSpec), field by field.
func TestNamesDiffer(t *testing.T) {
	uri := func(s string) *url.URL {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	for name, tc := range map[string]struct {
		cert       x509.Certificate
		spec       CertificateSpec
		got, asked string // "" when they match
	}{
		"the same DNS names in another order": {
			x509.Certificate{DNSNames: []string{"b.example.test", "a.example.test"}},
			CertificateSpec{DNSNames: []string{"a.example.test", "b.example.test"}}, "", ""},
		"no commonName in the spec, the issuer promoted a DNS name to it (ACME)": {
			x509.Certificate{Subject: pkix.Name{CommonName: "a.example.test"}, DNSNames: []string{"a.example.test", "b.example.test"}},
			CertificateSpec{DNSNames: []string{"a.example.test", "b.example.test"}}, "", ""},
		"a commonName the issuer also made a DNS name (Vault)": {
			x509.Certificate{Subject: pkix.Name{CommonName: "a.example.test"}, DNSNames: []string{"a.example.test", "b.example.test"}},
			CertificateSpec{CommonName: "a.example.test", DNSNames: []string{"b.example.test"}}, "", ""},
		"a name repeated in the spec": {
			x509.Certificate{DNSNames: []string{"a.example.test"}, IPAddresses: []net.IP{net.ParseIP("10.0.0.1")}},
			CertificateSpec{DNSNames: []string{"a.example.test", "a.example.test"}, IPAddresses: []string{"10.0.0.1", "10.0.0.1"}}, "", ""},
		"an IPv4 address written IPv4-mapped in the spec": {
			x509.Certificate{IPAddresses: []net.IP{net.ParseIP("10.0.0.1").To4()}},
			CertificateSpec{IPAddresses: []string{"::ffff:10.0.0.1"}}, "", ""},
		"literalSubject sets the common name": {
			x509.Certificate{Subject: pkix.Name{CommonName: "web"}, DNSNames: []string{"a.example.test"}},
			CertificateSpec{LiteralSubject: "CN=web,O=acme", DNSNames: []string{"a.example.test"}}, "", ""},
		"only otherNames asked: nothing compared": {x509.Certificate{}, CertificateSpec{}, "", ""},
		"near miss: a DNS name added to the spec": {
			x509.Certificate{DNSNames: []string{"a.example.test"}},
			CertificateSpec{DNSNames: []string{"a.example.test", "b.example.test"}},
			"DNS names [a.example.test]", "DNS names [a.example.test b.example.test]"},
		"near miss: a common name the spec does not ask for": {
			x509.Certificate{Subject: pkix.Name{CommonName: "web"}, DNSNames: []string{"a.example.test"}},
			CertificateSpec{DNSNames: []string{"a.example.test"}},
			`commonName "web"`, "no commonName"},
		"near miss: another commonName": {
			x509.Certificate{Subject: pkix.Name{CommonName: "old"}, DNSNames: []string{"a.example.test"}},
			CertificateSpec{CommonName: "new", DNSNames: []string{"a.example.test"}},
			`commonName "old"`, `commonName "new"`},
		"near miss: an extra IP address": {
			x509.Certificate{DNSNames: []string{"a.example.test"}, IPAddresses: []net.IP{net.ParseIP("10.0.0.1"), net.ParseIP("10.0.0.2")}},
			CertificateSpec{DNSNames: []string{"a.example.test"}, IPAddresses: []string{"10.0.0.1"}},
			"IP addresses [10.0.0.1 10.0.0.2]", "IP addresses [10.0.0.1]"},
		"near miss: another URI and no email address": {
			x509.Certificate{URIs: []*url.URL{uri("spiffe://cluster.local/ns/apps/sa/old")}, EmailAddresses: []string{"ops@example.test"}},
			CertificateSpec{URIs: []string{"spiffe://cluster.local/ns/apps/sa/web"}},
			"URIs [spiffe://cluster.local/ns/apps/sa/old] and email addresses [ops@example.test]", "URIs [spiffe://cluster.local/ns/apps/sa/web] and no email addresses"},
	} {
		got, asked, differ := NamesDiffer(&tc.cert, tc.spec)
		if differ != (tc.got != "") || got != tc.got || asked != tc.asked {
			t.Errorf("%s: NamesDiffer = %q, %q, %v; want %q, %q", name, got, asked, differ, tc.got, tc.asked)
		}
	}
}

// TestCertificateMatchesAnnotations: the Secret's cert-manager annotations, when present, must
// name the Certificate's issuer (kind and group defaulted) and the Certificate.
func TestCertificateMatchesAnnotations(t *testing.T) {
	now := time.Now()
	cert := &x509.Certificate{NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), DNSNames: []string{"web.example.test"}}
	spec := CertificateSpec{Name: "web", Namespace: "apps", DNSNames: []string{"web.example.test"}, IssuerName: "prod", IssuerKind: "ClusterIssuer"}
	for name, tc := range map[string]struct {
		ann  map[string]string
		want string // "" when it matches
	}{
		"no annotations (a Secret made by hand)": {nil, ""},
		"the issuer and Certificate, group defaulted": {map[string]string{"cert-manager.io/issuer-name": "prod", "cert-manager.io/issuer-kind": "ClusterIssuer",
			"cert-manager.io/issuer-group": "", "cert-manager.io/certificate-name": "web"}, ""},
		"the issuer, group written out": {map[string]string{"cert-manager.io/issuer-name": "prod", "cert-manager.io/issuer-kind": "ClusterIssuer",
			"cert-manager.io/issuer-group": "cert-manager.io"}, ""},
		"near miss: another issuer": {map[string]string{"cert-manager.io/issuer-name": "staging", "cert-manager.io/issuer-kind": "ClusterIssuer"},
			"Secret web-tls was issued by ClusterIssuer.cert-manager.io/staging (its cert-manager.io/issuer-* annotations), the Certificate asks for ClusterIssuer.cert-manager.io/prod"},
		"near miss: an Issuer of the same name (kind defaults to Issuer)": {map[string]string{"cert-manager.io/issuer-name": "prod"},
			"was issued by Issuer.cert-manager.io/prod"},
		"near miss: another Certificate's Secret": {map[string]string{"cert-manager.io/certificate-name": "api"},
			`Secret web-tls was issued for Certificate "api" (its cert-manager.io/certificate-name annotation), not for "web"`},
	} {
		m := CertificateMatches(cert, Expected{SecretName: "web-tls", SecretAnnotations: tc.ann, Spec: spec, Now: now})
		if tc.want == "" && !m.OK || tc.want != "" && (m.OK || !strings.Contains(m.Message, tc.want) || m.Hint == "") {
			t.Errorf("%s: CertificateMatches = %+v, want %q", name, m, tc.want)
		}
	}
}
