package provider

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

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

func TestHookMatchNotReached(t *testing.T) {
	widgets := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	inDefault := probeRequest{gvr: widgets, namespace: "default", labels: map[string]string{"app": "probe"},
		nsLabels: map[string]string{"kubernetes.io/metadata.name": "default", "team": "a"}}
	rule := func(ops, groups, versions, resources string) admissionregistrationv1.RuleWithOperations {
		r := admissionregistrationv1.RuleWithOperations{Rule: admissionregistrationv1.Rule{
			APIGroups: strings.Split(groups, ","), APIVersions: strings.Split(versions, ","), Resources: strings.Split(resources, ",")}}
		for _, o := range strings.Split(ops, ",") {
			r.Operations = append(r.Operations, admissionregistrationv1.OperationType(o))
		}
		return r
	}
	scoped := func(r admissionregistrationv1.RuleWithOperations, s admissionregistrationv1.ScopeType) admissionregistrationv1.RuleWithOperations {
		r.Scope = &s
		return r
	}
	exact := admissionregistrationv1.Exact
	sel := func(s string) *metav1.LabelSelector {
		ls, err := metav1.ParseToLabelSelector(s)
		if err != nil {
			t.Fatal(err)
		}
		return ls
	}
	widgetsRule := []admissionregistrationv1.RuleWithOperations{rule("CREATE,UPDATE", "example.com", "v1", "widgets")}
	withV1beta1 := inDefault
	withV1beta1.equivalents = []schema.GroupVersionResource{{Group: "example.com", Version: "v1beta1", Resource: "widgets"}}
	cluster := probeRequest{gvr: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "clusterwidgets"}}
	namespace := probeRequest{gvr: namespacesResource, labels: map[string]string{"kubernetes.io/metadata.name": "p", "team": "b"}}
	namespace.nsLabels = namespace.labels
	unknownNS := inDefault
	unknownNS.nsLabels, unknownNS.nsErr = nil, "forbidden"
	for _, tc := range []struct {
		name string
		m    hookMatch
		q    probeRequest
		want string // "" when reached; else a part of the reason
	}{
		{"exact rule", hookMatch{Rules: widgetsRule}, inDefault, ""},
		{"wildcards", hookMatch{Rules: []admissionregistrationv1.RuleWithOperations{rule("*", "*", "*", "*")}}, inDefault, ""},
		{"all subresources (cert-manager's */*)", hookMatch{Rules: []admissionregistrationv1.RuleWithOperations{rule("CREATE", "example.com", "v1", "*/*")}}, inDefault, ""},
		{"resource and its subresources", hookMatch{Rules: []admissionregistrationv1.RuleWithOperations{rule("CREATE", "example.com", "v1", "widgets/*")}}, inDefault, ""},
		{"near miss: a subresource only", hookMatch{Rules: []admissionregistrationv1.RuleWithOperations{rule("CREATE", "example.com", "v1", "widgets/status")}}, inDefault, "its rules"},
		{"near miss: UPDATE only", hookMatch{Rules: []admissionregistrationv1.RuleWithOperations{rule("UPDATE,DELETE", "example.com", "v1", "widgets")}}, inDefault, "its rules"},
		{"near miss: another resource", hookMatch{Rules: []admissionregistrationv1.RuleWithOperations{rule("CREATE", "example.com", "v1", "gadgets")}}, inDefault, "its rules (CREATE gadgets of example.com/v1) do not match the probe's CREATE of widgets.example.com/v1"},
		{"near miss: another group", hookMatch{Rules: []admissionregistrationv1.RuleWithOperations{rule("CREATE", "other.com", "*", "widgets")}}, inDefault, "its rules"},
		{"near miss: no rules", hookMatch{}, inDefault, "its rules (none)"},
		{"Equivalent: another served version", hookMatch{Rules: []admissionregistrationv1.RuleWithOperations{rule("CREATE", "example.com", "v1beta1", "widgets")}}, withV1beta1, ""},
		{"near miss: Exact, another version", hookMatch{MatchPolicy: &exact, Rules: []admissionregistrationv1.RuleWithOperations{rule("CREATE", "example.com", "v1beta1", "widgets")}}, withV1beta1, "its rules"},
		{"near miss: a version not served", hookMatch{Rules: []admissionregistrationv1.RuleWithOperations{rule("CREATE", "example.com", "v2", "widgets")}}, withV1beta1, "its rules"},
		{"near miss: Namespaced scope, cluster-scoped probe", hookMatch{Rules: []admissionregistrationv1.RuleWithOperations{scoped(rule("CREATE", "*", "*", "*"), admissionregistrationv1.NamespacedScope)}}, cluster, "scope Namespaced"},
		{"near miss: Cluster scope, namespaced probe", hookMatch{Rules: []admissionregistrationv1.RuleWithOperations{scoped(rule("CREATE", "*", "*", "*"), admissionregistrationv1.ClusterScope)}}, inDefault, "its rules"},
		{"Cluster scope, a Namespace", hookMatch{Rules: []admissionregistrationv1.RuleWithOperations{scoped(rule("CREATE", "", "v1", "namespaces"), admissionregistrationv1.ClusterScope)}}, namespace, ""},
		{"namespaceSelector matches", hookMatch{Rules: widgetsRule, NamespaceSelector: sel("team=a")}, inDefault, ""},
		{"cert-manager's NotIn, label absent", hookMatch{Rules: widgetsRule, NamespaceSelector: sel("cert-manager.io/disable-validation notin (true)")}, inDefault, ""},
		{"near miss: namespaceSelector", hookMatch{Rules: widgetsRule, NamespaceSelector: sel("team=b")}, inDefault, "its namespaceSelector {team=b} does not match the labels of the probe's namespace default"},
		{"by name alone, labels unread", hookMatch{Rules: widgetsRule, NamespaceSelector: sel("kubernetes.io/metadata.name=default")}, unknownNS, ""},
		{"near miss: by name alone", hookMatch{Rules: widgetsRule, NamespaceSelector: sel("kubernetes.io/metadata.name in (a, b)")}, unknownNS, "its namespaceSelector"},
		{"near miss: labels unread", hookMatch{Rules: widgetsRule, NamespaceSelector: sel("team=a")}, unknownNS, "which the gate cannot read (forbidden)"},
		{"a cluster-scoped probe ignores namespaceSelector", hookMatch{Rules: []admissionregistrationv1.RuleWithOperations{rule("CREATE", "*", "*", "*")}, NamespaceSelector: sel("team=z")}, cluster, ""},
		{"a Namespace is matched by its own labels", hookMatch{Rules: []admissionregistrationv1.RuleWithOperations{rule("CREATE", "", "v1", "namespaces")}, NamespaceSelector: sel("team=b")}, namespace, ""},
		{"objectSelector matches", hookMatch{Rules: widgetsRule, ObjectSelector: sel("app=probe")}, inDefault, ""},
		{"near miss: objectSelector", hookMatch{Rules: widgetsRule, ObjectSelector: sel("app=web")}, inDefault, "its objectSelector {app=web} does not match the probe's labels {app=probe}"},
		{"near miss: matchConditions", hookMatch{Rules: widgetsRule, MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "c1", Expression: "true"}}}, inDefault, "its matchConditions (c1) are CEL, not evaluated"},
		{"near miss: admission configuration", hookMatch{Rules: []admissionregistrationv1.RuleWithOperations{rule("*", "*", "*", "*")}},
			probeRequest{gvr: schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"}}, "never calls webhooks"},
	} {
		got := tc.m.notReached(tc.q)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: notReached = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// webhooksOf reads the matching fields of a configuration as stored (the API server's defaults).
func TestWebhooksOfReadsMatchingFields(t *testing.T) {
	cfg := testenv.Object(t, `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: x}
webhooks:
- name: a.example.com
  matchPolicy: Exact
  reinvocationPolicy: Never
  objectSelector: {matchLabels: {app: x}}
  namespaceSelector: {matchExpressions: [{key: team, operator: In, values: [a]}]}
  matchConditions: [{name: c, expression: "true"}]
  rules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods], scope: Namespaced}]
  clientConfig: {url: "https://127.0.0.1:1/x"}`)
	hooks := webhooksOf(cfg.GetKind(), cfg)
	if len(hooks) != 1 || hooks[0].matchErr != "" {
		t.Fatalf("hooks = %+v", hooks)
	}
	m := hooks[0].match
	if len(m.Rules) != 1 || m.Rules[0].Resources[0] != "pods" || *m.Rules[0].Scope != admissionregistrationv1.NamespacedScope ||
		*m.MatchPolicy != admissionregistrationv1.Exact || m.ObjectSelector.MatchLabels["app"] != "x" ||
		m.NamespaceSelector.MatchExpressions[0].Key != "team" || len(m.MatchConditions) != 1 {
		t.Errorf("match = %+v", m)
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
