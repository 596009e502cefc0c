package kube

import (
	"context"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// A gate's first verdict must judge state at least as new as the gate's start. A shared
// informer that another gate started earlier may not have seen a write made just before this
// gate started (a rollout the previous step began, a Helm upgrade): its watch stream can lag.
// So every subscription makes one consistent read
// of what it asks for (a GET of a named object reads etcd directly, in milliseconds) and,
// until the informer has caught up with that read, answers with the newer of the two.

// freshRead is one consistent read: the objects found (by name) and the resourceVersion it is
// current at. For a GET the object's own resourceVersion is that floor.
type freshRead struct {
	objs  map[string]*unstructured.Unstructured
	floor uint64
	ok    bool // floor parsed: etcd resourceVersions are integers that grow with every write
	// absent is a GET's 404, which says nothing of when: only when the informer holds a copy
	// to judge is the read repeated as a consistent list, whose resourceVersion says it.
	absent bool
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

// get resolves name from the informer's copy and the read: once the informer has caught up its
// copy is the truth; before, the read's copy unless the informer holds a newer one, and for an
// object the read did not find, the informer's copy only when it was written after the read.
func (f *freshRead) get(name string, cached *unstructured.Unstructured, seen uint64) *unstructured.Unstructured {
	if f.caughtUp(seen) {
		return cached
	}
	if o, ok := f.objs[name]; ok {
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
	byName := map[string]*unstructured.Unstructured{}
	for _, o := range cached {
		byName[o.GetNamespace()+"/"+o.GetName()] = o
	}
	var out []*unstructured.Unstructured
	for k, o := range f.objs {
		if sel == nil || sel.Matches(labels.Set(o.GetLabels())) {
			out = append(out, newer(byName[k], o))
		}
		delete(byName, k)
	}
	for _, o := range byName {
		if v, ok := rv(o.GetResourceVersion()); ok && v > f.floor {
			out = append(out, o)
		}
	}
	return out
}

func (s *Subscription) seen() uint64 { return s.entry.seenRV.Load() }

// Read returns the object name (nil when absent) as new as the gate's start or newer: the
// newer of the informer's copy and one consistent read made at the first call. Call it once
// Synced says the watch is usable.
func (s *Subscription) Read(ctx context.Context, name string) (*unstructured.Unstructured, error) {
	s.mu.Lock()
	f := s.reads[name]
	s.mu.Unlock()
	cached := s.Get(name)
	if f == nil || (f.absent && cached != nil) {
		var err error
		if f, err = s.cache.readNamed(ctx, s.key, name, f != nil); err != nil {
			return nil, err
		}
		s.mu.Lock()
		s.reads[name] = f
		s.mu.Unlock()
	}
	if f.absent {
		return nil, nil // and the informer held no copy
	}
	// The store as of now (it may have moved during the read), against what it has reflected.
	seen := s.seen()
	return f.get(name, s.Get(name), seen), nil
}

// ReadList is Read for every object matching sel (nil: all); its consistent read is a list.
func (s *Subscription) ReadList(ctx context.Context, sel labels.Selector) ([]*unstructured.Unstructured, error) {
	key := "\x00list"
	if sel != nil {
		key += sel.String()
	}
	s.mu.Lock()
	f := s.reads[key]
	s.mu.Unlock()
	if f == nil {
		var err error
		if f, err = s.cache.readList(ctx, s.key, sel); err != nil {
			return nil, err
		}
		s.mu.Lock()
		s.reads[key] = f
		s.mu.Unlock()
	}
	seen := s.seen() // before the store is read: the store is then at least this new
	return f.list(s.List(sel), seen, sel), nil
}

// readNamed GETs name (from etcd, not the watch cache). A 404 is remembered as absent (nothing
// to judge while the informer holds no copy either). A user allowed to list but not get, and
// listNow (the informer holds a copy of an object a GET found absent: which is newer must be
// decided), read with a consistent list narrowed to the name, whose resourceVersion says as of
// when the object is as found.
func (c *WatchCache) readNamed(ctx context.Context, key WatchKey, name string, listNow bool) (*freshRead, error) {
	res := c.client.Resource(key.Resource).Namespace(key.Namespace)
	var o *unstructured.Unstructured
	var err error = apierrors.NewNotFound(key.Resource.GroupResource(), name)
	if !listNow {
		o, err = res.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsUnauthorized(err) { // once more, with credentials an exec plugin refreshed
			o, err = res.Get(ctx, name, metav1.GetOptions{})
		}
		if apierrors.IsNotFound(err) {
			return &freshRead{objs: map[string]*unstructured.Unstructured{}, absent: true}, nil
		}
	}
	if err == nil {
		o = c.trim(key, o)
		floor, ok := rv(o.GetResourceVersion())
		return &freshRead{objs: map[string]*unstructured.Unstructured{name: o}, floor: floor, ok: ok}, nil
	}
	if !apierrors.IsNotFound(err) && !apierrors.IsForbidden(err) {
		return nil, err
	}
	f, err := c.readListOpts(ctx, key, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		return nil, err
	}
	byName := map[string]*unstructured.Unstructured{}
	for _, o := range f.objs {
		byName[o.GetName()] = o
	}
	f.objs = byName
	return f, nil
}

func (c *WatchCache) readList(ctx context.Context, key WatchKey, sel labels.Selector) (*freshRead, error) {
	o := metav1.ListOptions{}
	if key.Name != "" {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", key.Name).String()
	}
	if sel != nil && !sel.Empty() {
		o.LabelSelector = sel.String()
	}
	return c.readListOpts(ctx, key, o)
}

// readListOpts is a consistent list (resourceVersion ""): the current state, never older.
func (c *WatchCache) readListOpts(ctx context.Context, key WatchKey, o metav1.ListOptions) (*freshRead, error) {
	var list *unstructured.UnstructuredList
	err := retryAuthOnce(func() (err error) {
		list, err = c.client.Resource(key.Resource).Namespace(key.Namespace).List(ctx, o)
		return err
	})
	if err != nil {
		return nil, err
	}
	floor, ok := rv(list.GetResourceVersion())
	f := &freshRead{objs: map[string]*unstructured.Unstructured{}, floor: floor, ok: ok}
	for i := range list.Items {
		it := c.trim(key, &list.Items[i])
		f.objs[it.GetNamespace()+"/"+it.GetName()] = it
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
