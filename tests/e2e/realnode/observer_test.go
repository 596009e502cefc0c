package realnode

import (
	"context"
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

// observer records, from outside the product, when each of its conditions first held. Every
// 10 ms (its resolution) it starts a check of each condition not yet seen, each check in its
// own goroutine with a 2 s limit (a call through a webhook that is coming up can hang until
// the webhook's timeout, and must not stall the clock); a condition holds from the start of
// the first check that found it true (the earliest it can be said to hold: strict for the
// gates measured against it).
type observer struct {
	mu     sync.Mutex
	first  map[string]time.Time
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func observe(ctx context.Context, conds map[string]func(context.Context) bool) *observer {
	ctx, cancel := context.WithCancel(ctx)
	o := &observer{first: map[string]time.Time{}, cancel: cancel}
	inFlight := make(chan struct{}, 32) // at most this many checks at once
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			for name, holds := range conds {
				o.mu.Lock()
				seen := !o.first[name].IsZero()
				o.mu.Unlock()
				if seen {
					continue
				}
				select {
				case inFlight <- struct{}{}:
				default:
					continue // the API server is slow: this tick's check waits for the next
				}
				o.wg.Add(1)
				go func(start time.Time) {
					defer o.wg.Done()
					defer func() { <-inFlight }()
					cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
					defer ccancel()
					if holds(cctx) {
						o.mu.Lock()
						if f := o.first[name]; f.IsZero() || start.Before(f) {
							o.first[name] = start
						}
						o.mu.Unlock()
					}
				}(time.Now())
			}
		}
	}()
	return o
}

// stop ends the observation and returns when each condition first held (zero: never).
func (o *observer) stop() map[string]time.Time {
	o.cancel()
	o.wg.Wait()
	return o.first
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
// break: every 10 ms it tries each condition not settled, each try in its own goroutine with a 2
// s limit; a condition holds since the start of the first try that found it true after the last
// that found it false (a prerequisite that held, then stopped, as a kind admitted before its
// webhook was registered, holds only from when it held again). A condition named in after is
// tried only while the one it names held at its latest try (one dry run per webhook every 10
// ms, not one per object); while that one does not hold, neither does it.
type streaks struct {
	mu      sync.Mutex
	last    map[string]time.Time // latest try's start
	lastOK  map[string]bool      // its answer
	broke   map[string]time.Time // latest start of a try that did not hold
	trues   map[string][]time.Time
	settled map[string]bool
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

func observeStreaks(ctx context.Context, conds map[string]check, after map[string]string) *streaks {
	ctx, cancel := context.WithCancel(ctx)
	o := &streaks{last: map[string]time.Time{}, lastOK: map[string]bool{}, broke: map[string]time.Time{},
		trues: map[string][]time.Time{}, settled: map[string]bool{}, cancel: cancel}
	inFlight := make(chan struct{}, 32)
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			for name, try := range conds {
				now := time.Now()
				o.mu.Lock()
				done := o.settled[name]
				leader := after[name]
				leaderDown := leader != "" && !o.settled[leader] && !o.lastOK[leader]
				if leaderDown && !done {
					o.record(name, now, false, false)
				}
				o.mu.Unlock()
				if done || leaderDown {
					continue
				}
				select {
				case inFlight <- struct{}{}:
				default:
					continue // the API server is slow: this tick's try waits for the next
				}
				o.wg.Add(1)
				go func(start time.Time) {
					defer o.wg.Done()
					defer func() { <-inFlight }()
					cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
					defer ccancel()
					holds, settled := try(cctx)
					if cctx.Err() != nil && ctx.Err() != nil {
						return // stopped meanwhile: no answer
					}
					o.mu.Lock()
					o.record(name, start, holds, settled)
					o.mu.Unlock()
				}(now)
			}
		}
	}()
	return o
}

// record notes one try (o.mu held).
func (o *streaks) record(name string, start time.Time, holds, settled bool) {
	if start.After(o.last[name]) {
		o.last[name], o.lastOK[name] = start, holds
	}
	if holds {
		o.trues[name] = append(o.trues[name], start)
		o.settled[name] = o.settled[name] || settled
	} else if start.After(o.broke[name]) {
		o.broke[name] = start
	}
}

// stop ends the observation and returns since when each condition has held (absent: it did
// not hold at the end).
func (o *streaks) stop() map[string]time.Time {
	o.cancel()
	o.wg.Wait()
	since := map[string]time.Time{}
	for name, ts := range o.trues {
		var s time.Time
		for _, t := range ts {
			if t.After(o.broke[name]) && (s.IsZero() || t.Before(s)) {
				s = t
			}
		}
		if !s.IsZero() {
			since[name] = s
		}
	}
	return since
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
