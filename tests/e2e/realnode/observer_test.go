package realnode

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/readiness-io/pulumi-readiness/internal/charts"
	"github.com/readiness-io/pulumi-readiness/internal/controlplane"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

// installable loads a module chart's images into the node and writes the chart, returning
// its folder (a Release's `chart`).
func installable(ctx context.Context, t *testing.T, c charts.Installable) string {
	t.Helper()
	dir, err := charts.Install(ctx, testenv.Node, c, t.TempDir(), t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// observer records, from outside the product, when each of its conditions first held (see
// poll for how it tries them); a condition holds from the start of the first try that found it
// true (the earliest it can be said to hold: strict for the gates measured against it).
type observer struct {
	mu    sync.Mutex
	first map[string]time.Time
	stopP func()
}

func observe(ctx context.Context, conds map[string]func(context.Context) bool) *observer {
	o := &observer{first: map[string]time.Time{}}
	o.stopP = poll(ctx, func(time.Time) []string {
		o.mu.Lock()
		defer o.mu.Unlock()
		var due []string
		for name := range conds {
			if o.first[name].IsZero() {
				due = append(due, name)
			}
		}
		return due
	}, func(ctx context.Context, name string, start time.Time) {
		if conds[name](ctx) {
			o.mu.Lock()
			if f := o.first[name]; f.IsZero() || start.Before(f) {
				o.first[name] = start
			}
			o.mu.Unlock()
		}
	})
	return o
}

// stop ends the observation and returns when each condition first held (zero: never).
func (o *observer) stop() map[string]time.Time {
	o.stopP()
	return o.first
}

// poll is the observers' clock: every 10 ms (their resolution) it starts a try of each
// condition due returns, each in its own goroutine with a 2 s limit (a call through a webhook
// that is coming up can hang until the webhook's timeout, and must not stall the clock), at most
// 32 at once (a slow API server skips a tick's try rather than pile them up). The returned
// function stops it and waits for the tries under way.
func poll(ctx context.Context, due func(now time.Time) []string, try func(ctx context.Context, name string, start time.Time)) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	inFlight := make(chan struct{}, 32)
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			for _, name := range due(time.Now()) {
				select {
				case inFlight <- struct{}{}:
				default:
					continue
				}
				wg.Add(1)
				go func(name string, start time.Time) {
					defer wg.Done()
					defer func() { <-inFlight }()
					cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
					defer ccancel()
					try(cctx, name, start)
				}(name, time.Now())
			}
		}
	}()
	return func() {
		cancel()
		wg.Wait()
	}
}

// answers is a condition: the webhooks that intercept a dry-run create of doc answer it,
// admitting it or denying it (a failed call is not an answer).
func answers(t *testing.T, gvr schema.GroupVersionResource, doc string) func(context.Context) bool {
	dyn := testenv.Dynamic(t)
	u, err := controlplane.Decode(doc)
	if err != nil {
		t.Fatal(err)
	}
	return func(ctx context.Context) bool {
		err := dryRunCreate(ctx, dyn, gvr, u)
		return err == nil || strings.Contains(err.Error(), "denied the request")
	}
}

// admits is a condition: a dry-run create of doc in its namespace is admitted (every webhook
// that intercepts it answered and allowed it).
func admits(t *testing.T, gvr schema.GroupVersionResource, doc string) func(context.Context) bool {
	dyn := testenv.Dynamic(t)
	u, err := controlplane.Decode(doc)
	if err != nil {
		t.Fatal(err)
	}
	return func(ctx context.Context) bool { return dryRunCreate(ctx, dyn, gvr, u) == nil }
}

func dryRunCreate(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, u *unstructured.Unstructured) error {
	obj := &unstructured.Unstructured{Object: u.DeepCopy().Object}
	_, err := dyn.Resource(gvr).Namespace(u.GetNamespace()).Create(ctx, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}

// deploymentsAvailable is a condition: ns holds at least n Deployments, each rolled out and
// available.
func deploymentsAvailable(ns string, n int) func(context.Context) bool {
	return func(ctx context.Context) bool {
		ds, err := testenv.CP.Client.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(ds.Items) < n {
			return false
		}
		for i := range ds.Items {
			if !available(&ds.Items[i]) {
				return false
			}
		}
		return true
	}
}

func available(d *appsv1.Deployment) bool {
	if d.Status.ObservedGeneration < d.Generation || d.Spec.Replicas == nil || d.Status.UpdatedReplicas < *d.Spec.Replicas {
		return false
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue {
			return d.Status.AvailableReplicas >= *d.Spec.Replicas
		}
	}
	return false
}

var (
	externalSecretsGVR = schema.GroupVersionResource{Group: "external-secrets.io", Version: "v1beta1", Resource: "externalsecrets"}
	certificatesGVR    = schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificates"}
	secretStoresGVR    = schema.GroupVersionResource{Group: "external-secrets.io", Version: "v1beta1", Resource: "secretstores"}
)

// secretStore is a SecretStore External Secrets' other webhook configuration
// (secretstore-validate) intercepts.
const secretStore = `apiVersion: external-secrets.io/v1beta1
kind: SecretStore
metadata: {name: observer, namespace: default}
spec: {provider: {fake: {data: []}}}`

// check is one try of a streak condition: whether it holds, and whether it is settled for good
// (the object exists: its prerequisites held, whatever follows).
type check func(context.Context) (holds, settled bool)

// streaks records, from outside the product, since when each condition has held without a
// break: it tries each condition not settled (see poll); a condition holds since the start of
// the first try that found it true after the last that found it false (a prerequisite that held,
// then stopped, as a kind admitted before its webhook was registered, holds only from when it
// held again). A condition named in after is tried only while the one it names held at its
// latest try (one dry run per webhook every 10 ms, not one per object); while that one does not
// hold, neither does it. A condition that holds is tried again every heldRetry only.
type streaks struct {
	mu     sync.Mutex
	last   map[string]time.Time // latest try's start
	lastOK map[string]bool      // its answer
	broke  map[string]time.Time // latest start of a try that did not hold
	trues  map[string][]time.Time
	// answered is when each try of trues returned (same index): a dry run through a webhook that
	// just began to serve can take a hundred milliseconds and more, and what the product can know
	// of a prerequisite it knows from an answer (the timelines of late objects show both).
	answered map[string][]time.Time
	settled  map[string]bool
	stopP    func()
}

// heldRetry is how often a condition that holds (its object not created yet) is tried again, to
// see it break. Every 10 ms, the observer sent up to a hundred dry runs a second per condition
// through webhooks that had begun to admit, on the 2-core node the ways run on, for as long as
// the objects waited for their releases: load no user's cluster has. A break is then seen up to
// heldRetry late (the first try that holds after it is still found within 10 ms); one shorter
// than heldRetry can go unseen, which none of the conditions here has (a kind admitted before
// its webhook was registered breaks for seconds, until the webhook serves).
const heldRetry = 100 * time.Millisecond

func observeStreaks(ctx context.Context, conds map[string]check, after map[string]string) *streaks {
	o := &streaks{last: map[string]time.Time{}, lastOK: map[string]bool{}, broke: map[string]time.Time{},
		trues: map[string][]time.Time{}, answered: map[string][]time.Time{}, settled: map[string]bool{}}
	o.stopP = poll(ctx, func(now time.Time) []string {
		o.mu.Lock()
		defer o.mu.Unlock()
		var due []string
		for name := range conds {
			if o.settled[name] {
				continue
			}
			if o.lastOK[name] && now.Sub(o.last[name]) < heldRetry {
				continue // it holds: tried again only to see it break
			}
			if leader := after[name]; leader != "" && !o.settled[leader] && !o.lastOK[leader] {
				o.record(name, now, now, false, false)
				continue
			}
			due = append(due, name)
		}
		return due
	}, func(ctx context.Context, name string, start time.Time) {
		holds, settled := conds[name](ctx)
		if errors.Is(ctx.Err(), context.Canceled) {
			return // stopped meanwhile: no answer (a try that timed out did not hold)
		}
		end := time.Now()
		o.mu.Lock()
		o.record(name, start, end, holds, settled)
		o.mu.Unlock()
	})
	return o
}

// record notes one try, begun at start and answered at end (o.mu held).
func (o *streaks) record(name string, start, end time.Time, holds, settled bool) {
	if start.After(o.last[name]) {
		o.last[name], o.lastOK[name] = start, holds
	}
	if holds {
		o.trues[name] = append(o.trues[name], start)
		o.answered[name] = append(o.answered[name], end)
		o.settled[name] = o.settled[name] || settled
	} else if start.After(o.broke[name]) {
		o.broke[name] = start
	}
}

// stop ends the observation and returns since when each condition has held (absent: it did
// not hold at the end).
func (o *streaks) stop() map[string]time.Time {
	o.stopP()
	since, _ := o.firstTries()
	return since
}

// firstTries returns, for each condition that holds, the start of the first try of its last
// streak and when that try was answered.
func (o *streaks) firstTries() (since, answered map[string]time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	since, answered = map[string]time.Time{}, map[string]time.Time{}
	for name, ts := range o.trues {
		var s time.Time
		for i, t := range ts {
			if t.After(o.broke[name]) && (s.IsZero() || t.Before(s)) {
				s, answered[name] = t, o.answered[name][i]
			}
		}
		if !s.IsZero() {
			since[name] = s
		} else {
			delete(answered, name)
		}
	}
	return since, answered
}

// admittedOrExists is a streak condition: a dry-run create of doc is admitted (every webhook
// that intercepts it answered and allowed it), or the object exists (settled).
func admittedOrExists(t *testing.T, gvr schema.GroupVersionResource, doc string) check {
	dyn := testenv.Dynamic(t)
	u, err := controlplane.Decode(doc)
	if err != nil {
		t.Fatal(err)
	}
	return func(ctx context.Context) (bool, bool) {
		err := dryRunCreate(ctx, dyn, gvr, u)
		if apierrors.IsAlreadyExists(err) {
			return true, true
		}
		return err == nil, false
	}
}
