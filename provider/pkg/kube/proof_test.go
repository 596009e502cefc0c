package kube

import "testing"

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
