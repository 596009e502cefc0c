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
// could make the certificate acceptable; a stale Secret is cert-manager's to rewrite.
func TestOnlyRenewalFixes(t *testing.T) {
	now := time.Now()
	at := func(d time.Duration) *x509.Certificate {
		return &x509.Certificate{NotAfter: now.Add(d).Truncate(time.Second)}
	}
	rfc := func(d time.Duration) string { return now.Add(d).Truncate(time.Second).UTC().Format(time.RFC3339) }
	for name, tc := range map[string]struct {
		cert        *x509.Certificate
		status      string
		minValidity time.Duration
		want        bool
	}{
		"expired, the one reported":                        {at(-time.Hour), rfc(-time.Hour), 0, true},
		"below minValidity, the one reported":              {at(time.Hour), rfc(time.Hour), 2 * time.Hour, true},
		"near miss: below minValidity, but a stale Secret": {at(time.Hour), rfc(48 * time.Hour), 2 * time.Hour, false},
		"near miss: expired, but a stale Secret":           {at(-time.Hour), rfc(48 * time.Hour), 0, false},
		"valid for long enough":                            {at(48 * time.Hour), rfc(48 * time.Hour), 2 * time.Hour, false},
		"no notAfter reported, expired":                    {at(-time.Hour), "", 0, true},
	} {
		if got := OnlyRenewalFixes(tc.cert, tc.status, now, tc.minValidity); got != tc.want {
			t.Errorf("%s: OnlyRenewalFixes = %v, want %v", name, got, tc.want)
		}
	}
}
