package kube

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

// Proof on demand. Only a verdict that ends a gate (ready, or failed) needs state at least as
// new as the gate's start; "not ready yet" on a lagging copy costs nothing, since the watch
// delivers the newer state in order. So a check may judge the informer's copy at once (Peek,
// PeekList) and prove what it judged only when its verdict would end the gate (Seen.Prove):
// a thousand gates waiting on one watch make no consistent read until they would pass, and by
// then one read proves them all (see readGroup.caughtSince and revisionClock).

// Seen is what a check judged from a subscription's informer copy: the objects' resource
// versions by store key, and how far the store had reflected the watch when it was read.
type Seen struct {
	sub  *Subscription
	name string          // the object read; "" for a list
	sel  labels.Selector // a list's selector (nil: all)
	rvs  map[string]string
	seen uint64 // seenRV before the store was read: the store held every write up to it
}

// versions keys the objects' resource versions by store key.
func versions(objs ...*unstructured.Unstructured) map[string]string {
	m := make(map[string]string, len(objs))
	for _, o := range objs {
		if o != nil {
			m[storeKey(o.GetNamespace(), o.GetName())] = o.GetResourceVersion()
		}
	}
	return m
}

// ProofStep is the next step in proving what a verdict judged (see ProofFacts.Next).
type ProofStep int

const (
	// Proven at no cost (see ProofFacts.Covered).
	Proven ProofStep = iota
	// AwaitList: a consistent list of the resource (any namespace), begun after the
	// subscription, is in flight; its revision may prove the copy at no cost (Seen.Next awaits it).
	AwaitList
	// AwaitWatch: such a list is done and the watch, which keeps delivering events, is about
	// to pass its revision: wait for its events, briefly, rather than read.
	AwaitWatch
	// Read: prove it by a consistent read (Seen.Prove).
	Read
)

// ProofFacts are what the proof policy decides on (see Seen.Facts).
type ProofFacts struct {
	// Covered: a list of the resource begun after the subscription was served at a revision
	// the store has reflected, and the store holds what was judged.
	Covered bool
	Listing bool // a list of the resource begun after the subscription is in flight
	OwnList bool // a list of the watch's scope begun after the subscription: reading it is free
	Listed  bool // a list of the resource begun after the subscription is done
	Busy    bool // the watch delivered an event within busyWithin
}

// Next is the proof policy: free when covered; else wait for a list that is coming anyway;
// else read, unless the watch is about to pass a list's revision on its own and mayWait (the
// gate has neither waited long for one nor proven a verdict yet). A read of a list the watch
// already made costs nothing, so is never waited for.
func (f ProofFacts) Next(mayWait bool) ProofStep {
	switch {
	case f.Covered:
		return Proven
	case f.Listing:
		return AwaitList
	case f.Listed && f.Busy && mayWait && !f.OwnList:
		return AwaitWatch
	}
	return Read
}

// busyWithin is how recent a watch's last event must be for its store to be waited for.
const busyWithin = 100 * time.Millisecond

// busy reports whether the watch delivered an event within busyWithin: more are likely to
// follow at once (a burst of writes).
func (e *watchEntry) busy() bool {
	return time.Since(time.Unix(0, e.lastEvent.Load())) < busyWithin
}

// Facts returns what decides how what was seen is to be proven.
func (v Seen) Facts() ProofFacts {
	s := v.sub
	if v.covered() {
		return ProofFacts{Covered: true}
	}
	return ProofFacts{
		Listing: s.clock.listing(s.gsince),
		OwnList: s.entry.reads.begunSince(s.since),
		Listed:  s.clock.after(s.gsince),
		Busy:    s.entry.busy(),
	}
}

// covered reports whether what was seen is proven without a read: a consistent list of the
// same resource (any namespace), begun after the subscription, was served at a revision the
// store had reflected when it was read, or has reflected since while still holding exactly
// what was judged.
func (v Seen) covered() bool {
	s := v.sub
	if s.clock.covers(s.gsince, v.seen) {
		return true
	}
	now := s.seen() // before the store is read again: it is then at least this new
	return now > v.seen && s.clock.covers(s.gsince, now) && v.unchanged()
}

// unchanged reports whether the store still holds exactly what was seen.
func (v Seen) unchanged() bool {
	if v.name != "" {
		return sameVersions(v.rvs, versions(v.sub.Get(v.name)))
	}
	return sameVersions(v.rvs, versions(v.sub.List(v.sel)...))
}

// Next returns how what was seen is to be proven: Proven, AwaitWatch or Read. A list of the
// resource in flight (AwaitList) is waited for here, once, and the policy asked again. Before
// a Read on a watch other subscriptions share, the watch's scope list is begun, unless a list
// of the resource began meanwhile (then that one is awaited): the one list proves every
// verdict on the watch, and by the clock on the resource's other watches, so verdicts passing
// at once on many watches cost one list, not one each.
func (v Seen) Next(ctx context.Context, mayWait bool) (ProofStep, error) {
	s := v.sub
	awaited := false
	for {
		f := v.Facts()
		f.Listing = f.Listing && !awaited // a list begun since the one awaited is not waited for
		step := f.Next(mayWait)
		if step == AwaitList || (step == Read && !awaited && !s.clock.claim(s.gsince, s.beginProofList)) {
			if err := s.clock.await(ctx, s.gsince); err != nil {
				return Read, err
			}
			awaited = true
			continue
		}
		return step, nil
	}
}

// Prove reports whether what was seen is the state as of the subscription's start or newer.
// Free when covered; else the subscription's own consistent read (see Read, shared with the
// watch's other subscriptions) must find exactly the same objects. False means the copy
// judged was stale (or moved on since): judge again on Read.
func (v Seen) Prove(ctx context.Context) (bool, error) {
	s := v.sub
	if v.covered() {
		return true, nil
	}
	var found []*unstructured.Unstructured
	switch {
	case v.name != "" && !s.entry.busy() && s.entry.reads.shared != nil && s.entry.reads.shared() && !s.entry.reads.listed(s.since):
		// A quiet shared watch whose list is not done: the list (begun by Next, or here) goes
		// on in the background for the watch's other verdicts, and this one GETs its object.
		// A consistent list waits for the API server's watch cache of the type to catch up
		// with etcd, until its next progress request (up to ~100 ms, 76 ms measured), where a
		// GET reads etcd in milliseconds. On a busy watch the type's next write brings the
		// cache up to date at once: the list is as quick, and the GET is saved.
		s.beginProofList()
		f, err := s.cache.readNamed(ctx, s.key, v.name)
		if err != nil {
			return false, err
		}
		found = []*unstructured.Unstructured{f.objs[s.storeKey(v.name)]} // nil when absent
	case v.name != "":
		o, err := s.Read(ctx, v.name)
		if err != nil {
			return false, err
		}
		found = []*unstructured.Unstructured{o}
	default:
		objs, err := s.ReadList(ctx, v.sel)
		if err != nil {
			return false, err
		}
		found = objs
	}
	return sameVersions(v.rvs, versions(found...)), nil
}

func sameVersions(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
