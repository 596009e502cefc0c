package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/pulumi/pulumi-go-provider/infer"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"golang.org/x/sync/singleflight"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/readiness-io/pulumi-readiness/provider/internal/session"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/admission"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/autogate"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/kube"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/verdict"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/wait"
)

// What the plan asks the cluster about its own webhook configurations (autogate's
// clusterAdmission): which there are, and whether a dry run of an object is admitted now. Both
// are remembered for the provider process (one update): a burst of plan calls lists the
// configurations once, and a batch key is dry-run once.
const (
	// webhooksFresh is how long one listing of the configurations answers plan calls.
	webhooksFresh = 2 * time.Second
	// admitsBound bounds the plan-time dry run: past it the object is gated (an extra gate
	// passes as soon as the webhook answers; a missing one lets a failure through).
	admitsBound = 3 * time.Second
	// admittedFresh is how long "admitted now" holds for later objects of the same key; "not
	// admitted" holds for the update (the gate of that key exists, later objects share it).
	admittedFresh = 30 * time.Second
)

type clusterMemo struct {
	mu       sync.Mutex
	listed   time.Time
	configs  []autogate.WebhookConfig
	known    bool
	admitted map[string]time.Time // key -> when a dry run was admitted
	refused  map[string]bool      // key -> not admitted at plan time
	// answered: webhook (autogate.WebhookID) -> when it last answered a dry run that was
	// admitted, the plan's or an AdmissionReady gate's (noteAnswered).
	answered map[string]time.Time
	// configWatches watch both configuration kinds for the process (never released: one update).
	configWatches []*kube.Subscription
	watched       []autogate.WebhookConfig // the watches' configurations, as of watchedFor
	watchedFor    string
	flight        singleflight.Group // concurrent asks of one key share its dry run
}

var (
	clusterMemosMu sync.Mutex
	clusterMemos   = map[*kube.Clients]*clusterMemo{}
)

func memoFor(c *kube.Clients) *clusterMemo {
	clusterMemosMu.Lock()
	defer clusterMemosMu.Unlock()
	m := clusterMemos[c]
	if m == nil {
		m = &clusterMemo{admitted: map[string]time.Time{}, refused: map[string]bool{}, answered: map[string]time.Time{}}
		clusterMemos[c] = m
	}
	return m
}

// Webhooks are both configuration kinds, from watches the plan keeps for the provider process
// (one update): a configuration another stack created is seen within milliseconds, and no
// decision waits for a listing. While the watches load (or may not be made: RBAC), a listing
// answers, reused for webhooksFresh.
func (c discoveryCluster) Webhooks() ([]autogate.WebhookConfig, bool) {
	m := memoFor(c.clients)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.configWatches == nil {
		for _, r := range []string{"validatingwebhookconfigurations", "mutatingwebhookconfigurations"} {
			key := kube.WatchKey{Resource: session.VWCGVK.GroupVersion().WithResource(r)}
			m.configWatches = append(m.configWatches, c.clients.Watches.Subscribe(key, nil))
		}
	}
	if w := m.configWatches; w[0].Synced() && w[1].Synced() && w[0].Err() == nil && w[1].Err() == nil {
		lists := [][]*unstructured.Unstructured{w[0].List(nil), w[1].List(nil)}
		var fp strings.Builder
		for _, l := range lists {
			for _, u := range l {
				fmt.Fprintf(&fp, "%s@%s;", u.GetName(), u.GetResourceVersion())
			}
			fp.WriteString("|")
		}
		if fp.String() != m.watchedFor { // converted once per state of the configurations, not per call
			m.watchedFor, m.watched = fp.String(), nil
			for i, kind := range []string{session.VWCGVK.Kind, session.MWCGVK.Kind} {
				for _, u := range lists[i] {
					m.watched = append(m.watched, webhookConfigOf(kind, *u))
				}
			}
		}
		return m.watched, true
	}
	if time.Since(m.listed) < webhooksFresh {
		return m.configs, m.known
	}
	ctx, cancel := context.WithTimeout(c.ctx, discoveryTimeout)
	defer cancel()
	var configs []autogate.WebhookConfig
	for _, gvk := range []struct{ kind, resource string }{
		{session.VWCGVK.Kind, "validatingwebhookconfigurations"}, {session.MWCGVK.Kind, "mutatingwebhookconfigurations"},
	} {
		list, err := c.clients.Dynamic.Resource(session.VWCGVK.GroupVersion().WithResource(gvk.resource)).List(ctx, metav1.ListOptions{})
		if err != nil {
			m.listed, m.configs, m.known = time.Now(), nil, false
			return nil, false
		}
		for _, item := range list.Items {
			configs = append(configs, webhookConfigOf(gvk.kind, item))
		}
	}
	m.listed, m.configs, m.known = time.Now(), configs, true
	return configs, true
}

// webhookConfigOf is a configuration as the plan's rules read it (its webhooks' rules and
// selectors; the caBundle is dropped).
func webhookConfigOf(kind string, u unstructured.Unstructured) autogate.WebhookConfig {
	cfg := autogate.WebhookConfig{Kind: kind, Name: u.GetName()}
	hooks, _, _ := unstructured.NestedSlice(u.Object, "webhooks")
	for _, h := range hooks {
		if hm, ok := h.(map[string]any); ok {
			hm = runtime.DeepCopyJSON(hm)
			unstructured.RemoveNestedField(hm, "clientConfig", "caBundle")
			cfg.Webhooks = append(cfg.Webhooks, hm)
		}
	}
	return cfg
}

// Admits runs one AdmissionReady round of obj (consecutive 1) to a verdict within admitsBound,
// once per key (concurrent asks of one key share the first's). When every webhook of hooks
// answered an admitted dry run of another object within admittedFresh (a gate's, or the plan's
// for another key: a chart's custom resources written one after another), that is the proof:
// no dry run is made, which kept the plan's webhook call off the path of every dependent.
func (c discoveryCluster) Admits(key string, obj map[string]any, hooks []string) bool {
	m := memoFor(c.clients)
	m.mu.Lock()
	at, admitted := m.admitted[key]
	refused := m.refused[key]
	recent := len(hooks) > 0
	for _, h := range hooks {
		recent = recent && time.Since(m.answered[h]) < admittedFresh
	}
	m.mu.Unlock()
	switch {
	case refused:
		return false
	case admitted && time.Since(at) < admittedFresh:
		return true
	case recent:
		session.Trace("autoGate plan: "+key, "admitted: its webhooks answered within %s", admittedFresh)
		return true
	}
	v, _, _ := m.flight.Do(key, func() (any, error) {
		ok := admitsNow(c.ctx, c.clients, obj)
		m.mu.Lock()
		if ok {
			m.admitted[key] = time.Now()
		} else {
			m.refused[key] = true
		}
		m.mu.Unlock()
		return ok, nil
	})
	return v.(bool)
}

// noteAnswered records that hooks (autogate.WebhookID) answered an admitted dry run at at.
func noteAnswered(clients *kube.Clients, hooks []string, at time.Time) {
	m := memoFor(clients)
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, h := range hooks {
		if at.After(m.answered[h]) {
			m.answered[h] = at
		}
	}
}

// admitsNow is AdmissionReady's proof of one object, as a gate would run it (a dry run through
// every webhook; failurePolicy Ignore ones called directly), judged once within admitsBound.
func admitsNow(ctx context.Context, clients *kube.Clients, obj map[string]any) bool {
	one := 1
	r := session.New(ctx, clients)
	defer r.Close()
	e, _, err := admissionBuilder(AdmissionReadyArgs{Objects: []map[string]any{obj}, Consecutive: &one})(r)
	if err != nil {
		return false
	}
	r.What = "autoGate plan: " + e.what()
	// One verdict, not a wait: a round that does not admit it ends the proof (the gate waits,
	// not the plan); only the watch caches loading and a proof under way are waited for.
	once := func(ctx context.Context) verdict.Result {
		res := e.check(ctx)
		if res.Ready || res.Failed != nil || res.Unsynced || res.Confirming {
			return res
		}
		return verdict.Result{Failed: errors.New(res.Message)}
	}
	_, err = wait.Until(ctx, wait.Spec{What: e.what(), Timeout: admitsBound, Wake: r.Wake, MaxBackoff: maxBackoffOf(e),
		Progress: func(string) {}, Check: r.Checking(once)})
	if err != nil {
		first, _, _ := strings.Cut(err.Error(), "\n")
		session.Trace(r.What, "not admitted at plan time: %s", first)
	} else {
		session.Trace(r.What, "admitted at plan time")
	}
	return err == nil
}

func (unknownCluster) Webhooks() ([]autogate.WebhookConfig, bool)   { return nil, true }
func (unknownCluster) Admits(string, map[string]any, []string) bool { return false }

// planCluster is what the plan asks the cluster of the answering provider: discovery through its
// clients, or "unknown" to everything when it has no cluster configured.
func planCluster(ctx context.Context) autogate.Cluster {
	cfg := infer.GetConfig[Config](ctx)
	if clients, err := cfg.Clients(); err == nil {
		return discoveryCluster{ctx: ctx, clients: clients}
	}
	return unknownCluster{namespace: "default"}
}

// memoCluster remembers a cluster's answers for one batch: the batch is one moment, as
// concurrent single calls joined in one discovery lookup were.
type memoCluster struct {
	autogate.Cluster
	serves    map[schema.GroupKind]memoServes
	resources map[schema.GroupVersionKind]memoResource
	spent     map[string]time.Duration // what each kind of question cost this call, for the trace
}

type memoServes struct{ served, known bool }

type memoResource struct {
	resource          string
	namespaced, known bool
}

func newMemoCluster(c autogate.Cluster) *memoCluster {
	return &memoCluster{Cluster: c, serves: map[schema.GroupKind]memoServes{}, resources: map[schema.GroupVersionKind]memoResource{}}
}

func (m *memoCluster) Serves(gk schema.GroupKind) (bool, bool) {
	a, ok := m.serves[gk]
	if !ok {
		defer m.took("discovery", time.Now())
		a.served, a.known = m.Cluster.Serves(gk)
		m.serves[gk] = a
	}
	return a.served, a.known
}

func (m *memoCluster) Resource(gvk schema.GroupVersionKind) (string, bool, bool) {
	a, ok := m.resources[gvk]
	if !ok {
		defer m.took("discovery", time.Now())
		r, namespaced, known := m.Cluster.Resource(gvk)
		a = memoResource{resource: r, namespaced: namespaced, known: known}
		m.resources[gvk] = a
	}
	return a.resource, a.namespaced, a.known
}

func (m *memoCluster) Webhooks() ([]autogate.WebhookConfig, bool) {
	defer m.took("webhook configurations", time.Now())
	return m.Cluster.Webhooks()
}

func (m *memoCluster) Admits(key string, obj map[string]any, hooks []string) bool {
	defer m.took("dry run", time.Now())
	return m.Cluster.Admits(key, obj, hooks)
}

// took adds what a question to the cluster cost since began to the call's trace (spent).
func (m *memoCluster) took(what string, began time.Time) {
	if m.spent == nil {
		m.spent = map[string]time.Duration{}
	}
	m.spent[what] += time.Since(began)
}

// webhookMayIntercept is the seam to the provider's webhook matching (rules, namespaceSelector,
// objectSelector, as the API server decides; namespace labels, unknown at plan time, count as
// matching; matchConditions count as matching).
func webhookMayIntercept(hook map[string]any, req autogate.Request) bool {
	b, err := json.Marshal(hook)
	if err != nil {
		return true
	}
	var m admission.Match
	if err := json.Unmarshal(b, &m); err != nil {
		return true // unreadable: fail closed, gate
	}
	q := admission.Request{GVR: req.GVR, Namespace: req.Namespace, Labels: req.Labels,
		NSErr:       "the namespace's labels are not known when the program registers the object",
		Equivalents: ruleVersions(m, req.GVR)}
	return m.Excludes(q) == ""
}

// ruleVersions are gvr's group and resource at every version the webhook's rules name: with
// matchPolicy Equivalent (the default) the API server converts a request for another served
// version of the same resource and calls the webhook, and which versions the cluster will serve
// is not known at plan time, so any version counts as served (fail closed: gate).
func ruleVersions(m admission.Match, gvr schema.GroupVersionResource) []schema.GroupVersionResource {
	var out []schema.GroupVersionResource
	for _, r := range m.Rules {
		for _, v := range r.APIVersions {
			if v != gvr.Version {
				out = append(out, gvr.GroupResource().WithVersion(v))
			}
		}
	}
	return out
}

// discoveryTimeout bounds one discovery answer: past it the kind counts as unknown.
const discoveryTimeout = 5 * time.Second

// discoveryCluster answers the plan's questions from the provider's discovery cache (a miss
// asks the API server again: a CRD may have been installed since).
type discoveryCluster struct {
	ctx     context.Context
	clients *kube.Clients
}

// discoveryFlight joins concurrent lookups of one kind: one discovery refresh for all of them.
// A kind not served makes each lookup reset the discovery cache and ask the API server again;
// a TypeScript program decides its objects as it constructs them, before the Release that
// installs their CRDs exists, so 200 ExternalSecrets re-ran discovery for each of the 16 plan
// calls in flight at a time.
var discoveryFlight singleflight.Group

func (c discoveryCluster) mapping(gk schema.GroupKind, version string) (*meta.RESTMapping, bool, bool) {
	type answer struct {
		m   *meta.RESTMapping
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		v, err, _ := discoveryFlight.Do(fmt.Sprintf("%p %s", c.clients, gk.WithVersion(version)), func() (any, error) {
			if version == "" {
				return c.clients.MappingAnyVersion(gk)
			}
			return c.clients.Mapping(gk.WithVersion(version))
		})
		m, _ := v.(*meta.RESTMapping)
		ch <- answer{m: m, err: err}
	}()
	select {
	case a := <-ch:
		var noKind *kube.NoKindError
		switch {
		case a.err == nil:
			return a.m, true, true
		case errors.As(a.err, &noKind):
			return nil, false, true
		}
		return nil, false, false
	case <-time.After(discoveryTimeout):
	case <-c.ctx.Done():
	}
	return nil, false, false
}

func (c discoveryCluster) Serves(gk schema.GroupKind) (bool, bool) {
	_, served, known := c.mapping(gk, "")
	return served, known
}

func (c discoveryCluster) Resource(gvk schema.GroupVersionKind) (string, bool, bool) {
	m, served, known := c.mapping(gvk.GroupKind(), gvk.Version)
	if !served || !known {
		return "", false, false
	}
	return m.Resource.Resource, m.Scope.Name() == meta.RESTScopeNameNamespace, true
}

func (c discoveryCluster) DefaultNamespace() string {
	if c.clients.Namespace != "" {
		return c.clients.Namespace
	}
	return "default"
}

// unknownCluster answers "unknown" to everything (the provider has no cluster configured).
type unknownCluster struct{ namespace string }

func (unknownCluster) Serves(schema.GroupKind) (bool, bool) { return false, false }
func (unknownCluster) Resource(schema.GroupVersionKind) (string, bool, bool) {
	return "", false, false
}
func (u unknownCluster) DefaultNamespace() string { return u.namespace }
