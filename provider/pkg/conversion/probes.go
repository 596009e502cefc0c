package conversion

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/crdschema"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/status"
)

// ProbePrefix is the generateName of a probe without a name; the API server's generated suffix
// is stripped from messages, so that a progress message does not change with every round.
const ProbePrefix = "readiness-conversion-probe-"

// Probe is the object dry-run created through version v of crd: the user's conversionProbes
// entry for that kind and version, or a minimal one from v's schema; a namespaced one in its own
// namespace, else in namespace (the provider's default; "default" when empty). A namespace that
// does not exist is waited for, the dry-run's answer saying so.
func Probe(crd status.CRDResult, v string, probes []map[string]any, namespace string) *unstructured.Unstructured {
	gv := schema.GroupVersion{Group: crd.Group, Version: v}.String()
	var obj *unstructured.Unstructured
	for _, p := range probes {
		u := (&unstructured.Unstructured{Object: p}).DeepCopy()
		if u.GetAPIVersion() == gv && u.GetKind() == crd.Kind {
			obj = u
			break
		}
	}
	if obj == nil {
		obj = &unstructured.Unstructured{Object: crdschema.MinimalObject(crd.Schemas[v])}
		obj.SetAPIVersion(gv)
		obj.SetKind(crd.Kind)
	}
	if obj.GetName() == "" && obj.GetGenerateName() == "" {
		obj.SetGenerateName(ProbePrefix)
	}
	if crd.Scope != "Namespaced" {
		obj.SetNamespace("")
	} else if obj.GetNamespace() == "" {
		if namespace == "" {
			namespace = "default"
		}
		obj.SetNamespace(namespace)
	}
	return obj
}

// Note is a line for the log, said once per gate under Key.
type Note struct{ Key, Text string }

// MatchProbes checks that every conversionProbes entry is a kind of a checked CRD (else a typo:
// an error) and not in its storage version (a create there converts nothing: an error). A probe
// for a CRD without a conversion webhook, or for a version it does not serve, is only noted: a
// probe written for another release of the CRD is not used, and charts drop conversion webhooks.
// The notes are those made before the error, if any.
func MatchProbes(probes []map[string]any, crds []status.CRDResult) ([]Note, error) {
	var notes []Note
	for i, p := range probes {
		u := (&unstructured.Unstructured{Object: p}).DeepCopy()
		gv, _ := schema.ParseGroupVersion(u.GetAPIVersion())
		var kinds []string
		matched := false
		for _, res := range crds {
			kinds = append(kinds, res.Group+" "+res.Kind)
			if res.Group != gv.Group || res.Kind != u.GetKind() {
				continue
			}
			matched = true
			key := fmt.Sprintf("conversionProbes[%d]", i)
			switch {
			case !res.Conversion.Webhook():
				notes = append(notes, Note{key, fmt.Sprintf("conversionProbes[%d] is not used: CRD %s.%s declares conversion strategy %s (no conversion webhook)",
					i, res.Plural, res.Group, res.Conversion.Strategy)})
			case !slices.Contains(res.Versions, gv.Version):
				notes = append(notes, Note{key, fmt.Sprintf("conversionProbes[%d] is not used: CRD %s.%s does not serve version %s (served: %s)",
					i, res.Plural, res.Group, gv.Version, strings.Join(res.Versions, ", "))})
			case gv.Version == res.StorageVersion:
				return notes, fmt.Errorf("conversionProbes[%d]: %s is the storage version of CRD %s.%s: creating it converts nothing; "+
					"write the probe in another served version (served: %s)", i, gv.Version, res.Plural, res.Group, strings.Join(res.Versions, ", "))
			}
		}
		if !matched {
			return notes, fmt.Errorf("conversionProbes[%d]: %s %s is not a kind of the checked CRDs (%s)", i, u.GetAPIVersion(), u.GetKind(), strings.Join(kinds, ", "))
		}
	}
	return notes, nil
}
