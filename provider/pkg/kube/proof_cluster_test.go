//go:build cluster

package kube

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	wakeA, wakeB := make(chan struct{}, 1), make(chan struct{}, 1)
	keyA, keyB := WatchKey{Resource: configMaps, Namespace: a}, WatchKey{Resource: configMaps, Namespace: b}
	holderA, holderB := c.Watches.Subscribe(keyA, wakeA), c.Watches.Subscribe(keyB, wakeB)
	defer holderA.Close()
	defer holderB.Close()
	waitSynced(t, holderA, wakeA)
	waitSynced(t, holderB, wakeB)
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
