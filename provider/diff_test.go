package provider

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

func TestDiffGateReplacesOnAnyNestedChange(t *testing.T) {
	str := func(s string) *string { return &s }
	base := func() ResourceReadyArgs {
		return ResourceReadyArgs{APIVersion: "v1", Kind: "ConfigMap", Name: str("web"),
			Condition: &Condition{Type: "Ready"}, GateArgs: GateArgs{Timeout: str("1m"), Triggers: []any{"v1", map[string]any{"rev": 3.0}}}}
	}
	for name, tc := range map[string]struct {
		edit func(*ResourceReadyArgs)
		want map[string]p.DiffKind
	}{
		"nothing":               {func(*ResourceReadyArgs) {}, map[string]p.DiffKind{}},
		"triggers[0]":           {func(a *ResourceReadyArgs) { a.Triggers = []any{"v2", map[string]any{"rev": 3.0}} }, map[string]p.DiffKind{"triggers": p.UpdateReplace}},
		"triggers[1].rev":       {func(a *ResourceReadyArgs) { a.Triggers = []any{"v1", map[string]any{"rev": 4.0}} }, map[string]p.DiffKind{"triggers": p.UpdateReplace}},
		"condition.type":        {func(a *ResourceReadyArgs) { a.Condition = &Condition{Type: "Available"} }, map[string]p.DiffKind{"condition": p.UpdateReplace}},
		"condition.status":      {func(a *ResourceReadyArgs) { a.Condition = &Condition{Type: "Ready", Status: str("False")} }, map[string]p.DiffKind{"condition": p.UpdateReplace}},
		"name added":            {func(a *ResourceReadyArgs) { a.Namespace = str("apps") }, map[string]p.DiffKind{"namespace": p.AddReplace}},
		"trigger list removed":  {func(a *ResourceReadyArgs) { a.Triggers = nil }, map[string]p.DiffKind{"triggers": p.DeleteReplace}},
		"timeout only":          {func(a *ResourceReadyArgs) { a.Timeout = str("5m") }, map[string]p.DiffKind{"timeout": p.Update}},
		"stableFor added":       {func(a *ResourceReadyArgs) { a.StableFor = str("10s") }, map[string]p.DiffKind{"stableFor": p.Add}},
		"failureGrace only":     {func(a *ResourceReadyArgs) { a.FailureGrace = str("30s") }, map[string]p.DiffKind{"failureGrace": p.Add}},
		"empty and unset alike": {func(a *ResourceReadyArgs) { a.Triggers = []any{"v1", map[string]any{"rev": 3.0}}; a.Regex = nil }, map[string]p.DiffKind{}},
	} {
		t.Run(name, func(t *testing.T) {
			news := base()
			tc.edit(&news)
			d := diffGate(base(), news)
			got := map[string]p.DiffKind{}
			for k, v := range d.DetailedDiff {
				got[k] = v.Kind
			}
			if !reflect.DeepEqual(got, tc.want) || d.HasChanges != (len(tc.want) > 0) {
				t.Errorf("diff = %v (hasChanges %v), want %v", got, d.HasChanges, tc.want)
			}
		})
	}
	// Map inputs (WebhookReady's probe): a nested change replaces too.
	probe := func(ns string) map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"namespace": ns}}
	}
	d := diffGate(WebhookReadyArgs{Probe: probe("a")}, WebhookReadyArgs{Probe: probe("b")})
	if d.DetailedDiff["probe"].Kind != p.UpdateReplace {
		t.Errorf("probe.metadata.namespace change: %v", d.DetailedDiff)
	}
}

// TestNestedInputChangeReplacesThroughTheProvider drives the provider's gRPC Diff as the engine
// does for a client that set no replaceOnChanges (Pulumi YAML, a component's children): a change
// of triggers[0] must plan a replacement, and the replacing Create waits again.
func TestNestedInputChangeReplacesThroughTheProvider(t *testing.T) {
	ns := testenv.Namespace(t, "diff")
	testenv.Apply(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web, namespace: "+ns+"}")
	s := newServer(t)
	inputs := func(trigger string) map[string]property.Value {
		return props("apiVersion", "v1", "kind", "ConfigMap", "namespace", ns, "name", "web", "exists", true,
			"timeout", "30s", "triggers", property.New([]property.Value{property.New(trigger)}))
	}
	created := await(t, createAsync(t, s, "ResourceReady", inputs("v1")), 30*time.Second)
	if created.err != nil {
		t.Fatal(created.err)
	}
	moved := inputs("v1")
	moved["namespace"] = property.New("elsewhere")
	for key, in := range map[string]map[string]property.Value{"triggers": inputs("v2"), "namespace": moved} {
		d, err := s.Diff(p.DiffRequest{ID: created.resp.ID, Urn: urn("ResourceReady"), State: created.resp.Properties,
			Inputs: property.NewMap(in), OldInputs: property.NewMap(inputs("v1"))})
		if err != nil {
			t.Fatal(err)
		}
		if !d.HasChanges || len(d.DetailedDiff) != 1 || d.DetailedDiff[key].Kind != p.UpdateReplace {
			t.Errorf("%s changed: want one replacing change of %s, got %v", key, key, d.DetailedDiff)
		}
	}
	// The replacement waits again: with the ConfigMap gone, the new gate does not pass.
	if err := testenv.Resource(t, testenv.Object(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web, namespace: "+ns+"}")).
		Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	replaced := inputs("v2")
	replaced["timeout"] = property.New("2s")
	if r := await(t, createAsync(t, s, "ResourceReady", replaced), 30*time.Second); r.err == nil || !strings.Contains(r.err.Error(), "timed out") {
		t.Fatalf("the replacing gate must wait again (and time out here), got %v", r.err)
	}
}
