package admission

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/verdict"
)

// AdmissionReady's rounds: every round dry-runs each object once (the caller gathers the
// answers); Decide judges the round from them.

// Answer is the API server's answer for one object in one round, judged.
type Answer struct {
	Verdict
	// Label names the object in messages: "objects[0] (Pod apps/web)".
	Label string
	// Name is the object's Kind/namespace/name as admitted; Mutated says a webhook changed it.
	Name    string
	Mutated bool
	// Ignored says a failurePolicy Ignore webhook may intercept the object: the API server skips
	// it, unseen, while it is down, so a retry of a failed create cannot stand in for a second round.
	Ignored bool
}

// Round is what one round gathered: the answers, in the objects' order, up to the first verdict
// (the caller stops there: the round is decided); Total objects; Good rounds in a row before this
// one that admitted all of them, and Need such rounds to pass.
//
// Retried says each object's create is retried by autoGate's error hook when the API server could
// not call a webhook (docs/retry.md): a webhook with failurePolicy Fail that flaps after one
// admitted round then fails the create where it shows, and the hook proves admission again
// before trying again, so one round is enough. Not where a failurePolicy Ignore webhook may
// intercept an object (Answer.Ignored): its flap lets the create through unmutated, which
// nothing sees.
type Round struct {
	Answers    []Answer
	Total      int
	Good, Need int
	Retried    bool
}

// RoundDecision is a round judged: Result (the caller's wait loop keeps the schedule); Good,
// the rounds in a row now admitting all; of an admitting round, Mutated (sorted); Deniers every
// webhook or policy that denied an object or could not be called in it.
type RoundDecision struct {
	Result  verdict.Result
	Good    int
	Mutated []string
	Deniers []string
}

// Decide judges a round. A verdict on any object fails at once; otherwise every object not yet
// admitted is listed with why, and the round does not count. `Need` admitting rounds in a row pass.
func Decide(r Round) RoundDecision {
	var d RoundDecision
	var pending, hints []string
	for _, a := range r.Answers {
		if a.Denier != "" && !slices.Contains(d.Deniers, a.Denier) {
			d.Deniers = append(d.Deniers, a.Denier)
		}
	}
	sort.Strings(d.Deniers)
	for _, a := range r.Answers {
		if a.Terminal != "" {
			d.Result = verdict.Result{Failed: fmt.Errorf("%s: %s", a.Label, a.Terminal)}
			return d
		}
		if a.Why != "" {
			pending = append(pending, a.Label+": "+a.Why)
			if a.Hint != "" && !slices.Contains(hints, a.Hint) {
				hints = append(hints, a.Hint)
			}
			continue
		}
		if a.Mutated {
			d.Mutated = append(d.Mutated, a.Name)
		}
	}
	if len(pending) > 0 {
		d.Mutated = nil
		d.Result = verdict.Result{Message: fmt.Sprintf("%d of %d admitted; %s", r.Total-len(pending), r.Total, strings.Join(pending, "; ")),
			Hint: strings.Join(hints, "; ")}
		return d
	}
	if len(r.Answers) < r.Total {
		// Not every object was tried: never a good round.
		d.Result = verdict.Result{Message: fmt.Sprintf("%d of %d objects dry-run this round", len(r.Answers), r.Total)}
		return d
	}
	d.Good = r.Good + 1
	sort.Strings(d.Mutated)
	need := r.Need
	if r.Retried && !slices.ContainsFunc(r.Answers, func(a Answer) bool { return a.Ignored }) {
		need = 1
	}
	if d.Good < need {
		d.Result = verdict.Result{Message: fmt.Sprintf("all %d admitted in %d of %d consecutive rounds; confirming", r.Total, d.Good, need), Confirming: true}
		return d
	}
	msg := fmt.Sprintf("all %d admitted in %d consecutive rounds", r.Total, d.Good)
	if need < r.Need {
		msg = fmt.Sprintf("all %d admitted in %d round (retried: every webhook that may intercept them has failurePolicy Fail, "+
			"so a flap fails the create visibly and autoGate's error hook retries it)", r.Total, d.Good)
	}
	d.Result = verdict.Result{Ready: true, Message: msg}
	return d
}

// NeedDirect lists the failurePolicy Ignore webhooks among interceptors (the webhooks that may
// intercept the object in, see Interceptors) that must answer a direct call: the API server admits
// without such a webhook while it is down, so an admission shows nothing about it. A mutating one
// that the mutation expect sees is credited to (see CreditsMutation) needs none.
func NeedDirect(interceptors []*Hook, x *Expect, in *unstructured.Unstructured) []*Hook {
	var out []*Hook
	for _, h := range interceptors {
		if h.Policy != "Ignore" {
			continue
		}
		if h.Mutating && x != nil && CreditsMutation(x, in, h, interceptors) == "" {
			continue // the mutation expect sees is its answer
		}
		out = append(out, h)
	}
	return out
}
