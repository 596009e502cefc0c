package kube

import (
	"context"
	"strconv"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// A verdict that ends a gate must judge state at least as new as the gate's start (a check
// judges the informer's copy and proves it only then: see proof.go, whose Prove comes to
// Subscription.Read). A shared informer that another gate started earlier may not have seen a
// write made just before this gate started (a rollout the previous step began, a Helm
// upgrade): its watch stream can lag.
// So every subscription is served one consistent read of what it asks for (a GET of a named
// object reads etcd directly, in milliseconds) and, until the informer has caught up with that
// read, answers with the newer of the two.
//
// The reads are shared: a watch makes one consistent read at a time (see readGroup), and every
// subscription that asks while one is in flight waits for the next, which begins after it asked
// and so is at least as new as its start; a read that began before a subscription asked never
// serves it. A lone subscription's read is a GET of its one name; a read on a watch other
// subscriptions share is one consistent list of the watch's whole scope, which serves them all. A subscription drops the read it was served
// as soon as the informer's store has caught up with it: from then on the store is the truth.

// freshRead is one consistent read: the objects found (by store key, see storeKey) and the
// resourceVersion it is current at. For a GET the object's own resourceVersion is that floor.
type freshRead struct {
	objs  map[string]*unstructured.Unstructured
	floor uint64
	ok    bool // floor parsed: etcd resourceVersions are integers that grow with every write
	// scope: a list of the watch's whole scope, which answers for every name and selector
	// (its floor says as of when an object not found was absent).
	scope bool
	// absent is a GET's 404, which says nothing of when: only when the informer holds a copy
	// to judge is the read repeated (see Read).
	absent bool
	seq    uint64 // its place among its watch's reads (see readGroup)
}

// storeKey is the informer store's key of an object (cache.MetaNamespaceKeyFunc).
func storeKey(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// rv parses a resourceVersion; ok is false for a storage that does not use integers.
func rv(s string) (uint64, bool) {
	v, err := strconv.ParseUint(s, 10, 64)
	return v, err == nil
}

// newer returns whichever of a (the informer's copy) and b (the consistent read) is newer,
// preferring the informer's on a tie (it goes on to see later events).
func newer(a, b *unstructured.Unstructured) *unstructured.Unstructured {
	if a == nil || b == nil {
		if b != nil {
			return b
		}
		return a
	}
	av, aok := rv(a.GetResourceVersion())
	bv, bok := rv(b.GetResourceVersion())
	if aok && bok && bv > av {
		return b
	}
	return a
}

// caughtUp reports whether the informer's store, having reflected every write up to seen,
// holds every write the read saw. (Not the reflector's LastSyncResourceVersion: the reflector
// is ahead of the store.) An unparsable floor cannot be compared: the informer is trusted.
func (f *freshRead) caughtUp(seen uint64) bool {
	return !f.ok || seen >= f.floor
}

// settles reports whether the store's copy at key k (nil: none) makes the read useless for k:
// it is at least as new as the read's copy, or, for an object the read did not find, written
// after the read. The watch delivers k's writes in order, so the store never goes back from
// there. (A list's floor is etcd's revision, which other types' writes move: a quiet type's
// informer may never see it, so its objects are compared one by one.)
func (f *freshRead) settles(k string, cached *unstructured.Unstructured) bool {
	if !f.ok || cached == nil {
		return !f.ok
	}
	c, ok := rv(cached.GetResourceVersion())
	if !ok {
		return false
	}
	if o, found := f.objs[k]; found {
		v, ok := rv(o.GetResourceVersion())
		return ok && c >= v
	}
	return c > f.floor
}

// settlesAll reports whether store (every object the informer holds) makes the read useless:
// every object read is there at least as new, and every object there that the read did not
// find was written after it (else its deletion may not have reached the store yet).
func (f *freshRead) settlesAll(store []*unstructured.Unstructured) bool {
	if !f.ok {
		return true
	}
	seen := 0
	for _, o := range store {
		k := storeKey(o.GetNamespace(), o.GetName())
		if !f.settles(k, o) {
			return false
		}
		if _, found := f.objs[k]; found {
			seen++
		}
	}
	return seen == len(f.objs)
}

// get resolves the object at store key k from the informer's copy and the read: once the
// informer has caught up its copy is the truth; before, the read's copy unless the informer
// holds a newer one, and for an object the read did not find, the informer's copy only when it
// was written after the read.
func (f *freshRead) get(k string, cached *unstructured.Unstructured, seen uint64) *unstructured.Unstructured {
	if f.caughtUp(seen) {
		return cached
	}
	if o, ok := f.objs[k]; ok {
		return newer(cached, o)
	}
	if cached != nil {
		if v, ok := rv(cached.GetResourceVersion()); ok && v > f.floor {
			return cached
		}
	}
	return nil
}

// list resolves a list the same way, object by object; the read must have listed sel's scope.
func (f *freshRead) list(cached []*unstructured.Unstructured, seen uint64, sel labels.Selector) []*unstructured.Unstructured {
	if f.caughtUp(seen) {
		return cached
	}
	byKey := map[string]*unstructured.Unstructured{}
	for _, o := range cached {
		byKey[storeKey(o.GetNamespace(), o.GetName())] = o
	}
	var out []*unstructured.Unstructured
	for k, o := range f.objs {
		if sel == nil || sel.Matches(labels.Set(o.GetLabels())) {
			out = append(out, newer(byKey[k], o))
		}
		delete(byKey, k)
	}
	for _, o := range byKey {
		if v, ok := rv(o.GetResourceVersion()); ok && v > f.floor {
			out = append(out, o)
		}
	}
	return out
}

// readGroup makes one watch's consistent reads, one at a time. A read serves a subscription
// only if it began after the subscription did (a read that began earlier may predate a write
// the subscription's gate must see). So whoever asks while a read is in flight joins it only
// when it began after the asker subscribed and answers what the asker needs; otherwise the
// asker joins the next read, which starts when the one in flight ends, after every one of its
// waiters asked. The newest list of the watch's scope is kept for subscriptions that began
// before it and ask later, until the store has caught up with it; from then on such a
// subscription trusts the store at once. A thousand gates joining one watch at once so cost a
// handful of reads, not a thousand.
type readGroup struct {
	read func(ctx context.Context, n readNeed) (*freshRead, error)
	// begin notes a list of the scope on its resource's revision clock as it begins (nil: the
	// read notes it itself), so that another watch's verdict knows at once that it is coming.
	begin func() uint64
	// shared reports whether other subscriptions use the watch (and its scope is small): then a
	// read is a list of the scope even for one name, so that it proves every subscription begun
	// before it at once (caughtSince), and other namespaces' too (revisionClock), instead of one
	// GET each.
	shared func() bool

	mu       sync.Mutex
	inflight *sharedRead // nil when no read is in flight
	next     *sharedRead // the read to start when the one in flight ends; its waiters asked before it began
	started  uint64      // reads begun: a read's seq, and what a subscription notes when it begins
	last     *sharedRead // the newest scope read done, until the store caught up with it
	caught   uint64      // seq of the newest scope read the store has caught up with
}

// caughtSince reports whether the store has caught up with a scope read that began after since:
// it then holds every write made before a subscription that began at since.
func (g *readGroup) caughtSince(since uint64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.caught > since
}

// caughtUp records that the store has caught up with f (by its floor: every object of the
// scope); a kept read as old or older is dropped.
func (g *readGroup) caughtUp(f *freshRead) {
	if !f.scope {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.caught = max(g.caught, f.seq)
	if g.last != nil && g.last.seq <= f.seq {
		g.last = nil
	}
}

// begunSince reports whether a list of the scope began after since: in flight, done and kept,
// or caught up with by the store.
func (g *readGroup) begunSince(since uint64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.caught > since || (g.last != nil && g.last.seq > since) ||
		(g.inflight != nil && g.inflight.seq > since && g.inflight.need.list)
}

// listed reports whether a list of the scope begun after since is done (kept, or caught up
// with by the store): reading it is free.
func (g *readGroup) listed(since uint64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.caught > since || (g.last != nil && g.last.seq > since)
}

// now returns the number of reads begun so far: a read whose seq is greater began after this call.
func (g *readGroup) now() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.started
}

// readNeed is what the waiters of one read ask for: a GET answers one name; anything more
// (several names, a list, a name a GET found absent while the informer holds a copy) is one
// consistent list of the watch's scope, which answers for all of it.
type readNeed struct {
	names map[string]bool
	list  bool
	clock uint64 // a list's seq on the revision clock, when noted as it began (see readGroup.begin)
}

// single returns the one name a GET can answer, if that is all that is needed.
func (n readNeed) single() (string, bool) {
	if n.list || len(n.names) != 1 {
		return "", false
	}
	for name := range n.names {
		return name, true
	}
	return "", false
}

// sharedRead is one consistent read and the waiters it serves; it is cancelled when every
// waiter has given up (their gates timed out or were cancelled).
type sharedRead struct {
	seq     uint64 // its place among the group's reads, set when it begins
	need    readNeed
	waiters int
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{}
	f       *freshRead
	err     error
}

// do asks for a read answering name (or, with list, the watch's whole scope) that began after
// since (see now), and waits for it or for ctx.
func (g *readGroup) do(ctx context.Context, since uint64, name string, list bool) (*freshRead, error) {
	return g.await(ctx, g.join(ctx, since, name, list))
}

// answers reports whether the read answers name (or, with list, the whole scope).
func (n readNeed) answers(name string, list bool) bool {
	if n.list {
		return true
	}
	single, ok := n.single()
	return ok && !list && single == name
}

// join adds a waiter to the read in flight when that one began after since and answers what is
// asked, else to the next read, starting it at once when none is in flight.
func (g *readGroup) join(ctx context.Context, since uint64, name string, list bool) *sharedRead {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.caught > since {
		return caughtRead // the store caught up with a list begun after the asker meanwhile
	}
	if r := g.last; r != nil && r.seq > since {
		return r // done: a list of the whole scope, begun after the asker
	}
	if r := g.inflight; r != nil && r.seq > since && r.waiters > 0 && r.need.answers(name, list) {
		r.waiters++
		return r
	}
	r := g.next
	if r == nil {
		rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		r = &sharedRead{need: readNeed{names: map[string]bool{}}, ctx: rctx, cancel: cancel, done: make(chan struct{})}
		g.next = r
	}
	if list {
		r.need.list = true
	} else {
		r.need.names[name] = true
	}
	r.waiters++
	if g.inflight == nil {
		g.start()
	}
	return r
}

// caughtRead answers a subscription whose store has caught up with a read begun after it: its
// floor cannot be compared (ok false), so the store is trusted (see freshRead.caughtUp).
var caughtRead = func() *sharedRead {
	r := &sharedRead{done: make(chan struct{}), f: &freshRead{objs: map[string]*unstructured.Unstructured{}}}
	close(r.done)
	return r
}()

// start begins the next read (g.mu held); when it ends, the one queued meanwhile begins.
func (g *readGroup) start() {
	r := g.next
	if g.shared != nil && g.shared() {
		r.need.list = true
	}
	if r.need.list && g.begin != nil {
		r.need.clock = g.begin()
	}
	g.started++
	r.seq = g.started
	g.next, g.inflight = nil, r
	go func() {
		f, err := g.read(r.ctx, r.need)
		r.cancel()
		g.mu.Lock()
		defer g.mu.Unlock()
		if err == nil {
			f.seq = r.seq
			if f.scope && r.seq > g.caught {
				g.last = r
			}
		}
		r.f, r.err = f, err
		close(r.done)
		g.inflight = nil
		if g.next != nil {
			g.start()
		}
	}()
}

// await waits for r; a waiter whose ctx ends leaves it, and the last to leave stops it.
func (g *readGroup) await(ctx context.Context, r *sharedRead) (*freshRead, error) {
	select {
	case <-r.done:
		return r.f, r.err
	case <-ctx.Done():
	}
	select {
	case <-r.done: // done as ctx ended (a kept read always is): the answer stands
		return r.f, r.err
	default:
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	r.waiters--
	if r.waiters == 0 {
		if g.next == r {
			g.next = nil // not begun: it never will
		}
		r.cancel()
	}
	return nil, ctx.Err()
}

// consistentRead makes one read for a readGroup: a GET when one name is needed, else a
// consistent list of the watch's scope.
func (c *WatchCache) consistentRead(ctx context.Context, key WatchKey, n readNeed) (*freshRead, error) {
	if name, ok := n.single(); ok {
		return c.readNamed(ctx, key, name)
	}
	f, err := c.readList(ctx, key, n.clock)
	if err != nil {
		return nil, err
	}
	f.scope = true
	return f, nil
}

// readNamed GETs name (from etcd, not the watch cache). A 404 is remembered as absent (nothing
// to judge while the informer holds no copy either). A user allowed to list but not get reads
// with a consistent list narrowed to the name, whose resourceVersion says as of when the object
// is as found.
func (c *WatchCache) readNamed(ctx context.Context, key WatchKey, name string) (*freshRead, error) {
	res := c.client.Resource(key.Resource).Namespace(key.Namespace)
	o, err := res.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsUnauthorized(err) { // once more, with credentials an exec plugin refreshed
		o, err = res.Get(ctx, name, metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		return &freshRead{objs: map[string]*unstructured.Unstructured{}, absent: true}, nil
	}
	if err == nil {
		o = c.trim(key, o)
		floor, ok := rv(o.GetResourceVersion())
		return &freshRead{objs: map[string]*unstructured.Unstructured{storeKey(o.GetNamespace(), o.GetName()): o}, floor: floor, ok: ok}, nil
	}
	if !apierrors.IsForbidden(err) {
		return nil, err
	}
	return c.readListOpts(ctx, key, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()}, 0)
}

// readList is a consistent list of the watch's scope (narrowed to its name, if it has one);
// seq is its place on the revision clock if already noted (else 0).
func (c *WatchCache) readList(ctx context.Context, key WatchKey, seq uint64) (*freshRead, error) {
	o := metav1.ListOptions{}
	if key.Name != "" {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", key.Name).String()
	}
	return c.readListOpts(ctx, key, o, seq)
}

// readListOpts is a consistent list (resourceVersion ""): the current state, never older. seq
// is its place on the revision clock, if noted already (else 0: noted here).
func (c *WatchCache) readListOpts(ctx context.Context, key WatchKey, o metav1.ListOptions, seq uint64) (*freshRead, error) {
	var list *unstructured.UnstructuredList
	clock := c.clock(key.Resource.GroupResource())
	if seq == 0 {
		seq = clock.begin()
	}
	err := retryAuthOnce(func() (err error) {
		list, err = c.client.Resource(key.Resource).Namespace(key.Namespace).List(ctx, o)
		return err
	})
	if err != nil {
		clock.failed(seq)
		return nil, err
	}
	floor, ok := rv(list.GetResourceVersion())
	if ok && floor > 0 {
		clock.served(seq, floor)
	} else {
		clock.failed(seq)
	}
	f := &freshRead{objs: map[string]*unstructured.Unstructured{}, floor: floor, ok: ok}
	for i := range list.Items {
		it := c.trim(key, &list.Items[i])
		f.objs[storeKey(it.GetNamespace(), it.GetName())] = it
	}
	return f, nil
}

// trim applies the kind's cache transform, so a read holds no more than the cache would.
func (c *WatchCache) trim(key WatchKey, o *unstructured.Unstructured) *unstructured.Unstructured {
	if t, ok := c.transforms[key.Resource.GroupResource()]; ok {
		return t(o)
	}
	return o
}

// retryAuthOnce runs call again once after a 401 or 403: an exec credential plugin (cloud
// logins) refreshes its token when a request gets 401, so the next attempt carries fresh
// credentials; a second refusal is the answer.
func retryAuthOnce(call func() error) error {
	err := call()
	if apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err) {
		err = call()
	}
	return err
}
