package provider

import (
	"fmt"
	"strings"
	"testing"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	presource "github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"sigs.k8s.io/yaml"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/autogate"
)

// invokePlan asks readiness:index:autoGateDecide, through the provider's gRPC surface, about a
// registration written as YAML in the shape {resource, installers, dependsOn, options}: in a
// session of its own, each installer registers first, in program order, then the resource (at
// the top level, written below them, of the cluster the provider talks to). It returns the
// resource's gates' types and the answer.
func invokePlan(t *testing.T, s interface {
	Invoke(p.InvokeRequest) (p.InvokeResponse, error)
}, args string) ([]string, map[string]any) {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(args), &m); err != nil {
		t.Fatal(err)
	}
	session := fmt.Sprintf("%s-%d", t.Name(), time.Now().UnixNano())
	installers, _ := m["installers"].([]any)
	var regs []map[string]any
	for _, i := range installers {
		r := i.(map[string]any)
		regs = append(regs, map[string]any{"id": r["id"], "type": r["type"], "name": r["name"], "object": r["object"]})
	}
	res := m["resource"].(map[string]any)
	self := map[string]any{"id": "urn:pulumi:test::test::" + res["type"].(string) + "::" + res["name"].(string),
		"type": res["type"], "name": res["name"], "object": res["object"]}
	if d, ok := m["dependsOn"]; ok {
		self["dependsOn"] = d
	}
	regs = append(regs, self)
	var entries []any
	for n, r := range regs {
		r["order"] = n
		entries = append(entries, map[string]any{"order": n, "type": r["type"], "name": r["name"]})
	}
	var out map[string]any
	for n, r := range regs {
		call := map[string]any{"session": session, "registration": r}
		if n == 0 {
			call["entries"] = entries
			call["clusters"] = []any{map[string]any{"id": "", "planner": true}}
			if o, ok := m["options"]; ok {
				call["options"] = o
			}
		}
		resp, err := s.Invoke(p.InvokeRequest{Token: "readiness:index:autoGateDecide",
			Args: presource.FromResourcePropertyMap(presource.NewPropertyMapFromMap(call))})
		if err != nil {
			t.Fatalf("invoke: %v", err)
		}
		if len(resp.Failures) > 0 {
			t.Fatalf("invoke failures: %v", resp.Failures)
		}
		out = presource.ToResourcePropertyMap(resp.Return).Mappable()
	}
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
