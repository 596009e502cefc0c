package kube

import (
	"context"
	"time"

	"math"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
)

// The clock proves a store once a list begun after the subscription was served at a revision
// the store has reflected; a list begun before the subscription never does.
func TestRevisionClockCovers(t *testing.T) {
	var c revisionClock
	before := c.begin() // a list begun before the subscription
	since := c.now()
	c.served(before, 10)
	if c.covers(since, 100) {
		t.Fatal("a list begun before the subscription proved it")
	}
	if c.after(since) {
		t.Fatal("no list began after the subscription")
	}
	later := c.begin()
	if !c.after(since) {
		t.Fatal("a list in flight, begun after the subscription, is not noticed")
	}
	if c.covers(since, 100) {
		t.Fatal("a list still in flight proved the subscription")
	}
	c.served(later, 50)
	for _, tc := range []struct {
		seen uint64
		want bool
	}{
		{49, false}, // the store has not reflected the list's revision: a write before it may be missing
		{50, true},
		{51, true},
	} {
		if got := c.covers(since, tc.seen); got != tc.want {
			t.Errorf("store at %d, list at 50: covers = %v, want %v", tc.seen, got, tc.want)
		}
	}
	// Lists served out of order are kept by the order they began in.
	a, b := c.begin(), c.begin()
	c.served(b, 70)
	c.served(a, 60)
	if c.done[len(c.done)-2].seq != a || c.done[len(c.done)-1].seq != b {
		t.Fatalf("stamps out of order: %+v", c.done)
	}
	if !c.covers(later, 60) || c.covers(b, 1000) {
		t.Fatal("a list begun after since, served at 60, must cover a store at 60; none began after b")
	}
	for i := 0; i < 2*keepStamps; i++ {
		c.served(c.begin(), uint64(100+i))
	}
	if len(c.done) != keepStamps {
		t.Fatalf("%d stamps kept, want %d", len(c.done), keepStamps)
	}
}

func TestSameVersions(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b map[string]string
		want bool
	}{
		{"both empty (absent, absent)", map[string]string{}, map[string]string{}, true},
		{"same object, same version", map[string]string{"ns/a": "5"}, map[string]string{"ns/a": "5"}, true},
		{"written since", map[string]string{"ns/a": "5"}, map[string]string{"ns/a": "6"}, false},
		{"created since", map[string]string{}, map[string]string{"ns/a": "6"}, false},
		{"deleted since", map[string]string{"ns/a": "5"}, map[string]string{}, false},
		{"another object", map[string]string{"ns/a": "5"}, map[string]string{"ns/b": "5"}, false},
		{"one more in a list", map[string]string{"ns/a": "5"}, map[string]string{"ns/a": "5", "ns/b": "7"}, false},
	} {
		if got := sameVersions(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// While a relist is applied, no listed object raises seenRV: the store still holds old copies
// of the keys not replaced yet. The first watch event after the list (newer than it) does.
func TestRelistDoesNotRaiseSeen(t *testing.T) {
	obj := func(rv string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetResourceVersion(rv)
		return u
	}
	var e watchEntry
	e.saw(obj("100"))
	if e.seenRV.Load() != 100 {
		t.Fatalf("seen %d, want 100", e.seenRV.Load())
	}
	e.relistRV.Store(math.MaxUint64) // the relist's list in flight
	e.saw(obj("150"))
	if e.seenRV.Load() != 100 {
		t.Fatalf("an object applied before the relist's version was known raised seen to %d", e.seenRV.Load())
	}
	e.relistRV.Store(200) // listed at 200: its objects are at most that
	for _, v := range []string{"120", "200", "180"} {
		e.saw(obj(v))
	}
	if e.seenRV.Load() != 100 {
		t.Fatalf("an object of the relist raised seen to %d", e.seenRV.Load())
	}
	e.saw(cache.DeletedFinalStateUnknown{Key: "ns/gone", Obj: obj("90")})
	e.saw(obj("201")) // a watch event: the relist is wholly applied
	if e.seenRV.Load() != 201 || e.relistRV.Load() != 0 {
		t.Fatalf("seen %d, relist %d after the first event past the list", e.seenRV.Load(), e.relistRV.Load())
	}
}

// The proof policy: free when covered; a list in flight that began after the subscription is
// awaited, whatever else holds; a busy watch behind a done list is waited for only while the
// gate may wait, and never when its own watch's list (free to read) exists.
func TestProofPolicy(t *testing.T) {
	for _, tc := range []struct {
		name    string
		f       ProofFacts
		mayWait bool
		want    ProofStep
	}{
		{"covered", ProofFacts{Covered: true}, true, Proven},
		{"covered, may not wait", ProofFacts{Covered: true}, false, Proven},
		{"a list in flight", ProofFacts{Listing: true}, true, AwaitList},
		{"a list in flight, may not wait: it is a read under way, not a wait for events", ProofFacts{Listing: true}, false, AwaitList},
		{"its own list in flight", ProofFacts{Listing: true, OwnList: true}, true, AwaitList},
		{"a list done, busy watch", ProofFacts{Listed: true, Busy: true}, true, AwaitWatch},
		{"a list done, busy watch, waited long enough", ProofFacts{Listed: true, Busy: true}, false, Read},
		{"a list done, quiet watch: it may never pass the revision", ProofFacts{Listed: true}, true, Read},
		{"its own list done: reading it is free", ProofFacts{Listed: true, Busy: true, OwnList: true}, true, Read},
		{"no list since the subscription, busy watch", ProofFacts{Busy: true}, true, Read},
		{"nothing at all", ProofFacts{}, true, Read},
	} {
		if got := tc.f.Next(tc.mayWait); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A list in flight is noticed by the subscriptions begun before it, and awaited until it is
// served or fails; one begun before a subscription is not.
func TestRevisionClockListing(t *testing.T) {
	var c revisionClock
	old := c.begin() // in flight, begun before the subscription
	since := c.now()
	if c.listing(since) {
		t.Fatal("a list begun before the subscription counts as in flight for it")
	}
	if err := c.await(context.Background(), since); err != nil {
		t.Fatal(err)
	}
	a, b := c.begin(), c.begin()
	if !c.listing(since) {
		t.Fatal("lists in flight, begun after the subscription, are not noticed")
	}
	done := make(chan error, 1)
	go func() { done <- c.await(context.Background(), since) }()
	c.served(a, 10)
	select {
	case <-done:
		t.Fatal("await returned while a list was still in flight")
	case <-time.After(20 * time.Millisecond):
	}
	c.failed(b)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if c.listing(since) || !c.listing(old-1) {
		t.Fatal("only the list begun before the subscription is still in flight")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.await(ctx, old-1); err == nil {
		t.Fatal("await of a list in flight returned no error after its context ended")
	}
}
