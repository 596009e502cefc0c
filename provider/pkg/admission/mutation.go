package admission

import (
	"encoding/base64"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/jsonvalue"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// systemLabels are added by the API server itself, not by a webhook.
var systemLabels = map[string]bool{"kubernetes.io/metadata.name": true}

// MutatedBy says whether the dry-run result out differs from the input in: a value the input
// sets (every top-level field but apiVersion, kind, metadata and status; a list must keep its
// length and each element its values), or its labels and annotations (changed or, for a create,
// added). Fields the input leaves out are the API server's defaults and do not count; for an
// update, labels and annotations the existing object has are not the webhook's either. A
// Secret's stringData is compared as the data the API server turns it into.
func MutatedBy(in, out *unstructured.Unstructured, update bool) bool {
	want := in.Object
	if IsSecret(in) {
		if sd, ok := want["stringData"].(map[string]any); ok {
			want = make(map[string]any, len(in.Object))
			for k, v := range in.Object {
				want[k] = v
			}
			data := map[string]any{}
			if d, ok := in.Object["data"].(map[string]any); ok {
				for k, v := range d {
					data[k] = v
				}
			}
			for k, v := range sd {
				if s, ok := v.(string); ok {
					data[k] = base64.StdEncoding.EncodeToString([]byte(s))
				}
			}
			delete(want, "stringData")
			want["data"] = data
		}
	}
	for k, v := range want {
		switch k {
		case "apiVersion", "kind", "metadata", "status":
			continue
		}
		if !subsetOf(v, out.Object[k]) {
			return true
		}
	}
	for _, field := range []string{"labels", "annotations"} {
		have, _, _ := unstructured.NestedStringMap(in.Object, "metadata", field)
		got, _, _ := unstructured.NestedStringMap(out.Object, "metadata", field)
		for k, v := range have {
			if g, ok := got[k]; !ok || g != v {
				return true
			}
		}
		if update {
			continue
		}
		for k := range got {
			if _, ok := have[k]; !ok && !(field == "labels" && systemLabels[k]) {
				return true
			}
		}
	}
	return false
}

// subsetOf says whether every value want sets is in got: maps by key (got may have more keys:
// defaults), lists element by element with the same length, scalars equal (numbers by value,
// quantities such as "500m" and "0.5" by amount). An empty map or list, or null, in want
// matches a missing value (the API server drops empty fields).
func subsetOf(want, got any) bool {
	switch w := want.(type) {
	case nil:
		return true
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return len(w) == 0 && got == nil
		}
		for k, v := range w {
			if !subsetOf(v, g[k]) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok {
			return len(w) == 0 && got == nil
		}
		if len(w) != len(g) {
			return false
		}
		for i := range w {
			if !subsetOf(w[i], g[i]) {
				return false
			}
		}
		return true
	case string:
		g, ok := got.(string)
		if !ok {
			return false
		}
		if w == g {
			return true
		}
		qw, err1 := resource.ParseQuantity(w)
		qg, err2 := resource.ParseQuantity(g)
		return err1 == nil && err2 == nil && qw.Cmp(qg) == 0
	}
	if wn, ok := jsonvalue.Number(want); ok {
		gn, ok := jsonvalue.Number(got)
		return ok && wn == gn
	}
	return want == got
}
