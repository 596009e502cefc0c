package testenv

import (
	"context"
	"strings"
	"testing"
	"time"

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

// RegisterPods creates a configuration of kind (Validating or Mutating) whose one webhook, with
// failurePolicy policy, intercepts CREATE and UPDATE of Pods in namespace ns only (so it never
// meets another test's Pods); deleted after the test. It returns the webhook's name.
func (w *Webhook) RegisterPods(t testing.TB, kind, name, policy, ns string) string {
	prefix := strings.ToLower(strings.TrimSuffix(kind, "WebhookConfiguration")) + "." + name + "."
	hook := prefix + "pods.test"
	doc := strings.Replace(w.ConfigurationFor(kind, name, "", "pods"), "failurePolicy: Fail", "failurePolicy: "+policy, 1)
	doc = strings.Replace(doc, "- name: "+prefix+"\n", "- name: "+hook+"\n", 1)
	doc = strings.Replace(doc, "  rules:", "  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: "+ns+"}}\n  rules:", 1)
	Apply(t, doc)
	gvr := vwcGVR
	if kind == "MutatingWebhookConfiguration" {
		gvr.Resource = "mutatingwebhookconfigurations"
	}
	t.Cleanup(func() { _ = Dynamic(t).Resource(gvr).Delete(context.Background(), name, metav1.DeleteOptions{}) })
	return hook
}

// ServiceAccountReady waits (up to 30 s) until the controller-manager created namespace ns's
// default ServiceAccount, without which the API server refuses Pods (even in a dry run).
func ServiceAccountReady(t testing.TB, ns string) {
	t.Helper()
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := Dynamic(t).Resource(gvr).Namespace(ns).Get(context.Background(), "default", metav1.GetOptions{})
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("namespace %s has no default ServiceAccount: %v", ns, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
