package kube

import (
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

// Ahead asks for what was seen, judged not ready, to be proven while the gate waits. Only a
// copy a pass would prove by a list asks: one on a watch other subscriptions share (a lone
// subscription's named object is proven by a GET, as quick as it gets) or a list of objects.
// Once per subscription; nothing when a list of the resource began after it.
func (v Seen) Ahead() {
	if v.asksAhead() {
		v.sub.clock.ahead.add(v.sub)
	}
}

// AheadNow is Ahead for a check that still has slow work to do after its reads (AdmissionReady's
// dry runs, tens of milliseconds each): the list is begun now, not after the batch's quiet
// period, so that a pass the work ends in finds it done or in flight (a verdict's own proof would
// only begin then). The clock still shares it with any list of the resource begun meanwhile.
func (v Seen) AheadNow() {
	if v.asksAhead() {
		v.sub.clock.claim(v.sub.gsince, v.sub.beginList)
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
