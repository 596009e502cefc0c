package session

import (
	"testing"
	"time"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/kube"
)

func TestSharedDelay(t *testing.T) {
	const hot = 40 * time.Millisecond
	for _, tc := range []struct {
		d       time.Duration
		waiters int
		want    time.Duration
	}{
		{hot, 0, hot}, // waits on no webhook
		{hot, 1, hot},
		{hot, SharedPollers, hot}, // a few gates keep their own pace
		{hot, SharedPollers + 1, 2 * hot},
		{hot, 50, 13 * hot},                       // fifty ExternalSecrets behind one webhook: about four gates' polling
		{250 * time.Millisecond, 50, time.Second}, // at most a second, so gates left alone learn soon
		{2 * time.Second, 50, 2 * time.Second},    // never below the gate's own delay
	} {
		if got := SharedDelay(tc.d, tc.waiters); got != tc.want {
			t.Errorf("SharedDelay(%v, %d) = %v, want %v", tc.d, tc.waiters, got, tc.want)
		}
	}
}

// Runs of one cluster waiting on a webhook are counted per webhook; an answer wakes every other
// run waiting on it (not the one that saw it, nor runs of another webhook or another cluster's);
// a run that waits on nothing any more, or closed, is no longer counted or woken.
func TestWebhookWaiters(t *testing.T) {
	clients, other := &kube.Clients{}, &kube.Clients{}
	run := func(c *kube.Clients) *Run { return &Run{Clients: c, Wake: make(chan struct{}, 1)} }
	a, b, c, d := run(clients), run(clients), run(clients), run(other)
	woken := func(r *Run) bool {
		select {
		case <-r.Wake:
			return true
		default:
			return false
		}
	}
	if n := a.WaitOnWebhooks([]string{"v.eso"}); n != 1 {
		t.Fatalf("first waiter counted %d", n)
	}
	if n := b.WaitOnWebhooks([]string{"v.eso", "m.cm"}); n != 2 {
		t.Fatalf("second waiter counted %d, want 2", n)
	}
	if n := c.WaitOnWebhooks([]string{"m.cm"}); n != 2 {
		t.Fatalf("a waiter on another webhook counted %d, want 2 (b waits on both)", n)
	}
	if n := d.WaitOnWebhooks([]string{"v.eso"}); n != 1 {
		t.Fatalf("another cluster's waiter counted %d, want 1", n)
	}
	if n := a.WaitOnWebhooks([]string{"v.eso"}); n != 2 {
		t.Fatalf("a waiter noted twice counted %d, want 2", n)
	}

	a.WebhooksAnswered([]string{"v.eso"})
	if woken(a) || !woken(b) || woken(c) || woken(d) {
		t.Fatal("an answer must wake the other waiters on that webhook of that cluster only")
	}

	b.WaitOnWebhooks(nil) // passed: waits on nothing
	a.WebhooksAnswered([]string{"v.eso", "m.cm"})
	if woken(b) || !woken(c) {
		t.Fatal("a run that waits on nothing was woken, or one still waiting was not")
	}
	if n := c.WaitOnWebhooks([]string{"m.cm"}); n != 1 {
		t.Fatalf("after b left, %d waiters on m.cm, want 1", n)
	}
	c.Close()
	if n := a.WaitOnWebhooks([]string{"m.cm"}); n != 1 {
		t.Fatalf("a closed run is still counted: %d", n)
	}
	a.Close()
	w := waitersOf(clients)
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.runs) != 0 {
		t.Fatalf("runs left after every one closed: %v", w.runs)
	}
}
