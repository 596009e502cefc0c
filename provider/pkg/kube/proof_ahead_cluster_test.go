//go:build cluster

package kube

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

// awaitAheadSent waits until the resource's ahead batch has been sent (or dropped), no list of
// the resource is in flight and the clock has counted atLeast lists: a fired batch's timer is
// cleared just before its list begins, so a test that expects a list says so.
func awaitAheadSent(t *testing.T, c *revisionClock, atLeast uint64) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		c.ahead.mu.Lock()
		pending := c.ahead.timer != nil
		c.ahead.mu.Unlock()
		if !pending && !c.listing(0) && c.now() >= atLeast {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the ahead list was never sent")
		}
	}
}

// TestProvenAhead, against the API server: gates that wait on shared watches of one resource
// (two namespaces) ask to be proven ahead in a burst; one list is sent while they wait, and
// when their objects change, the copies they judge are proven with no read. Near misses: a
// gate that began after that list is not proven by it; a lone gate's named object and a gate
// gone before the list was sent ask for none.
func TestProvenAhead(t *testing.T) {
	a, b := testenv.Namespace(t, "aheada"), testenv.Namespace(t, "aheadb")
	cmsA, cmsB := testenv.CP.Client.CoreV1().ConfigMaps(a), testenv.CP.Client.CoreV1().ConfigMaps(b)
	const n = 10
	createConfigMaps(t, cmsA, n)
	createConfigMaps(t, cmsB, n)
	c := clients(t)
	clock := c.Watches.clock(configMaps.GroupResource())
	keyA, keyB := WatchKey{Resource: configMaps, Namespace: a}, WatchKey{Resource: configMaps, Namespace: b}
	holderA, wakeA := holdSynced(t, c.Watches, keyA)
	holderB, wakeB := holdSynced(t, c.Watches, keyB)

	// A gate gone before the list would be sent asks for none.
	gone := c.Watches.Subscribe(keyA, make(chan struct{}, 1))
	_, seen := gone.Peek("c0")
	seen.Ahead()
	gone.Close()
	lists0 := clock.now()
	awaitAheadSent(t, clock, 0)
	if clock.now() != lists0 {
		t.Fatal("a list was sent for a gate that had ended")
	}

	// A lone gate on its object's own watch is proven by a GET when it passes: no list.
	lone := c.Watches.Subscribe(WatchKey{Resource: configMaps, Namespace: a, Name: "c0"}, make(chan struct{}, 1))
	defer lone.Close()
	_, seen = lone.Peek("c0")
	seen.Ahead()
	if clock.ahead.mu.Lock(); len(clock.ahead.subs) != 0 {
		clock.ahead.mu.Unlock()
		t.Fatal("a lone gate on a named watch asked for a list")
	}
	clock.ahead.mu.Unlock()

	type gate struct {
		s    *Subscription
		name string
	}
	var gates []gate
	for i := 0; i < n; i++ {
		for _, k := range []WatchKey{keyA, keyB} {
			s := c.Watches.Subscribe(k, make(chan struct{}, 1))
			defer s.Close()
			gates = append(gates, gate{s, fmt.Sprint("c", i)})
		}
	}
	for _, g := range gates {
		_, seen := g.s.Peek(g.name) // judged not ready: it waits
		seen.Ahead()
		seen.Ahead() // once per gate
	}
	awaitAheadSent(t, clock, lists0+1)
	if got := clock.now() - lists0; got != 1 {
		t.Fatalf("%d lists proved %d waiting gates of one resource ahead, want 1", got, len(gates))
	}
	late := c.Watches.Subscribe(keyA, make(chan struct{}, 1)) // began after the list
	defer late.Close()

	var lastA, lastB string
	for i := 0; i < n; i++ {
		lastA = setV(t, cmsA, fmt.Sprint("c", i), "1")
		lastB = setV(t, cmsB, fmt.Sprint("c", i), "1")
	}
	awaitStore(t, holderA, wakeA, fmt.Sprint("c", n-1), lastA)
	awaitStore(t, holderB, wakeB, fmt.Sprint("c", n-1), lastB)
	lists, readsA, readsB := clock.now(), holderA.entry.reads.now(), holderB.entry.reads.now()
	for _, g := range gates {
		_, seen := g.s.Peek(g.name) // the change: it would pass now
		if f := seen.Facts(); !f.Covered {
			t.Fatalf("%s/%s: judged after the ahead list, yet not proven by it: %+v", g.s.key.Namespace, g.name, f)
		}
	}
	if _, seen := late.Peek("c0"); seen.Facts().Covered {
		t.Fatal("a gate that began after the ahead list was proven by it")
	}
	if clock.now() != lists || holderA.entry.reads.now() != readsA || holderB.entry.reads.now() != readsB {
		t.Fatal("proving the gates made a read")
	}
}

// TestProvenAheadNow, against the API server: a check with slow work left after its reads
// (AdmissionReady's dry runs) begins its list at once, with no quiet period, and the change it
// then passes on is proven by that list with no read. Near misses: a second ask of the same gate
// sends no second list, and a lone gate's named object asks for none.
func TestProvenAheadNow(t *testing.T) {
	ns := testenv.Namespace(t, "aheadnow")
	cms := testenv.CP.Client.CoreV1().ConfigMaps(ns)
	createConfigMaps(t, cms, 2)
	c := clients(t)
	clock := c.Watches.clock(configMaps.GroupResource())
	key := WatchKey{Resource: configMaps, Namespace: ns}
	holder, wake := holdSynced(t, c.Watches, key)

	lone := c.Watches.Subscribe(WatchKey{Resource: configMaps, Namespace: ns, Name: "c0"}, make(chan struct{}, 1))
	defer lone.Close()
	lists0 := clock.now()
	_, seen := lone.Peek("c0")
	seen.AheadNow()
	if clock.listing(0) || clock.now() != lists0 {
		t.Fatal("a lone gate on a named watch began a list")
	}

	s := c.Watches.Subscribe(key, make(chan struct{}, 1))
	defer s.Close()
	_, seen = s.Peek("c0")
	seen.AheadNow()
	if clock.ahead.mu.Lock(); clock.ahead.timer != nil || len(clock.ahead.subs) != 0 {
		clock.ahead.mu.Unlock()
		t.Fatal("AheadNow waited for the batch's quiet period")
	}
	clock.ahead.mu.Unlock()
	if clock.now() != lists0+1 {
		t.Fatalf("AheadNow began %d lists, want 1", clock.now()-lists0)
	}
	seen.AheadNow() // once per gate
	if clock.now() != lists0+1 {
		t.Fatal("a second ask of the same gate began another list")
	}
	awaitAheadSent(t, clock, lists0+1)

	last := setV(t, cms, "c0", "1") // the change the slow work ends in
	awaitStore(t, holder, wake, "c0", last)
	lists, reads := clock.now(), holder.entry.reads.now()
	if _, seen := s.Peek("c0"); !seen.Facts().Covered {
		t.Fatalf("judged after the list AheadNow began, yet not proven by it: %+v", seen.Facts())
	}
	if clock.now() != lists || holder.entry.reads.now() != reads {
		t.Fatal("proving the pass made a read")
	}
}

// TestProvenAheadByRead, against the API server: a lone gate that waits on an existing object of
// a namespace's watch (a Certificate while cert-manager issues its Secret) makes its pass's GET
// while it waits, once; the change it then passes on is proven with no read. Near misses: an
// object not created yet is not read ahead (its 404 proves nothing of the copy that appears
// later), nor is an object of a watch other gates share (one list proves them) or of a named
// watch (read at every check anyway).
func TestProvenAheadByRead(t *testing.T) {
	ns := testenv.Namespace(t, "aheadread")
	cms := testenv.CP.Client.CoreV1().ConfigMaps(ns)
	createConfigMaps(t, cms, 1)
	c := clients(t)
	wake := make(chan struct{}, 1)
	s := c.Watches.Subscribe(WatchKey{Resource: configMaps, Namespace: ns}, wake)
	defer s.Close()
	waitSynced(t, s, wake)
	reads0 := s.entry.reads.now()

	_, seen := s.Peek("absent") // not created yet
	seen.Ahead()
	if s.entry.reads.now() != reads0 {
		t.Fatal("an object not created yet was read ahead")
	}

	_, seen = s.Peek("c0") // judged not ready: it waits
	seen.Ahead()
	seen.Ahead() // once per gate
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, settled := s.readFor(s.storeKey("c0")); settled {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the read ahead never settled the object")
		}
	}
	if got := s.entry.reads.now() - reads0; got != 1 {
		t.Fatalf("%d reads ahead, want 1", got)
	}

	last := setV(t, cms, "c0", "1") // the change it passes on
	awaitStore(t, s, wake, "c0", last)
	reads := s.entry.reads.now()
	_, seen = s.Peek("c0")
	if step, err := seen.Next(context.Background(), true); err != nil || step != Read {
		t.Fatalf("proof step %v (%v), want Read", step, err)
	}
	if ok, err := seen.Prove(context.Background()); err != nil || !ok {
		t.Fatalf("the pass was not proven: %v %v", ok, err)
	}
	if s.entry.reads.now() != reads {
		t.Fatal("proving the pass made a read")
	}

	// Another gate on the same watch: now shared, its copy is proven by a list, not read ahead.
	other := c.Watches.Subscribe(WatchKey{Resource: configMaps, Namespace: ns}, make(chan struct{}, 1))
	defer other.Close()
	_, seen = other.Peek("c0")
	if seen.readsAhead() {
		t.Fatal("a gate on a shared watch reads ahead")
	}
	namedWake := make(chan struct{}, 1)
	named := c.Watches.Subscribe(WatchKey{Resource: configMaps, Namespace: ns, Name: "c0"}, namedWake)
	defer named.Close()
	waitSynced(t, named, namedWake)
	if _, seen = named.Peek("c0"); seen.readsAhead() {
		t.Fatal("a gate on a named watch reads ahead")
	}
}
