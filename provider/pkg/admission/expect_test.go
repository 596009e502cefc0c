package admission

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestMutationExpect(t *testing.T) {
	x, err := CompileExpect(ptr(sidecarExpect))
	if err != nil {
		t.Fatal(err)
	}
	u := func(m map[string]any) *unstructured.Unstructured { return &unstructured.Unstructured{Object: m} }
	in := u(podIn("default"))
	out := in.DeepCopy()
	out.SetLabels(map[string]string{"app": "web"})
	out.SetAnnotations(map[string]string{"note": "x"})
	if v := x.Judge(in, out); v.Held || !strings.Contains(v.Why, "did not satisfy expect") || !strings.Contains(v.Why, "spec.containers [app]") ||
		!strings.Contains(v.Why, "labels keys [app]") || strings.Contains(v.Why, "web") {
		t.Errorf("judge = %+v; want not yet, naming containers and label keys, no values", v)
	}
	injected := out.DeepCopy()
	cs, _, _ := unstructured.NestedSlice(injected.Object, "spec", "containers")
	_ = unstructured.SetNestedSlice(injected.Object, append(cs, map[string]any{"name": "sidecar"}), "spec", "containers")
	if v := x.Judge(in, injected); !v.Held {
		t.Errorf("judge = %+v; want held", v)
	}
	// A missing key: not yet, saying so.
	y, _ := CompileExpect(ptr("object.metadata.annotations['sidecar/status'] == 'injected'"))
	if v := y.Judge(in, u(podIn("default"))); v.Held || v.Terminal != "" || !strings.Contains(v.Why, "no such key") {
		t.Errorf("judge = %+v; want not yet, saying no such key", v)
	}
	// Not a bool at runtime: terminal.
	z, _ := CompileExpect(ptr("object.spec.containers[0].name"))
	if v := z.Judge(in, out); v.Terminal == "" {
		t.Errorf("judge = %+v; want terminal", v)
	}
	// A Secret's result is never quoted.
	sec := u(map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "s", "labels": map[string]any{"k-secretish": "v"}},
		"data": map[string]any{"password": "c2VjcmV0"}})
	w, _ := CompileExpect(ptr("object.data.password == 'x'"))
	for _, v := range []ExpectVerdict{w.Judge(sec, sec), y.Judge(sec, sec)} {
		if v.Held || strings.Contains(v.Why, "c2VjcmV0") || strings.Contains(v.Why, "secretish") || strings.Contains(v.Why, "password'") || !strings.Contains(v.Why, "not shown") && !strings.Contains(v.Why, "hidden") {
			t.Errorf("judge of a Secret = %+v", v)
		}
	}

	// Attribution.
	h := &Hook{Name: "inject.x", Config: "MutatingWebhookConfiguration/x", Mutating: true, Policy: "Ignore"}
	same := &Hook{Name: "inject.x", Config: "MutatingWebhookConfiguration/x", Mutating: true, Policy: "Ignore"}
	other := &Hook{Name: "other.y", Config: "MutatingWebhookConfiguration/y", Mutating: true, Policy: "Fail"}
	validating := &Hook{Name: "v.z", Config: "ValidatingWebhookConfiguration/z", Policy: "Ignore"}
	if why := CreditsMutation(x, in, h, []*Hook{same, validating}); why != "" {
		t.Errorf("the only mutating webhook is not credited: %s", why)
	}
	if why := CreditsMutation(x, in, h, []*Hook{same, other}); !strings.Contains(why, "other.y") {
		t.Errorf("credited although another mutating webhook intercepts the object: %q", why)
	}
	if why := CreditsMutation(x, injected, h, []*Hook{same}); !strings.Contains(why, "already holds") {
		t.Errorf("credited although expect holds on the object as given: %q", why)
	}
}
