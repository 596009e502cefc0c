package admission

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestSecretRedactor(t *testing.T) {
	o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
		"data": map[string]any{"a": base64.StdEncoding.EncodeToString([]byte("plain-a"))}, "stringData": map[string]any{"b": "plain-b"}}}
	red := SecretRedactor(o)
	msg := red(fmt.Sprintf("denied: %s %s %s %s", base64.StdEncoding.EncodeToString([]byte("plain-a")), "plain-a", "plain-b", base64.StdEncoding.EncodeToString([]byte("plain-b"))))
	if strings.Contains(msg, "plain") || strings.Contains(msg, "cGxha") {
		t.Errorf("redacted message still holds data: %s", msg)
	}
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"a": "plain-a"}}}
	if got := SecretRedactor(cm)("plain-a"); got != "plain-a" {
		t.Errorf("a ConfigMap's data is not secret: %s", got)
	}
}
