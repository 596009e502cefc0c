package provider

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi/sdk/v3/go/property"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/validation/path"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/admission"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/kube"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/status"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/wait"
)

// target is what a gate watches: a kind in a namespace, one object by name or all matching a
// selector.
type target struct {
	gvk       schema.GroupVersionKind
	namespace string // the requested namespace (defaulted); ignored for cluster-scoped kinds
	name      string
	selector  labels.Selector
	// hint marks a lookup that only adds to a message or fails early (never passes a gate):
	// what it judged is proven only when the gate fails (see run.checking).
	hint bool
}

func (t target) String() string {
	var b strings.Builder
	b.WriteString(t.gvk.Kind)
	if t.name != "" {
		b.WriteString(" ")
		if t.namespace != "" {
			b.WriteString(t.namespace + "/")
		}
		b.WriteString(t.name)
	} else {
		fmt.Fprintf(&b, "s matching %q", t.selector.String())
		if t.namespace != "" {
			b.WriteString(" in " + t.namespace)
		}
	}
	return b.String()
}

// objects resolves the target's kind and returns what the shared watch holds for it. A kind
// the API server does not serve yet is waited for (its CRD may be installing); pending is set
// when the caller should report it and wait.
func (r *run) objects(t target) (objs []*unstructured.Unstructured, pending *wait.Result) {
	m, err := r.clients.Mapping(t.gvk)
	if err != nil {
		var nk *kube.NoKindError
		if errors.As(err, &nk) {
			return nil, r.kindPending(t.gvk, nk)
		}
		if terminal := discoveryErr(r.clients, t.gvk, err); terminal != nil {
			return nil, &wait.Result{Failed: terminal}
		}
		return nil, &wait.Result{Message: "resolving the kind: " + err.Error(), Poll: true}
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
		return nil, &wait.Result{Failed: terminal}
	} else if note != "" && !sub.Synced() {
		return nil, &wait.Result{Message: note, Unsynced: true}
	}
	if !sub.Synced() {
		return nil, &wait.Result{Message: "listing " + m.Resource.Resource, Unsynced: true}
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

// readErr turns a failed consistent read (see kube.Subscription.Read) into a result: refused
// credentials or RBAC fail at once (after the one retry with refreshed credentials), anything
// else is retried.
func (r *run) readErr(what string, err error) *wait.Result {
	if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
		return &wait.Result{Failed: fmt.Errorf("cannot read %s: %w", what, err)}
	}
	return &wait.Result{Message: "reading " + what + ": " + err.Error(), Poll: true}
}

// kindPending waits for a kind to be served: it watches CRDs and re-discovers while a CRD
// defining the kind exists but discovery does not serve it yet. A kind the server serves at
// other versions only, with no CRD to add the one asked for, fails at once: waiting cannot
// fix an apiVersion.
func (r *run) kindPending(gvk schema.GroupVersionKind, nk *kube.NoKindError) *wait.Result {
	sub := r.watch(kube.WatchKey{Resource: crdResource})
	if terminal, note := watchErr("customresourcedefinitions (kind "+gvk.Kind+" is not served, so the gate watches for its CRD)", sub); terminal != nil {
		return &wait.Result{Failed: terminal}
	} else if note != "" && !sub.Synced() {
		return &wait.Result{Message: note, Unsynced: true}
	}
	if !sub.Synced() {
		return &wait.Result{Message: "listing CRDs", Unsynced: true}
	}
	for _, c := range sub.List(nil) {
		res := status.CRD(c)
		if res.Group == gvk.Group && res.Kind == gvk.Kind {
			if gvk.Version != "" && len(res.ServedVersions) > 0 && !slices.Contains(res.ServedVersions, gvk.GroupVersion().String()) {
				// A CRD update may add the version; its watch event wakes the gate.
				return &wait.Result{Message: fmt.Sprintf("CRD %s serves %s, not %s (%s)", c.GetName(), strings.Join(res.ServedVersions, ", "), gvk.GroupVersion(), res.Message),
					Hint: "fix apiVersion, or install the CRD version that serves it"}
			}
			return &wait.Result{Message: fmt.Sprintf("kind %s is defined by CRD %s (%s) but not served yet", gvk.Kind, c.GetName(), res.Message), Poll: res.Ready}
		}
	}
	if len(nk.Served) > 0 {
		return &wait.Result{Failed: nk}
	}
	return &wait.Result{Message: nk.Error(), Hint: "install the CRD that defines this kind before the gate, or fix apiVersion/kind"}
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

// nameProblem validates an object name (DNS-1123 subdomain, as most kinds require).
func nameProblem(n string) string {
	if n == "" {
		return "must not be empty"
	}
	if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
		return fmt.Sprintf("%q is not a valid object name: %s", n, strings.Join(errs, "; "))
	}
	return ""
}

// pathSegmentNamed are the groups whose kinds take any name that is a URL path segment (the
// API server validates them with path.ValidatePathSegmentName): RBAC's `system:metrics-server`.
var pathSegmentNamed = map[string]bool{"rbac.authorization.k8s.io": true}

// kindNameProblem validates an object name by its kind's rules: a path segment (no "/" or "%",
// not "." or "..") for every kind, the name of a URL; a DNS-1123 subdomain as well for all but
// the kinds that allow more. When the apiVersion is not known yet only the path-segment rule
// applies: the API server has the last word.
func kindNameProblem(apiVersion string, apiVersionKnown bool, n string) string {
	if n == "" {
		return "must not be empty"
	}
	if errs := path.IsValidPathSegmentName(n); len(errs) > 0 {
		return fmt.Sprintf("%q is not a valid object name: %s", n, strings.Join(errs, "; "))
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if !apiVersionKnown || err != nil || pathSegmentNamed[gv.Group] {
		return ""
	}
	return nameProblem(n)
}

// defaultNamespace is the gate's namespace input, else the provider's default namespace.
func (r *run) defaultNamespace(ns *string) string {
	if ns != nil && *ns != "" {
		return *ns
	}
	return r.clients.Namespace
}

// nameFailures validates a gate's name and optional namespace inputs at Check.
func nameFailures(inputs property.Map, nameKey, name, nsKey string, ns *string) []p.CheckFailure {
	var out []p.CheckFailure
	if isKnown(inputs, nameKey) {
		if msg := nameProblem(name); msg != "" {
			out = append(out, p.CheckFailure{Property: nameKey, Reason: msg})
		}
	}
	if ns != nil && *ns != "" && isKnown(inputs, nsKey) {
		if msg := admission.NamespaceProblem(*ns); msg != "" {
			out = append(out, p.CheckFailure{Property: nsKey, Reason: msg})
		}
	}
	return out
}

// keyFailures validates Secret key names (letters, digits, '-', '_', '.').
func keyFailures(inputs property.Map, field string, keys []string) []p.CheckFailure {
	if !isKnown(inputs, field) {
		return nil
	}
	var out []p.CheckFailure
	for i, k := range keys {
		if errs := validation.IsConfigMapKey(k); len(errs) > 0 {
			out = append(out, p.CheckFailure{Property: fmt.Sprintf("%s[%d]", field, i),
				Reason: fmt.Sprintf("%q is not a valid Secret key: %s", k, strings.Join(errs, "; "))})
		}
	}
	return out
}

// The built-in types several gates read.
var (
	secretGVK   = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	serviceGVK  = schema.GroupVersionKind{Version: "v1", Kind: "Service"}
	crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
)

// rolloutKinds: the kinds RolloutReady (and HelmReleaseReady's rollouts) judge, and how each one's rollout is read.
var rolloutKinds = map[string]struct {
	gv   schema.GroupVersion
	eval func(*unstructured.Unstructured) status.Rollout
}{
	"Deployment":  {schema.GroupVersion{Group: "apps", Version: "v1"}, status.DeploymentRollout},
	"StatefulSet": {schema.GroupVersion{Group: "apps", Version: "v1"}, status.StatefulSetRollout},
	"DaemonSet":   {schema.GroupVersion{Group: "apps", Version: "v1"}, status.DaemonSetRollout},
	"Job":         {schema.GroupVersion{Group: "batch", Version: "v1"}, status.JobDone},
}
