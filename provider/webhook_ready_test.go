package provider

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/property"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

func widget(group, name string) string {
	return fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata: {name: %s, namespace: default}\nspec: {size: 1}", group, name)
}

func probeOf(group string) property.Value {
	return property.New(property.NewMap(map[string]property.Value{
		"apiVersion": property.New(group + "/v1"), "kind": property.New("Widget"),
		"metadata": property.New(property.NewMap(map[string]property.Value{"name": property.New("probe"), "namespace": property.New("default")})),
	}))
}

func TestWebhookReadyProbeWaitsForALateWebhook(t *testing.T) {
	group := widgetCRD(t)
	wh := testenv.NewWebhook(t)
	cfg := "widgets-" + strings.Split(group, ".")[0]
	wh.Register(t, cfg, group)

	// Field report 001: creating the resource before the webhook serves fails.
	_, err := testenv.Resource(t, testenv.Object(t, widget(group, "early"))).Create(context.Background(), testenv.Object(t, widget(group, "early")), metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
		t.Fatalf("want the field report's `failed calling webhook`, got %v", err)
	}

	s := newServer(t)
	ch := createAsync(t, s, "WebhookReady", props("validatingWebhookConfiguration", cfg, "probe", probeOf(group), "timeout", "60s"))
	mustNotReturn(t, ch, 1500*time.Millisecond) // connection refused: nothing listens yet
	wh.Start(t)
	r := await(t, ch, 30*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !r.resp.Properties.Get("probed").AsBool() || r.resp.Properties.Get("failurePolicy").AsString() != "Fail" {
		t.Errorf("outputs = %v", r.resp.Properties)
	}
	// What the gate promises: the resource can be created now. The probe persisted nothing.
	testenv.Apply(t, widget(group, "after"))
	if _, err := testenv.Resource(t, testenv.Object(t, widget(group, "probe"))).Get(context.Background(), "probe", metav1.GetOptions{}); err == nil {
		t.Error("the dry-run probe left an object behind")
	}

	// A webhook that denies the probe answered: serving.
	wh.Mode.Store("deny")
	if r := await(t, createAsync(t, s, "WebhookReady", props("validatingWebhookConfiguration", cfg, "probe", probeOf(group), "timeout", "30s")), 30*time.Second); r.err != nil {
		t.Fatalf("a denying webhook must count as serving: %v", r.err)
	}
	// One that answers 500 does not.
	wh.Mode.Store("error")
	r = await(t, createAsync(t, s, "WebhookReady", props("validatingWebhookConfiguration", cfg, "probe", probeOf(group), "timeout", "3s")), 30*time.Second)
	if r.err == nil || !strings.Contains(r.err.Error(), "dry-run probe") {
		t.Fatalf("a webhook answering 500 must not count as serving; got %v", r.err)
	}
}

func TestWebhookReadyServiceBackedWaitsForEndpointsAndCABundle(t *testing.T) {
	ns := testenv.Namespace(t, "wh")
	group := uniqueGroup(t)
	cfg := "svc-" + strings.Split(group, ".")[0]
	testenv.Apply(t, fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: webhook, namespace: %[1]s}
spec:
  selector: {app: webhook}
  ports: [{name: https, port: 443, targetPort: https}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: %[2]s
  annotations: {cert-manager.io/inject-ca-from: %[1]s/webhook-cert}
webhooks:
- name: validate.%[3]s
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
  clientConfig: {service: {name: webhook, namespace: %[1]s, port: 443, path: /validate}}
  rules: [{apiGroups: ["%[3]s"], apiVersions: ["*"], operations: [CREATE], resources: [things]}]`, ns, cfg, group))
	t.Cleanup(func() {
		_ = testenv.Dynamic(t).Resource(vwcResource).Delete(context.Background(), cfg, metav1.DeleteOptions{})
	})
	s := newServer(t)
	// No probe, and the rules cover no served kind, so none is derived: the API server never
	// dials the Service's 10.x address in this test (the passing case is in netns_test.go).
	ch := createAsync(t, s, "WebhookReady", props("validatingWebhookConfiguration", cfg, "timeout", "10s"))
	mustNotReturn(t, ch, time.Second) // caBundle empty, no pods
	testenv.Apply(t, deployment(ns, "webhook", "registry.local/webhook:1", 1))
	mustNotReturn(t, ch, 2*time.Second) // endpoints may be ready, but the caBundle is not injected
	// Play cert-manager's cainjector.
	cur, err := testenv.Dynamic(t).Resource(vwcResource).Get(context.Background(), cfg, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hooks := cur.Object["webhooks"].([]any)
	hooks[0].(map[string]any)["clientConfig"].(map[string]any)["caBundle"] = base64.StdEncoding.EncodeToString(testenv.IssueCertificate(t, "webhook", time.Hour).CAPEM)
	if _, err := testenv.Dynamic(t).Resource(vwcResource).Update(context.Background(), cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// caBundle injected, endpoints ready: still no answer from the webhook, so no pass; with no
	// served kind to derive a probe from, the gate asks for one.
	if r := await(t, ch, 60*time.Second); r.err == nil {
		t.Fatalf("passed on caBundle and endpoints alone: %v", r.resp.Properties)
	}
	r := await(t, createAsync(t, s, "WebhookReady", props("validatingWebhookConfiguration", cfg, "timeout", "5s")), 30*time.Second)
	if r.err == nil || !strings.Contains(r.err.Error(), "no kind the API server serves matches the webhooks' rules") {
		t.Fatalf("want a wait asking for a probe, got err=%v outputs=%v", r.err, r.resp.Properties)
	}
}

// Item 5: a policy that denies the probe before the target (a policy engine's mutating webhook,
// a ValidatingAdmissionPolicy) may do so forever: the target's webhooks must then each answer a
// direct AdmissionReview, and the gate passes once they do.
func TestWebhookReadyProvesATargetBehindADenyingPolicy(t *testing.T) {
	for _, blocker := range []string{"policy webhook", "ValidatingAdmissionPolicy"} {
		t.Run(blocker, func(t *testing.T) {
			group := widgetCRD(t)
			base := strings.Split(group, ".")[0]
			target := testenv.NewWebhook(t)
			target.RegisterAs(t, "ValidatingWebhookConfiguration", "target-"+base, "Fail", group, "widgets")
			want := "probe denied by policy webhook"
			if blocker == "policy webhook" {
				policy := testenv.NewWebhook(t)
				policy.Mode.Store("deny-named")
				policy.Start(t)
				hook := policy.RegisterAs(t, "MutatingWebhookConfiguration", "policy-"+base, "Fail", group, "widgets")
				deniedWithin(t, group, `admission webhook "`+hook+`" denied the request`)
			} else {
				want = "probe denied by an admission policy"
				denyByPolicy(t, "deny-"+base, group)
			}
			s := newServer(t)
			gate := func(timeout string) <-chan gateResult {
				return createAsync(t, s, "WebhookReady", props("validatingWebhookConfiguration", "target-"+base, "probe", generatedProbeOf(group), "timeout", timeout))
			}
			// Near miss: the policy denies, the target does not serve.
			r := await(t, gate("2s"), 30*time.Second)
			if r.err == nil {
				t.Fatalf("passed while the target does not serve: %v", r.resp.Properties)
			}
			for _, w := range []string{want, "calling webhook validating.target-" + base + "." + group + " directly instead", "connection refused"} {
				if !strings.Contains(r.err.Error(), w) {
					t.Errorf("error lacks %q: %v", w, r.err)
				}
			}
			ch := gate("60s")
			mustNotReturn(t, ch, time.Second)
			// Near miss: something answers on the target's address, but no AdmissionReview.
			target.Mode.Store("stranger")
			target.Start(t)
			mustNotReturn(t, ch, 1500*time.Millisecond)
			// The target answers (a denial is an answer), the policy still denies the probe.
			target.Mode.Store("deny")
			r = await(t, ch, 30*time.Second)
			if r.err != nil {
				t.Fatal(r.err)
			}
			if !r.resp.Properties.Get("probed").AsBool() {
				t.Errorf("outputs = %v", r.resp.Properties)
			}
		})
	}
}

// denyByPolicy makes a ValidatingAdmissionPolicy deny every Widget of group, and waits until
// the API server enforces it.
func denyByPolicy(t *testing.T, name, group string) {
	t.Helper()
	testenv.Apply(t, fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: %[1]s}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules: [{apiGroups: ["%[2]s"], apiVersions: ["*"], operations: [CREATE], resources: [widgets]}]
  validations: [{expression: "false", message: "no widgets here"}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: %[1]s}
spec: {policyName: %[1]s, validationActions: [Deny]}`, name, group))
	t.Cleanup(func() {
		for _, doc := range []string{"ValidatingAdmissionPolicyBinding", "ValidatingAdmissionPolicy"} {
			o := testenv.Object(t, "apiVersion: admissionregistration.k8s.io/v1\nkind: "+doc+"\nmetadata: {name: "+name+"}")
			_ = testenv.Resource(t, o).Delete(context.Background(), name, metav1.DeleteOptions{})
		}
	})
	deniedWithin(t, group, "ValidatingAdmissionPolicy")
}

// deniedWithin waits (up to 30 s) until a dry-run create of a Widget of group is refused with
// a message containing want: the policy is enforced, and the API server's first requests for
// a new kind (which can take seconds) are behind us.
func deniedWithin(t *testing.T, group, want string) {
	t.Helper()
	w := testenv.Object(t, widget(group, "policy-check"))
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := testenv.Resource(t, w).Create(context.Background(), w, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil && strings.Contains(err.Error(), want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the policy is not enforced: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
