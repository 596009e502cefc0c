package kube

import (
	"encoding/base64"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/crdschema"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/status"
)

// PublicSecretKeys are Secret keys whose values are public by nature and may be kept in memory
// for evaluation (a TLS certificate chain and its CA), reduced to their CERTIFICATE blocks: a
// bundle that also holds a private key loses it. Every other value is replaced by a presence
// marker before it enters a cache.
var PublicSecretKeys = map[string]bool{"tls.crt": true, "ca.crt": true}

// SecretPresent is the marker a trimmed Secret holds for a non-empty value; an empty value
// stays empty so "present but empty" can still be told apart.
const SecretPresent = "cHJlc2VudA==" // base64("present"): a valid base64 string, never real data

// trimSecret drops Secret values (keeping key names, emptiness and public certificates) and
// the last-applied annotation, which can hold the whole Secret in clear text.
// A tls.key that is the private key of tls.crt's certificate becomes status.KeyPairsMarker, so
// that a gate can still tell a matching pair (CertificateReady before Ready=True) without the key.
func trimSecret(u *unstructured.Unstructured) *unstructured.Unstructured {
	data, _, _ := unstructured.NestedMap(u.Object, "data")
	pairs := false
	if crt, _ := data["tls.crt"].(string); crt != "" {
		if leaf, err := status.LeafCertificate(crt); err == nil {
			key, _ := data["tls.key"].(string)
			pairs = status.KeyPairs(key, leaf) == nil
		}
	}
	for k, v := range data {
		s, _ := v.(string)
		switch {
		case s == "":
		case PublicSecretKeys[k]:
			data[k] = publicPart(s)
		case k == "tls.key" && pairs:
			data[k] = status.KeyPairsMarker
		default:
			data[k] = SecretPresent
		}
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

// publicPart keeps only the certificates of a base64 PEM value; a value that is not PEM at all
// becomes the presence marker (nothing of it is kept).
func publicPart(b64 string) string {
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return SecretPresent
	}
	certs := status.PublicCertificates(raw)
	if certs == "" {
		return SecretPresent
	}
	return base64.StdEncoding.EncodeToString([]byte(certs))
}

// trimCRD drops the OpenAPI schemas, which are most of a CRD's size. A CRD with a conversion
// webhook keeps the skeleton of each schema that crdschema.MinimalObject reads (the required fields
// and their constraints): CrdReady builds its dry-run conversion probe from it.
func trimCRD(u *unstructured.Unstructured) *unstructured.Unstructured {
	strategy, _, _ := unstructured.NestedString(u.Object, "spec", "conversion", "strategy")
	versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
	for _, v := range versions {
		if m, ok := v.(map[string]any); ok {
			s, _, _ := unstructured.NestedMap(m, "schema", "openAPIV3Schema")
			delete(m, "schema")
			if strategy == "Webhook" && s != nil {
				m["schema"] = map[string]any{"openAPIV3Schema": crdschema.RequiredSkeleton(s)}
			}
		}
	}
	if versions != nil {
		_ = unstructured.SetNestedSlice(u.Object, versions, "spec", "versions")
	}
	u.SetManagedFields(nil)
	return u
}

// trimHelmRecord drops the payload of a Helm release record kept in a ConfigMap (Helm's
// configmap driver: labelled owner=helm, the release's values and manifest under `release`);
// other ConfigMaps are kept whole, as gates may judge their data.
func trimHelmRecord(u *unstructured.Unstructured) *unstructured.Unstructured {
	if u.GetLabels()["owner"] != "helm" {
		return u
	}
	if _, ok, _ := unstructured.NestedString(u.Object, "data", "release"); ok {
		_ = unstructured.SetNestedField(u.Object, "", "data", "release")
	}
	u.SetManagedFields(nil)
	return u
}
