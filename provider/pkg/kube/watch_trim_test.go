package kube

import (
	"encoding/base64"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/readiness-io/pulumi-readiness/internal/fakes"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/status"
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
	if data["tls.key"] != status.KeyPairsMarker || data["note"] != SecretPresent || data["empty"] != "" {
		t.Errorf("other values: %v", data)
	}
	// A tls.key that is not tls.crt's key is only present; one that is says so, and holds no key.
	other, err := fakes.IssueCertificate("web.example", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, crt, key, want string
	}{
		{"the certificate's own key", b64(issued.CertPEM), b64(issued.KeyPEM), status.KeyPairsMarker},
		{"near miss: another certificate's key", b64(issued.CertPEM), b64(other.KeyPEM), SecretPresent},
		{"near miss: no tls.crt to pair with", "", b64(issued.KeyPEM), SecretPresent},
		{"near miss: the marker written as the value by hand", b64(issued.CertPEM), status.KeyPairsMarker, SecretPresent},
	} {
		u := &unstructured.Unstructured{Object: map[string]any{"data": map[string]any{"tls.crt": c.crt, "tls.key": c.key}}}
		if got := trimSecret(u).Object["data"].(map[string]any)["tls.key"]; got != c.want {
			t.Errorf("%s: tls.key = %v, want %v", c.name, got, c.want)
		}
	}
}

func decodedOrEmpty(s string) string {
	raw, _ := base64.StdEncoding.DecodeString(s)
	return string(raw)
}

// trimCRD drops schemas, but a CRD with a conversion webhook keeps the required-field skeleton
// CrdReady builds its dry-run conversion probe from.
func TestTrimCRDKeepsTheRequiredSkeletonOfConversionCRDs(t *testing.T) {
	schema := func() map[string]any {
		return map[string]any{"type": "object", "required": []any{"spec"}, "description": "long text",
			"properties": map[string]any{
				"spec":   map[string]any{"type": "object", "required": []any{"size"}, "properties": map[string]any{"size": map[string]any{"type": "integer", "minimum": int64(1)}, "big": map[string]any{"type": "string"}}},
				"status": map[string]any{"type": "object"},
			}}
	}
	crd := func(strategy string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
			"conversion": map[string]any{"strategy": strategy},
			"versions":   []any{map[string]any{"name": "v1", "schema": map[string]any{"openAPIV3Schema": schema()}}}}}}
	}
	none := trimCRD(crd("None"))
	if v, _, _ := unstructured.NestedSlice(none.Object, "spec", "versions"); v[0].(map[string]any)["schema"] != nil {
		t.Errorf("strategy None keeps a schema: %v", v[0])
	}
	hook := trimCRD(crd("Webhook"))
	v, _, _ := unstructured.NestedSlice(hook.Object, "spec", "versions")
	got, _, _ := unstructured.NestedMap(v[0].(map[string]any), "schema", "openAPIV3Schema")
	want := map[string]any{"type": "object", "required": []any{"spec"}, "properties": map[string]any{
		"spec": map[string]any{"type": "object", "required": []any{"size"}, "properties": map[string]any{"size": map[string]any{"type": "integer", "minimum": int64(1)}}}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("skeleton %v, want %v", got, want)
	}
}
