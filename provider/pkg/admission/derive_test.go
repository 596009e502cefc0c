package admission

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// pickProbeKind on discovery-shaped input: wildcards resolve to a served kind, never to none
// while one is covered.
func TestPickProbeKind(t *testing.T) {
	sk := func(group, version, resource, kind string, namespaced, preferred bool) ServedKind {
		k := ServedKind{Kind: kind, Namespaced: namespaced, Preferred: preferred}
		k.GVR.Group, k.GVR.Version, k.GVR.Resource = group, version, resource
		return k
	}
	served := []ServedKind{
		sk("", "v1", "namespaces", "Namespace", false, true), sk("", "v1", "configmaps", "ConfigMap", true, true),
		sk("", "v1", "pods", "Pod", true, true), sk("", "v1", "secrets", "Secret", true, true),
		sk("networking.istio.io", "v1", "virtualservices", "VirtualService", true, true),
		sk("networking.istio.io", "v1", "destinationrules", "DestinationRule", true, true),
		sk("networking.istio.io", "v1beta1", "destinationrules", "DestinationRule", true, false),
		sk("kyverno.io", "v1", "clusterpolicies", "ClusterPolicy", false, true),
	}
	hook := func(rules string) *Hook {
		h := &Hook{Name: "h"}
		obj := object(t, "apiVersion: v1\nkind: X\nrules: "+rules)
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &h.Match); err != nil {
			t.Fatal(err)
		}
		return h
	}
	for rules, want := range map[string]string{
		`[{apiGroups: [networking.istio.io], apiVersions: ["*"], operations: [CREATE], resources: ["*"]}]`:       "destinationrules.networking.istio.io/v1",
		`[{apiGroups: ["*"], apiVersions: ["*"], operations: ["*"], resources: ["*/*"]}]`:                        "pods/v1",
		`[{apiGroups: ["*"], apiVersions: ["*"], operations: [CREATE], resources: ["*"], scope: Cluster}]`:       "namespaces/v1",
		`[{apiGroups: [kyverno.io], apiVersions: [v1], operations: [CREATE], resources: ["clusterpolicies/*"]}]`: "clusterpolicies.kyverno.io/v1",
		`[{apiGroups: [""], apiVersions: [v1], operations: [CONNECT], resources: ["pods/exec"]}]`:                "pods/v1",
		`[{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [secrets, configmaps]}]`:         "configmaps/v1",
		`[{apiGroups: [""], apiVersions: ["*"], operations: [CREATE], resources: ["*"]}]`:                        "pods/v1",
		// Near misses: nothing served is covered.
		`[{apiGroups: [example.test], apiVersions: ["*"], operations: [CREATE], resources: ["*"]}]`: "",
		`[]`: "",
	} {
		k, ok := PickProbeKind([]*Hook{hook(rules)}, served)
		got := ""
		if ok {
			got = GVRString(k.GVR)
		}
		if got != want {
			t.Errorf("rules %s: derived %q, want %q", rules, got, want)
		}
	}
}

// A derived probe must pass schema validation, or the API server answers Invalid before any
// webhook runs: a custom kind gets what its CRD's schema requires (cert-manager v1.11's
// CertificateRequest, met on a real node: spec.request and spec.issuerRef.name), a kind with a
// spec of its own keeps it, and a kind with no known schema goes bare.
func TestProbeObjectContent(t *testing.T) {
	certificateRequest := map[string]any{"type": "object", "required": []any{"spec"}, "properties": map[string]any{
		"spec": map[string]any{"type": "object", "required": []any{"issuerRef", "request"}, "properties": map[string]any{
			"request":   map[string]any{"type": "string", "format": "byte"},
			"issuerRef": map[string]any{"type": "object", "required": []any{"name"}, "properties": map[string]any{"name": map[string]any{"type": "string"}}},
			"duration":  map[string]any{"type": "string"},
		}}}}
	cr := ServedKind{GVR: schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificaterequests"},
		Kind: "CertificateRequest", Namespaced: true}
	ingress := ServedKind{GVR: schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "ingresses"},
		Kind: "Ingress", Namespaced: true}
	cases := map[string]struct {
		kind     ServedKind
		schema   map[string]any
		wantSpec map[string]any
	}{
		"custom kind: its schema's required fields": {cr, certificateRequest,
			map[string]any{"request": "AAAA", "issuerRef": map[string]any{"name": ""}}},
		"custom kind, schema unknown: bare (Invalid will say why)": {cr, nil, nil},
		"kind with a spec of its own: the schema is not read": {ingress, certificateRequest,
			map[string]any{"defaultBackend": map[string]any{"service": map[string]any{"name": "readiness-probe", "port": map[string]any{"number": int64(80)}}}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			obj := ProbeObject(tc.kind, "ns1", tc.schema)
			spec, _ := obj.Object["spec"].(map[string]any)
			if !reflect.DeepEqual(spec, tc.wantSpec) {
				t.Errorf("spec = %#v, want %#v", spec, tc.wantSpec)
			}
			if obj.GetGenerateName() != "readiness-probe-" || obj.GetNamespace() != "ns1" || obj.GetKind() != tc.kind.Kind {
				t.Errorf("object %v", obj.Object)
			}
		})
	}
	if HasProbeSpec(cr) || !HasProbeSpec(ingress) {
		t.Error("HasProbeSpec")
	}
}
