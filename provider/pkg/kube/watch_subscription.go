package kube

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

// Subscription is one gate's use of a shared watch. Its owner is poked on wake whenever the
// watched objects change, the cache syncs, or the watch reports an error.
type Subscription struct {
	key   WatchKey
	entry *watchEntry
	cache *WatchCache
	once  sync.Once

	since  uint64         // the watch's consistent reads begun before this subscription (proof_read.go)
	clock  *revisionClock // its resource's (proof_clock.go)
	gsince uint64         // the consistent lists of its resource, any watch, begun before it
	asked  atomic.Bool    // it asked to be proven ahead (proof_ahead.go)
	closed atomic.Bool
	// The consistent read this subscription was served (see proof_read.go), until the store caught up.
	mu         sync.Mutex
	reads      map[string]*freshRead // by store key (listKey: ReadList's)
	settled    map[string]bool       // store keys the store has caught up on: it is their truth
	settledAll bool                  // the store caught up with a scope read: the truth for all
}

// Close releases the subscription; the watch stops when no gate uses it any more.
func (s *Subscription) Close() {
	s.once.Do(func() {
		s.closed.Store(true)
		s.entry.mu.Lock()
		delete(s.entry.wakes, s)
		s.entry.mu.Unlock()
		c := s.cache
		c.mu.Lock()
		defer c.mu.Unlock()
		s.entry.refs--
		if s.entry.refs == 0 {
			close(s.entry.stop)
			delete(c.entries, s.key)
		}
	})
}

// Synced reports whether the initial list has completed, so "not found" can be trusted.
func (s *Subscription) Synced() bool {
	s.entry.mu.Lock()
	defer s.entry.mu.Unlock()
	return s.entry.synced
}

// Err is the watch's last error (list or watch failed, e.g. Forbidden), nil once it recovers.
// A first refusal (401/403) is reported as a RetryingAuthError, which is not itself a 401/403:
// the informer tries again, with refreshed credentials when an exec plugin supplies them, and
// only a second refusal in a row is the API server's answer.
func (s *Subscription) Err() error {
	s.entry.mu.Lock()
	defer s.entry.mu.Unlock()
	if s.entry.err != nil && s.entry.authFailures == 1 &&
		(apierrors.IsUnauthorized(s.entry.err) || apierrors.IsForbidden(s.entry.err)) {
		return &RetryingAuthError{Err: s.entry.err}
	}
	return s.entry.err
}

// RetryingAuthError is a first 401/403 on a list or watch, being retried. It deliberately does
// not unwrap: callers treat it as transient.
type RetryingAuthError struct{ Err error }

func (e *RetryingAuthError) Error() string {
	return "credentials refused, retrying once with refreshed credentials: " + e.Err.Error()
}

// Named reports whether the watch is of one named object.
func (s *Subscription) Named() bool { return s.key.Name != "" }

// Get returns the cached object name (in the key's namespace), or nil when absent.
func (s *Subscription) Get(name string) *unstructured.Unstructured {
	k := name
	if s.key.Namespace != "" {
		k = s.key.Namespace + "/" + name
	}
	o, ok, err := s.entry.informer.GetStore().GetByKey(k)
	if err != nil || !ok {
		return nil
	}
	return o.(*unstructured.Unstructured)
}

// List returns the cached objects matching sel (everything when sel is nil).
func (s *Subscription) List(sel labels.Selector) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range s.entry.informer.GetStore().List() {
		u := o.(*unstructured.Unstructured)
		if sel == nil || sel.Matches(labels.Set(u.GetLabels())) {
			out = append(out, u)
		}
	}
	return out
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

func (s *Subscription) seen() uint64 { return s.entry.seenRV.Load() }

// storeKey is the store key of name in the subscription's namespace.
func (s *Subscription) storeKey(name string) string { return storeKey(s.key.Namespace, name) }

// listKey keeps, among a subscription's reads, the scope read ReadList was served.
const listKey = "\x00list"

// readFor returns the read that answers for store key k (nil: none yet), or settled when the
// store has caught up with one that did: the store alone is then the truth for k.
func (s *Subscription) readFor(k string) (f *freshRead, settled bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.settledAll || s.settled[k] {
		return nil, true
	}
	if f = s.reads[k]; f == nil && k != listKey {
		if f = s.reads[listKey]; f != nil {
			s.keep(k, f)
		}
	}
	return f, false
}

// keep remembers the read the subscription was served for k (s.mu held).
func (s *Subscription) keep(k string, f *freshRead) {
	if s.reads == nil {
		s.reads = map[string]*freshRead{}
	}
	s.reads[k] = f
}

// settle drops the read kept for k once the store has caught up with it, freeing its copies
// once no other key holds it; all: for every key.
func (s *Subscription) settle(k string, all bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if all {
		s.reads, s.settled, s.settledAll = nil, nil, true
		return
	}
	delete(s.reads, k)
	if s.settled == nil {
		s.settled = map[string]bool{}
	}
	s.settled[k] = true
}

// serve asks the watch's readGroup for a read of name (list: of the whole scope) and keeps it.
func (s *Subscription) serve(ctx context.Context, k, name string, list bool) (*freshRead, error) {
	f, err := s.entry.reads.do(ctx, s.since, name, list)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.keep(k, f)
	s.mu.Unlock()
	return f, nil
}

// Read returns the object name (nil when absent) as new as the gate's start or newer: the
// newer of the informer's copy and the consistent read the subscription was served at its
// first call (see readGroup), until the informer has caught up with that read. Call it once
// Synced says the watch is usable.
func (s *Subscription) Read(ctx context.Context, name string) (*unstructured.Unstructured, error) {
	k := s.storeKey(name)
	f, settled := s.readFor(k)
	if settled {
		return s.Get(name), nil
	}
	if f == nil && s.entry.reads.caughtSince(s.since) {
		s.settle(k, true)
		return s.Get(name), nil
	}
	if f == nil || (f.absent && s.Get(name) != nil) {
		var err error
		// After a GET's 404, another GET: the informer's copy may be of an object created since
		// (the GET finds it, as new or newer) or a stale one of an object deleted before (the GET
		// finds none). Not a list: a consistent list waits for the API server's watch cache of a
		// quiet type to catch up with etcd (up to 100 ms), a GET reads etcd.
		if f, err = s.serve(ctx, k, name, false); err != nil {
			return nil, err
		}
	}
	if f.absent {
		return nil, nil // and the informer held no copy
	}
	// The store as of now (it may have moved during the read), against what it has reflected.
	seen := s.seen()
	cached := s.Get(name)
	if f.caughtUp(seen) {
		s.entry.reads.caughtUp(f)
	}
	if f.caughtUp(seen) || f.settles(k, cached) {
		s.settle(k, false)
		return cached, nil
	}
	return f.get(k, cached, seen), nil
}

// ReadList is Read for every object matching sel (nil: all); its consistent read is a list of
// the watch's whole scope.
func (s *Subscription) ReadList(ctx context.Context, sel labels.Selector) ([]*unstructured.Unstructured, error) {
	f, settled := s.readFor(listKey)
	if settled || (f == nil && s.entry.reads.caughtSince(s.since)) {
		s.settle(listKey, true)
		return s.List(sel), nil
	}
	if f == nil {
		var err error
		if f, err = s.serve(ctx, listKey, "", true); err != nil {
			return nil, err
		}
	}
	seen := s.seen() // before the store is read: the store is then at least this new
	if f.caughtUp(seen) || f.settlesAll(s.List(nil)) {
		s.entry.reads.caughtUp(f)
		s.settle(listKey, true)
		return s.List(sel), nil
	}
	return f.list(s.List(sel), seen, sel), nil
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

// LastEvent is when the watch last handed an object to its handlers (zero before the first):
// the trace (READINESS_TRACE) tells a watch's late delivery from a slow check with it.
func (s *Subscription) LastEvent() time.Time {
	if n := s.entry.lastEvent.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}
