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

// Covered reports whether what was seen is proven without a read: a consistent list of the
// same resource (any namespace), begun after the subscription, was served at a revision the
// store had reflected. Else soon says such a list is in flight or the store is behind its
// revision, but the watch delivered an event within busyWithin: it is likely to pass that revision on its own within milliseconds (a
// burst of writes), which proves it then at no cost, where a read now would cost a request.
func (v Seen) Covered() (ok, soon bool) {
	s := v.sub
	if s.clock.covers(s.gsince, v.seen) {
		return true, false
	}
	if s.entry.reads.begunSince(s.since) {
		return false, false // its own watch's list proves it at no cost: no reason to wait
	}
	last := s.entry.lastEvent.Load()
	return false, s.clock.after(s.gsince) && time.Since(time.Unix(0, last)) < busyWithin
}

// busyWithin is how recent a watch's last event must be for its store to be waited for.
const busyWithin = 100 * time.Millisecond

// Prove reports whether what was seen is the state as of the subscription's start or newer.
// Free when a consistent read of any watch that began after the subscription found etcd at a
// revision the store had already reflected; else the subscription's own consistent read (see
// Read, shared with the watch's other subscriptions) must find exactly the same objects. False
// means the copy judged was stale (or moved on since): judge again on Read.
func (v Seen) Prove(ctx context.Context) (bool, error) {
	s := v.sub
	if s.clock.covers(s.gsince, v.seen) {
		return true, nil
	}
	if v.name != "" && s.entry.reads.shared != nil && s.entry.reads.shared() && !s.entry.reads.begunSince(s.since) {
		// The first proof on a shared watch: this gate's object by a GET (etcd, milliseconds),
		// and a list of the watch's scope in the background, which proves every other gate on
		// it (and, by the clock, on the same resource elsewhere) when they pass.
		go func() {
			bg, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, _ = s.entry.reads.do(bg, s.since, "", true)
		}()
		f, err := s.cache.readNamed(ctx, s.key, v.name)
		if err != nil {
			return false, err
		}
		o := f.objs[s.storeKey(v.name)]
		if f.absent || o == nil {
			return len(v.rvs) == 0, nil
		}
		return sameVersions(v.rvs, versions(o)), nil
	}
	if v.name != "" {
		o, err := s.Read(ctx, v.name)
		if err != nil {
			return false, err
		}
		return sameVersions(v.rvs, versions(o)), nil
	}
	objs, err := s.ReadList(ctx, v.sel)
	if err != nil {
		return false, err
	}
	return sameVersions(v.rvs, versions(objs...)), nil
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
	mu      sync.Mutex
	started uint64  // lists begun: a list's seq, and what a subscription notes when it begins
	done    []stamp // lists done, by seq; the oldest dropped past keepStamps
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

// begin notes a consistent list about to be sent and returns its seq.
func (c *revisionClock) begin() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.started++
	return c.started
}

// served records the revision the list begun as seq was served at.
func (c *revisionClock) served(seq, rv uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
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
