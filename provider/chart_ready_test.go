package provider

import (
	"context"
	"strings"
	"testing"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	presource "github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/common/tokens"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

// chartChild is a reference to a helm.sh/v4:Chart's child, as the engine passes one of the
// Chart's `resources`: its URN (type token kubernetes:<group>/<version>:<Kind>, name
// <chart>:<id>) and its ID (namespace/name, or name); id "" is unknown (a preview).
func chartChild(typ, id string) property.Value {
	u := presource.NewURN("test", "readiness", "kubernetes:helm.sh/v4:Chart", tokens.Type(typ), "app:"+id)
	idv := property.New(id)
	if id == "" {
		idv = property.New(property.Computed)
	}
	return property.New(property.ResourceReference{URN: u, ID: idv, PackageVersion: "4.32.0"})
}

func chartInputs(timeout string, children ...property.Value) map[string]property.Value {
	return map[string]property.Value{"resources": property.New(property.NewArray(children)), "timeout": property.New(timeout)}
}

// Check names the field and the entry: an empty list, and entries that are not one Kubernetes
// object. Unknowns (a Chart's resources on a first preview, an ID not assigned yet) pass.
func TestChartReadyCheck(t *testing.T) {
	s := newServer(t, unreachableKubeconfig(t)) // Check and preview never call the cluster
	cm := chartChild("kubernetes:core/v1:ConfigMap", "web/cm")
	for _, c := range []struct {
		name      string
		resources property.Value
		field     string // "" : no failure
		reason    string
	}{
		{"a Chart's children", property.New(property.NewArray([]property.Value{cm,
			chartChild("kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration", "hook")})), "", ""},
		{"objects by their fields", property.New(property.NewArray([]property.Value{property.New(property.NewMap(map[string]property.Value{
			"apiVersion": property.New("example.com/v1"), "kind": property.New("Widget"), "namespace": property.New("web"), "name": property.New("w")}))})), "", ""},
		{"unknown list (first preview)", property.New(property.Computed), "", ""},
		{"an unknown entry", property.New(property.NewArray([]property.Value{cm, property.New(property.Computed)})), "", ""},
		{"an ID not assigned yet", property.New(property.NewArray([]property.Value{chartChild("kubernetes:apps/v1:Deployment", "")})), "", ""},
		{"near miss: empty list", property.New(property.NewArray(nil)), "resources", "the list is empty"},
		{"near miss: the Chart itself (a component)", property.New(property.NewArray([]property.Value{cm, property.New(property.ResourceReference{
			URN: presource.NewURN("test", "readiness", "", "kubernetes:helm.sh/v4:Chart", "app"), ID: property.Value{}})})),
			"resources[1]", "is a pulumi-kubernetes component"},
		{"near miss: not a pulumi-kubernetes resource", property.New(property.NewArray([]property.Value{chartChild("random:index/randomPet:RandomPet", "x")})),
			"resources[0]", "is not a pulumi-kubernetes resource"},
		{"near miss: an unknown ID's type is still judged", property.New(property.NewArray([]property.Value{chartChild("kubernetes:apps/v1:DeploymentPatch", "")})),
			"resources[0]", "patch or list resource"},
		{"near miss: a malformed ID", property.New(property.NewArray([]property.Value{chartChild("kubernetes:apps/v1:Deployment", "a/b/c")})),
			"resources[0]", "not a Kubernetes object's"},
		{"near miss: an ID string (the Node.js SDK's form of an unregistered kind)", property.New(property.NewArray([]property.Value{property.New("web/prom")})),
			"resources[0]", "its kind is unknown"},
		{"near miss: a map", property.New(property.NewArray([]property.Value{property.New(property.NewMap(map[string]property.Value{"kind": property.New("Deployment")}))})),
			"resources[0]", "is not a Kubernetes API version"},
		{"near miss: a manifest is not an object given by its fields", property.New(property.NewArray([]property.Value{property.New(property.NewMap(map[string]property.Value{
			"apiVersion": property.New("v1"), "kind": property.New("ConfigMap"), "metadata": property.New(property.NewMap(map[string]property.Value{"name": property.New("cm")}))}))})),
			"resources[0]", `(found "metadata")`},
		{"near miss: a number", property.New(property.NewArray([]property.Value{property.New(1.0)})),
			"resources[0]", "not a reference to a pulumi-kubernetes object"},
	} {
		t.Run(c.name, func(t *testing.T) {
			chk, err := s.Check(p.CheckRequest{Urn: urn("ChartReady"), Inputs: property.NewMap(map[string]property.Value{"resources": c.resources})})
			if err != nil {
				t.Fatal(err)
			}
			if c.field == "" {
				if len(chk.Failures) > 0 {
					t.Fatalf("failures: %v", chk.Failures)
				}
				resp, err := s.Create(p.CreateRequest{Urn: urn("ChartReady"), Properties: chk.Inputs, DryRun: true})
				if err != nil {
					t.Fatalf("preview: %v", err)
				}
				if !resp.Properties.Get("objects").IsComputed() {
					t.Errorf("preview outputs known: %v", resp.Properties)
				}
				if c.name == "a Chart's children" {
					// Kept as the objects they stand for (infer cannot write references back).
					got := chk.Inputs.Get("resources").AsArray().Get(0).AsMap()
					if got.Get("apiVersion").AsString() != "v1" || got.Get("kind").AsString() != "ConfigMap" ||
						got.Get("namespace").AsString() != "web" || got.Get("name").AsString() != "cm" {
						t.Errorf("resources[0] kept as %v", got)
					}
				}
				return
			}
			if len(chk.Failures) != 1 || chk.Failures[0].Property != c.field || !strings.Contains(chk.Failures[0].Reason, c.reason) {
				t.Fatalf("failures %v; want one on %s saying %q", chk.Failures, c.field, c.reason)
			}
		})
	}
}

// A Chart's objects, each kind's near miss beside: the gate does not pass while a webhook
// configuration's backend does not serve, a Deployment is not available or a CRD is not
// Established, and its timeout names the object and what was last seen; it passes once all are.
func TestChartReadyNearMisses(t *testing.T) {
	ns := testenv.Namespace(t, "chart")
	group := uniqueGroup(t)
	wh := testenv.NewWebhook(t) // reserved, not serving
	hook := "chart-" + strings.Split(group, ".")[0]
	testenv.Apply(t, wh.Configuration(hook, group))
	t.Cleanup(func() {
		_ = testenv.Dynamic(t).Resource(vwcResource).Delete(context.Background(), hook, metav1.DeleteOptions{})
	})
	testenv.Apply(t, configMapDoc(ns, "cm"))
	dep := testenv.Apply(t, strings.Replace(deployment(ns, "web", "registry.local/web:1", 1), "nodeSelector: {type: kwok}", nowhere, 1))[0]
	testenv.Apply(t, testenv.CRD(group, "Widget", "widgets")) // what the webhook intercepts: its derived probe
	// Two CRDs claiming one kind: the second is not Established until the first goes.
	first := testenv.Apply(t, testenv.CRD(group, "Gadget", "gadgets"))[0]
	testenv.Apply(t, strings.Replace(testenv.CRD(group, "Gadget", "gizmos"), "singular: gadget", "singular: gizmo", 1))

	cm := chartChild("kubernetes:core/v1:ConfigMap", ns+"/cm")
	webhook := chartChild("kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration", hook)
	deploy := chartChild("kubernetes:apps/v1:Deployment", ns+"/web")
	crd := chartChild("kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition", "gizmos."+group)
	s := newServer(t)

	nearMisses := []struct {
		child property.Value
		want  []string
	}{
		{webhook, []string{"ValidatingWebhookConfiguration " + hook}},
		{deploy, []string{"Deployment " + ns + "/web", "available"}},
		{crd, []string{"CustomResourceDefinition gizmos." + group, "NamesAccepted=False"}},
	}
	var pending []<-chan gateResult
	for _, m := range nearMisses {
		pending = append(pending, createAsync(t, s, "ChartReady", chartInputs("4s", cm, m.child)))
	}
	for i, m := range nearMisses {
		r := await(t, pending[i], 60*time.Second)
		if r.err == nil {
			t.Errorf("passed with %s not ready: %v", m.want[0], r.resp.Properties)
			continue
		}
		for _, w := range append([]string{"timed out", "1 of 2 objects pending"}, m.want...) {
			if !strings.Contains(r.err.Error(), w) {
				t.Errorf("timeout error lacks %q: %v", w, r.err)
			}
		}
	}

	// All together: each turns ready in turn; the gate passes only after the last.
	ch := createAsync(t, s, "ChartReady", chartInputs("2m", cm, webhook, deploy, crd))
	if err := testenv.Resource(t, first).Delete(context.Background(), first.GetName(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	mustNotReturn(t, ch, 2*time.Second) // the Deployment and the webhook are still not ready
	patch := `{"spec":{"template":{"spec":{"nodeSelector":{"type":"kwok"}}}}}`
	if _, err := testenv.Resource(t, dep).Patch(context.Background(), "web", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	mustNotReturn(t, ch, 3*time.Second) // the webhook does not serve yet
	wh.Start(t)
	defer wh.Close()
	r := await(t, ch, 90*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := r.resp.Properties.Get("objects").AsNumber(); got != 4 {
		t.Errorf("objects = %v, want 4", got)
	}
	if got := outStrings(t, r.resp.Properties, "webhooks"); len(got) != 1 || got[0] != hook {
		t.Errorf("webhooks = %v, want [%s]", got, hook)
	}
	if wh.Calls.Load() == 0 {
		t.Error("passed without the webhook ever answering a probe")
	}

	// Refresh (Read) on a new provider process judges the objects Check kept: a ready chart stays,
	// and one whose webhook stopped answering is dropped (the next up waits again).
	chk, err := s.Check(p.CheckRequest{Urn: urn("ChartReady"), Inputs: property.NewMap(chartInputs("2m", cm, webhook, deploy, crd))})
	if err != nil {
		t.Fatal(err)
	}
	read := func() string {
		t.Helper()
		resp, err := newServer(t).Read(p.ReadRequest{ID: r.resp.ID, Urn: urn("ChartReady"), Properties: r.resp.Properties, Inputs: chk.Inputs})
		if err != nil {
			t.Fatal(err)
		}
		return resp.ID
	}
	if id := read(); id != r.resp.ID {
		t.Fatalf("refresh dropped a ready chart (id %q)", id)
	}
	wh.Close()
	if id := read(); id != "" {
		t.Error("refresh kept a chart whose webhook does not answer")
	}
}
