package session

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/admission"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/kube"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/status"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/verdict"
)

// Read returns the object name as the check should judge it: the informer's copy, noted to be
// proven if the verdict ends the gate (see Checking), so that gates sharing a watch make one
// read when they pass, not one each when they start. A watch of one named object (a Secret, a
// Helm record) is read at once instead: no other object's gate shares it, and a read made
// while the gate waits makes its pass free (the store is the truth once it caught up).
// Once proving, every read is consistent.
func (r *Run) Read(sub *kube.Subscription, name string) (*unstructured.Unstructured, error) {
	if r.proving || sub.Named() {
		return sub.Read(r.ctx, name)
	}
	o, seen := sub.Peek(name)
	r.seen = append(r.seen, seen)
	return o, nil
}

// ReadList is Read for every object matching sel (nil: all).
func (r *Run) ReadList(sub *kube.Subscription, sel labels.Selector) ([]*unstructured.Unstructured, error) {
	return r.readListInto(sub, sel, &r.seen)
}

// readListInto is readList noting what it judged in judged (r.seen, or r.hints for a hint).
func (r *Run) readListInto(sub *kube.Subscription, sel labels.Selector, judged *[]kube.Seen) ([]*unstructured.Unstructured, error) {
	if r.proving || sub.Named() {
		return sub.ReadList(r.ctx, sel)
	}
	objs, seen := sub.PeekList(sel)
	*judged = append(*judged, seen)
	return objs, nil
}

// Objects resolves the target's kind and returns what the shared watch holds for it. A kind
// the API server does not serve yet is waited for (its CRD may be installing); pending is set
// when the caller should report it and wait.
func (r *Run) Objects(t Target) (objs []*unstructured.Unstructured, pending *verdict.Result) {
	m, err := r.Clients.Mapping(t.GVK)
	if err != nil {
		var nk *kube.NoKindError
		if errors.As(err, &nk) {
			return nil, r.KindPending(t.GVK, nk)
		}
		if terminal := discoveryErr(r.Clients, t.GVK, err); terminal != nil {
			return nil, &verdict.Result{Failed: terminal}
		}
		return nil, &verdict.Result{Message: "resolving the kind: " + err.Error(), Poll: true}
	}
	key := kube.WatchKey{Resource: m.Resource}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		key.Namespace = t.Namespace
	}
	if m.Resource.Group == "" && m.Resource.Resource == "secrets" && t.Name != "" {
		key.Name = t.Name // Secrets: watch the one object, never cache a namespace's Secrets
	}
	sub := r.Watch(key)
	if terminal, note := WatchErr(m.Resource.Resource+" in "+nsOrCluster(key.Namespace), sub); terminal != nil {
		return nil, &verdict.Result{Failed: terminal}
	} else if note != "" && !sub.Synced() {
		return nil, &verdict.Result{Message: note, Unsynced: true}
	}
	if !sub.Synced() {
		return nil, &verdict.Result{Message: "listing " + m.Resource.Resource, Unsynced: true}
	}
	if t.Name != "" {
		o, err := r.Read(sub, t.Name)
		if err != nil {
			return nil, r.ReadErr(m.Resource.Resource+" "+t.Name, err)
		}
		if o != nil {
			return []*unstructured.Unstructured{o}, nil
		}
		return nil, nil
	}
	judged := &r.seen
	if t.Hint {
		judged = &r.hints // a hint adds to a verdict and may fail it: a failure it leads to is proven too
	}
	objs, err = r.readListInto(sub, t.Selector, judged)
	if err != nil {
		return nil, r.ReadErr(m.Resource.Resource+" in "+nsOrCluster(key.Namespace), err)
	}
	return objs, nil
}

// ObjectsOf is Objects for each target, their watches all asked for before any is waited on (so
// that they list at once, not one check after another). pending is the first terminal result,
// else the first that waits; which is the target's index.
func (r *Run) ObjectsOf(ts ...Target) (objs [][]*unstructured.Unstructured, which int, pending *verdict.Result) {
	objs = make([][]*unstructured.Unstructured, len(ts))
	which = -1
	for i, t := range ts {
		o, p := r.Objects(t)
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

// ReadErr turns a failed consistent read (see kube.Subscription.Read) into a result: refused
// credentials or RBAC fail at once (after the one retry with refreshed credentials), anything
// else is retried.
func (r *Run) ReadErr(what string, err error) *verdict.Result {
	if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
		return &verdict.Result{Failed: fmt.Errorf("cannot read %s: %w", what, err)}
	}
	return &verdict.Result{Message: "reading " + what + ": " + err.Error(), Poll: true}
}

// KindPending waits for a kind to be served: it watches CRDs and re-discovers while a CRD
// defining the kind exists but discovery does not serve it yet. A kind the server serves at
// other versions only, with no CRD to add the one asked for, fails at once: waiting cannot
// fix an apiVersion.
func (r *Run) KindPending(gvk schema.GroupVersionKind, nk *kube.NoKindError) *verdict.Result {
	sub := r.Watch(kube.WatchKey{Resource: CRDResource})
	if terminal, note := WatchErr("customresourcedefinitions (kind "+gvk.Kind+" is not served, so the gate watches for its CRD)", sub); terminal != nil {
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

// NamespaceLabels reads the labels of namespace ns through a watch on that one Namespace, when
// one of hooks has a namespaceSelector that needs them to tell whether the API server calls it.
// A namespace the gate may not read, or that does not exist, is not an error: nsErr says why
// the labels are unknown (a webhook is then not taken as called when that must be proven, and
// as called when it must be ruled out). rv is the Namespace's resourceVersion when read.
func (r *Run) NamespaceLabels(ns string, hooks []*admission.Hook) (lbls map[string]string, nsErr, rv string, pending *verdict.Result) {
	need := false
	for _, h := range hooks {
		need = need || h.Match.NeedsNamespaceLabels()
	}
	if !need {
		return nil, "", "", nil
	}
	sub := r.Watch(kube.WatchKey{Resource: admission.NamespacesResource, Name: ns})
	if err := sub.Err(); err != nil && (apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err)) {
		return nil, fmt.Sprintf("%v; grant verbs list, watch on namespaces with resourceNames [%s]", err, ns), "", nil
	}
	if !sub.Synced() {
		return nil, "", "", &verdict.Result{Message: "reading namespace " + ns + " (its labels decide which webhooks intercept the request)", Unsynced: true}
	}
	o, err := r.Read(sub, ns)
	if err != nil {
		return nil, "", "", r.ReadErr("namespace "+ns, err)
	}
	if o == nil {
		return nil, "namespace " + ns + " not found", "", nil
	}
	return o.GetLabels(), "", o.GetResourceVersion(), nil
}

// ExternalName reads webhook h's Service once per gate (a GET, for callers that do not watch
// it) and returns its external name when it is an ExternalName Service; "" otherwise, or when it
// cannot be read.
func (r *Run) ExternalName(ctx context.Context, h *admission.Hook) string {
	key := h.SvcNamespace + "/" + h.SvcName
	r.namesMu.Lock()
	defer r.namesMu.Unlock()
	if ext, ok := r.externalNames[key]; ok {
		return ext
	}
	svc, err := r.Clients.Dynamic.Resource(schema.GroupVersionResource{Version: "v1", Resource: "services"}).
		Namespace(h.SvcNamespace).Get(ctx, h.SvcName, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	if r.externalNames == nil {
		r.externalNames = map[string]string{}
	}
	r.externalNames[key] = admission.ExternalNameOf(svc)
	return r.externalNames[key]
}
