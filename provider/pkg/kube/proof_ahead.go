package kube

import (
	"context"
	"sync"
	"time"
)

// Proving ahead. A gate that waits will have its verdict proven when it passes (proof.go); the
// list that proves it may as well be made while it waits, so that the event that makes it
// ready finds its copy already covered (the store has passed the list's revision) and the gate
// returns at once. Else the first verdict to pass sends the list, and a consistent list waits
// for the API server's watch cache of the type to catch up with etcd (up to ~100 ms): the
// detection tail. The list is the one the pass would have made, made earlier: one per burst
// of gates joining the resource's watches, sent once none has asked for aheadQuiet.

const (
	// aheadQuiet is how long no gate of a resource must have asked before its list is sent:
	// gates that start together (a stack's step, a chart's objects) share one list.
	aheadQuiet = 50 * time.Millisecond
	// aheadMax bounds how long gates that keep joining put the list off.
	aheadMax = time.Second
)

// aheadBatch is the subscriptions of one resource that asked to be proven ahead, until its
// list is sent.
type aheadBatch struct {
	mu    sync.Mutex
	subs  []*Subscription
	timer *time.Timer
	gen   uint64 // of the timer: a batch's timer fires for its own batch only
	first time.Time
}

// Ahead asks for what was seen, judged not ready, to be proven while the gate waits. A copy a
// pass would prove by a list (one on a watch other subscriptions share, or a list of objects)
// joins its resource's batch; once per subscription, and nothing when a list of the resource
// began after it. A lone subscription's named object that exists is read now (readsAhead).
func (v Seen) Ahead() {
	switch {
	case v.asksAhead():
		v.sub.clock.ahead.add(v.sub)
	case v.readsAhead():
		v.sub.readAhead(v.name)
	}
}

// AheadNow is Ahead for a check that still has slow work to do after its reads (AdmissionReady's
// dry runs, tens of milliseconds each): the list is begun now, not after the batch's quiet
// period, so that a pass the work ends in finds it done or in flight (a verdict's own proof would
// only begin then). The clock still shares it with any list of the resource begun meanwhile.
func (v Seen) AheadNow() {
	switch {
	case v.asksAhead():
		v.sub.clock.claim(v.sub.gsince, v.sub.beginList)
	case v.readsAhead():
		v.sub.readAhead(v.name)
	}
}

// asksAhead reports whether what was seen asks to be proven ahead (see Ahead), and marks its
// subscription as having asked.
func (v Seen) asksAhead() bool {
	s := v.sub
	g := &s.entry.reads
	if s.Named() || (v.name != "" && (g.shared == nil || !g.shared())) {
		return false
	}
	return !s.clock.after(s.gsince) && s.asked.CompareAndSwap(false, true)
}

// readsAhead reports whether what was seen is one existing object of a watch no other
// subscription shares, not yet settled (see Subscription.Read), and marks the subscription as
// having asked. A pass proves such a copy by the subscription's GET; under load that GET took
// 40-140 ms on the path from the object's change to the gate's return (a Certificate's, after its
// Secret turned issued). Made while the gate waits, it settles the name: from then on the store is
// its truth and the pass's proof is free. The same one GET, made earlier; none for an object not
// created yet, whose 404 would prove nothing about the copy that appears later.
func (v Seen) readsAhead() bool {
	s := v.sub
	if v.name == "" || s.Named() || len(v.rvs) == 0 {
		return false
	}
	if g := &s.entry.reads; g.shared != nil && g.shared() {
		return false // its pass is proven by the batch's list (asksAhead)
	}
	if _, settled := s.readFor(s.storeKey(v.name)); settled {
		return false
	}
	return s.asked.CompareAndSwap(false, true)
}

// readAhead makes the subscription's consistent read of name in the background (for a minute
// at most), whether or not anyone waits for it; the pass's own read joins it while in flight.
func (s *Subscription) readAhead(name string) {
	bg, cancel := context.WithTimeout(context.Background(), time.Minute)
	go func() {
		defer cancel()
		_, _ = s.Read(bg, name)
	}()
}

// add puts s in the batch and (re)starts the quiet period.
func (b *aheadBatch) add(s *Subscription) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.subs = append(b.subs, s)
	if b.timer == nil {
		b.first = time.Now()
		b.gen++
		gen := b.gen
		b.timer = time.AfterFunc(aheadQuiet, func() { b.send(gen) })
		return
	}
	if time.Since(b.first)+aheadQuiet < aheadMax {
		b.timer.Reset(aheadQuiet)
	}
}

// send begins one list, after every subscription of the batch began, on the watch of the
// newest one still open (the clock proves the others by it: proof_clock.go). gen is the batch
// whose timer fired: a Reset racing its firing may fire it again, after the batch was sent.
func (b *aheadBatch) send(gen uint64) {
	b.mu.Lock()
	if b.timer == nil || b.gen != gen {
		b.mu.Unlock()
		return
	}
	subs := b.subs
	b.subs, b.timer = nil, nil
	b.mu.Unlock()
	var newest *Subscription
	for _, s := range subs {
		if !s.closed.Load() && (newest == nil || s.gsince > newest.gsince) {
			newest = s
		}
	}
	if newest != nil {
		newest.clock.claim(newest.gsince, newest.beginList)
	}
}
