package provider

import (
	"fmt"
	"strings"
	"testing"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/autogate"
)

// A webhook configuration installed outside the stack (another stack's, by hand) is checked as
// the stack's own (issue 47): an object it intercepts gets an AdmissionReady when a dry run is
// not admitted at plan time (its server down), none once it answers; an object it does not
// intercept gets nothing, and neither is dry-run; the stack's own configuration of that name is
// left to the stack's rules. On a real API server, with a real webhook server.
func TestAutoGatePlanChecksTheClustersWebhooks(t *testing.T) {
	group := uniqueGroup(t)
	testenv.Apply(t, testenv.CRD(group, "Widget", "widgets"))
	waitServed(t, group)
	wh := testenv.NewWebhook(t)
	cfg := "platform-" + strings.Split(group, ".")[0]
	wh.Register(t, cfg, group) // failurePolicy Fail, server not started yet
	widget := fmt.Sprintf(`
resource:
  type: kubernetes:%[1]s/v1:Widget
  name: w
  object: {apiVersion: %[1]s/v1, kind: Widget, metadata: {name: w, namespace: default}, spec: {size: 1}}
`, group)

	// The server is down: gated, on nothing of the stack.
	types, out := invokePlan(t, newServer(t), widget)
	gates, _ := out["gates"].([]any)
	if len(types) != 1 || types[0] != autogate.TypeAdmissionReady {
		t.Fatalf("a cluster webhook that does not answer: gates %v, want one AdmissionReady (%v)", types, out)
	}
	g := gates[0].(map[string]any)
	if !strings.Contains(fmt.Sprint(g["key"]), cfg) || len(g["after"].([]any)) != 0 || len(g["afterGates"].([]any)) != 0 ||
		!strings.Contains(fmt.Sprint(g["reason"]), "not installed by this stack") {
		t.Errorf("the gate should name the configuration and wait for nothing of the stack: %v", g)
	}
	if k := fmt.Sprint(g["key"]); !strings.HasPrefix(k, "auto-admission-widgets") || !strings.HasSuffix(k, "-default-"+cfg) {
		t.Errorf("key = %s, want the resource, namespace and configuration", k)
	}

	// Near miss: an object the configuration does not intercept is neither gated nor dry-run.
	cm := `
resource:
  type: kubernetes:core/v1:ConfigMap
  name: cm
  object: {apiVersion: v1, kind: ConfigMap, metadata: {name: cm, namespace: default}}
`
	if types, out := invokePlan(t, newServer(t), cm); len(types) != 0 {
		t.Errorf("a ConfigMap no webhook intercepts: gates %v (%v)", types, out)
	}

	// Near miss: the stack installs the configuration itself: the stack's rules gate it (exists,
	// then admitted), with no second gate for the cluster's copy.
	own := widget + fmt.Sprintf(`
installers:
- id: hook
  type: kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration
  name: platform-hook
  object: {apiVersion: admissionregistration.k8s.io/v1, kind: ValidatingWebhookConfiguration, metadata: {name: %s},
    webhooks: [{name: a.%s, rules: [{apiGroups: ["%s"], apiVersions: ["*"], operations: [CREATE], resources: [widgets]}]}]}
`, cfg, group, group)
	if types, out := invokePlan(t, newServer(t), own); fmt.Sprint(types) != fmt.Sprint([]string{autogate.TypeResourceReady, autogate.TypeAdmissionReady}) ||
		strings.Contains(fmt.Sprint(out["gates"]), "not installed by this stack") {
		t.Errorf("the stack's own configuration: gates %v (%v)", types, out)
	}

	// Near miss: the server answers: no gate.
	wh.Start(t)
	if types, out := invokePlan(t, newServer(t), widget); len(types) != 0 {
		t.Errorf("a cluster webhook that answers: gates %v, want none (%v)", types, out)
	}
}
