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
