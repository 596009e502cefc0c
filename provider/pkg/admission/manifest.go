package admission

import (
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/validation/path"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
)

// MaxManifestBytes is the API server's default limit on a request body (3 MiB): a larger object
// is refused with "Request entity too large" on every try.
const MaxManifestBytes = 3 << 20

// ManifestProblem says what is wrong with a manifest the gate will dry-run create (AdmissionReady's
// objects, a probe), or "": what the API server would refuse on every try, so waiting cannot help.
// needName: a probe may leave out its name (it gets generateName). Never quotes a value that
// could be data (only apiVersion, kind, names and namespaces, which are not).
func ManifestProblem(m map[string]any, needName bool) string {
	u := &unstructured.Unstructured{Object: m}
	av, _ := m["apiVersion"].(string)
	if av == "" {
		return "apiVersion is missing (or not a string)"
	}
	if _, err := schema.ParseGroupVersion(av); err != nil {
		return fmt.Sprintf("%q is not an apiVersion such as v1, apps/v1 or external-secrets.io/v1beta1", av)
	}
	k, _ := m["kind"].(string)
	switch {
	case k == "":
		return "kind is missing (or not a string)"
	case strings.ContainsAny(k, " /."):
		return fmt.Sprintf("%q is not a kind such as ConfigMap", k)
	case k == "List" || (strings.HasSuffix(k, "List") && m["items"] != nil):
		return fmt.Sprintf("%s is a list of objects, which cannot be created as one: give each object on its own", k)
	}
	md, hasMD := m["metadata"]
	mdMap, ok := md.(map[string]any)
	if hasMD && !ok {
		return "metadata must be an object (a map with name, namespace, labels, ...)"
	}
	if needName && !hasMD {
		return "metadata is missing (it needs name or generateName)"
	}
	for _, f := range []string{"name", "generateName", "namespace"} {
		if v, ok := mdMap[f]; ok {
			if _, isStr := v.(string); !isStr {
				return fmt.Sprintf("metadata.%s must be a string", f)
			}
		}
	}
	// Names are not all DNS names (RBAC's "system:..."), but each becomes one segment of an API path.
	if errs := path.IsValidPathSegmentName(u.GetName()); len(errs) > 0 {
		return fmt.Sprintf("metadata.name %q %s", u.GetName(), strings.Join(errs, "; "))
	}
	if errs := path.IsValidPathSegmentPrefix(u.GetGenerateName()); len(errs) > 0 {
		return fmt.Sprintf("metadata.generateName %q %s", u.GetGenerateName(), strings.Join(errs, "; "))
	}
	if needName && u.GetName() == "" && u.GetGenerateName() == "" {
		return "metadata.name (or metadata.generateName) is missing"
	}
	if ns := u.GetNamespace(); ns != "" {
		if msg := NamespaceProblem(ns); msg != "" {
			return "metadata.namespace: " + msg
		}
	}
	if b, err := json.Marshal(m); err != nil {
		return "it cannot be encoded as JSON"
	} else if len(b) > MaxManifestBytes {
		return fmt.Sprintf("it is %d bytes as JSON, over the API server's default request limit of %d (it would be refused "+
			"with \"Request entity too large\" on every try)", len(b), MaxManifestBytes)
	}
	return ""
}

// NameProblem says why n is not an object name (a DNS-1123 subdomain, as most kinds require), or "".
func NameProblem(n string) string {
	if n == "" {
		return "must not be empty"
	}
	if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
		return fmt.Sprintf("%q is not a valid object name: %s", n, strings.Join(errs, "; "))
	}
	return ""
}

// NamespaceProblem says why n is not a namespace name (a DNS-1123 label), or "".
func NamespaceProblem(n string) string {
	if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
		return fmt.Sprintf("%q is not a valid namespace: %s", n, strings.Join(errs, "; "))
	}
	return ""
}
