package provider

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/kube"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/verdict"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/wait"
)

// run is one gate's use of the cluster during a Create: its watches, its wake-up channel and
// its progress line. Close it when the gate returns, which releases its watches.
type run struct {
	// ctx bounds the consistent reads of fresh subscriptions: during a check, the check's own
	// (which ends at the gate's timeout, or when it is cancelled; see checking), else the
	// Create's or Read's.
	ctx     context.Context
	clients *kube.Clients
	wake    chan struct{}
	subs    map[kube.WatchKey]*kube.Subscription
	log     p.Logger
	// externalNames caches, by namespace/name, what a webhook's Service resolves to when it is
	// an ExternalName Service (see externalNameFor); dialers are the URL dialers (see run_wake.go).
	externalNames map[string]string
	namesMu       sync.Mutex // externalNames: a composite gate's probes run in the background (probe_async.go)
	dialers       map[string]*urlDialer

	// seen is what the running check judged from informer copies (see read), proven only
	// when its verdict would end the gate; proving makes every read consistent instead, once
	// a copy judged turned out stale, and in refresh (a "not ready" there drops the gate).
	seen    []kube.Seen
	hints   []kube.Seen // what hints were judged on (target.hint): proven when the verdict fails
	proving bool
	// awaited is when a verdict first waited for its watch to pass a newer revision instead
	// of reading (see kube.AwaitWatch); proven once one verdict of the run was proven.
	awaited time.Time
	proven  bool
	// what is the gate's subject, as its trace names it (trace.go).
	what string
}

// newRun gets the shared clients. It does not call the cluster (see reach).
func newRun(ctx context.Context) (*run, error) {
	clients, err := infer.GetConfig[Config](ctx).Clients()
	if err != nil {
		return nil, err
	}
	return runOn(ctx, clients), nil
}

// runOn is a run on clients already at hand (the autoGate plan's dry run).
func runOn(ctx context.Context, clients *kube.Clients) *run {
	return &run{
		ctx:     ctx,
		clients: clients,
		wake:    make(chan struct{}, 1),
		subs:    map[kube.WatchKey]*kube.Subscription{},
		log:     p.GetLogger(ctx),
	}
}

// reach waits for the API server to answer within the gate's own budget: the shorter of the
// provider's clusterReachTimeout and the gate's timeout wins, the status line says what is going
// on meanwhile, and Ctrl-C gives the same "cancelled while waiting" as any other wait. It
// returns the time it took, which the gate's wait no longer has.
func (r *run) reach(ctx context.Context, what string, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	budget := wait.EffectiveTimeout(ctx, timeout)
	rctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	host := r.clients.Config.Host
	err := r.clients.EnsureReachable(rctx, func(waited time.Duration) {
		r.log.InfoStatus(fmt.Sprintf("waiting for %s: cannot reach the Kubernetes API at %s (retrying, %s)", what, host, waited.Round(time.Second)))
	})
	if err == nil {
		return time.Since(start), nil
	}
	defer r.log.InfoStatus("")
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

// watch subscribes the gate to key once and returns the subscription.
func (r *run) watch(key kube.WatchKey) *kube.Subscription {
	if s, ok := r.subs[key]; ok {
		return s
	}
	s := r.clients.Watches.Subscribe(key, r.wake)
	r.subs[key] = s
	return s
}

// watchErr turns a watch error into a terminal failure when waiting cannot fix it (RBAC), and
// into a progress note otherwise (the API server restarting).
func watchErr(what string, s *kube.Subscription) (terminal error, note string) {
	err := s.Err()
	if err == nil {
		return nil, ""
	}
	if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
		return fmt.Errorf("cannot watch %s: %w", what, err), ""
	}
	return nil, "watch interrupted, reconnecting: " + err.Error()
}

func (r *run) close() {
	for _, s := range r.subs {
		s.Close()
	}
	r.subs = nil
	r.stopReach()
}

// wait runs the shared wait loop, reporting progress on the resource's status line.
func (r *run) wait(ctx context.Context, spec wait.Spec) (verdict.Result, error) {
	defer r.log.InfoStatus("")
	r.what = spec.What
	spec.Timeout = wait.EffectiveTimeout(ctx, spec.Timeout)
	spec.Wake = r.wake
	spec.Progress = func(msg string) { r.log.InfoStatus(msg) }
	spec.Check = r.checking(spec.Check)
	return wait.Until(ctx, spec)
}

// defaultNamespace is the gate's namespace input, else the provider's default namespace.
func (r *run) defaultNamespace(ns *string) string {
	if ns != nil && *ns != "" {
		return *ns
	}
	return r.clients.Namespace
}

// refreshBound bounds how long a refresh runs a gate's proof before judging it.
const refreshBound = time.Minute

// judge runs a gate's proof until it reaches a verdict, without waiting for readiness: the watch
// caches must have loaded (Unsynced) and a proof under way must finish (Confirming: the first of
// two good probes says nothing yet). Refresh uses it, so a ready gate is never dropped for
// lack of patience.
func (r *run) judge(ctx context.Context, e evaluation) (verdict.Result, error) {
	r.proving = true // every verdict counts here, "not ready" too
	r.what = e.what()
	var last verdict.Result
	_, err := wait.Until(ctx, wait.Spec{
		What:       e.what(),
		Timeout:    refreshBound,
		Wake:       r.wake,
		MaxBackoff: maxBackoffOf(e),
		Progress:   func(msg string) { r.log.InfoStatus(msg) },
		Check: r.checking(func(ctx context.Context) verdict.Result {
			res := e.check(ctx)
			if res.Failed != nil || !(res.Unsynced || res.Confirming) {
				last = res
				return verdict.Result{Ready: true}
			}
			return res
		}),
	})
	r.log.InfoStatus("")
	if err != nil {
		return last, fmt.Errorf("reading the cluster state: %w", err)
	}
	return last, last.Failed
}

// eventSubject is implemented by gates that wait on one named object: a timeout then quotes
// that object's most recent Warning events (FailedMount, FailedScheduling, BackOff, ...).
type eventSubject interface {
	subject() (namespace, name string)
}

// recentWarnings lists the newest Warning events about name in namespace, newest last. It is
// called once, when a wait has already timed out, so a plain list (not a watch) is right.
func (r *run) recentWarnings(ctx context.Context, namespace, name string, max int) []string {
	if name == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	sel := fields.AndSelectors(fields.OneTermEqualSelector("involvedObject.name", name),
		fields.OneTermEqualSelector("type", "Warning")).String()
	list, err := r.clients.Typed.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: sel})
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
