package admission

import (
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestHookMatchNotReached(t *testing.T) {
	widgets := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	inDefault := Request{GVR: widgets, Namespace: "default", Labels: map[string]string{"app": "probe"},
		NSLabels: map[string]string{"kubernetes.io/metadata.name": "default", "team": "a"}}
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
	withV1beta1.Equivalents = []schema.GroupVersionResource{{Group: "example.com", Version: "v1beta1", Resource: "widgets"}}
	cluster := Request{GVR: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "clusterwidgets"}}
	namespace := Request{GVR: NamespacesResource, Labels: map[string]string{"kubernetes.io/metadata.name": "p", "team": "b"}}
	namespace.NSLabels = namespace.Labels
	unknownNS := inDefault
	unknownNS.NSLabels, unknownNS.NSErr = nil, "forbidden"
	for _, tc := range []struct {
		name string
		m    Match
		q    Request
		want string // "" when reached; else a part of the reason
	}{
		{"exact rule", Match{Rules: widgetsRule}, inDefault, ""},
		{"wildcards", Match{Rules: []admissionregistrationv1.RuleWithOperations{rule("*", "*", "*", "*")}}, inDefault, ""},
		{"all subresources (cert-manager's */*)", Match{Rules: []admissionregistrationv1.RuleWithOperations{rule("CREATE", "example.com", "v1", "*/*")}}, inDefault, ""},
		{"resource and its subresources", Match{Rules: []admissionregistrationv1.RuleWithOperations{rule("CREATE", "example.com", "v1", "widgets/*")}}, inDefault, ""},
		{"near miss: a subresource only", Match{Rules: []admissionregistrationv1.RuleWithOperations{rule("CREATE", "example.com", "v1", "widgets/status")}}, inDefault, "its rules"},
		{"near miss: UPDATE only", Match{Rules: []admissionregistrationv1.RuleWithOperations{rule("UPDATE,DELETE", "example.com", "v1", "widgets")}}, inDefault, "its rules"},
		{"near miss: another resource", Match{Rules: []admissionregistrationv1.RuleWithOperations{rule("CREATE", "example.com", "v1", "gadgets")}}, inDefault, "its rules (CREATE gadgets of example.com/v1) do not match the probe's CREATE of widgets.example.com/v1"},
		{"near miss: another group", Match{Rules: []admissionregistrationv1.RuleWithOperations{rule("CREATE", "other.com", "*", "widgets")}}, inDefault, "its rules"},
		{"near miss: no rules", Match{}, inDefault, "its rules (none)"},
		{"Equivalent: another served version", Match{Rules: []admissionregistrationv1.RuleWithOperations{rule("CREATE", "example.com", "v1beta1", "widgets")}}, withV1beta1, ""},
		{"near miss: Exact, another version", Match{MatchPolicy: &exact, Rules: []admissionregistrationv1.RuleWithOperations{rule("CREATE", "example.com", "v1beta1", "widgets")}}, withV1beta1, "its rules"},
		{"near miss: a version not served", Match{Rules: []admissionregistrationv1.RuleWithOperations{rule("CREATE", "example.com", "v2", "widgets")}}, withV1beta1, "its rules"},
		{"near miss: Namespaced scope, cluster-scoped probe", Match{Rules: []admissionregistrationv1.RuleWithOperations{scoped(rule("CREATE", "*", "*", "*"), admissionregistrationv1.NamespacedScope)}}, cluster, "scope Namespaced"},
		{"near miss: Cluster scope, namespaced probe", Match{Rules: []admissionregistrationv1.RuleWithOperations{scoped(rule("CREATE", "*", "*", "*"), admissionregistrationv1.ClusterScope)}}, inDefault, "its rules"},
		{"Cluster scope, a Namespace", Match{Rules: []admissionregistrationv1.RuleWithOperations{scoped(rule("CREATE", "", "v1", "namespaces"), admissionregistrationv1.ClusterScope)}}, namespace, ""},
		{"namespaceSelector matches", Match{Rules: widgetsRule, NamespaceSelector: sel("team=a")}, inDefault, ""},
		{"cert-manager's NotIn, label absent", Match{Rules: widgetsRule, NamespaceSelector: sel("cert-manager.io/disable-validation notin (true)")}, inDefault, ""},
		{"near miss: namespaceSelector", Match{Rules: widgetsRule, NamespaceSelector: sel("team=b")}, inDefault, "its namespaceSelector {team=b} does not match the labels of the probe's namespace default"},
		{"by name alone, labels unread", Match{Rules: widgetsRule, NamespaceSelector: sel("kubernetes.io/metadata.name=default")}, unknownNS, ""},
		{"near miss: by name alone", Match{Rules: widgetsRule, NamespaceSelector: sel("kubernetes.io/metadata.name in (a, b)")}, unknownNS, "its namespaceSelector"},
		{"near miss: labels unread", Match{Rules: widgetsRule, NamespaceSelector: sel("team=a")}, unknownNS, "which the gate cannot read (forbidden)"},
		{"a cluster-scoped probe ignores namespaceSelector", Match{Rules: []admissionregistrationv1.RuleWithOperations{rule("CREATE", "*", "*", "*")}, NamespaceSelector: sel("team=z")}, cluster, ""},
		{"a Namespace is matched by its own labels", Match{Rules: []admissionregistrationv1.RuleWithOperations{rule("CREATE", "", "v1", "namespaces")}, NamespaceSelector: sel("team=b")}, namespace, ""},
		{"objectSelector matches", Match{Rules: widgetsRule, ObjectSelector: sel("app=probe")}, inDefault, ""},
		{"near miss: objectSelector", Match{Rules: widgetsRule, ObjectSelector: sel("app=web")}, inDefault, "its objectSelector {app=web} does not match the probe's labels {app=probe}"},
		{"near miss: matchConditions", Match{Rules: widgetsRule, MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "c1", Expression: "true"}}}, inDefault, "its matchConditions (c1) are CEL, not evaluated"},
		{"near miss: admission configuration", Match{Rules: []admissionregistrationv1.RuleWithOperations{rule("*", "*", "*", "*")}},
			Request{GVR: schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"}}, "never calls webhooks"},
	} {
		got := tc.m.NotReached(tc.q)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: notReached = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// webhooksOf reads the matching fields of a configuration as stored (the API server's defaults).
func TestWebhooksOfReadsMatchingFields(t *testing.T) {
	cfg := object(t, `apiVersion: admissionregistration.k8s.io/v1
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
	hooks := WebhooksOf(cfg.GetKind(), cfg)
	if len(hooks) != 1 || hooks[0].MatchErr != "" {
		t.Fatalf("hooks = %+v", hooks)
	}
	m := hooks[0].Match
	if len(m.Rules) != 1 || m.Rules[0].Resources[0] != "pods" || *m.Rules[0].Scope != admissionregistrationv1.NamespacedScope ||
		*m.MatchPolicy != admissionregistrationv1.Exact || m.ObjectSelector.MatchLabels["app"] != "x" ||
		m.NamespaceSelector.MatchExpressions[0].Key != "team" || len(m.MatchConditions) != 1 {
		t.Errorf("match = %+v", m)
	}
}
