package admission

import (
	"encoding/base64"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestMutatedBy(t *testing.T) {
	u := func(m map[string]any) *unstructured.Unstructured { return &unstructured.Unstructured{Object: m} }
	in := map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "p", "labels": map[string]any{"app": "web"}},
		"spec": map[string]any{"containers": []any{map[string]any{"name": "app", "image": "web:1", "resources": map[string]any{"limits": map[string]any{"cpu": "0.5"}}}}, "priority": float64(0)}}
	defaulted := map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "p", "namespace": "default", "uid": "x", "labels": map[string]any{"app": "web"}},
		"spec": map[string]any{"containers": []any{map[string]any{"name": "app", "image": "web:1", "imagePullPolicy": "IfNotPresent", "resources": map[string]any{"limits": map[string]any{"cpu": "500m"}}}},
			"priority": int64(0), "restartPolicy": "Always"}, "status": map[string]any{"phase": "Pending"}}
	if MutatedBy(u(in), u(defaulted), false) {
		t.Error("defaults filled in by the API server are not a mutation")
	}
	sidecar := u(defaulted).DeepCopy()
	cs := sidecar.Object["spec"].(map[string]any)["containers"].([]any)
	sidecar.Object["spec"].(map[string]any)["containers"] = append(cs, map[string]any{"name": "istio-proxy"})
	if !MutatedBy(u(in), sidecar, false) {
		t.Error("an injected container is a mutation")
	}
	image := u(defaulted).DeepCopy()
	image.Object["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["image"] = "registry/web:1@sha256:abc"
	if !MutatedBy(u(in), image, false) {
		t.Error("a rewritten image is a mutation")
	}
	label := u(defaulted).DeepCopy()
	label.SetLabels(map[string]string{"app": "web", "injected": "yes"})
	if !MutatedBy(u(in), label, false) {
		t.Error("an added label is a mutation")
	}
	if MutatedBy(u(in), label, true) {
		t.Error("on an update, a label the existing object has is not the webhook's")
	}
	ns := u(map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "a"}})
	nsOut := ns.DeepCopy()
	nsOut.SetLabels(map[string]string{"kubernetes.io/metadata.name": "a"})
	if MutatedBy(ns, nsOut, false) {
		t.Error("the API server's own namespace label is not a mutation")
	}
	sec := u(map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "s"}, "stringData": map[string]any{"k": "v"}, "type": "Opaque"})
	secOut := u(map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "s"}, "data": map[string]any{"k": base64.StdEncoding.EncodeToString([]byte("v"))}, "type": "Opaque"})
	if MutatedBy(sec, secOut, false) {
		t.Error("stringData turned into data is not a mutation")
	}
	secOut.Object["data"].(map[string]any)["k"] = base64.StdEncoding.EncodeToString([]byte("w"))
	if !MutatedBy(sec, secOut, false) {
		t.Error("a changed Secret value is a mutation")
	}
}
