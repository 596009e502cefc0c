package provider

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/admission"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/kube"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/status"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/verdict"
)

// coverWait bounds how long a verdict waits for its busy watch to prove it before reading.
const coverWait = 100 * time.Millisecond

// checking runs check with r.ctx set to the check's context, so that the reads a check makes
// end with the gate (its timeout, a cancel) rather than run on after it. A verdict that ends
// the gate is kept only once what it judged is proven current (see read); if a copy judged was
// stale, the check runs again at once on consistent reads.
func (r *run) checking(check func(context.Context) verdict.Result) func(context.Context) verdict.Result {
	return func(ctx context.Context) verdict.Result {
		outer := r.ctx
		r.ctx = ctx
		defer func() { r.ctx, r.seen, r.hints = outer, nil, nil }()
		r.seen, r.hints = nil, nil
		began := time.Now()
		res := check(ctx)
		checked := time.Now()
		res = r.prove(ctx, check, res)
		if tracer != nil {
			r.traceCheck(began, checked, &res)
		}
		return res
	}
}

// prove keeps res, the verdict of check, once what it judged is proven current: a verdict that
// waits costs nothing now (what a pass will judge is proven meanwhile); one that ends the gate
// waits for its busy watches, or reads; a stale copy runs check again on consistent reads.
func (r *run) prove(ctx context.Context, check func(context.Context) verdict.Result, res verdict.Result) verdict.Result {
	if !res.Ready && res.Failed == nil {
		for _, v := range r.seen { // it waits: prove meanwhile what a pass will judge
			v.Ahead()
		}
		return res
	}
	judged := r.seen
	if res.Failed != nil {
		judged = append(judged, r.hints...)
	}
	var reads []kube.Seen
	for _, v := range judged {
		step, err := v.Next(ctx, r.mayAwait())
		if err != nil { // the gate's time is up: the wait loop says so
			return verdict.Result{Message: "confirming that the state judged is current", Confirming: true}
		}
		switch step {
		case kube.Proven:
			continue
		case kube.AwaitWatch:
			// Its watch is busy: wait for it to pass a list's revision rather than read now.
			if r.awaited.IsZero() {
				r.awaited = time.Now()
			}
			return verdict.Result{Message: "confirming that the state judged is current (its watch is catching up)", Confirming: true, RetryIn: coverWait - time.Since(r.awaited)}
		}
		reads = append(reads, v)
	}
	ok, err := proveAll(ctx, reads)
	if err != nil {
		return *r.readErr("the state judged", err)
	}
	if !ok {
		r.proving, r.seen, r.hints = true, nil, nil
		return check(ctx)
	}
	r.proven = true
	return res
}

// proveAll proves the reads at once (a HelmReleaseReady judges a dozen kinds: their consistent
// reads one after another cost their sum, under load tens of milliseconds), and reports whether
// all found what was judged, or the first error.
func proveAll(ctx context.Context, reads []kube.Seen) (bool, error) {
	if len(reads) == 1 {
		return reads[0].Prove(ctx)
	}
	oks, errs := make([]bool, len(reads)), make([]error, len(reads))
	var wg sync.WaitGroup
	for i, v := range reads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			oks[i], errs[i] = v.Prove(ctx)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return false, err
		}
	}
	return !slices.Contains(oks, false), nil
}

// mayAwait reports whether a verdict may still wait for its busy watch to prove it (see
// kube.AwaitWatch): not once the run has proven a verdict, nor for more than coverWait.
func (r *run) mayAwait() bool {
	return !r.proven && (r.awaited.IsZero() || time.Since(r.awaited) < coverWait)
}

// read returns the object name as the check should judge it: the informer's copy, noted to be
// proven if the verdict ends the gate (see checking), so that gates sharing a watch make one
// read when they pass, not one each when they start. A watch of one named object (a Secret, a
// Helm record) is read at once instead: no other object's gate shares it, and a read made
// while the gate waits makes its pass free (the store is the truth once it caught up).
// Once proving, every read is consistent.
func (r *run) read(sub *kube.Subscription, name string) (*unstructured.Unstructured, error) {
	if r.proving || sub.Named() {
		return sub.Read(r.ctx, name)
	}
	o, seen := sub.Peek(name)
	r.seen = append(r.seen, seen)
	return o, nil
}

// readList is read for every object matching sel (nil: all).
func (r *run) readList(sub *kube.Subscription, sel labels.Selector) ([]*unstructured.Unstructured, error) {
	return r.readListInto(sub, sel, &r.seen)
}

// readListInto is readList noting what it judged in judged (r.seen, or r.hints for a hint).
func (r *run) readListInto(sub *kube.Subscription, sel labels.Selector, judged *[]kube.Seen) ([]*unstructured.Unstructured, error) {
	if r.proving || sub.Named() {
		return sub.ReadList(r.ctx, sel)
	}
	objs, seen := sub.PeekList(sel)
	*judged = append(*judged, seen)
	return objs, nil
}

// objects resolves the target's kind and returns what the shared watch holds for it. A kind
// the API server does not serve yet is waited for (its CRD may be installing); pending is set
// when the caller should report it and wait.
func (r *run) objects(t target) (objs []*unstructured.Unstructured, pending *verdict.Result) {
	m, err := r.clients.Mapping(t.gvk)
	if err != nil {
		var nk *kube.NoKindError
		if errors.As(err, &nk) {
			return nil, r.kindPending(t.gvk, nk)
		}
		if terminal := discoveryErr(r.clients, t.gvk, err); terminal != nil {
			return nil, &verdict.Result{Failed: terminal}
		}
		return nil, &verdict.Result{Message: "resolving the kind: " + err.Error(), Poll: true}
	}
	key := kube.WatchKey{Resource: m.Resource}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		key.Namespace = t.namespace
	}
	if m.Resource.Group == "" && m.Resource.Resource == "secrets" && t.name != "" {
		key.Name = t.name // Secrets: watch the one object, never cache a namespace's Secrets
	}
	sub := r.watch(key)
	if terminal, note := watchErr(m.Resource.Resource+" in "+nsOrCluster(key.Namespace), sub); terminal != nil {
		return nil, &verdict.Result{Failed: terminal}
	} else if note != "" && !sub.Synced() {
		return nil, &verdict.Result{Message: note, Unsynced: true}
	}
	if !sub.Synced() {
		return nil, &verdict.Result{Message: "listing " + m.Resource.Resource, Unsynced: true}
	}
	if t.name != "" {
		o, err := r.read(sub, t.name)
		if err != nil {
			return nil, r.readErr(m.Resource.Resource+" "+t.name, err)
		}
		if o != nil {
			return []*unstructured.Unstructured{o}, nil
		}
		return nil, nil
	}
	judged := &r.seen
	if t.hint {
		judged = &r.hints // a hint adds to a verdict and may fail it: a failure it leads to is proven too
	}
	objs, err = r.readListInto(sub, t.selector, judged)
	if err != nil {
		return nil, r.readErr(m.Resource.Resource+" in "+nsOrCluster(key.Namespace), err)
	}
	return objs, nil
}

// objectsOf is objects for each target, their watches all asked for before any is waited on (so
// that they list at once, not one check after another). pending is the first terminal result,
// else the first that waits; which is the target's index.
func (r *run) objectsOf(ts ...target) (objs [][]*unstructured.Unstructured, which int, pending *verdict.Result) {
	objs = make([][]*unstructured.Unstructured, len(ts))
	which = -1
	for i, t := range ts {
		o, p := r.objects(t)
		objs[i] = o
		switch {
		case p != nil && p.Failed != nil:
			return nil, i, p
		case p != nil && pending == nil:
			which, pending = i, p
		}
	}
	return objs, which, pending
}

// readErr turns a failed consistent read (see kube.Subscription.Read) into a result: refused
// credentials or RBAC fail at once (after the one retry with refreshed credentials), anything
// else is retried.
func (r *run) readErr(what string, err error) *verdict.Result {
	if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
		return &verdict.Result{Failed: fmt.Errorf("cannot read %s: %w", what, err)}
	}
	return &verdict.Result{Message: "reading " + what + ": " + err.Error(), Poll: true}
}

// kindPending waits for a kind to be served: it watches CRDs and re-discovers while a CRD
// defining the kind exists but discovery does not serve it yet. A kind the server serves at
// other versions only, with no CRD to add the one asked for, fails at once: waiting cannot
// fix an apiVersion.
func (r *run) kindPending(gvk schema.GroupVersionKind, nk *kube.NoKindError) *verdict.Result {
	sub := r.watch(kube.WatchKey{Resource: crdResource})
	if terminal, note := watchErr("customresourcedefinitions (kind "+gvk.Kind+" is not served, so the gate watches for its CRD)", sub); terminal != nil {
		return &verdict.Result{Failed: terminal}
	} else if note != "" && !sub.Synced() {
		return &verdict.Result{Message: note, Unsynced: true}
	}
	if !sub.Synced() {
		return &verdict.Result{Message: "listing CRDs", Unsynced: true}
	}
	for _, c := range sub.List(nil) {
		res := status.CRD(c)
		if res.Group == gvk.Group && res.Kind == gvk.Kind {
			if gvk.Version != "" && len(res.ServedVersions) > 0 && !slices.Contains(res.ServedVersions, gvk.GroupVersion().String()) {
				// A CRD update may add the version; its watch event wakes the gate.
				return &verdict.Result{Message: fmt.Sprintf("CRD %s serves %s, not %s (%s)", c.GetName(), strings.Join(res.ServedVersions, ", "), gvk.GroupVersion(), res.Message),
					Hint: "fix apiVersion, or install the CRD version that serves it"}
			}
			return &verdict.Result{Message: fmt.Sprintf("kind %s is defined by CRD %s (%s) but not served yet", gvk.Kind, c.GetName(), res.Message), Poll: res.Ready}
		}
	}
	if len(nk.Served) > 0 {
		return &verdict.Result{Failed: nk}
	}
	return &verdict.Result{Message: nk.Error(), Hint: "install the CRD that defines this kind before the gate, or fix apiVersion/kind"}
}

// discoveryErr turns a discovery failure that waiting cannot fix (RBAC, rejected credentials)
// into a terminal error naming what was asked and the API server's answer (verb, path, user).
func discoveryErr(c *kube.Clients, gvk schema.GroupVersionKind, err error) error {
	if !apierrors.IsForbidden(err) && !apierrors.IsUnauthorized(err) {
		return nil
	}
	if plain := c.DiscoveryRefusal(context.Background()); plain != nil && (apierrors.IsForbidden(plain) || apierrors.IsUnauthorized(plain)) {
		err = plain // the server's own message: verb, path and user
	}
	what := fmt.Sprintf("cannot discover the API server's kinds (to resolve %s %s)", gvk.GroupVersion(), gvk.Kind)
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("%s: %w; discovery (get on /api and /apis) is granted to authenticated users by "+
			"the default system:discovery ClusterRole", what, err)
	}
	return fmt.Errorf("%s: %w: the API server rejected the provider's credentials (token or client "+
		"certificate invalid or expired); check the kubeconfig", what, err)
}

func nsOrCluster(ns string) string {
	if ns == "" {
		return "the cluster"
	}
	return "namespace " + ns
}

// namespaceLabels reads the labels of namespace ns through a watch on that one Namespace, when
// one of hooks has a namespaceSelector that needs them to tell whether the API server calls it.
// A namespace the gate may not read, or that does not exist, is not an error: nsErr says why
// the labels are unknown (a webhook is then not taken as called when that must be proven, and
// as called when it must be ruled out). rv is the Namespace's resourceVersion when read.
func (r *run) namespaceLabels(ns string, hooks []*admission.Hook) (lbls map[string]string, nsErr, rv string, pending *verdict.Result) {
	need := false
	for _, h := range hooks {
		need = need || h.Match.NeedsNamespaceLabels()
	}
	if !need {
		return nil, "", "", nil
	}
	sub := r.watch(kube.WatchKey{Resource: admission.NamespacesResource, Name: ns})
	if err := sub.Err(); err != nil && (apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err)) {
		return nil, fmt.Sprintf("%v; grant verbs list, watch on namespaces with resourceNames [%s]", err, ns), "", nil
	}
	if !sub.Synced() {
		return nil, "", "", &verdict.Result{Message: "reading namespace " + ns + " (its labels decide which webhooks intercept the request)", Unsynced: true}
	}
	o, err := r.read(sub, ns)
	if err != nil {
		return nil, "", "", r.readErr("namespace "+ns, err)
	}
	if o == nil {
		return nil, "namespace " + ns + " not found", "", nil
	}
	return o.GetLabels(), "", o.GetResourceVersion(), nil
}
