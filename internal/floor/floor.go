// Package floor computes the best possible `pulumi up` of one measured run, its floor: every
// object's create step begun the instant its own prerequisites held (as an observer outside the
// product saw them in that run) and the objects it depends on in the program had finished, each
// then taking as long as pulumi-kubernetes took to create and await it in the run. The floor is
// when the last object would have finished; the path of objects that decides it is its critical
// path. Beside it, each object's lag: how long after its prerequisites held (in the run) its
// create step began.
//
// A prerequisite that follows from an earlier object (a Secret issued after its Certificate)
// is taken as the run saw it: a way that created the Certificate late also sees the Secret late,
// which its own lag for the Certificate shows.
package floor

import (
	"fmt"
	"time"
)

// Object is one object of the program: its Pulumi name, the objects it depends on (dependsOn,
// as the program writes it, gates left out) and the observer's condition for its own
// prerequisites ("" when it has none beyond its dependencies: a Release, a Namespace).
type Object struct {
	Name  string
	Deps  []string
	Ready string
}

// Run is what one run saw: when each object's create step began and when the engine reported
// it created (pulumi-kubernetes' await of it included), and when each condition first held.
type Run struct {
	Began    time.Time
	Created  map[string]time.Time
	Finished map[string]time.Time
	Held     map[string]time.Time
}

// Result is a run's floor (from Run.Began), its critical path (first object first) and each
// object's lag. Missing names what the run did not see (an object never created, a condition
// never held): without it there is no floor.
type Result struct {
	Floor   time.Duration
	Path    []string
	Lags    map[string]time.Duration
	Missing []string
}

// Schedule computes a run's floor. objs must list every object after those it depends on
// (program order does).
func Schedule(objs []Object, r Run) Result {
	res := Result{Lags: map[string]time.Duration{}}
	var t0 time.Time // the engine's first create step: nothing could start before it
	for _, o := range objs {
		if c, ok := r.Created[o.Name]; ok && (t0.IsZero() || c.Before(t0)) {
			t0 = c
		}
	}
	start, finish := map[string]time.Time{}, map[string]time.Time{}
	from := map[string]string{} // what decided an object's ideal start ("" the engine's first step)
	for _, o := range objs {
		created, okc := r.Created[o.Name]
		finished, okf := r.Finished[o.Name]
		if !okc || !okf {
			res.Missing = append(res.Missing, "object "+o.Name)
			continue
		}
		ideal, why := t0, ""
		prereq := time.Time{} // in the run: its condition and its dependencies' finish
		if o.Ready != "" {
			held, ok := r.Held[o.Ready]
			if !ok {
				res.Missing = append(res.Missing, "condition "+o.Ready)
				continue
			}
			prereq = held
			if held.After(ideal) {
				ideal, why = held, ""
			}
		}
		complete := true
		for _, d := range o.Deps {
			f, ok := finish[d]
			if !ok {
				complete = false
				break
			}
			if rf := r.Finished[d]; rf.After(prereq) {
				prereq = rf
			}
			if f.After(ideal) {
				ideal, why = f, d
			}
		}
		if !complete {
			res.Missing = append(res.Missing, "dependency of "+o.Name)
			continue
		}
		if !prereq.IsZero() {
			res.Lags[o.Name] = created.Sub(prereq)
		}
		start[o.Name], finish[o.Name], from[o.Name] = ideal, ideal.Add(finished.Sub(created)), why
	}
	if len(res.Missing) > 0 || len(objs) == 0 {
		return res
	}
	last := objs[0].Name
	for _, o := range objs {
		if finish[o.Name].After(finish[last]) {
			last = o.Name
		}
	}
	res.Floor = finish[last].Sub(r.Began)
	for n := last; n != ""; n = from[n] {
		res.Path = append([]string{n}, res.Path...)
	}
	return res
}

// String is the critical path with each object's ideal finish, for a log.
func (r Result) String() string {
	if len(r.Missing) > 0 {
		return fmt.Sprintf("no floor: the run did not see %v", r.Missing)
	}
	return fmt.Sprintf("floor %s through %v", r.Floor.Round(time.Millisecond), r.Path)
}

// Hops splits each lag at the step that let the object go: the last of its dependencies or of
// the run's other steps (gates: names in Run.Finished that are not objects) to finish before
// its create step began. An object's hop is its create step's start after that finish (the
// engine's part: the finished step's registration answered, the object's sent, transformed and
// checked); the rest of its lag is how long that step finished after the prerequisites held
// (the gates' part). Which gate let an object go is inferred from the timing alone, so a gate of
// another object that finished just after its own can shorten its hop by that much. Objects
// with nothing finished before their create step have no hop.
func Hops(objs []Object, r Run) map[string]time.Duration {
	isObject := map[string]bool{}
	for _, o := range objs {
		isObject[o.Name] = true
	}
	hops := map[string]time.Duration{}
	for _, o := range objs {
		created, ok := r.Created[o.Name]
		if !ok {
			continue
		}
		var released time.Time
		consider := func(n string) {
			if f, ok := r.Finished[n]; ok && !f.After(created) && f.After(released) {
				released = f
			}
		}
		for _, d := range o.Deps {
			consider(d)
		}
		for n := range r.Finished {
			if !isObject[n] {
				consider(n)
			}
		}
		if !released.IsZero() {
			hops[o.Name] = created.Sub(released)
		}
	}
	return hops
}
