package session

import (
	"slices"
	"sync"
	"time"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/kube"
)

// Gates waiting on one webhook poll it together. Every AdmissionReady whose objects a webhook
// could not answer (its server not listening yet, no endpoints, erroring) dry-runs them again on
// its own backoff, and fifty ExternalSecrets behind one chart's webhook were fifty dry runs
// every 40 ms for as long as the webhook took to start. So the runs waiting on a webhook note it
// here: with more than SharedPollers of them, each one's delay grows with their number
// (SharedDelay), so that together they poll about as often as SharedPollers would, and the first
// of them (or any other gate) whose object the webhook answers wakes them all at once
// (WebhooksAnswered): each then makes its own dry run, which no answer to another object proves.
// Up to SharedPollers runs nothing changes: a few gates keep their own schedule exactly.

// SharedPollers is how many runs waiting on one webhook poll at their own pace.
const SharedPollers = 4

// sharedDelayMax bounds a delay SharedDelay lengthened: runs that left without an answer (timed
// out, cancelled) wake no one, so the ones left find out within it.
const sharedDelayMax = time.Second

// SharedDelay is the delay before a run's next round, given its own (d) and how many runs wait
// on the webhook most of them wait on (waiters, this one included): d up to SharedPollers
// waiters, else d times their number over SharedPollers (rounded up), at most max(d, 1 s).
func SharedDelay(d time.Duration, waiters int) time.Duration {
	if waiters <= SharedPollers {
		return d
	}
	return min(d*time.Duration((waiters+SharedPollers-1)/SharedPollers), max(d, sharedDelayMax))
}

// hookWaiters are the runs of one cluster's clients waiting on each webhook (by name, as the
// API server's "failed calling webhook" names it: two configurations' webhooks of one name share
// an entry, which costs at worst a wake-up that finds nothing new).
type hookWaiters struct {
	mu   sync.Mutex
	runs map[string]map[*Run]bool
}

var waitersByClients sync.Map // *kube.Clients → *hookWaiters

func waitersOf(c *kube.Clients) *hookWaiters {
	w, _ := waitersByClients.LoadOrStore(c, &hookWaiters{runs: map[string]map[*Run]bool{}})
	return w.(*hookWaiters)
}

// WaitOnWebhooks notes that the run's latest round waits on webhooks hooks to answer (none: it
// waits on no webhook any more, as after a pass) and returns how many runs wait on the most
// waited-for of them, this one included (0 for none).
func (r *Run) WaitOnWebhooks(hooks []string) int {
	if len(hooks) == 0 && len(r.waitingOn) == 0 {
		return 0
	}
	w := waitersOf(r.Clients)
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, h := range r.waitingOn {
		if !slices.Contains(hooks, h) {
			delete(w.runs[h], r)
			if len(w.runs[h]) == 0 {
				delete(w.runs, h)
			}
		}
	}
	r.waitingOn = append(r.waitingOn[:0], hooks...)
	most := 0
	for _, h := range hooks {
		if w.runs[h] == nil {
			w.runs[h] = map[*Run]bool{}
		}
		w.runs[h][r] = true
		most = max(most, len(w.runs[h]))
	}
	return most
}

// WebhooksAnswered wakes every run waiting on one of hooks: a webhook answered a dry run.
func (r *Run) WebhooksAnswered(hooks []string) {
	w := waitersOf(r.Clients)
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, h := range hooks {
		for other := range w.runs[h] {
			if other != r {
				select {
				case other.Wake <- struct{}{}:
				default: // already poked
				}
			}
		}
	}
}

// Waiting is how many runs, of any cluster's clients, wait on webhook hook: what the tests
// check the gates' rounds note.
func Waiting(hook string) int {
	n := 0
	waitersByClients.Range(func(_, v any) bool {
		w := v.(*hookWaiters)
		w.mu.Lock()
		n += len(w.runs[hook])
		w.mu.Unlock()
		return true
	})
	return n
}
