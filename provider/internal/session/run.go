package session

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/kube"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/verdict"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/wait"
)

// Run is one gate's use of the cluster during a Create: its watches, its wake-up channel and
// its progress line. Close it when the gate returns, which releases its watches.
type Run struct {
	// ctx bounds the consistent reads of fresh subscriptions: during a check, the check's own
	// (which ends at the gate's timeout, or when it is cancelled; see Checking), else the
	// Create's or Read's.
	ctx context.Context
	// Clients are the cluster's clients, shared by every gate of the provider.
	Clients *kube.Clients
	// Wake is poked by the run's watch subscriptions (and URL dialers) whenever something it
	// reads changed: the wait loop's Wake.
	Wake chan struct{}
	subs map[kube.WatchKey]*kube.Subscription
	// Log is the resource's logger: its status line and its messages.
	Log p.Logger
	// externalNames caches, by namespace/name, what a webhook's Service resolves to when it is
	// an ExternalName Service (see ExternalName); dialers are the URL dialers (see wake.go).
	externalNames map[string]string
	namesMu       sync.Mutex // externalNames: a composite gate's probes run in the background
	dialers       map[string]*urlDialer

	// seen is what the running check judged from informer copies (see Read), proven only
	// when its verdict would end the gate; proving makes every read consistent instead, once
	// a copy judged turned out stale, and in refresh (a "not ready" there drops the gate).
	seen    []kube.Seen
	hints   []kube.Seen // what hints were judged on (target.hint): proven when the verdict fails
	proving bool
	// awaited is when a verdict first waited for its watch to pass a newer revision instead
	// of reading (see kube.AwaitWatch); proven once one verdict of the run was proven.
	awaited time.Time
	proven  bool
	// What is the gate's subject, as its trace names it (trace.go).
	What string
	// waitingOn are the webhooks its latest round waits on (webhook_waiters.go).
	waitingOn []string
}

// New is a run of one gate (or of the autoGate plan's dry run) on clients, which the caller
// built from the provider's configuration. It does not call the cluster (see Reach).
func New(ctx context.Context, clients *kube.Clients) *Run {
	return &Run{
		ctx:     ctx,
		Clients: clients,
		Wake:    make(chan struct{}, 1),
		subs:    map[kube.WatchKey]*kube.Subscription{},
		Log:     p.GetLogger(ctx),
	}
}

// Reach waits for the API server to answer within the gate's own budget: the shorter of the
// provider's clusterReachTimeout and the gate's timeout wins, the status line says what is going
// on meanwhile, and Ctrl-C gives the same "cancelled while waiting" as any other wait. It
// returns the time it took, which the gate's wait no longer has.
func (r *Run) Reach(ctx context.Context, what string, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	budget := wait.EffectiveTimeout(ctx, timeout)
	rctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	host := r.Clients.Config.Host
	err := r.Clients.EnsureReachable(rctx, func(waited time.Duration) {
		r.Log.InfoStatus(fmt.Sprintf("waiting for %s: cannot reach the Kubernetes API at %s (retrying, %s)", what, host, waited.Round(time.Second)))
	})
	if err == nil {
		return time.Since(start), nil
	}
	defer r.Log.InfoStatus("")
	last := fmt.Sprintf("cannot reach the Kubernetes API at %s", host)
	var ue *kube.UnreachableError
	if errors.As(err, &ue) && ue.Last != nil {
		last += ": " + ue.Last.Error()
	}
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		return 0, fmt.Errorf("%w while waiting for %s; last seen: %s", wait.ErrCancelled, what, last)
	case rctx.Err() != nil:
		return 0, &wait.TimeoutError{What: what, Waited: time.Since(start), Last: last,
			Hint: "that the cluster is up and that the provider's kubeconfig/context point at it"}
	}
	return 0, err
}

// Watch subscribes the gate to key once and returns the subscription.
func (r *Run) Watch(key kube.WatchKey) *kube.Subscription {
	if s, ok := r.subs[key]; ok {
		return s
	}
	s := r.Clients.Watches.Subscribe(key, r.Wake)
	r.subs[key] = s
	return s
}

// WatchErr turns a watch error into a terminal failure when waiting cannot fix it (RBAC), and
// into a progress note otherwise (the API server restarting).
func WatchErr(what string, s *kube.Subscription) (terminal error, note string) {
	err := s.Err()
	if err == nil {
		return nil, ""
	}
	if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
		return fmt.Errorf("cannot watch %s: %w", what, err), ""
	}
	return nil, "watch interrupted, reconnecting: " + err.Error()
}

// Close releases the run's watches and stops its URL dialers.
func (r *Run) Close() {
	for _, s := range r.subs {
		s.Close()
	}
	r.subs = nil
	r.stopReach()
	r.WaitOnWebhooks(nil)
}

// Wait runs the shared wait loop, reporting progress on the resource's status line.
func (r *Run) Wait(ctx context.Context, spec wait.Spec) (verdict.Result, error) {
	defer r.Log.InfoStatus("")
	spec.Progress = func(msg string) { r.Log.InfoStatus(msg) }
	return r.wait(ctx, spec)
}

// Quietly is Wait without a status line: for a run that belongs to no resource yet (autoGate's
// head start of a gate, provider/head_start.go), whose progress would land on the stack's line.
func (r *Run) Quietly(ctx context.Context, spec wait.Spec) (verdict.Result, error) {
	spec.Progress = func(string) {}
	return r.wait(ctx, spec)
}

func (r *Run) wait(ctx context.Context, spec wait.Spec) (verdict.Result, error) {
	r.What = spec.What
	spec.Timeout = wait.EffectiveTimeout(ctx, spec.Timeout)
	spec.Wake = r.Wake
	spec.Check = r.Checking(spec.Check)
	return wait.Until(ctx, spec)
}

// DefaultNamespace is the gate's namespace input, else the provider's default namespace.
func (r *Run) DefaultNamespace(ns *string) string {
	if ns != nil && *ns != "" {
		return *ns
	}
	return r.Clients.Namespace
}

// RefreshBound bounds how long a refresh runs a gate's proof before judging it.
const RefreshBound = time.Minute

// Judge runs a gate's proof (what, check) until it reaches a verdict, without waiting for
// readiness: the watch caches must have loaded (Unsynced) and a proof under way must finish
// (Confirming: the first of two good probes says nothing yet). Refresh uses it, so a ready gate
// is never dropped for lack of patience. maxBackoff is the check's own probe backoff cap (0:
// the wait loop's).
func (r *Run) Judge(ctx context.Context, what string, check func(context.Context) verdict.Result, maxBackoff time.Duration) (verdict.Result, error) {
	r.proving = true // every verdict counts here, "not ready" too
	r.What = what
	var last verdict.Result
	_, err := wait.Until(ctx, wait.Spec{
		What:       what,
		Timeout:    RefreshBound,
		Wake:       r.Wake,
		MaxBackoff: maxBackoff,
		Progress:   func(msg string) { r.Log.InfoStatus(msg) },
		Check: r.Checking(func(ctx context.Context) verdict.Result {
			res := check(ctx)
			if res.Failed != nil || !(res.Unsynced || res.Confirming) {
				last = res
				return verdict.Result{Ready: true}
			}
			return res
		}),
	})
	r.Log.InfoStatus("")
	if err != nil {
		return last, fmt.Errorf("reading the cluster state: %w", err)
	}
	return last, last.Failed
}

// RecentWarnings lists the newest Warning events about name in namespace, newest last. It is
// called once, when a wait has already timed out, so a plain list (not a watch) is right.
func (r *Run) RecentWarnings(ctx context.Context, namespace, name string, max int) []string {
	if name == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	sel := fields.AndSelectors(fields.OneTermEqualSelector("involvedObject.name", name),
		fields.OneTermEqualSelector("type", "Warning")).String()
	list, err := r.Clients.Typed.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil || len(list.Items) == 0 {
		return nil
	}
	items := list.Items
	last := func(i int) time.Time {
		e := items[i]
		switch {
		case !e.LastTimestamp.IsZero():
			return e.LastTimestamp.Time
		case !e.EventTime.IsZero():
			return e.EventTime.Time
		}
		return e.CreationTimestamp.Time
	}
	sort.Slice(items, func(i, j int) bool { return last(i).Before(last(j)) })
	if len(items) > max {
		items = items[len(items)-max:]
	}
	out := make([]string, 0, len(items))
	for _, e := range items {
		out = append(out, fmt.Sprintf("%s %s: %s", e.InvolvedObject.Kind, e.Reason, e.Message))
	}
	return out
}
