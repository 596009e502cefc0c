package session

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Target is what a gate watches: a kind in a namespace, one object by name or all matching a
// selector.
type Target struct {
	GVK       schema.GroupVersionKind
	Namespace string // the requested namespace (defaulted); ignored for cluster-scoped kinds
	Name      string
	Selector  labels.Selector
	// Hint marks a lookup that only adds to a message or fails early (never passes a gate):
	// what it judged is proven only when the gate fails (see Run.Checking).
	Hint bool
}

func (t Target) String() string {
	var b strings.Builder
	b.WriteString(t.GVK.Kind)
	if t.Name != "" {
		b.WriteString(" ")
		if t.Namespace != "" {
			b.WriteString(t.Namespace + "/")
		}
		b.WriteString(t.Name)
	} else {
		fmt.Fprintf(&b, "s matching %q", t.Selector.String())
		if t.Namespace != "" {
			b.WriteString(" in " + t.Namespace)
		}
	}
	return b.String()
}

// The built-in types several gates read.
var (
	SecretGVK   = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	ServiceGVK  = schema.GroupVersionKind{Version: "v1", Kind: "Service"}
	CRDResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	// The admission configuration kinds: WebhookReady's targets, what AdmissionReady and a
	// `service` target read cluster-wide, a release's or chart's webhooks.
	MWCGVK      = schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "MutatingWebhookConfiguration"}
	VWCGVK      = schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingWebhookConfiguration"}
	VWCResource = VWCGVK.GroupVersion().WithResource("validatingwebhookconfigurations")
)
