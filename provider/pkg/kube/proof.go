package kube

import (
	"context"
	"sync"
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

// Peek returns the informer's copy of name (nil when absent) and what was seen, to Prove later.
func (s *Subscription) Peek(name string) (*unstructured.Unstructured, Seen) {
	seen := s.seen() // before the store is read: the store is then at least this new
	o := s.Get(name)
	return o, Seen{sub: s, name: name, rvs: versions(o), seen: seen}
}

// PeekList returns the informer's copies matching sel (nil: all) and what was seen.
func (s *Subscription) PeekList(sel labels.Selector) ([]*unstructured.Unstructured, Seen) {
	seen := s.seen()
	objs := s.List(sel)
	return objs, Seen{sub: s, sel: sel, rvs: versions(objs...), seen: seen}
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

// beginProofList begins a list of the watch's scope, on the clock at once (see claim), when
// other subscriptions share the watch and none was begun since this one; it runs in the
// background (for a minute at most) whether or not anyone waits for it.
func (s *Subscription) beginProofList() {
	if g := &s.entry.reads; g.shared != nil && g.shared() {
		s.beginList()
	}
}

// beginList begins a list of the watch's scope, unless one was begun since the subscription,
// in the background (for a minute at most) whether or not anyone waits for it.
func (s *Subscription) beginList() {
	g := &s.entry.reads
	if g.begunSince(s.since) {
		return
	}
	bg, cancel := context.WithTimeout(context.Background(), time.Minute)
	r := g.join(bg, s.since, "", true)
	go func() {
		defer cancel()
		_, _ = g.await(bg, r)
	}()
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

// revisionClock remembers what one resource's storage revision was after a point in time, for
// all its watches (namespaces) at once: a consistent list's resourceVersion is its storage's
// revision when it was served (etcd's, shared by every resource that etcd holds), not only its
// namespace's. A store that has reflected its watch up to that revision holds every write made
// before the list began (its watch delivers its writes in order), so a subscription that began
// before the list needs no read of its own. A quiet watch never reaches a newer revision: it is
// proven by its own read instead. One clock per resource, never across resources: an
// aggregated API or a resource in an `--etcd-servers-overrides` etcd counts its own revisions.
type revisionClock struct {
	mu       sync.Mutex
	started  uint64          // lists begun: a list's seq, and what a subscription notes when it begins
	done     []stamp         // lists done, by seq; the oldest dropped past keepStamps
	pending  map[uint64]bool // lists begun and not yet served (or failed)
	changed  chan struct{}   // closed (and replaced) when a pending list ends
	claiming sync.Mutex      // serializes claim
	ahead    aheadBatch      // subscriptions to prove while they wait (ahead.go)
}

// stamp is one consistent list: begun as the seq-th, served at revision rv.
type stamp struct{ seq, rv uint64 }

const keepStamps = 64

// now returns the lists begun so far: a list whose seq is greater began after this call.
func (c *revisionClock) now() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.started
}

// begin notes a consistent list about to be sent and returns its seq; end it with served or
// failed.
func (c *revisionClock) begin() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.started++
	if c.pending == nil {
		c.pending = map[uint64]bool{}
	}
	c.pending[c.started] = true
	return c.started
}

// claim runs begin (which may begin a list) unless a list begun after since exists (in
// flight or done), and reports whether it ran: of verdicts deciding at once, one begins a
// list, the others see it.
func (c *revisionClock) claim(since uint64, begin func()) bool {
	c.claiming.Lock()
	defer c.claiming.Unlock()
	if c.after(since) {
		return false
	}
	begin()
	return true
}

// failed ends the list begun as seq without a revision (an error, a storage without integer
// resourceVersions).
func (c *revisionClock) failed(seq uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.end(seq)
}

// end drops seq from the pending lists and wakes those awaiting them (c.mu held).
func (c *revisionClock) end(seq uint64) {
	if !c.pending[seq] {
		return
	}
	delete(c.pending, seq)
	if c.changed != nil {
		close(c.changed)
		c.changed = nil
	}
}

// listing reports whether a list begun after since is still in flight.
func (c *revisionClock) listing(since uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.listingLocked(since)
}

func (c *revisionClock) listingLocked(since uint64) bool {
	for seq := range c.pending {
		if seq > since {
			return true
		}
	}
	return false
}

// await waits until no list begun after since is in flight (or ctx ends).
func (c *revisionClock) await(ctx context.Context, since uint64) error {
	for {
		c.mu.Lock()
		if !c.listingLocked(since) {
			c.mu.Unlock()
			return nil
		}
		if c.changed == nil {
			c.changed = make(chan struct{})
		}
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// served records the revision the list begun as seq was served at.
func (c *revisionClock) served(seq, rv uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.end(seq)
	i := len(c.done)
	for i > 0 && c.done[i-1].seq > seq {
		i--
	}
	c.done = append(c.done[:i], append([]stamp{{seq, rv}}, c.done[i:]...)...)
	if len(c.done) > keepStamps {
		c.done = c.done[len(c.done)-keepStamps:]
	}
}

// after reports whether a list began after since (served or still in flight).
func (c *revisionClock) after(since uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.started > since
}

// covers reports whether a list that began after since was served at a revision the store
// had reflected (seen).
func (c *revisionClock) covers(since, seen uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.done {
		if st.seq > since && seen >= st.rv {
			return true
		}
	}
	return false
}
