package kube

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
)

// WatchKey names one shared watch: a resource type in one namespace ("" for cluster-scoped
// kinds or all namespaces), optionally narrowed to one object by name. Gates on the same key
// share one informer; a named key is used for Secrets, whose data should not be cached
// namespace-wide (and whose RBAC can then be narrowed with resourceNames).
type WatchKey struct {
	Resource  schema.GroupVersionResource
	Namespace string
	Name      string
}

// Transform trims objects before they enter a shared cache (dropping Secret values, CRD
// schemas) so the provider holds only what gates read.
type Transform func(*unstructured.Unstructured) *unstructured.Unstructured

// WatchCache hands out shared informers keyed by WatchKey and stops each one when its last
// user releases it. client-go's reflector underneath lists, watches, and re-lists on expiry
// (410 Gone), so gates always evaluate the latest observed state.
type WatchCache struct {
	client     dynamic.Interface
	mu         sync.Mutex
	entries    map[WatchKey]*watchEntry
	transforms map[schema.GroupResource]Transform

	// Opened counts informers started over the cache's life (one list+watch each).
	Opened atomic.Int64

	// clocks: per resource, its storage's revision after each consistent list (proof_clock.go).
	// Per resource, never across: an aggregated API or an `--etcd-servers-overrides` resource
	// counts resourceVersions in a storage of its own.
	clocks map[schema.GroupResource]*revisionClock
}

// clock returns the revision clock of resource gr's storage.
func (c *WatchCache) clock(gr schema.GroupResource) *revisionClock {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.clockLocked(gr)
}

func (c *WatchCache) clockLocked(gr schema.GroupResource) *revisionClock {
	k, ok := c.clocks[gr]
	if !ok {
		if c.clocks == nil {
			c.clocks = map[schema.GroupResource]*revisionClock{}
		}
		k = &revisionClock{}
		c.clocks[gr] = k
	}
	return k
}

// NewWatchCache returns an empty cache over client.
func NewWatchCache(client dynamic.Interface) *WatchCache {
	return &WatchCache{
		client:  client,
		entries: map[WatchKey]*watchEntry{},
		transforms: map[schema.GroupResource]Transform{
			{Group: "", Resource: "secrets"}:                                       trimSecret,
			{Group: "", Resource: "configmaps"}:                                    trimHelmRecord,
			{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}: trimCRD,
		},
	}
}

type watchEntry struct {
	informer cache.SharedIndexInformer
	stop     chan struct{}
	done     chan struct{}
	refs     int
	watching atomic.Bool // the watch has been established once
	// seenRV is the highest resourceVersion among the objects the informer's handlers were
	// given (after the store was updated, in the order of the watch): the store reflects every
	// write up to it. A deleted object's last state carries the deletion's resourceVersion.
	seenRV atomic.Uint64
	// relistRV is set while a relist is being applied: its resourceVersion (MaxUint64 until
	// known); 0 otherwise (see saw).
	relistRV atomic.Uint64
	// lastEvent is when the handlers were last given an object (unix nanoseconds): a watch
	// that keeps delivering is about to pass a revision it has not reached yet (proof.go).
	lastEvent atomic.Int64

	mu     sync.Mutex
	synced bool
	err    error
	// authFailures counts list/watch attempts refused (401/403) since a watch was last
	// established: the first may be an expired token that an exec plugin refreshes.
	authFailures int
	wakes        map[*Subscription]chan<- struct{}

	reads readGroup // the consistent reads its subscriptions are served (proof_read.go)
}

func (e *watchEntry) notify() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, w := range e.wakes {
		poke(w)
	}
}

func poke(w chan<- struct{}) {
	select {
	case w <- struct{}{}:
	default: // a wake-up is already pending; the gate will see the latest state anyway
	}
}

// Subscribe starts (or joins) the watch for key and pokes wake on every change.
// Release it with Close.
func (c *WatchCache) Subscribe(key WatchKey, wake chan<- struct{}) *Subscription {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok {
		e = c.start(key)
		c.entries[key] = e
	}
	e.refs++
	s := &Subscription{key: key, entry: e, cache: c, since: e.reads.now(), clock: c.clockLocked(key.Resource.GroupResource())}
	s.gsince = s.clock.now()
	e.mu.Lock()
	e.wakes[s] = wake
	synced := e.synced
	e.mu.Unlock()
	if synced {
		poke(wake) // evaluate at once against the warm cache
	}
	return s
}

func (c *WatchCache) start(key WatchKey) *watchEntry {
	tweak := func(o *metav1.ListOptions) {
		if key.Name != "" {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", key.Name).String()
		}
	}
	e := &watchEntry{stop: make(chan struct{}), done: make(chan struct{}), wakes: map[*Subscription]chan<- struct{}{}}
	e.reads.read = func(ctx context.Context, n readNeed) (*freshRead, error) { return c.consistentRead(ctx, key, n) }
	e.reads.begin = c.clockLocked(key.Resource.GroupResource()).begin
	// A list proves every subscription of the watch at once, but costs as much as the watch's
	// own list: past listProofMax objects, each proof is a GET of its name instead.
	e.reads.shared = func() bool { return e.shared() && len(e.informer.GetStore().ListKeys()) <= listProofMax }
	res := c.client.Resource(key.Resource).Namespace(key.Namespace)
	// dynamicinformer's list-watch, and one thing more: the cache counts as synced only once its
	// watch is established too, so a watch the API server refuses (RBAC without `watch`) fails
	// the gate rather than letting it judge a list that will never hear of a change.
	var inf cache.SharedIndexInformer
	inf = cache.NewSharedIndexInformerWithOptions(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			tweak(&o)
			// The reflector's first list asks for resourceVersion "0": whatever the API server's
			// watch cache holds, at once, which may predate a write made just before the gate
			// started. A consistent list ("") is current, but waits for the watch cache of a
			// quiet type to catch up with etcd (~85 ms measured), a delay every new watch would
			// pay. Freshness is Subscription.Read's job instead: a GET, served by etcd in
			// milliseconds, for one gate's object; one consistent list shared by the gates that
			// ask together, and for a selector (proof_read.go).
			// No shortcut from a relist's time either: a paginated list's later pages and a 410
			// relist reach the store after List returns, so "listed after the gate began" does
			// not mean the store holds that list yet.
			e.mu.Lock()
			relist := e.synced
			e.mu.Unlock()
			if relist {
				e.relistRV.Store(math.MaxUint64) // see saw
			}
			l, err := res.List(ctx, o)
			if relist && err == nil {
				if v, ok := rv(l.GetResourceVersion()); ok {
					e.relistRV.Store(v)
				}
			}
			return l, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			tweak(&o)
			w, err := res.Watch(ctx, o)
			if err == nil {
				e.watching.Store(true)
				e.mu.Lock()
				e.authFailures = 0
				e.mu.Unlock()
				e.markSynced(inf.HasSynced())
			}
			return w, err
		},
	}, &unstructured.Unstructured{}, cache.SharedIndexInformerOptions{ObjectDescription: key.Resource.String()})
	e.informer = inf
	if t, ok := c.transforms[key.Resource.GroupResource()]; ok {
		_ = inf.SetTransform(func(o any) (any, error) {
			if u, ok := o.(*unstructured.Unstructured); ok {
				return t(u), nil
			}
			return o, nil
		})
	}
	_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		e.mu.Lock()
		e.err = err
		if apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err) {
			e.authFailures++
		}
		e.mu.Unlock()
		e.notify()
		cache.DefaultWatchErrorHandler(ctx, r, err)
	})
	clearErr := func() {
		e.mu.Lock()
		e.err = nil
		e.mu.Unlock()
	}
	// The initial list's last object makes the informer synced before its event reaches the
	// handler, so a non-empty list is noticed as synced here, at once.
	event := func(o any) { e.saw(o); clearErr(); e.markSynced(inf.HasSynced()); e.notify() }
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    event,
		UpdateFunc: func(_, o any) { event(o) },
		DeleteFunc: event,
	})
	c.Opened.Add(1)
	Stats.WatchesOpened.Add(1)
	go func() {
		defer close(e.done)
		inf.Run(e.stop)
	}()
	go e.awaitSync(inf.HasSynced)
	return e
}

// saw notes an object the handlers were given (see seenRV).
func (e *watchEntry) saw(o any) {
	e.lastEvent.Store(time.Now().UnixNano())
	if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return
	}
	v, ok := rv(u.GetResourceVersion())
	if !ok {
		return
	}
	// A relist (after a watch expired) replaces the store one object at a time, in key order:
	// until the first watch event after it (newer than the list), the store holds old copies
	// beside new ones, so no object of the list may raise seenRV.
	if l := e.relistRV.Load(); l != 0 {
		if v <= l {
			return
		}
		e.relistRV.CompareAndSwap(l, 0)
	}
	for {
		cur := e.seenRV.Load()
		if v <= cur || e.seenRV.CompareAndSwap(cur, v) {
			return
		}
	}
}

// listProofMax is the most objects a watch may hold for one subscription's proof to be a list
// of its whole scope (see readGroup.shared).
const listProofMax = 500

// shared reports whether more than one subscription uses the watch.
func (e *watchEntry) shared() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.wakes) > 1
}

// markSynced records the initial sync (list loaded and watch established) once and wakes
// every subscriber.
func (e *watchEntry) markSynced(listed bool) {
	if !listed || !e.watching.Load() {
		return
	}
	e.mu.Lock()
	first := !e.synced
	if first {
		e.synced, e.err = true, nil
	}
	e.mu.Unlock()
	if first {
		e.notify()
	}
}

// awaitSync is the backstop for a sync no event announces (an empty list, whose watch was
// established before the list was processed). client-go's WaitForCacheSync looks every 100 ms,
// a delay every gate paid before its first verdict; this looks at the in-memory flags after
// 1 ms, then at doubling intervals up to 100 ms.
func (e *watchEntry) awaitSync(hasSynced func() bool) {
	t := time.NewTimer(time.Millisecond)
	defer t.Stop()
	for d := time.Millisecond; ; d = min(2*d, 100*time.Millisecond) {
		select {
		case <-e.stop:
			return
		case <-t.C:
		}
		if hasSynced() && e.watching.Load() {
			e.markSynced(true)
			return
		}
		t.Reset(d)
	}
}

// Active returns how many shared watches are open now.
func (c *WatchCache) Active() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
