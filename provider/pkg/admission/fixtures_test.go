package admission

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/internal/fixtures"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/verdict"
)

// Table tests over YAML fixtures in testdata/ (as kstatus's): each file is a list of cases, what
// the gate gathered and what must be decided, the near misses beside the states that pass.

func objectOf(m map[string]any) *unstructured.Unstructured {
	if m == nil {
		return nil
	}
	return &unstructured.Unstructured{Object: m}
}

// serviceState is a gathered Service's state, as its endpoint check judged it.
type serviceState struct {
	Ready    bool   `json:"ready"`
	Message  string `json:"message"`
	Unsynced bool   `json:"unsynced"`
	Poll     bool   `json:"poll"`
}

// decided is what a case says must be decided.
type decided struct {
	Ready     bool     `json:"ready"`
	Message   string   `json:"message"` // a part of the message, when not ready
	Unsynced  bool     `json:"unsynced"`
	Poll      bool     `json:"poll"`
	Names     []string `json:"names"`
	Policy    string   `json:"policy"`
	Ambiguous []string `json:"ambiguous"`
	Seen      []string `json:"seen"`
}

func (want decided) check(t *testing.T, got Checked) {
	t.Helper()
	r := got.Result
	if r.Ready != want.Ready || r.Failed != nil || !strings.Contains(r.Message, want.Message) || r.Unsynced != want.Unsynced || r.Poll != want.Poll {
		t.Errorf("result = %+v; want ready=%v unsynced=%v poll=%v saying %q", r, want.Ready, want.Unsynced, want.Poll, want.Message)
	}
	if !want.Ready {
		return
	}
	if !slices.Equal(got.Names, want.Names) || got.Policy != want.Policy || len(got.Hooks) != len(want.Names) || len(got.CABundles) != len(want.Names) {
		t.Errorf("names %v, policy %s, %d hooks, %d caBundles; want %v, %s", got.Names, got.Policy, len(got.Hooks), len(got.CABundles), want.Names, want.Policy)
	}
	var ambiguous []string
	for n := range got.Ambiguous {
		ambiguous = append(ambiguous, n)
	}
	slices.Sort(ambiguous)
	if !slices.Equal(ambiguous, want.Ambiguous) {
		t.Errorf("ambiguous = %v, want %v", ambiguous, want.Ambiguous)
	}
	if want.Seen != nil && !slices.Equal(got.Seen, want.Seen) {
		t.Errorf("seen = %v, want %v", got.Seen, want.Seen)
	}
}

func TestCheckConfigurationFixtures(t *testing.T) {
	type tc struct {
		Name     string                  `json:"name"`
		Kind     string                  `json:"kind"`
		Config   map[string]any          `json:"config"`
		Want     []string                `json:"want"`
		Services map[string]serviceState `json:"services"`
		decided  `json:",inline"`
	}
	for _, c := range fixtures.Load[tc](t, "configurations.yaml") {
		t.Run(c.Name, func(t *testing.T) {
			snap := Configuration{Kind: c.Kind, Name: "", Object: objectOf(c.Config), Want: c.Want, Services: map[string]verdict.Result{}}
			if snap.Object != nil {
				snap.Name = snap.Object.GetName()
			}
			for k, s := range c.Services {
				snap.Services[k] = verdict.Result{Ready: s.Ready, Message: s.Message, Unsynced: s.Unsynced, Poll: s.Poll}
			}
			c.decided.check(t, CheckConfiguration(snap))
		})
	}
}

func TestCheckServiceFixtures(t *testing.T) {
	type tc struct {
		Name       string           `json:"name"`
		Want       []string         `json:"want"`
		Mutating   []map[string]any `json:"mutating"`
		Validating []map[string]any `json:"validating"`
		decided    `json:",inline"`
	}
	objects := func(ms []map[string]any) []*unstructured.Unstructured {
		var out []*unstructured.Unstructured
		for _, m := range ms {
			out = append(out, objectOf(m))
		}
		return out
	}
	for _, c := range fixtures.Load[tc](t, "services.yaml") {
		t.Run(c.Name, func(t *testing.T) {
			got := CheckService(ServiceTarget{Namespace: "web", Name: "hook", Port: 443, Want: c.Want,
				Mutating: objects(c.Mutating), Validating: objects(c.Validating)})
			c.decided.check(t, got)
		})
	}
}

func TestDecideRoundFixtures(t *testing.T) {
	type answer struct {
		Label, Name, Terminal, Why, Hint, Denier string
		Mutated, Ignored                         bool
	}
	type tc struct {
		Name       string   `json:"name"`
		Total      int      `json:"total"`
		Need       int      `json:"need"`
		GoodBefore int      `json:"goodBefore"`
		Retried    bool     `json:"retried"`
		Answers    []answer `json:"answers"`
		// What must be decided.
		Good       int      `json:"good"`
		Ready      bool     `json:"ready"`
		Confirming bool     `json:"confirming"`
		Failed     string   `json:"failed"`
		Message    string   `json:"message"`
		Hint       string   `json:"hint"`
		Mutated    []string `json:"mutated"`
		Deniers    []string `json:"deniers"`
	}
	for _, c := range fixtures.Load[tc](t, "rounds.yaml") {
		t.Run(c.Name, func(t *testing.T) {
			r := Round{Total: c.Total, Need: c.Need, Good: c.GoodBefore, Retried: c.Retried}
			for _, a := range c.Answers {
				r.Answers = append(r.Answers, Answer{Verdict: Verdict{Terminal: a.Terminal, Why: a.Why, Hint: a.Hint, Denier: a.Denier},
					Label: a.Label, Name: a.Name, Mutated: a.Mutated, Ignored: a.Ignored})
			}
			d := Decide(r)
			res := d.Result
			failed := ""
			if res.Failed != nil {
				failed = res.Failed.Error()
			}
			if res.Ready != c.Ready || res.Confirming != c.Confirming || d.Good != c.Good || (c.Failed == "") != (failed == "") ||
				!strings.Contains(failed, c.Failed) || !strings.Contains(res.Message, c.Message) || res.Hint != c.Hint {
				t.Errorf("Decide = %+v (good %d); want ready=%v confirming=%v good=%d failed %q saying %q hint %q",
					res, d.Good, c.Ready, c.Confirming, c.Good, c.Failed, c.Message, c.Hint)
			}
			if !slices.Equal(d.Mutated, c.Mutated) || !slices.Equal(d.Deniers, c.Deniers) {
				t.Errorf("mutated %v, deniers %v; want %v, %v", d.Mutated, d.Deniers, c.Mutated, c.Deniers)
			}
		})
	}
}

// TestNeedDirect: which failurePolicy Ignore webhooks must answer a direct call.
func TestNeedDirect(t *testing.T) {
	x, err := CompileExpect(ptr(sidecarExpect))
	if err != nil {
		t.Fatal(err)
	}
	in := &unstructured.Unstructured{Object: podIn("default")}
	inject := &Hook{Name: "inject", Config: "MutatingWebhookConfiguration/i", Mutating: true, Policy: "Ignore"}
	other := &Hook{Name: "other", Config: "MutatingWebhookConfiguration/o", Mutating: true, Policy: "Ignore"}
	fail := &Hook{Name: "fail", Config: "ValidatingWebhookConfiguration/v", Policy: "Fail"}
	audit := &Hook{Name: "audit", Config: "ValidatingWebhookConfiguration/a", Policy: "Ignore"}
	names := func(hs []*Hook) (out []string) {
		for _, h := range hs {
			out = append(out, h.Name)
		}
		return out
	}
	for _, c := range []struct {
		name  string
		inter []*Hook
		x     *Expect
		want  []string
	}{
		{"a Fail webhook needs none (the API server admits only with its answer)", []*Hook{fail}, x, nil},
		{"the only mutating Ignore webhook is credited with expect's mutation", []*Hook{inject, fail}, x, nil},
		{"near miss: without expect, an Ignore injector must answer", []*Hook{inject}, nil, []string{"inject"}},
		{"near miss: two mutating webhooks intercept: neither is credited", []*Hook{inject, other}, x, []string{"inject", "other"}},
		{"near miss: a validating Ignore webhook must answer", []*Hook{audit, inject}, x, []string{"audit"}},
	} {
		if got := names(NeedDirect(c.inter, c.x, in)); !slices.Equal(got, c.want) {
			t.Errorf("%s: NeedDirect = %v, want %v", c.name, got, c.want)
		}
	}
	// expect already holding on the input proves nothing.
	holds := &unstructured.Unstructured{Object: podIn("default")}
	_ = unstructured.SetNestedSlice(holds.Object, []any{map[string]any{"name": "sidecar"}}, "spec", "containers")
	if got := names(NeedDirect([]*Hook{inject}, x, holds)); !slices.Equal(got, []string{"inject"}) {
		t.Errorf("credited although expect holds on the object as given: %v", got)
	}
}
