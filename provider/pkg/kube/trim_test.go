package kube

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/readiness-io/pulumi-readiness/internal/fakes"
)

// TestTrimSecretKeepsOnlyCertificates: the public keys of a TLS Secret are kept for evaluation,
// but only their CERTIFICATE blocks; a private key bundled into ca.crt or tls.crt never enters
// the cache, nor does any other value.
func TestTrimSecretKeepsOnlyCertificates(t *testing.T) {
	issued, err := fakes.IssueCertificate("web.example", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	b64 := func(s []byte) string { return base64.StdEncoding.EncodeToString(s) }
	bundle := append(append([]byte{}, issued.CertPEM...), issued.KeyPEM...)
	u := &unstructured.Unstructured{Object: map[string]any{"data": map[string]any{
		"tls.crt": b64(bundle), "ca.crt": b64(append(append([]byte{}, issued.KeyPEM...), issued.CAPEM...)),
		"tls.key": b64(issued.KeyPEM), "note": b64([]byte("not pem")), "empty": "",
	}}}
	data := trimSecret(u).Object["data"].(map[string]any)
	decoded := func(k string) string {
		raw, err := base64.StdEncoding.DecodeString(data[k].(string))
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		return string(raw)
	}
	if got := decoded("tls.crt"); got != string(issued.CertPEM) {
		t.Errorf("tls.crt kept %q, want only the certificate", got)
	}
	if got := decoded("ca.crt"); got != string(issued.CAPEM) {
		t.Errorf("ca.crt kept %q, want only the CA certificate", got)
	}
	for k, v := range data {
		if s, _ := v.(string); strings.Contains(s, b64(issued.KeyPEM)) || strings.Contains(decodedOrEmpty(s), "PRIVATE KEY") {
			t.Errorf("%s still holds the private key", k)
		}
	}
	if data["tls.key"] != SecretPresent || data["note"] != SecretPresent || data["empty"] != "" {
		t.Errorf("other values: %v", data)
	}
}

func decodedOrEmpty(s string) string {
	raw, _ := base64.StdEncoding.DecodeString(s)
	return string(raw)
}
