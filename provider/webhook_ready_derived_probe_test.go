package provider

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/property"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

// Issue #21 item 4, WebhookReady without `probe`: a configuration whose webhooks are registered
// (a caBundle, a URL) but do not answer must not pass, whatever its rules (wildcards included);
// one that answers must. The webhooks here are URLs on 127.0.0.1 (the Service-backed case runs
// in the network namespace harness, netns_test.go). The provider's default namespace is the
// test's own, where the probe is derived; every webhook is limited to it.
func TestWebhookReadyWithoutProbeNeedsAnAnswer(t *testing.T) {
	group := widgetCRD(t)
	rules := map[string]string{
		"ordinary rule": `{apiGroups: ["GROUP"], apiVersions: ["*"], operations: [CREATE, UPDATE], resources: [widgets]}`,
		// istiod's validator: every resource of its groups.
		"resources *":   `{apiGroups: ["GROUP"], apiVersions: ["*"], operations: [CREATE, UPDATE], resources: ["*"]}`,
		"resources */*": `{apiGroups: ["GROUP"], apiVersions: ["*"], operations: [CREATE, UPDATE], resources: ["*/*"]}`,
		// Kyverno's resource webhook: every group, every resource and subresource.
		"apiGroups * resources */*": `{apiGroups: ["*"], apiVersions: ["*"], operations: [CREATE, UPDATE, DELETE, CONNECT], resources: ["*/*"], scope: Namespaced}`,
		// A kind-wide subresource wildcard.
		"widgets/*": `{apiGroups: ["GROUP"], apiVersions: [v1], operations: [CREATE], resources: ["widgets/*"]}`,
	}
	for name, rule := range rules {
		for _, kind := range []string{"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"} {
			t.Run(name+", "+kind, func(t *testing.T) {
				ns := testenv.Namespace(t, "noprobe")
				wh := testenv.NewWebhook(t)
				cfg := "noprobe-" + ns
				applyConfiguration(t, fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: %[1]s
metadata: {name: %[2]s}
webhooks:
- name: hook.%[2]s.example.test
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
  timeoutSeconds: 3
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: %[3]s}}
  clientConfig: {url: "%[4]s", caBundle: %[5]s}
  rules: [`+strings.ReplaceAll(rule, "GROUP", group)+`]`, kind, cfg, ns, wh.URL(), wh.CABundle()))
				s := newServerWithConfig(t, map[string]property.Value{
					"kubeconfig": property.New(string(testenv.CP.Kubeconfig)), "namespace": property.New(ns)})
				key := "validatingWebhookConfiguration"
				if kind == "MutatingWebhookConfiguration" {
					key = "mutatingWebhookConfiguration"
				}
				// Near miss: registered with its caBundle, nothing answers.
				r := await(t, createAsync(t, s, "WebhookReady", props(key, cfg, "timeout", "2s")), 30*time.Second)
				if r.err == nil {
					t.Fatalf("passed while the webhook does not answer: %v", r.resp.Properties)
				}
				if !strings.Contains(r.err.Error(), "probe") {
					t.Errorf("the error does not say why: %v", r.err)
				}
				ch := createAsync(t, s, "WebhookReady", props(key, cfg, "timeout", "60s"))
				mustNotReturn(t, ch, time.Second)
				wh.Start(t)
				r = await(t, ch, 30*time.Second)
				if r.err != nil {
					t.Fatal(r.err)
				}
				if wh.Calls.Load() == 0 || !r.resp.Properties.Get("probed").AsBool() {
					t.Errorf("passed without an answer from the webhook: calls=%d outputs=%v", wh.Calls.Load(), r.resp.Properties)
				}
			})
		}
	}
}

// Rules that cover no kind the API server serves give nothing to derive a probe from: the gate
// waits, asking for `probe`, instead of passing on the configuration alone.
func TestWebhookReadyWithoutProbeNothingToDeriveWaits(t *testing.T) {
	ns := testenv.Namespace(t, "noderive")
	wh := testenv.NewWebhook(t)
	wh.Start(t) // answering: still no pass without a call that shows it
	cfg := "noderive-" + ns
	applyConfiguration(t, fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: %[1]s}
webhooks:
- name: hook.%[1]s.example.test
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
  timeoutSeconds: 3
  clientConfig: {url: "%[2]s", caBundle: %[3]s}
  rules: [{apiGroups: [nothing.readiness.test], apiVersions: ["*"], operations: [CREATE], resources: ["*"]}]`, cfg, wh.URL(), wh.CABundle()))
	r := await(t, createAsync(t, newServer(t), "WebhookReady", props("validatingWebhookConfiguration", cfg, "timeout", "2s")), 30*time.Second)
	if r.err == nil {
		t.Fatalf("passed with no probe to show the webhook answers: %v", r.resp.Properties)
	}
	for _, want := range []string{"no kind the API server serves matches the webhooks' rules", "give `probe`"} {
		if !strings.Contains(r.err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, r.err)
		}
	}
}
