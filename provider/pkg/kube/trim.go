package kube

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// PublicSecretKeys are Secret keys whose values are public by nature and may be kept in memory
// for evaluation (a TLS certificate chain and its CA). Private keys and every other value are
// replaced by a presence marker before they enter a cache.
var PublicSecretKeys = map[string]bool{"tls.crt": true, "ca.crt": true}

// SecretPresent is the marker a trimmed Secret holds for a non-empty value; an empty value
// stays empty so "present but empty" can still be told apart.
const SecretPresent = "cHJlc2VudA==" // base64("present"): a valid base64 string, never real data

// trimSecret drops Secret values (keeping key names, emptiness and public certificates) and
// the last-applied annotation, which can hold the whole Secret in clear text.
func trimSecret(u *unstructured.Unstructured) *unstructured.Unstructured {
	data, _, _ := unstructured.NestedMap(u.Object, "data")
	for k, v := range data {
		s, _ := v.(string)
		if PublicSecretKeys[k] || s == "" {
			continue
		}
		data[k] = SecretPresent
	}
	if data != nil {
		_ = unstructured.SetNestedMap(u.Object, data, "data")
	}
	unstructured.RemoveNestedField(u.Object, "stringData")
	ann := u.GetAnnotations()
	if _, ok := ann["kubectl.kubernetes.io/last-applied-configuration"]; ok {
		delete(ann, "kubectl.kubernetes.io/last-applied-configuration")
		u.SetAnnotations(ann)
	}
	u.SetManagedFields(nil)
	return u
}

// trimCRD drops the OpenAPI schemas, which are most of a CRD's size and never read by a gate.
func trimCRD(u *unstructured.Unstructured) *unstructured.Unstructured {
	versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
	for _, v := range versions {
		if m, ok := v.(map[string]any); ok {
			delete(m, "schema")
		}
	}
	if versions != nil {
		_ = unstructured.SetNestedSlice(u.Object, versions, "spec", "versions")
	}
	u.SetManagedFields(nil)
	return u
}
