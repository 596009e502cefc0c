package provider

import (
	"fmt"
	"strings"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
	"k8s.io/apimachinery/pkg/api/validation/path"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/admission"
)

// nameProblem validates an object name (DNS-1123 subdomain, as most kinds require).
func nameProblem(n string) string {
	if n == "" {
		return "must not be empty"
	}
	if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
		return fmt.Sprintf("%q is not a valid object name: %s", n, strings.Join(errs, "; "))
	}
	return ""
}

// pathSegmentNamed are the groups whose kinds take any name that is a URL path segment (the
// API server validates them with path.ValidatePathSegmentName): RBAC's `system:metrics-server`.
var pathSegmentNamed = map[string]bool{"rbac.authorization.k8s.io": true}

// kindNameProblem validates an object name by its kind's rules: a path segment (no "/" or "%",
// not "." or "..") for every kind, the name of a URL; a DNS-1123 subdomain as well for all but
// the kinds that allow more. When the apiVersion is not known yet only the path-segment rule
// applies: the API server has the last word.
func kindNameProblem(apiVersion string, apiVersionKnown bool, n string) string {
	if n == "" {
		return "must not be empty"
	}
	if errs := path.IsValidPathSegmentName(n); len(errs) > 0 {
		return fmt.Sprintf("%q is not a valid object name: %s", n, strings.Join(errs, "; "))
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if !apiVersionKnown || err != nil || pathSegmentNamed[gv.Group] {
		return ""
	}
	return nameProblem(n)
}

// nameFailures validates a gate's name and optional namespace inputs at Check.
func nameFailures(inputs property.Map, nameKey, name, nsKey string, ns *string) []p.CheckFailure {
	var out []p.CheckFailure
	if isKnown(inputs, nameKey) {
		if msg := nameProblem(name); msg != "" {
			out = append(out, p.CheckFailure{Property: nameKey, Reason: msg})
		}
	}
	if ns != nil && *ns != "" && isKnown(inputs, nsKey) {
		if msg := admission.NamespaceProblem(*ns); msg != "" {
			out = append(out, p.CheckFailure{Property: nsKey, Reason: msg})
		}
	}
	return out
}

// keyFailures validates Secret key names (letters, digits, '-', '_', '.').
func keyFailures(inputs property.Map, field string, keys []string) []p.CheckFailure {
	if !isKnown(inputs, field) {
		return nil
	}
	var out []p.CheckFailure
	for i, k := range keys {
		if errs := validation.IsConfigMapKey(k); len(errs) > 0 {
			out = append(out, p.CheckFailure{Property: fmt.Sprintf("%s[%d]", field, i),
				Reason: fmt.Sprintf("%q is not a valid Secret key: %s", k, strings.Join(errs, "; "))})
		}
	}
	return out
}
