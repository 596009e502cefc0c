package provider

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

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
