package testenv

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/readiness-io/pulumi-readiness/internal/fakes"
)

// Webhook wraps fakes.Webhook for tests: failures end the test, cleanup is automatic.
type Webhook struct{ *fakes.Webhook }

// NewWebhook reserves a loopback port for a webhook that serves only once started.
func NewWebhook(t testing.TB) *Webhook {
	t.Helper()
	w, err := fakes.NewWebhook()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	return &Webhook{w}
}

// Start begins serving. It reports failure with t.Error, so it may be called from the
// goroutine that plays a webhook pod becoming ready late.
func (w *Webhook) Start(t testing.TB) {
	if err := w.Webhook.Start(); err != nil {
		t.Errorf("starting the test webhook: %v", err)
	}
}

var vwcGVR = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"}

// Register creates the webhook's configuration for group's widgets, deleted after the test.
func (w *Webhook) Register(t testing.TB, name, group string) {
	Apply(t, w.Configuration(name, group))
	t.Cleanup(func() { _ = Dynamic(t).Resource(vwcGVR).Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// RegisterAs creates a configuration of kind (Validating or Mutating) for group's resources,
// with failurePolicy policy, deleted after the test; it returns the webhook's name.
func (w *Webhook) RegisterAs(t testing.TB, kind, name, policy, group string, resources ...string) string {
	doc := strings.Replace(w.ConfigurationFor(kind, name, group, resources...), "failurePolicy: Fail", "failurePolicy: "+policy, 1)
	Apply(t, doc)
	gvr := vwcGVR
	if kind == "MutatingWebhookConfiguration" {
		gvr.Resource = "mutatingwebhookconfigurations"
	}
	t.Cleanup(func() { _ = Dynamic(t).Resource(gvr).Delete(context.Background(), name, metav1.DeleteOptions{}) })
	return strings.ToLower(strings.TrimSuffix(kind, "WebhookConfiguration")) + "." + name + "." + group
}
