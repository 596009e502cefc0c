package provider

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/property"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// An object without metadata.namespace is matched and dry-run in the namespace its provider's
// configuration names (`kubernetes:namespace`, passed on to the readiness provider autoGate
// makes for it): a webhook that validates that namespace only holds it.
func TestAutoGatePlanUsesTheProvidersNamespace(t *testing.T) {
	group := uniqueGroup(t)
	testenv.Apply(t, testenv.CRD(group, "Widget", "widgets"))
	waitServed(t, group)
	apps := testenv.Namespace(t, "apps")
	wh := testenv.NewWebhook(t)
	cfg := "platform-" + strings.Split(group, ".")[0]
	doc := strings.Replace(wh.Configuration(cfg, group), "  rules:",
		"  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: "+apps+"}}\n  rules:", 1)
	testenv.Apply(t, doc)
	t.Cleanup(func() {
		u := testenv.Object(t, doc)
		_ = testenv.Resource(t, u).Delete(context.Background(), u.GetName(), metav1.DeleteOptions{})
	})
	widget := fmt.Sprintf(`
resource:
  type: kubernetes:%[1]s/v1:Widget
  name: w
  object: {apiVersion: %[1]s/v1, kind: Widget, spec: {size: 1}}
`, group)
	inApps := newServerWithConfig(t, map[string]property.Value{"kubeconfig": property.New(string(testenv.CP.Kubeconfig)), "namespace": property.New(apps)})
	if types, out := invokePlan(t, inApps, widget); len(types) != 1 || !strings.HasSuffix(fmt.Sprint(out["gates"].([]any)[0].(map[string]any)["key"]), apps+"-"+cfg) {
		t.Errorf("in %s, which the webhook validates: gates %v (%v)", apps, types, out)
	}
	// Near miss: the provider's default namespace is another, which the webhook does not see.
	if types, out := invokePlan(t, newServer(t), widget); len(types) != 0 {
		t.Errorf("in default: gates %v, want none (%v)", types, out)
	}
}

// A chart's custom resources written one after another, all intercepted by one webhook of the
// cluster: once a dry run through it was admitted, the plan of the next object takes its answer
// (admittedFresh) instead of calling it again, which kept a webhook call off the path of every
// dependent (issue 49). Near miss: an object another webhook intercepts too, one that has not
// answered yet, is dry-run (that webhook is called). On a real API server, with real webhook
// servers.
func TestAutoGatePlanTakesAWebhooksRecentAnswer(t *testing.T) {
	group := uniqueGroup(t)
	testenv.Apply(t, testenv.CRD(group, "Widget", "widgets")+"\n---\n"+testenv.CRD(group, "Gadget", "gadgets"))
	waitServed(t, group)
	short := strings.Split(group, ".")[0]
	both := testenv.NewWebhook(t)
	both.RegisterAs(t, "ValidatingWebhookConfiguration", "both-"+short, "Fail", group, "widgets", "gadgets")
	both.Start(t)
	obj := func(kind, ns string) string {
		return fmt.Sprintf(`
resource:
  type: kubernetes:%[1]s/v1:%[2]s
  name: o
  object: {apiVersion: %[1]s/v1, kind: %[2]s, metadata: {name: o, namespace: %[3]s}, spec: {size: 1}}
`, group, kind, ns)
	}
	srv := newServer(t) // one provider process: one memo
	if types, out := invokePlan(t, srv, obj("Widget", "default")); len(types) != 0 {
		t.Fatalf("a webhook that answers: gates %v (%v)", types, out)
	}
	called := both.Calls.Load()
	if called == 0 {
		t.Fatal("the first object was not dry-run through the webhook")
	}
	if types, out := invokePlan(t, srv, obj("Gadget", "default")); len(types) != 0 {
		t.Fatalf("the next object: gates %v (%v)", types, out)
	}
	if n := both.Calls.Load(); n != called {
		t.Errorf("the webhook that answered a moment ago was called again (%d calls, was %d)", n, called)
	}

	// Near miss: a second webhook that has not answered yet intercepts gadgets too.
	other := testenv.NewWebhook(t)
	other.RegisterAs(t, "ValidatingWebhookConfiguration", "other-"+short, "Fail", group, "gadgets")
	other.Start(t)
	time.Sleep(webhooksFresh) // the plan's listing of the configurations is older than that: it lists again
	if types, out := invokePlan(t, srv, obj("Gadget", "kube-public")); len(types) != 0 {
		t.Fatalf("both webhooks answer: gates %v (%v)", types, out)
	}
	if other.Calls.Load() == 0 {
		t.Error("an object a webhook that never answered intercepts was not dry-run")
	}
}
