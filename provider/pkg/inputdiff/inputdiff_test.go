package inputdiff

import (
	"reflect"
	"testing"

	p "github.com/pulumi/pulumi-go-provider"
)

// Shapes of a gate's inputs: an embedded struct of shared inputs, a pointer to a nested struct, a
// list of anything and a map.
type shared struct {
	Timeout      *string `pulumi:"timeout,optional"`
	Triggers     []any   `pulumi:"triggers,optional"`
	StableFor    *string `pulumi:"stableFor,optional"`
	FailureGrace *string `pulumi:"failureGrace,optional"`
}

type condition struct {
	Type   string  `pulumi:"type"`
	Status *string `pulumi:"status,optional"`
}

type args struct {
	Kind      string         `pulumi:"kind"`
	Name      *string        `pulumi:"name,optional"`
	Namespace *string        `pulumi:"namespace,optional"`
	Condition *condition     `pulumi:"condition,optional"`
	Regex     []string       `pulumi:"regex,optional"`
	Probe     map[string]any `pulumi:"probe,optional"`
	internal  string         // unexported: not an input
	shared
}

func TestReplaceOnAnyNestedChange(t *testing.T) {
	str := func(s string) *string { return &s }
	probe := func(ns string) map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"namespace": ns}}
	}
	base := func() args {
		return args{Kind: "ConfigMap", Name: str("web"), Condition: &condition{Type: "Ready"}, Probe: probe("a"),
			shared: shared{Timeout: str("1m"), Triggers: []any{"v1", map[string]any{"rev": 3.0}}}}
	}
	for name, tc := range map[string]struct {
		edit func(*args)
		want map[string]p.DiffKind
	}{
		"nothing":                  {func(*args) {}, map[string]p.DiffKind{}},
		"triggers[0]":              {func(a *args) { a.Triggers = []any{"v2", map[string]any{"rev": 3.0}} }, map[string]p.DiffKind{"triggers": p.UpdateReplace}},
		"triggers[1].rev":          {func(a *args) { a.Triggers = []any{"v1", map[string]any{"rev": 4.0}} }, map[string]p.DiffKind{"triggers": p.UpdateReplace}},
		"condition.type":           {func(a *args) { a.Condition = &condition{Type: "Available"} }, map[string]p.DiffKind{"condition": p.UpdateReplace}},
		"condition.status":         {func(a *args) { a.Condition = &condition{Type: "Ready", Status: str("False")} }, map[string]p.DiffKind{"condition": p.UpdateReplace}},
		"probe.metadata.namespace": {func(a *args) { a.Probe = probe("b") }, map[string]p.DiffKind{"probe": p.UpdateReplace}},
		"namespace added":          {func(a *args) { a.Namespace = str("apps") }, map[string]p.DiffKind{"namespace": p.AddReplace}},
		"trigger list removed":     {func(a *args) { a.Triggers = nil }, map[string]p.DiffKind{"triggers": p.DeleteReplace}},
		"timeout only":             {func(a *args) { a.Timeout = str("5m") }, map[string]p.DiffKind{"timeout": p.Update}},
		"stableFor added":          {func(a *args) { a.StableFor = str("10s") }, map[string]p.DiffKind{"stableFor": p.Add}},
		"failureGrace only":        {func(a *args) { a.FailureGrace = str("30s") }, map[string]p.DiffKind{"failureGrace": p.Add}},
		"timeout removed":          {func(a *args) { a.Timeout = nil }, map[string]p.DiffKind{"timeout": p.Delete}},
		"timeout and kind":         {func(a *args) { a.Timeout, a.Kind = str("5m"), "Secret" }, map[string]p.DiffKind{"timeout": p.Update, "kind": p.UpdateReplace}},
		"empty and unset alike":    {func(a *args) { a.Regex = []string{} }, map[string]p.DiffKind{}},
		"an unexported field":      {func(a *args) { a.internal = "x" }, map[string]p.DiffKind{}},
	} {
		t.Run(name, func(t *testing.T) {
			news := base()
			tc.edit(&news)
			d := Replace(base(), news, "timeout", "stableFor", "failureGrace")
			got := map[string]p.DiffKind{}
			for k, v := range d.DetailedDiff {
				got[k] = v.Kind
				if !v.InputDiff {
					t.Errorf("%s: not an input diff", k)
				}
			}
			if !reflect.DeepEqual(got, tc.want) || d.HasChanges != (len(tc.want) > 0) {
				t.Errorf("diff = %v (hasChanges %v), want %v", got, d.HasChanges, tc.want)
			}
		})
	}
}
