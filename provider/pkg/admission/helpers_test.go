package admission

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// object decodes one YAML manifest.
func object(t testing.TB, doc string) *unstructured.Unstructured {
	t.Helper()
	m := map[string]any{}
	if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
		t.Fatalf("decoding YAML: %v\n%s", err, doc)
	}
	return &unstructured.Unstructured{Object: m}
}

func ptr[T any](v T) *T { return &v }

const sidecarExpect = "object.spec.containers.exists(c, c.name == 'sidecar')"

func podIn(ns string) map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"generateName": "probe-", "namespace": ns},
		"spec":     map[string]any{"containers": []any{map[string]any{"name": "app", "image": "readiness.invalid/app"}}}}
}
