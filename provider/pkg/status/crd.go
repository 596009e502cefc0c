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
	// Versions are the served version names (such as v1), StorageVersion the one objects are
	// stored in, and Schemas each served version's openAPIV3Schema (nil when it has none).
	Versions       []string
	StorageVersion string
	Schemas        map[string]map[string]any
	// Conversion is what spec.conversion declares.
	Conversion CRDConversion
}

// CRDConversion is a CRD's spec.conversion: Strategy is None (the default: versions differ only
// in apiVersion) or Webhook; for Webhook, where the API server sends ConversionReviews.
type CRDConversion struct {
	Strategy string
	// URL is clientConfig.url; Service is clientConfig.service as namespace/name:port/path.
	URL, Service string
	// CABundle says clientConfig.caBundle is set (without it the API server trusts the system roots).
	CABundle bool
}

// Webhook says the CRD declares a conversion webhook.
func (c CRDConversion) Webhook() bool { return c.Strategy == "Webhook" }

// Endpoint names where the API server sends ConversionReviews ("" when no clientConfig is set).
func (c CRDConversion) Endpoint() string {
	if c.URL != "" {
		return c.URL
	}
	if c.Service != "" {
		return "service " + c.Service
	}
	return ""
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
		if storage, _ := m["storage"].(bool); storage {
			r.StorageVersion = str(m["name"])
		}
		if served, _ := m["served"].(bool); served {
			r.ServedVersions = append(r.ServedVersions, r.Group+"/"+str(m["name"]))
			r.Versions = append(r.Versions, str(m["name"]))
			if s, ok, _ := unstructured.NestedMap(m, "schema", "openAPIV3Schema"); ok {
				if r.Schemas == nil {
					r.Schemas = map[string]map[string]any{}
				}
				r.Schemas[str(m["name"])] = s
			}
		}
	}
	sort.Strings(r.ServedVersions)
	r.Conversion = crdConversion(obj)

	if obj.GetDeletionTimestamp() != nil {
		r.Message = "being deleted"
		return r
	}
	established, estMsg := ConditionHolds(obj, "Established", "True")
	names, namesMsg := ConditionHolds(obj, "NamesAccepted", "True")
	switch {
	case established && names:
		// CRD conditions carry no observedGeneration, so a True left from the previous spec
		// would pass a rename. acceptedNames is what the API server serves: it must be the
		// spec's names (the naming controller copies them once accepted).
		if diff := namesPending(obj); diff != "" {
			r.Message = "Established, but the API server has not accepted the current names yet (" + diff + ")"
			return r
		}
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

// namesPending compares spec.names with status.acceptedNames and names the first difference
// ("" when they agree). Fields the spec leaves empty are defaulted by the API server (singular,
// listKind) and not compared.
func namesPending(obj *unstructured.Unstructured) string {
	spec, _, _ := unstructured.NestedMap(obj.Object, "spec", "names")
	acc, ok, _ := unstructured.NestedMap(obj.Object, "status", "acceptedNames")
	if !ok {
		return "no status.acceptedNames"
	}
	for _, f := range []string{"kind", "plural", "singular", "listKind"} {
		if want := str(spec[f]); want != "" && want != str(acc[f]) {
			return fmt.Sprintf("%s %q, accepted %q", f, want, str(acc[f]))
		}
	}
	for _, f := range []string{"shortNames", "categories"} {
		if want, got := fmt.Sprint(spec[f]), fmt.Sprint(acc[f]); spec[f] != nil && want != got {
			return fmt.Sprintf("%s %s, accepted %s", f, want, got)
		}
	}
	return ""
}

func crdConversion(obj *unstructured.Unstructured) CRDConversion {
	c := CRDConversion{Strategy: "None"}
	if s, _, _ := unstructured.NestedString(obj.Object, "spec", "conversion", "strategy"); s != "" {
		c.Strategy = s
	}
	cc, _, _ := unstructured.NestedMap(obj.Object, "spec", "conversion", "webhook", "clientConfig")
	c.URL, _ = cc["url"].(string)
	ca, _ := cc["caBundle"].(string)
	c.CABundle = ca != ""
	if svc, ok := cc["service"].(map[string]any); ok {
		port := int64(443)
		switch p := svc["port"].(type) {
		case int64:
			port = p
		case float64:
			port = int64(p)
		}
		c.Service = fmt.Sprintf("%s/%s:%d%s", str(svc["namespace"]), str(svc["name"]), port, str(svc["path"]))
	}
	return c
}

// CRDName is the name a CRD for plural.group must have.
func CRDName(plural, group string) string { return fmt.Sprintf("%s.%s", plural, group) }
