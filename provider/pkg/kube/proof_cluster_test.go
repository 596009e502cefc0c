//go:build cluster

package kube

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

// createConfigMaps makes n ConfigMaps c0..c(n-1) in ns with data v=0.
func createConfigMaps(t *testing.T, cms v1.ConfigMapInterface, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if _, err := cms.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("c", i)},
			Data: map[string]string{"v": "0"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// setV writes data v of ConfigMap name and returns its new resourceVersion.
func setV(t *testing.T, cms v1.ConfigMapInterface, name, v string) string {
	t.Helper()
	cm, err := cms.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["v"] = v
	cm, err = cms.Update(context.Background(), cm, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm.ResourceVersion
}

// awaitStore waits until s's store holds name at resourceVersion rv and its handlers have
// noted it (seenRV is raised after the store).
func awaitStore(t *testing.T, s *Subscription, wake <-chan struct{}, name, rv string) {
	t.Helper()
	v, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.After(30 * time.Second); ; {
		if o := s.Get(name); o != nil && o.GetResourceVersion() == rv && s.seen() >= v {
			return
		}
		select {
		case <-wake:
		case <-deadline:
			t.Fatalf("the store never saw %s at %s", name, rv)
		}
	}
}

// TestProofOnDemand, against the API server: gates judging the informer's copy make no
// consistent read while they wait; when their verdicts would end them, one read of the watch's
// scope proves them all; a copy the object has moved on from is not proven.
func TestProofOnDemand(t *testing.T) {
	ns := testenv.Namespace(t, "proof")
	cms := testenv.CP.Client.CoreV1().ConfigMaps(ns)
	const n = 50
	createConfigMaps(t, cms, n)
	c := clients(t)
	key := WatchKey{Resource: configMaps, Namespace: ns}
	wake := make(chan struct{}, 1)
	holder := c.Watches.Subscribe(key, wake)
	defer holder.Close()
	waitSynced(t, holder, wake)
	subs := make([]*Subscription, n)
	for i := range subs {
		subs[i] = c.Watches.Subscribe(key, make(chan struct{}, 1))
		defer subs[i].Close()
	}
	var last string
	for i := 0; i < n; i++ {
		last = setV(t, cms, fmt.Sprint("c", i), "1")
	}
	awaitStore(t, holder, wake, fmt.Sprint("c", n-1), last)
	g := &holder.entry.reads
	reads0, lists0 := g.now(), c.Watches.clock(configMaps.GroupResource()).now()
	seen := make([]Seen, n)
	for i, s := range subs {
		var o any
		o, seen[i] = s.Peek(fmt.Sprint("c", i))
		if o == nil {
			t.Fatalf("c%d: not in the store", i)
		}
	}
	if g.now() != reads0 || c.Watches.clock(configMaps.GroupResource()).now() != lists0 {
		t.Fatal("peeking made a consistent read")
	}
	var wg sync.WaitGroup
	for i := range seen {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if ok, err := seen[i].Prove(context.Background()); err != nil || !ok {
				t.Errorf("c%d: the current copy was not proven: %v %v", i, ok, err)
			}
		}()
	}
	wg.Wait()
	if reads := g.now() - reads0; reads != 1 {
		t.Errorf("%d consistent reads proved %d verdicts on one watch, want 1", reads, n)
	}
	// The near miss: a gate that begins after a write, judging a store that has not heard of
	// it yet (a lagging watch: here the copy peeked before the write, handed to it).
	_, stale := subs[0].Peek("c0")
	rv := setV(t, cms, "c0", "2")
	late := c.Watches.Subscribe(key, make(chan struct{}, 1))
	defer late.Close()
	stale.sub = late
	if ok, err := stale.Prove(context.Background()); err != nil || ok {
		t.Fatalf("a copy older than a write made before the gate began was proven: %v %v", ok, err)
	}
	awaitStore(t, holder, wake, "c0", rv)
	_, cur := late.Peek("c0")
	if ok, err := cur.Prove(context.Background()); err != nil || !ok {
		t.Fatalf("the current copy was not proven: %v %v", ok, err)
	}
}

// TestClockProvesOtherWatches, against the API server: a consistent list of one watch proves
// another watch's copy once that watch has reflected the list's revision, with no read of its
// own; before that (a copy older than the list) it does not.
func TestClockProvesOtherWatches(t *testing.T) {
	a, b := testenv.Namespace(t, "clocka"), testenv.Namespace(t, "clockb")
	cmsA, cmsB := testenv.CP.Client.CoreV1().ConfigMaps(a), testenv.CP.Client.CoreV1().ConfigMaps(b)
	createConfigMaps(t, cmsB, 1)
	createConfigMaps(t, cmsA, 2)
	c := clients(t)
	keyA, keyB := WatchKey{Resource: configMaps, Namespace: a}, WatchKey{Resource: configMaps, Namespace: b}
	holdSynced(t, c.Watches, keyA)
	holderB, wakeB := holdSynced(t, c.Watches, keyB)
	subA, subB := c.Watches.Subscribe(keyA, make(chan struct{}, 1)), c.Watches.Subscribe(keyB, make(chan struct{}, 1))
	defer subA.Close()
	defer subB.Close()
	_, seenB := subB.Peek("c0") // older than the list below
	_, seenA := subA.Peek("c0")
	if ok, err := seenA.Prove(context.Background()); err != nil || !ok {
		t.Fatalf("a: %v %v", ok, err)
	}
	if seenB.Facts().Covered {
		t.Fatal("b's copy, older than a's list, was proven by it")
	}
	rv := setV(t, cmsB, "c0", "1") // after a's list: b's store passes its revision
	awaitStore(t, holderB, wakeB, "c0", rv)
	readsB, lists := holderB.entry.reads.now(), c.Watches.clock(configMaps.GroupResource()).now()
	_, seenB = subB.Peek("c0")
	if !seenB.Facts().Covered {
		t.Fatal("b's store has passed a's list revision, yet its copy is not proven")
	}
	if ok, err := seenB.Prove(context.Background()); err != nil || !ok {
		t.Fatalf("b: %v %v", ok, err)
	}
	if holderB.entry.reads.now() != readsB || c.Watches.clock(configMaps.GroupResource()).now() != lists {
		t.Fatal("b's proof made a read of its own")
	}
}

// TestProofReadAfterAbsentIsAGet, against the API server: a named watch's read found nothing
// (a Secret not written yet), then the informer holds a copy; the read that follows is a GET,
// not a consistent list (which waits for the API server's watch cache of a quiet type: 76 ms
// measured, CertificateReady's detection tail). A stale copy of an object gone is not judged.
func TestProofReadAfterAbsentIsAGet(t *testing.T) {
	ctx := context.Background()
	ns := testenv.Namespace(t, "absent")
	cms := testenv.CP.Client.CoreV1().ConfigMaps(ns)
	c := clients(t)
	wake := make(chan struct{}, 1)
	s := c.Watches.Subscribe(WatchKey{Resource: configMaps, Namespace: ns, Name: "c0"}, wake)
	defer s.Close()
	waitSynced(t, s, wake)
	if o, err := s.Read(ctx, "c0"); err != nil || o != nil {
		t.Fatalf("c0 does not exist yet: %v %v", o, err)
	}
	createConfigMaps(t, cms, 1)
	rv := setV(t, cms, "c0", "1")
	awaitStore(t, s, wake, "c0", rv)
	lists := c.Watches.clock(configMaps.GroupResource()).now()
	o, err := s.Read(ctx, "c0")
	if err != nil || o == nil || o.GetResourceVersion() != rv {
		t.Fatalf("c0 at %s: %v %v", rv, o, err)
	}
	if c.Watches.clock(configMaps.GroupResource()).now() != lists {
		t.Fatal("the read after a 404 was a consistent list, not a GET")
	}
	// The near miss: the informer holds a copy of an object deleted before the read.
	gone := c.Watches.Subscribe(WatchKey{Resource: configMaps, Namespace: ns, Name: "gone"}, wake)
	defer gone.Close()
	waitSynced(t, gone, wake)
	if o, err := gone.Read(ctx, "gone"); err != nil || o != nil {
		t.Fatalf("gone does not exist: %v %v", o, err)
	}
	stale := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "gone", Namespace: ns, ResourceVersion: "1"}}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(stale)
	if err != nil {
		t.Fatal(err)
	}
	if err := gone.entry.informer.GetStore().Add(&unstructured.Unstructured{Object: u}); err != nil {
		t.Fatal(err)
	}
	if o, err := gone.Read(ctx, "gone"); err != nil || o != nil {
		t.Fatalf("judged the informer's copy of an object that is gone: %v %v", o, err)
	}
}

// TestClockProvesAStoreThatMovedOn, against the API server: a copy judged before a list of the
// resource (another namespace's) is proven once its store has passed the list's revision and
// still holds that copy, with no read of its own; not once the object itself has changed.
func TestClockProvesAStoreThatMovedOn(t *testing.T) {
	ctx := context.Background()
	a, b := testenv.Namespace(t, "movea"), testenv.Namespace(t, "moveb")
	cmsA, cmsB := testenv.CP.Client.CoreV1().ConfigMaps(a), testenv.CP.Client.CoreV1().ConfigMaps(b)
	createConfigMaps(t, cmsA, 1)
	createConfigMaps(t, cmsB, 2)
	c := clients(t)
	holdSynced(t, c.Watches, WatchKey{Resource: configMaps, Namespace: a})
	holderB, wakeB := holdSynced(t, c.Watches, WatchKey{Resource: configMaps, Namespace: b})
	subB := c.Watches.Subscribe(WatchKey{Resource: configMaps, Namespace: b}, make(chan struct{}, 1))
	defer subB.Close()
	_, seenB := subB.Peek("c0")
	readsB := holderB.entry.reads.now()
	setV(t, cmsA, "c0", "1") // etcd's revision moves past b's store
	// A list of a, on the clock, begun after subB.
	if _, err := c.Watches.readList(ctx, WatchKey{Resource: configMaps, Namespace: a}, 0); err != nil {
		t.Fatal(err)
	}
	if seenB.Facts().Covered {
		t.Fatal("b's store has not reached the list's revision, yet its copy is proven")
	}
	rv := setV(t, cmsB, "c1", "1") // another object: b's store passes the list's revision
	awaitStore(t, holderB, wakeB, "c1", rv)
	if !seenB.Facts().Covered {
		t.Fatal("b's store passed the list's revision and still holds the copy judged, yet it is not proven")
	}
	if holderB.entry.reads.now() != readsB {
		t.Fatal("b made a read of its own")
	}
	rv = setV(t, cmsB, "c0", "1") // the near miss: the object judged has moved on
	awaitStore(t, holderB, wakeB, "c0", rv)
	if seenB.Facts().Covered {
		t.Fatal("a copy the object has moved on from was proven")
	}
}

// holdTransport holds the answers to consistent lists (no resourceVersion) of path until
// released: the API server has served them, the client has not heard yet.
type holdTransport struct {
	next    http.RoundTripper
	path    string
	release chan struct{}
}

func (h holdTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := h.next.RoundTrip(r)
	q := r.URL.Query()
	if r.Method == http.MethodGet && r.URL.Path == h.path && !q.Has("watch") && !q.Has("resourceVersion") {
		<-h.release
	}
	return resp, err
}

// TestProofAwaitsAListOfAnotherWatch, against the API server: a verdict on one watch, while a
// list of the same resource begun after it (another watch's first proof) is in flight, awaits
// that list instead of reading, and is proven by it with no read of its own once its store has
// passed the list's revision. Verdicts passing at once on many watches so cost one list.
func TestProofAwaitsAListOfAnotherWatch(t *testing.T) {
	ctx := context.Background()
	a, b := testenv.Namespace(t, "awaita"), testenv.Namespace(t, "awaitb")
	cmsA, cmsB := testenv.CP.Client.CoreV1().ConfigMaps(a), testenv.CP.Client.CoreV1().ConfigMaps(b)
	createConfigMaps(t, cmsA, 2)
	createConfigMaps(t, cmsB, 2)
	cfg, _, err := LoadConfig(Settings{Kubeconfig: string(testenv.CP.Kubeconfig)})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return holdTransport{next: rt, path: "/api/v1/namespaces/" + a + "/configmaps", release: release}
	})
	c, err := NewClients(cfg, a, 0)
	if err != nil {
		t.Fatal(err)
	}
	keyA, keyB := WatchKey{Resource: configMaps, Namespace: a}, WatchKey{Resource: configMaps, Namespace: b}
	holdSynced(t, c.Watches, keyA)
	holderB, wakeB := holdSynced(t, c.Watches, keyB)
	subA, subB := c.Watches.Subscribe(keyA, make(chan struct{}, 1)), c.Watches.Subscribe(keyB, make(chan struct{}, 1))
	defer subA.Close()
	defer subB.Close()
	_, seenA := subA.Peek("c0")
	_, seenB := subB.Peek("c0")
	setV(t, cmsA, "c1", "1") // etcd's revision moves past b's store (a's c0, judged, stays)
	clock := c.Watches.clock(configMaps.GroupResource())
	lists0, readsB := clock.now(), holderB.entry.reads.now()
	provedA := make(chan error, 1)
	go func() {
		if step, err := seenA.Next(ctx, true); err != nil || step != Read {
			provedA <- fmt.Errorf("a: %v %v, want a read (the first proof on its resource)", step, err)
			return
		}
		ok, err := seenA.Prove(ctx)
		if err == nil && !ok {
			err = fmt.Errorf("a's current copy was not proven")
		}
		provedA <- err
	}()
	for deadline := time.Now().Add(30 * time.Second); !clock.listing(subB.gsince); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a's proof never began a list")
		}
	}
	if !seenB.Facts().Listing {
		t.Fatal("b does not see a's list in flight")
	}
	stepB := make(chan ProofStep, 1)
	go func() {
		step, err := seenB.Next(ctx, true)
		if err != nil {
			t.Error(err)
		}
		stepB <- step
	}()
	rv := setV(t, cmsB, "c1", "1") // after the list was served: b's store passes its revision
	awaitStore(t, holderB, wakeB, "c1", rv)
	select {
	case step := <-stepB:
		t.Fatalf("b decided (%v) while a list that may prove it was in flight", step)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	released = true
	if step := <-stepB; step != Proven {
		t.Fatalf("b: %v after a's list, want Proven", step)
	}
	if err := <-provedA; err != nil {
		t.Fatal(err)
	}
	if lists := clock.now() - lists0; lists != 1 {
		t.Errorf("%d lists for verdicts on two watches, want 1", lists)
	}
	if holderB.entry.reads.now() != readsB {
		t.Error("b made a read of its own")
	}
}
