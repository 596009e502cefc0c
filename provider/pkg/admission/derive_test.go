package admission

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
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
