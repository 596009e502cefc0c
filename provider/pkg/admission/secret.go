package admission

import (
	"encoding/base64"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// IsSecret says whether o is a core Secret, whose data is never quoted.
func IsSecret(o *unstructured.Unstructured) bool {
	return o.GetKind() == "Secret" && o.GroupVersionKind().Group == ""
}

// SecretRedactor replaces the values of a Secret's data and stringData (as given, and in their
// other encoding) in a message; for any other kind it returns the message unchanged. A webhook's
// denial may quote the object.
func SecretRedactor(o *unstructured.Unstructured) func(string) string {
	if !IsSecret(o) {
		return func(s string) string { return s }
	}
	var vals []string
	add := func(v string) {
		if len(v) >= 3 {
			vals = append(vals, v)
		}
	}
	data, _, _ := unstructured.NestedMap(o.Object, "data")
	for _, v := range data {
		if s, ok := v.(string); ok {
			add(s)
			if d, err := base64.StdEncoding.DecodeString(s); err == nil {
				add(string(d))
			}
		}
	}
	sd, _, _ := unstructured.NestedMap(o.Object, "stringData")
	for _, v := range sd {
		if s, ok := v.(string); ok {
			add(s)
			add(base64.StdEncoding.EncodeToString([]byte(s)))
		}
	}
	sort.Slice(vals, func(i, j int) bool { return len(vals[i]) > len(vals[j]) })
	return func(s string) string {
		for _, v := range vals {
			s = strings.ReplaceAll(s, v, "<redacted>")
		}
		return s
	}
}
