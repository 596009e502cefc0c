package kube

import (
	"context"
	"sync"
)

// revisionClock remembers what one resource's storage revision was after a point in time, for
// all its watches (namespaces) at once: a consistent list's resourceVersion is its storage's
// revision when it was served (etcd's, shared by every resource that etcd holds), not only its
// namespace's. A store that has reflected its watch up to that revision holds every write made
// before the list began (its watch delivers its writes in order), so a subscription that began
// before the list needs no read of its own. A quiet watch never reaches a newer revision: it is
// proven by its own read instead. One clock per resource, never across resources: an
// aggregated API or a resource in an `--etcd-servers-overrides` etcd counts its own revisions.
type revisionClock struct {
	mu       sync.Mutex
	started  uint64          // lists begun: a list's seq, and what a subscription notes when it begins
	done     []stamp         // lists done, by seq; the oldest dropped past keepStamps
	pending  map[uint64]bool // lists begun and not yet served (or failed)
	changed  chan struct{}   // closed (and replaced) when a pending list ends
	claiming sync.Mutex      // serializes claim
	ahead    aheadBatch      // subscriptions to prove while they wait (proof_ahead.go)
}

// stamp is one consistent list: begun as the seq-th, served at revision rv.
type stamp struct{ seq, rv uint64 }

const keepStamps = 64

// now returns the lists begun so far: a list whose seq is greater began after this call.
func (c *revisionClock) now() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.started
}

// begin notes a consistent list about to be sent and returns its seq; end it with served or
// failed.
func (c *revisionClock) begin() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.started++
	if c.pending == nil {
		c.pending = map[uint64]bool{}
	}
	c.pending[c.started] = true
	return c.started
}

// claim runs begin (which may begin a list) unless a list begun after since exists (in
// flight or done), and reports whether it ran: of verdicts deciding at once, one begins a
// list, the others see it.
func (c *revisionClock) claim(since uint64, begin func()) bool {
	c.claiming.Lock()
	defer c.claiming.Unlock()
	if c.after(since) {
		return false
	}
	begin()
	return true
}

// failed ends the list begun as seq without a revision (an error, a storage without integer
// resourceVersions).
func (c *revisionClock) failed(seq uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.end(seq)
}

// end drops seq from the pending lists and wakes those awaiting them (c.mu held).
func (c *revisionClock) end(seq uint64) {
	if !c.pending[seq] {
		return
	}
	delete(c.pending, seq)
	if c.changed != nil {
		close(c.changed)
		c.changed = nil
	}
}

// listing reports whether a list begun after since is still in flight.
func (c *revisionClock) listing(since uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.listingLocked(since)
}

func (c *revisionClock) listingLocked(since uint64) bool {
	for seq := range c.pending {
		if seq > since {
			return true
		}
	}
	return false
}

// await waits until no list begun after since is in flight (or ctx ends).
func (c *revisionClock) await(ctx context.Context, since uint64) error {
	for {
		c.mu.Lock()
		if !c.listingLocked(since) {
			c.mu.Unlock()
			return nil
		}
		if c.changed == nil {
			c.changed = make(chan struct{})
		}
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// served records the revision the list begun as seq was served at.
func (c *revisionClock) served(seq, rv uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.end(seq)
	i := len(c.done)
	for i > 0 && c.done[i-1].seq > seq {
		i--
	}
	c.done = append(c.done[:i], append([]stamp{{seq, rv}}, c.done[i:]...)...)
	if len(c.done) > keepStamps {
		c.done = c.done[len(c.done)-keepStamps:]
	}
}

// after reports whether a list began after since (served or still in flight).
func (c *revisionClock) after(since uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.started > since
}

// covers reports whether a list that began after since was served at a revision the store
// had reflected (seen).
func (c *revisionClock) covers(since, seen uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.done {
		if st.seq > since && seen >= st.rv {
			return true
		}
	}
	return false
}
