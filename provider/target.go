package provider

import (
	"fmt"
	"strings"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
	"k8s.io/apimachinery/pkg/api/validation/path"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/admission"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/status"
)

// target is what a gate watches: a kind in a namespace, one object by name or all matching a
// selector.
type target struct {
	gvk       schema.GroupVersionKind
	namespace string // the requested namespace (defaulted); ignored for cluster-scoped kinds
	name      string
	selector  labels.Selector
	// hint marks a lookup that only adds to a message or fails early (never passes a gate):
	// what it judged is proven only when the gate fails (see run.checking).
	hint bool
}

func (t target) String() string {
	var b strings.Builder
	b.WriteString(t.gvk.Kind)
	if t.name != "" {
		b.WriteString(" ")
		if t.namespace != "" {
			b.WriteString(t.namespace + "/")
		}
		b.WriteString(t.name)
	} else {
		fmt.Fprintf(&b, "s matching %q", t.selector.String())
		if t.namespace != "" {
			b.WriteString(" in " + t.namespace)
		}
	}
	return b.String()
}

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

// The built-in types several gates read.
var (
	secretGVK   = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	serviceGVK  = schema.GroupVersionKind{Version: "v1", Kind: "Service"}
	crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	// The admission configuration kinds: WebhookReady's targets, what AdmissionReady and a
	// `service` target read cluster-wide, a release's or chart's webhooks.
	mwcGVK      = schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "MutatingWebhookConfiguration"}
	vwcGVK      = schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingWebhookConfiguration"}
	vwcResource = vwcGVK.GroupVersion().WithResource("validatingwebhookconfigurations")
)

// rolloutKinds: the kinds RolloutReady (and HelmReleaseReady's rollouts) judge, and how each one's rollout is read.
var rolloutKinds = map[string]struct {
	gv   schema.GroupVersion
	eval func(*unstructured.Unstructured) status.Rollout
}{
	"Deployment":  {schema.GroupVersion{Group: "apps", Version: "v1"}, status.DeploymentRollout},
	"StatefulSet": {schema.GroupVersion{Group: "apps", Version: "v1"}, status.StatefulSetRollout},
	"DaemonSet":   {schema.GroupVersion{Group: "apps", Version: "v1"}, status.DaemonSetRollout},
	"Job":         {schema.GroupVersion{Group: "batch", Version: "v1"}, status.JobDone},
}
