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
		"near miss: a failed first issuance fails":                               {cert("False", 1, 1), failed, true, "ACME order failed"},
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
