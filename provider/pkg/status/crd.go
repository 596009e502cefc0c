package status

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// CRDResult is what CRD evaluates: whether the CRD may be used, and what it serves.
type CRDResult struct {
	Ready   bool
	Message string
	// Kind is spec.names.kind, Group spec.group, and ServedVersions the group/version strings
	// of every version with served: true.
	Kind           string
	Group          string
	Plural         string
	Scope          string
	ServedVersions []string
}

// CRD evaluates a CustomResourceDefinition: ready when Established=True and NamesAccepted=True
// (the two conditions the apiextensions controller sets once the kind is served) and the CRD is
// not being deleted. A nil obj is a CRD that does not exist yet.
func CRD(obj *unstructured.Unstructured) CRDResult {
	if obj == nil {
		return CRDResult{Message: "not found (not created yet)"}
	}
	r := CRDResult{}
	r.Group, _, _ = unstructured.NestedString(obj.Object, "spec", "group")
	r.Kind, _, _ = unstructured.NestedString(obj.Object, "spec", "names", "kind")
	r.Plural, _, _ = unstructured.NestedString(obj.Object, "spec", "names", "plural")
	r.Scope, _, _ = unstructured.NestedString(obj.Object, "spec", "scope")
	versions, _, _ := unstructured.NestedSlice(obj.Object, "spec", "versions")
	for _, v := range versions {
		m, ok := v.(map[string]any)
		if !ok {
			continue
		}
		if served, _ := m["served"].(bool); served {
			r.ServedVersions = append(r.ServedVersions, r.Group+"/"+str(m["name"]))
		}
	}
	sort.Strings(r.ServedVersions)

	if obj.GetDeletionTimestamp() != nil {
		r.Message = "being deleted"
		return r
	}
	established, estMsg := ConditionHolds(obj, "Established", "True")
	names, namesMsg := ConditionHolds(obj, "NamesAccepted", "True")
	switch {
	case established && names:
		if len(r.ServedVersions) == 0 {
			r.Message = "Established, but no version is served"
			return r
		}
		r.Ready = true
		r.Message = "Established"
	case !names && estMsg == "no Established condition yet":
		r.Message = namesMsg + ", " + estMsg
	case !names:
		r.Message = namesMsg
	default:
		r.Message = estMsg
	}
	return r
}

// CRDName is the name a CRD for plural.group must have.
func CRDName(plural, group string) string { return fmt.Sprintf("%s.%s", plural, group) }
