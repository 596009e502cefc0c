package objectrule

import (
	"slices"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/internal/fixtures"
)

// failure is a p.CheckFailure as a fixture writes it (same fields, so one converts to the other).
type failure struct {
	Property string `json:"property"`
	Reason   string `json:"reason"`
}

// verdict is a status.Result as a fixture writes it.
type verdict struct {
	Ready   bool   `json:"ready"`
	Failed  bool   `json:"failed"`
	Message string `json:"message"`
}

func TestCompileFixtures(t *testing.T) {
	type tc struct {
		Name string `json:"name"`
		Args Args   `json:"args"`
		// Unknown are inputs whose values are not known yet (computed at preview).
		Unknown []string  `json:"unknown"`
		Fails   []failure `json:"fails"`
		// Mode, Deleted, StrictPVC, FailedCel: the rule compiled (checked when fails is empty).
		Mode      string `json:"mode"`
		Deleted   bool   `json:"deleted"`
		StrictPVC bool   `json:"strictPvc"`
		FailedCel bool   `json:"failedCel"`
		// Object, when given, is judged by the rule's Eval, as Want; NoEval: the rule has none.
		Object map[string]any `json:"object"`
		Want   *verdict       `json:"want"`
		NoEval bool           `json:"noEval"`
	}
	for _, c := range fixtures.Load[tc](t, "compile.yaml") {
		t.Run(c.Name, func(t *testing.T) {
			r, fails := Compile(c.Args, func(k string) bool { return !slices.Contains(c.Unknown, k) })
			got := []failure{}
			for _, f := range fails {
				got = append(got, failure(f))
			}
			want := c.Fails
			if want == nil {
				want = []failure{}
			}
			if !slices.Equal(got, want) {
				y, _ := yaml.Marshal(got)
				t.Errorf("failures:\n%s\nwant %+v", y, want)
			}
			if len(c.Fails) > 0 {
				return
			}
			if c.Mode == "" {
				t.Fatal("a case that compiles names its mode")
			}
			if r.Mode != c.Mode || r.Deleted != c.Deleted || r.StrictPVC != c.StrictPVC || (r.FailedCel != nil) != c.FailedCel {
				t.Errorf("rule: mode %s deleted %v strictPvc %v failedCel %v; want %s %v %v %v",
					r.Mode, r.Deleted, r.StrictPVC, r.FailedCel != nil, c.Mode, c.Deleted, c.StrictPVC, c.FailedCel)
			}
			if c.NoEval != (r.Eval == nil) {
				t.Errorf("noEval %v, but Eval nil is %v", c.NoEval, r.Eval == nil)
			}
			if (c.Object == nil) != (c.Want == nil) {
				t.Fatal("give object and want together")
			}
			if c.Object != nil {
				res := r.Eval(fixtures.Object(t, c.Object))
				if got := (verdict{Ready: res.Ready, Failed: res.Failed, Message: res.Message}); got != *c.Want {
					t.Errorf("Eval = %+v, want %+v", got, *c.Want)
				}
			}
		})
	}
}
