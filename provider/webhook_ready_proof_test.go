package provider

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

// What a WebhookReady probe's answer proves (see probe.Webhook.unproven), against the real API
// server, each near miss beside the state that must pass: a denial by another webhook is no
// proof, nor an admission without a failurePolicy Ignore webhook or without a webhook the probe
// does not reach; a policy that denies the probe before its target is met with direct calls.

// An admitted dry-run proves a failurePolicy Fail webhook answered only if the API server called
// it: a webhook whose rules, objectSelector, namespaceSelector or matchConditions leave the probe
// out is skipped, and the dry-run is admitted while its server is down. Each near miss below is
// such a webhook with its server down (the gate must not pass, and says why the probe does not
// reach it), beside the same webhook serving (a direct AdmissionReview proves it answers).

// reachHook is one webhook entry of a configuration, served by w, for group's resource, with
// extra YAML (selectors, matchConditions) appended.
func reachHook(w *testenv.Webhook, name, group, resource, extra string) string {
	return fmt.Sprintf(`- name: %s
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
  timeoutSeconds: 3
  clientConfig: {url: "%s", caBundle: %s}
  rules: [{apiGroups: ["%s"], apiVersions: ["*"], operations: [CREATE, UPDATE], resources: ["%s"]}]
%s`, name, w.URL(), w.CABundle(), group, resource, extra)
}

func applyReachConfig(t *testing.T, name string, hooks ...string) {
	t.Helper()
	testenv.Apply(t, "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {name: "+name+"}\nwebhooks:\n"+strings.Join(hooks, ""))
	t.Cleanup(func() {
		_ = testenv.Dynamic(t).Resource(vwcResource).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

func TestWebhookReadyAdmittedProbeProvesOnlyWebhooksItReaches(t *testing.T) {
	for _, tc := range []struct {
		name  string
		extra string // YAML appended to the down webhook's entry
		other bool   // the down webhook handles gadgets, not widgets (rules)
		pair  bool   // a second webhook, serving, that the probe does reach
		deny  bool   // the second webhook denies the probe (its answer, not the down webhook's)
		want  []string
	}{
		{name: "objectSelector", extra: "  objectSelector: {matchLabels: {tier: never}}\n",
			want: []string{"its objectSelector", `does not match the probe's labels`}},
		{name: "namespaceSelector", extra: "  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: elsewhere}}\n",
			want: []string{"its namespaceSelector", `namespace default`}},
		{name: "rules", other: true, want: []string{"its rules", "widgets"}},
		{name: "matchConditions", extra: "  matchConditions: [{name: never, expression: \"false\"}]\n",
			want: []string{"matchConditions", "not evaluated"}},
		{name: "two webhooks", other: true, pair: true, want: []string{"its rules", "widgets"}},
		// Both intercept the probe; the validating webhooks are called in parallel and the API
		// server reports one error: the other's denial says nothing of the down one.
		{name: "denial by the other webhook", pair: true, deny: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			group := widgetCRD(t)
			base := strings.Split(group, ".")[0]
			cfg := "reach-" + base
			down := testenv.NewWebhook(t)
			hook := "down." + group
			resource := "widgets"
			if tc.other {
				resource = "gadgets"
			}
			hooks := []string{reachHook(down, hook, group, resource, tc.extra)}
			if tc.pair {
				up := testenv.NewWebhook(t)
				if tc.deny {
					up.Mode.Store("deny")
				}
				up.Start(t)
				hooks = append([]string{reachHook(up, "up."+group, group, "widgets", "")}, hooks...)
			}
			applyReachConfig(t, cfg, hooks...)
			// The trap: the API server admits the dry-run although the webhook's server is down.
			w := testenv.Object(t, widget(group, "trap"))
			if _, err := testenv.Resource(t, w).Create(context.Background(), w, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil && !tc.deny {
				t.Fatalf("the API server was expected to admit a probe the webhook does not intercept: %v", err)
			}
			s := newServer(t)
			gate := func(timeout string) <-chan gateResult {
				return createAsync(t, s, "WebhookReady", props("validatingWebhookConfiguration", cfg, "probe", probeOf(group), "timeout", timeout))
			}
			r := await(t, gate("2s"), 30*time.Second)
			if r.err == nil {
				t.Fatalf("passed on an admitted dry-run that never reached webhook %s (its server is down): %v", hook, r.resp.Properties)
			}
			want := []string{"connection refused"}
			if !tc.deny {
				want = append(want, fmt.Sprintf("the probe is not intercepted by webhook %q", hook))
			}
			for _, want := range append(want, tc.want...) {
				if !strings.Contains(r.err.Error(), want) {
					t.Errorf("error lacks %q: %v", want, r.err)
				}
			}
			// The webhook serves: its direct answer is the proof.
			down.Start(t)
			calls := down.Calls.Load()
			r = await(t, gate("30s"), 30*time.Second)
			if r.err != nil {
				t.Fatal(r.err)
			}
			if !r.resp.Properties.Get("probed").AsBool() {
				t.Errorf("outputs = %v", r.resp.Properties)
			}
			if down.Calls.Load() == calls {
				t.Errorf("passed without calling webhook %s", hook)
			}
		})
	}
}

// A Service-backed webhook the probe does not reach needs a direct call through the API server's
// service proxy; a provider that may not make it cannot prove the webhook answers: fail at once
// naming the webhook, why the probe does not reach it, and what to do. (The objectSelector keeps
// the API server from ever calling the Service, and the proxy call is refused before any dial.)
func TestWebhookReadyUnreachedServiceWebhookWithoutServiceProxyFailsAtOnce(t *testing.T) {
	ns := testenv.Namespace(t, "unreached")
	group := widgetCRD(t)
	cfg := "unreached-" + ns
	hook := "validate." + group
	testenv.Apply(t, fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: hook, namespace: %[1]s}
spec:
  selector: {app: hook}
  ports: [{name: https, port: 443, targetPort: https}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: %[2]s}
webhooks:
- name: %[3]s
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
  objectSelector: {matchLabels: {tier: never}}
  clientConfig: {service: {name: hook, namespace: %[1]s, port: 443, path: /validate}, caBundle: %[5]s}
  rules: [{apiGroups: ["%[4]s"], apiVersions: ["*"], operations: [CREATE], resources: [widgets]}]`,
		ns, cfg, hook, group, base64.StdEncoding.EncodeToString(testenv.IssueCertificate(t, "hook."+ns+".svc", time.Hour).CAPEM)))
	t.Cleanup(func() {
		_ = testenv.Dynamic(t).Resource(vwcResource).Delete(context.Background(), cfg, metav1.DeleteOptions{})
	})
	testenv.Apply(t, deployment(ns, "hook", "registry.local/hook:1", 1))
	user := "unreached-" + ns
	// The README's role for WebhookReady, without services/proxy.
	testenv.Apply(t, fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: %[1]s}
rules:
- {apiGroups: [admissionregistration.k8s.io], resources: [validatingwebhookconfigurations], verbs: [list, watch]}
- {apiGroups: [""], resources: [services], verbs: [list, watch]}
- {apiGroups: [discovery.k8s.io], resources: [endpointslices], verbs: [list, watch]}
- {apiGroups: ["%[2]s"], resources: [widgets], verbs: [create]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: %[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: %[1]s}
subjects: [{kind: User, name: %[1]s}]`, user, group))
	deleteClusterRoleAtEnd(t, user)
	kc := actingAs(t, user)
	r := await(t, createAsync(t, newServer(t, kc), "WebhookReady",
		props("validatingWebhookConfiguration", cfg, "probe", probeOf(group), "timeout", "20s")), 60*time.Second)
	if r.err == nil {
		t.Fatalf("passed on an admitted dry-run that never reached webhook %s: %v", hook, r.resp.Properties)
	}
	for _, want := range []string{fmt.Sprintf(`the probe is not intercepted by webhook %q: its objectSelector {tier=never} does not match the probe's labels {}`, hook),
		`cannot create resource "services/proxy"`, "grant verb `create` on resource \"services/proxy\" in namespace " + ns,
		"give a probe it intercepts, or list only the webhooks you need in `webhooks`"} {
		if !strings.Contains(r.err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, r.err)
		}
	}
	if strings.Contains(r.err.Error(), "timed out") {
		t.Errorf("waited for the timeout instead of failing at once: %v", r.err)
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

func TestWebhookReadyDenialByAnotherWebhookIsNotProof(t *testing.T) {
	group := widgetCRD(t)
	base := strings.Split(group, ".")[0]
	target := testenv.NewWebhook(t)
	target.RegisterAs(t, "ValidatingWebhookConfiguration", "target-"+base, "Fail", group, "widgets")
	// A policy engine's mutating webhook that denies everything, quoting the object's name. It
	// runs before any validating webhook, so the target is never called.
	policy := testenv.NewWebhook(t)
	policy.Mode.Store("deny-named")
	policy.Start(t)
	policyHook := policy.RegisterAs(t, "MutatingWebhookConfiguration", "policy-"+base, "Fail", group, "widgets")
	// What the gate meets: the API server answers a webhook's denial, but not the target's.
	w := testenv.Object(t, widget(group, "trap"))
	if _, err := testenv.Resource(t, w).Create(context.Background(), w, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err == nil ||
		!strings.Contains(err.Error(), `admission webhook "`+policyHook+`" denied the request`) {
		t.Fatalf("want the policy webhook's denial, got %v", err)
	}
	s := newServer(t)
	gate := func(timeout string) <-chan gateResult {
		return createAsync(t, s, "WebhookReady", props("validatingWebhookConfiguration", "target-"+base, "probe", generatedProbeOf(group), "timeout", timeout))
	}

	before := policy.Calls.Load()
	r := await(t, gate("2s"), 30*time.Second)
	if r.err == nil {
		t.Fatalf("passed on a denial by another webhook while the target is down: %v", r.resp.Properties)
	}
	want := fmt.Sprintf(`probe denied by policy webhook %q before reaching ValidatingWebhookConfiguration target-%s`, policyHook, base)
	if !strings.Contains(r.err.Error(), want) {
		t.Errorf("error lacks %q: %v", want, r.err)
	}
	// Every denial quotes its request (as messages quoting a generated name do): a message that
	// changes must not restart the backoff (it did: about 10 dry-runs a second for the whole
	// timeout). Backoff 100, 200, 250, 250 ms... makes about 9 probes in 2 s; 20 is the spin.
	if n := policy.Calls.Load() - before; n > 13 {
		t.Errorf("%d dry-runs in a 2 s wait: the probe spins", n)
	}

	ch := gate("60s")
	mustNotReturn(t, ch, time.Second)
	// The policy lets the probe through: the target's own denial is its answer. (With the
	// policy still denying, the target's direct answer proves it: see
	// TestWebhookReadyProvesATargetBehindADenyingPolicy.)
	target.Mode.Store("deny")
	target.Start(t)
	policy.Mode.Store("allow")
	r = await(t, ch, 30*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !r.resp.Properties.Get("probed").AsBool() {
		t.Errorf("outputs = %v", r.resp.Properties)
	}
}

func TestWebhookReadyIgnorePolicyNeedsADirectAnswer(t *testing.T) {
	group := widgetCRD(t)
	base := strings.Split(group, ".")[0]
	cfg := "ignore-" + base
	wh := testenv.NewWebhook(t)
	hook := wh.RegisterAs(t, "ValidatingWebhookConfiguration", cfg, "Ignore", group, "widgets")
	// The trap: with failurePolicy Ignore the API server admits without a webhook that is down.
	w := testenv.Object(t, widget(group, "trap"))
	if _, err := testenv.Resource(t, w).Create(context.Background(), w, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatalf("the API server was expected to admit without an Ignore webhook that is down: %v", err)
	}
	s := newServer(t)
	gate := func(timeout string) <-chan gateResult {
		return createAsync(t, s, "WebhookReady", props("validatingWebhookConfiguration", cfg, "probe", probeOf(group), "timeout", timeout))
	}
	r := await(t, gate("2s"), 30*time.Second)
	if r.err == nil {
		t.Fatalf("passed on an admitted dry-run while the Ignore webhook is down: %v", r.resp.Properties)
	}
	for _, want := range []string{"webhook " + hook + " has failurePolicy Ignore", "calling it directly", "connection refused"} {
		if !strings.Contains(r.err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, r.err)
		}
	}

	ch := gate("60s")
	mustNotReturn(t, ch, time.Second)
	// Something else answers on the webhook's address: 200 and JSON, but no AdmissionReview.
	wh.Mode.Store("stranger")
	wh.Start(t)
	mustNotReturn(t, ch, 1500*time.Millisecond)
	// An AdmissionReview, but not the answer to this request.
	wh.Mode.Store("other-uid")
	mustNotReturn(t, ch, time.Second)
	wh.Mode.Store("allow")
	r = await(t, ch, 30*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	out := r.resp.Properties
	if !out.Get("probed").AsBool() || out.Get("failurePolicy").AsString() != "Ignore" {
		t.Errorf("outputs = %v", out)
	}
	if wh.AnsweredIn("allow") == 0 {
		t.Error("the gate passed without calling the webhook")
	}
}
