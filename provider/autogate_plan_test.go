package provider

import (
	"fmt"
	"strings"
	"testing"

	p "github.com/pulumi/pulumi-go-provider"
	presource "github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/common/tokens"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/autogate"
)

// invokePlan calls readiness:index:autoGatePlan through the provider's gRPC surface with args
// written as YAML, and returns the gates' types and the answer.
func invokePlan(t *testing.T, s interface {
	Invoke(p.InvokeRequest) (p.InvokeResponse, error)
}, args string) ([]string, map[string]any) {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(args), &m); err != nil {
		t.Fatal(err)
	}
	resp, err := s.Invoke(p.InvokeRequest{Token: "readiness:index:autoGatePlan",
		Args: presource.FromResourcePropertyMap(presource.NewPropertyMapFromMap(m))})
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	if len(resp.Failures) > 0 {
		t.Fatalf("invoke failures: %v", resp.Failures)
	}
	out := presource.ToResourcePropertyMap(resp.Return).Mappable()
	var types []string
	gates, _ := out["gates"].([]any)
	for _, g := range gates {
		types = append(types, g.(map[string]any)["type"].(string))
	}
	return types, out
}

// A kind the cluster does not serve is gated (an admitted dry-run waits for it); once its CRD
// is served, the same object with no installer in the stack is not.
func TestAutoGatePlanAsksDiscoveryWhetherTheKindIsServed(t *testing.T) {
	s := newServer(t)
	group := uniqueGroup(t)
	args := fmt.Sprintf(`
resource:
  type: kubernetes:%[1]s/v1:Widget
  name: w
  object: {apiVersion: %[1]s/v1, kind: Widget, metadata: {name: w, namespace: default}, spec: {size: 1}}
`, group)
	if types, out := invokePlan(t, s, args); len(types) != 1 || types[0] != autogate.TypeAdmissionReady {
		t.Fatalf("unserved kind: gates %v, want one AdmissionReady (%v)", types, out)
	}
	testenv.Apply(t, testenv.CRD(group, "Widget", "widgets"))
	waitServed(t, group)
	if types, out := invokePlan(t, s, args); len(types) != 0 {
		t.Fatalf("served kind, no installer: gates %v, want none (%v)", types, out)
	}
}

// The plan uses the provider's webhook matching: an objectSelector the object does not match,
// a rule for another operation or scope keep it ungated; a namespaceSelector over labels the
// plan cannot know counts as matching.
func TestAutoGatePlanMatchesWebhooksAsTheAPIServer(t *testing.T) {
	s := newServer(t)
	plan := func(webhook, labels string) []string {
		types, _ := invokePlan(t, s, fmt.Sprintf(`
resource:
  type: kubernetes:core/v1:ConfigMap
  name: cm
  object: {apiVersion: v1, kind: ConfigMap, metadata: {name: cm, namespace: team-a, labels: {%s}}}
installers:
- id: hook
  type: kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration
  name: hook
  object:
    apiVersion: admissionregistration.k8s.io/v1
    kind: ValidatingWebhookConfiguration
    metadata: {name: hook}
    webhooks:
    - %s
`, labels, webhook))
		return types
	}
	const rules = `rules: [{apiGroups: [""], apiVersions: [v1], operations: [%s], resources: [configmaps], scope: "%s"}]`
	gated := []string{autogate.TypeResourceReady, autogate.TypeAdmissionReady}
	for _, c := range []struct {
		name, webhook, labels string
		want                  []string
	}{
		{"matching rule", "{name: a, " + fmt.Sprintf(rules, "CREATE", "*") + "}", "", gated},
		{"UPDATE only", "{name: a, " + fmt.Sprintf(rules, "UPDATE", "*") + "}", "", nil},
		{"cluster scope only", "{name: a, " + fmt.Sprintf(rules, "CREATE", "Cluster") + "}", "", nil},
		{"objectSelector not matched", "{name: a, objectSelector: {matchLabels: {inject: 'yes'}}, " + fmt.Sprintf(rules, "CREATE", "*") + "}", "", nil},
		{"objectSelector matched", "{name: a, objectSelector: {matchLabels: {inject: 'yes'}}, " + fmt.Sprintf(rules, "CREATE", "*") + "}", "inject: 'yes'", gated},
		{"namespaceSelector by name, another namespace", "{name: a, namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: team-b}}, " + fmt.Sprintf(rules, "CREATE", "*") + "}", "", nil},
		{"matchPolicy unset (Equivalent): a rule for another version of the resource", "{name: a, " + strings.Replace(fmt.Sprintf(rules, "CREATE", "*"), "[v1]", "[v1beta1]", 1) + "}", "", gated},
		{"matchPolicy Equivalent: a rule for another version", "{name: a, matchPolicy: Equivalent, " + strings.Replace(fmt.Sprintf(rules, "CREATE", "*"), "[v1]", "[v1beta1]", 1) + "}", "", gated},
		{"near miss: Exact, a rule for another version", "{name: a, matchPolicy: Exact, " + strings.Replace(fmt.Sprintf(rules, "CREATE", "*"), "[v1]", "[v1beta1]", 1) + "}", "", nil},
		{"namespaceSelector over unknown labels", "{name: a, namespaceSelector: {matchLabels: {team: a}}, " + fmt.Sprintf(rules, "CREATE", "*") + "}", "", gated},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := plan(c.webhook, c.labels); fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("gates = %v, want %v", got, c.want)
			}
		})
	}
}

// invokeRaw calls a function through the provider's gRPC surface with args written as YAML.
func invokeRaw(t *testing.T, s interface {
	Invoke(p.InvokeRequest) (p.InvokeResponse, error)
}, token, args string) (map[string]any, error) {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(args), &m); err != nil {
		t.Fatal(err)
	}
	resp, err := s.Invoke(p.InvokeRequest{Token: tokens.Type(token),
		Args: presource.FromResourcePropertyMap(presource.NewPropertyMapFromMap(m))})
	if err != nil {
		return nil, err
	}
	if len(resp.Failures) > 0 {
		t.Fatalf("invoke failures: %v", resp.Failures)
	}
	return presource.ToResourcePropertyMap(resp.Return).Mappable(), nil
}

// The batch answers each plan exactly as autoGatePlan answers it alone: a ConfigMap a stack
// webhook intercepts, one its objectSelector leaves out (near miss), a kind the cluster does not
// serve, an installer, a plan with no installers; shared installers are sent once, by index.
func TestAutoGatePlanBatchAnswersEachPlanAsAlone(t *testing.T) {
	s := newServer(t)
	group := uniqueGroup(t)
	hook := `{id: hook, type: kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration, name: hook,
  object: {apiVersion: admissionregistration.k8s.io/v1, kind: ValidatingWebhookConfiguration, metadata: {name: hook},
    webhooks: [{name: a, objectSelector: {matchLabels: {inject: 'yes'}},
      rules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps], scope: "*"}]}]}}`
	release := `{id: rel, type: kubernetes:helm.sh/v3:Release, name: eso, object: {name: eso, namespace: eso, chart: x}}`
	resources := []string{
		`{type: kubernetes:core/v1:ConfigMap, name: in, object: {apiVersion: v1, kind: ConfigMap, metadata: {name: in, namespace: team-a, labels: {inject: 'yes'}}}}`,
		`{type: kubernetes:core/v1:ConfigMap, name: out, object: {apiVersion: v1, kind: ConfigMap, metadata: {name: out, namespace: team-a}}}`,
		fmt.Sprintf(`{type: kubernetes:%[1]s/v1:Widget, name: w, object: {apiVersion: %[1]s/v1, kind: Widget, metadata: {name: w, namespace: default}}}`, group),
		`{type: kubernetes:external-secrets.io/v1:ExternalSecret, name: es, object: {apiVersion: external-secrets.io/v1, kind: ExternalSecret, metadata: {name: es, namespace: team-a}, spec: {target: {name: es}}}}`,
		`{type: kubernetes:core/v1:ConfigMap, name: in2, object: {apiVersion: v1, kind: ConfigMap, metadata: {name: in2, namespace: team-a, labels: {inject: 'yes'}}}}`,
	}
	type call struct {
		resource   string
		installers []int // into [hook, release]
		dependsOn  string
	}
	calls := []call{{resources[0], []int{0, 1}, "[]"}, {resources[1], []int{0}, "[]"}, {resources[2], nil, "[]"},
		{resources[3], []int{1, 0}, "[rel]"}, {resources[0], nil, "[]"}, {resources[4], []int{0}, "[]"}}
	all := []string{hook, release}
	var plans []string
	var want []any
	for _, c := range calls {
		var inst, idx []string
		for _, i := range c.installers {
			inst = append(inst, all[i])
			idx = append(idx, fmt.Sprint(i))
		}
		alone, err := invokeRaw(t, s, "readiness:index:autoGatePlan", fmt.Sprintf("{resource: %s, installers: [%s], dependsOn: %s, options: {timeout: 5m}}",
			c.resource, strings.Join(inst, ", "), c.dependsOn))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, alone)
		plans = append(plans, fmt.Sprintf("{resource: %s, installers: [%s], dependsOn: %s, options: {timeout: 5m}}", c.resource, strings.Join(idx, ", "), c.dependsOn))
	}
	got, err := invokeRaw(t, s, "readiness:index:autoGatePlanBatch", fmt.Sprintf("{installers: [%s], plans: [%s]}", strings.Join(all, ", "), strings.Join(plans, ", ")))
	if err != nil {
		t.Fatal(err)
	}
	results, _ := got["results"].([]any)
	if len(results) != len(want) {
		t.Fatalf("%d results, want %d: %v", len(results), len(want), got)
	}
	// A gate key several answers name is sent once, as the first answer names it.
	shared, _ := got["gates"].([]any)
	if len(shared) != 5 {
		t.Errorf("the batch sent %d gates, want 5 (in2's two gates are in's): %v", len(shared), shared)
	}
	for _, r := range results {
		m := r.(map[string]any)
		var gates []any
		for _, i := range m["gates"].([]any) {
			gates = append(gates, shared[int(i.(float64))])
		}
		m["gates"] = gates
	}
	want[5].(map[string]any)["gates"] = want[0].(map[string]any)["gates"] // in's gates, in for in2 as their representative
	// The result's own fields (the single call's return echoes its inputs too).
	answer := func(r any) string {
		m, _ := r.(map[string]any)
		g, _ := m["gates"].([]any)
		return fmt.Sprint(m["remember"], m["installer"], len(g), g, m["warnings"])
	}
	for i := range want {
		if answer(results[i]) != answer(want[i]) {
			t.Errorf("plan %d: batch answered\n%v\nalone\n%v", i, results[i], want[i])
		}
	}
	// What the calls alone answered, so that equal answers are not equal by being empty. (es, of a
	// kind not served, depends on the Release: HelmReleaseReady, then its admitted dry-run.)
	gates := func(r any) int { g, _ := r.(map[string]any)["gates"].([]any); return len(g) }
	if gates(want[0]) != 2 || gates(want[1]) != 0 || gates(want[2]) != 1 || gates(want[3]) != 2 || gates(want[4]) != 0 {
		t.Fatalf("unexpected answers alone: %v", want)
	}
	if _, err := invokeRaw(t, s, "readiness:index:autoGatePlanBatch", fmt.Sprintf("{installers: [%s], plans: [{resource: %s, installers: [2]}]}", hook, resources[0])); err == nil ||
		!strings.Contains(err.Error(), "names installer 2 of 1") {
		t.Fatalf("an index past the installers: err %v, want one naming it", err)
	}
}

// countingCluster counts the questions that reach the cluster.
type countingCluster struct {
	autogate.Cluster
	serves, resources int
}

func (c *countingCluster) Serves(gk schema.GroupKind) (bool, bool) {
	c.serves++
	return c.Cluster.Serves(gk)
}

func (c *countingCluster) Resource(gvk schema.GroupVersionKind) (string, bool, bool) {
	c.resources++
	return c.Cluster.Resource(gvk)
}

// Within one batch a kind is looked up once (a kind not served would refresh discovery per plan).
func TestAutoGatePlanBatchAsksTheClusterOncePerKind(t *testing.T) {
	c := &countingCluster{Cluster: unknownCluster{namespace: "default"}}
	var plans []AutoGatePlanBatchItem
	for i := range 50 {
		plans = append(plans, AutoGatePlanBatchItem{Resource: AutoGatePlanResource{Type: "kubernetes:example.com/v1:Widget", Name: fmt.Sprint("w", i),
			Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": fmt.Sprint("w", i)}}}})
	}
	out, err := decideBatch(AutoGatePlanBatchArgs{Plans: plans}, newMemoCluster(c))
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Results) != 50 || len(out.Results[49].Gates) != 1 || len(out.Gates) != 1 {
		t.Fatalf("results %d, last %v, gates %d: want 50, each gated by the one gate", len(out.Results), out.Results[49], len(out.Gates))
	}
	if c.serves > 1 || c.resources > 1 {
		t.Fatalf("the cluster was asked %d (Serves) and %d (Resource) times, want at most once each", c.serves, c.resources)
	}
}
