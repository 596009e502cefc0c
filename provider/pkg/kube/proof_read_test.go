package kube

import (
	"context"
	"errors"
	"testing"
	"time"
)

// fakeRead stands in for one consistent read behind a readGroup: it announces itself on begun
// and answers only when the test releases it (or its ctx ends).
type fakeRead struct {
	need    readNeed
	ctx     context.Context
	release chan struct{}
	answer  *freshRead
}

func newFakeGroup() (*readGroup, chan *fakeRead) {
	begun := make(chan *fakeRead, 16)
	g := &readGroup{read: func(ctx context.Context, n readNeed) (*freshRead, error) {
		r := &fakeRead{need: n, ctx: ctx, release: make(chan struct{}), answer: &freshRead{scope: !isSingle(n)}}
		begun <- r
		select {
		case <-r.release:
			return r.answer, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}}
	return g, begun
}

func isSingle(n readNeed) bool { _, ok := n.single(); return ok }

func next(t *testing.T, begun chan *fakeRead) *fakeRead {
	t.Helper()
	select {
	case r := <-begun:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("no read began")
		return nil
	}
}

type served struct {
	f   *freshRead
	err error
}

// ask joins now (so the order of asking is the test's) and waits in the background.
func ask(ctx context.Context, g *readGroup, since uint64, name string, list bool) <-chan served {
	r := g.join(ctx, since, name, list)
	out := make(chan served, 1)
	go func() {
		f, err := g.await(ctx, r)
		out <- served{f, err}
	}()
	return out
}

func got(t *testing.T, c <-chan served) served {
	t.Helper()
	select {
	case s := <-c:
		return s
	case <-time.After(30 * time.Second):
		t.Fatal("a waiter was never served")
		return served{}
	}
}

// TestReadGroupServesOnlyReadsBegunAfterTheAsker is the sharing rule: one read serves every
// asker it began after and answers for; the near misses (an asker that subscribed after the
// read in flight began, asking for the very object it reads; an asker whose name a GET in
// flight does not answer) wait for the next read, which is shared too.
func TestReadGroupServesOnlyReadsBegunAfterTheAsker(t *testing.T) {
	ctx := context.Background()
	g, begun := newFakeGroup()
	before := g.now() // subscriptions made before any read began
	a := ask(ctx, g, before, "a", false)
	r1 := next(t, begun)
	if name, ok := r1.need.single(); !ok || name != "a" {
		t.Fatalf("a lone asker's read should be a GET of its name, got %+v", r1.need)
	}
	after := g.now() // a subscription made while r1 is in flight

	d := ask(ctx, g, before, "a", false)     // subscribed before r1 began, asks what r1 reads: served by r1
	late := ask(ctx, g, after, "a", false)   // near miss: asks what r1 reads, but subscribed after r1 began
	other := ask(ctx, g, before, "b", false) // near miss: subscribed before r1, but r1 (a GET of a) does not answer b
	list := ask(ctx, g, before, "", true)    // a list: r1 does not answer it
	late2 := ask(ctx, g, after, "c", false)  // shares the next read with the others

	close(r1.release)
	for name, c := range map[string]<-chan served{"first asker": a, "earlier subscriber": d} {
		if s := got(t, c); s.err != nil || s.f != r1.answer {
			t.Errorf("%s: served %p (err %v), want the read in flight %p", name, s.f, s.err, r1.answer)
		}
	}
	r2 := next(t, begun)
	if !r2.need.list {
		t.Errorf("a read several wait for should list the watch's scope, got %+v", r2.need)
	}
	close(r2.release)
	for name, c := range map[string]<-chan served{"late subscriber": late, "other name": other, "list": list, "late, other name": late2} {
		s := got(t, c)
		if s.f == r1.answer {
			t.Errorf("%s was served a read that began before it asked or that does not answer it", name)
		}
		if s.err != nil || s.f != r2.answer {
			t.Errorf("%s: served %p (err %v), want the next read %p", name, s.f, s.err, r2.answer)
		}
	}
	if g.started != 2 {
		t.Errorf("%d reads for 6 askers, want 2", g.started)
	}

	// A list in flight answers any name, for subscriptions made before it began only.
	before = g.now()
	l := ask(ctx, g, before, "", true)
	r3 := next(t, begun)
	after = g.now()
	x := ask(ctx, g, before, "x", false)
	y := ask(ctx, g, after, "y", false) // near miss
	close(r3.release)
	for _, c := range []<-chan served{l, x} {
		if s := got(t, c); s.f != r3.answer {
			t.Errorf("a list in flight that began after the subscription should serve it")
		}
	}
	r4 := next(t, begun)
	close(r4.release)
	if s := got(t, y); s.f != r4.answer {
		t.Errorf("a subscription made after the list began was served by it")
	}
}

// TestReadGroupKeepsTheNewestList: a list of the whole scope, once done, serves subscriptions
// that began before it and ask later, without another request; one that began after it does
// not (near miss). Once the store has caught up with it, those subscriptions trust the store.
func TestReadGroupKeepsTheNewestList(t *testing.T) {
	ctx := context.Background()
	g, begun := newFakeGroup()
	early := g.now()
	l := ask(ctx, g, early, "", true)
	r1 := next(t, begun)
	close(r1.release)
	if s := got(t, l); s.f != r1.answer {
		t.Fatal("the list's asker was not served")
	}
	later := g.now()
	if s := got(t, ask(ctx, g, early, "x", false)); s.f != r1.answer {
		t.Error("a subscription that began before the list and asks afterwards should be served by it")
	}
	if g.started != 1 {
		t.Errorf("%d reads, want the kept list only", g.started)
	}
	late := ask(ctx, g, later, "x", false) // near miss: began after the list
	r2 := next(t, begun)
	close(r2.release)
	if s := got(t, late); s.f != r2.answer {
		t.Error("a subscription that began after the list was served by it")
	}
	if g.caughtSince(early) {
		t.Error("caught up before the store did")
	}
	g.caughtUp(r1.answer)
	if !g.caughtSince(early) {
		t.Error("a subscription that began before a list the store caught up with should trust the store")
	}
	if g.caughtSince(later) {
		t.Error("near miss: a subscription that began after the list trusted the store")
	}
	if g.last != nil {
		t.Error("the list is kept after the store caught up with it")
	}
}

// TestReadGroupStopsReadsNobodyWaitsFor: a waiter whose gate is cancelled returns at once with
// its ctx's error; the read stops when its last waiter left, and a queued read every waiter
// left never begins. Another waiter keeps a shared read going.
func TestReadGroupStopsReadsNobodyWaitsFor(t *testing.T) {
	g, begun := newFakeGroup()
	ctxA, cancelA := context.WithCancel(context.Background())
	a := ask(ctxA, g, 0, "a", false)
	r1 := next(t, begun)
	ctxB, cancelB := context.WithCancel(context.Background())
	b := ask(ctxB, g, 0, "b", false) // queued behind r1
	cancelB()
	if s := got(t, b); !errors.Is(s.err, context.Canceled) {
		t.Errorf("a cancelled waiter: err %v", s.err)
	}
	cancelA()
	if s := got(t, a); !errors.Is(s.err, context.Canceled) {
		t.Errorf("a cancelled waiter: err %v", s.err)
	}
	select {
	case <-r1.ctx.Done(): // the read was stopped
	case <-time.After(30 * time.Second):
		t.Fatal("a read nobody waits for any more was not stopped")
	}
	// r1 has ended: nothing was queued, so the next asker's read is the second one begun.
	c := ask(context.Background(), g, g.now(), "c", false)
	r2 := next(t, begun)
	if name, _ := r2.need.single(); name != "c" {
		t.Errorf("the abandoned queued read began: need %+v", r2.need)
	}
	// Shared: one waiter leaving does not stop it for the other.
	ctxD, cancelD := context.WithCancel(context.Background())
	d := ask(ctxD, g, 0, "c", false)
	cancelD()
	if s := got(t, d); !errors.Is(s.err, context.Canceled) {
		t.Errorf("a cancelled waiter: err %v", s.err)
	}
	if r2.ctx.Err() != nil {
		t.Error("a read another waiter still waits for was stopped")
	}
	close(r2.release)
	if s := got(t, c); s.err != nil || s.f != r2.answer {
		t.Errorf("the remaining waiter: %v", s.err)
	}
}
