package conversion

import (
	"errors"
	"reflect"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/internal/fixtures"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/status"
)

// apiError is an API server's answer as a fixture writes it: a Status (code and reason, as
// client-go returns it: ClassifyConversion reads both), or with no code a plain error
// (client-side: a rate limiter, a lost connection).
type apiError struct {
	Code    int32  `json:"code"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

func (e *apiError) err() error {
	switch {
	case e == nil:
		return nil
	case e.Code == 0:
		return errors.New(e.Message)
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: e.Code,
		Reason: metav1.StatusReason(e.Reason), Message: e.Message}}
}

// answer is an Answer as a fixture writes it.
type answer struct {
	Version   string    `json:"version"`
	Namespace string    `json:"namespace"`
	Err       *apiError `json:"err"`
}

func answers(as []answer) []Answer {
	var out []Answer
	for _, a := range as {
		out = append(out, Answer{Version: a.Version, Namespace: a.Namespace, Err: a.Err.err()})
	}
	return out
}

// outcomes are the fixtures' names of the outcomes, in Outcome's order.
var outcomes = []string{"notYet", "confirming", "proven", "nothingToConvert", "failed", "interrupted"}

// crdOf reads a fixture's CRD manifest as the gate does (status.CRD over the decoded object).
func crdOf(t *testing.T, m map[string]any) (string, status.CRDResult) {
	t.Helper()
	u := fixtures.Object(t, m)
	return u.GetName(), status.CRD(u)
}

func TestDecideFixtures(t *testing.T) {
	type verdict struct {
		Outcome string `json:"outcome"`
		Message string `json:"message"`
		Hint    string `json:"hint"`
		Failed  string `json:"failed"`
		Good    int    `json:"good"`
		Note    string `json:"note"`
	}
	type tc struct {
		Name    string         `json:"name"`
		CRD     map[string]any `json:"crd"`
		Lists   []answer       `json:"lists"`
		Found   *Ref           `json:"found"`
		Gets    []answer       `json:"gets"`
		DryRuns []answer       `json:"dryRuns"`
		Ended   bool           `json:"ended"`
		Good    int            `json:"good"`
		Need    int            `json:"need"`
		Want    verdict        `json:"want"`
	}
	seen := map[string]bool{}
	for _, c := range fixtures.Load[tc](t, "rounds.yaml") {
		t.Run(c.Name, func(t *testing.T) {
			if c.Need == 0 {
				t.Fatal("a case names the good rounds it needs")
			}
			in := Input{Lists: answers(c.Lists), Found: c.Found, Gets: answers(c.Gets), DryRuns: answers(c.DryRuns),
				Ended: c.Ended, Good: c.Good, Need: c.Need}
			in.Name, in.CRD = crdOf(t, c.CRD)
			v := Decide(in)
			got := verdict{Outcome: outcomes[v.Outcome], Message: v.Message, Hint: v.Hint, Good: v.Good, Note: v.Note}
			if v.Err != nil {
				got.Failed = v.Err.Error()
			}
			if got != c.Want {
				g, _ := yaml.Marshal(got)
				w, _ := yaml.Marshal(c.Want)
				t.Errorf("Decide =\n%swant\n%s", g, w)
			}
			if (v.Outcome == Failed) != (v.Err != nil) {
				t.Errorf("outcome %s with error %v", outcomes[v.Outcome], v.Err)
			}
			seen[c.Want.Outcome] = true
		})
	}
	// The table holds every outcome, so a Decide that always answered one would fail it.
	for _, o := range outcomes {
		if !seen[o] {
			t.Errorf("no case decides %s", o)
		}
	}
}

func TestMatchProbesFixtures(t *testing.T) {
	type tc struct {
		Name      string           `json:"name"`
		CRDs      []map[string]any `json:"crds"`
		Probes    []map[string]any `json:"probes"`
		Namespace string           `json:"namespace"`
		Notes     []Note           `json:"notes"`
		Err       string           `json:"err"`
		// Version, when given: the object Probe builds for crds[0] in it must be Built.
		Version string         `json:"version"`
		Built   map[string]any `json:"built"`
	}
	for _, c := range fixtures.Load[tc](t, "probes.yaml") {
		t.Run(c.Name, func(t *testing.T) {
			var probes []map[string]any
			for _, m := range c.Probes {
				probes = append(probes, fixtures.Object(t, m).Object) // integers as int64, as built decodes them
			}
			var crds []status.CRDResult
			for _, m := range c.CRDs {
				_, r := crdOf(t, m)
				crds = append(crds, r)
			}
			notes, err := MatchProbes(probes, crds)
			if !reflect.DeepEqual(notes, c.Notes) {
				t.Errorf("notes = %+v, want %+v", notes, c.Notes)
			}
			if got := ""; err != nil || c.Err != "" {
				if err != nil {
					got = err.Error()
				}
				if got != c.Err {
					t.Errorf("err = %q, want %q", got, c.Err)
				}
			}
			if (c.Version == "") != (c.Built == nil) {
				t.Fatal("give version and built together")
			}
			if c.Version != "" {
				got := Probe(crds[0], c.Version, probes, c.Namespace)
				if want := fixtures.Object(t, c.Built); !reflect.DeepEqual(got.Object, want.Object) {
					g, _ := yaml.Marshal(got.Object)
					w, _ := yaml.Marshal(want.Object)
					t.Errorf("Probe =\n%swant\n%s", g, w)
				}
			}
		})
	}
}
