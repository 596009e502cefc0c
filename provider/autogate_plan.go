package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/admission"
	"time"

	"github.com/pulumi/pulumi-go-provider/infer"
	"golang.org/x/sync/singleflight"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/autogate"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/kube"
)

// AutoGatePlan is the function the SDKs' autoGate transforms invoke for every Kubernetes
// registration: which gates it must wait for. The rules live in pkg/autogate; this file only
// gathers what they need from the cluster (discovery) and passes the webhook matching.
type AutoGatePlan struct{}

type AutoGatePlanResource struct {
	Type       string         `pulumi:"type"`
	Name       string         `pulumi:"name"`
	ParentType *string        `pulumi:"parentType,optional"`
	Object     map[string]any `pulumi:"object,optional"`
	Cluster    *string        `pulumi:"cluster,optional"`
	Parent     *string        `pulumi:"parent,optional"`
}

type AutoGatePlanInstaller struct {
	ID      string         `pulumi:"id"`
	Type    string         `pulumi:"type"`
	Name    string         `pulumi:"name"`
	Object  map[string]any `pulumi:"object,optional"`
	Cluster *string        `pulumi:"cluster,optional"`
	Parent  *string        `pulumi:"parent,optional"`
}

type AutoGatePlanOptions struct {
	Timeout      *string  `pulumi:"timeout,optional"`
	StableFor    *string  `pulumi:"stableFor,optional"`
	FailureGrace *string  `pulumi:"failureGrace,optional"`
	Namespaces   []string `pulumi:"namespaces,optional"`
}

type AutoGatePlanArgs struct {
	Resource   AutoGatePlanResource    `pulumi:"resource"`
	Installers []AutoGatePlanInstaller `pulumi:"installers,optional"`
	DependsOn  []string                `pulumi:"dependsOn,optional"`
	Options    *AutoGatePlanOptions    `pulumi:"options,optional"`
}

type AutoGatePlanGate struct {
	Key        string                `pulumi:"key"`
	Name       string                `pulumi:"name"`
	Type       string                `pulumi:"type"`
	Args       map[string]any        `pulumi:"args"`
	After      []string              `pulumi:"after"`
	AfterGates []string              `pulumi:"afterGates"`
	Reason     string                `pulumi:"reason"`
	ArgsFrom   []AutoGatePlanArgFrom `pulumi:"argsFrom"`
}

// AutoGatePlanArgFrom is a gate input the SDK reads from an installer's outputs.
type AutoGatePlanArgFrom struct {
	Arg       string `pulumi:"arg"`
	Installer string `pulumi:"installer"`
	Output    string `pulumi:"output"`
}

func (a *AutoGatePlanArgFrom) Annotate(an infer.Annotator) {
	an.Describe(a, "A gate input taken from an installer's outputs once the engine created it: an autonamed installer's name "+
		"is known only there (pulumi-kubernetes names it at create).")
	an.Describe(&a.Arg, "The gate input to set (`name`).")
	an.Describe(&a.Installer, "The installer's id.")
	an.Describe(&a.Output, "A dotted path into the installer's outputs (`metadata.name`, `status.name`).")
}

type AutoGatePlanResult struct {
	Remember  bool               `pulumi:"remember"`
	Installer map[string]any     `pulumi:"installer,optional"`
	Gates     []AutoGatePlanGate `pulumi:"gates"`
	Warnings  []string           `pulumi:"warnings"`
}

func (f *AutoGatePlan) Annotate(a infer.Annotator) {
	a.Describe(f, "The decision behind the SDKs' `autoGate`: for one Kubernetes registration (its type, name and props) and the "+
		"installers registered before it (CRDs, webhook configurations, Certificates, ExternalSecrets, Helm v3 Releases), which "+
		"readiness gates it must wait for, and whether it is itself an installer to remember. Called by the SDKs; see docs/autogate.md.")
}

func (r *AutoGatePlanResource) Annotate(a infer.Annotator) {
	a.Describe(&r.Type, "The Pulumi type token (`kubernetes:apps/v1:Deployment`).")
	a.Describe(&r.Name, "The Pulumi resource name.")
	a.Describe(&r.ParentType, "The parent's type token, for children of a component (`kubernetes:helm.sh/v4:Chart`).")
	a.Describe(&r.Object, "The resource's props as plain JSON (a Kubernetes object; a Release's props); unknown values omitted.")
	a.Describe(&r.Cluster, "Which cluster the registration's kubernetes provider talks to, as the SDK names it (its provider's URN); "+
		"unset for the cluster of the readiness provider answering the call. Installers of another cluster are ignored.")
	a.Describe(&r.Parent, "The SDK's handle for the parent component (its URN), for a component's child: tells the children of one component "+
		"apart from another's whatever their names (Chart v3 and ConfigFile v1 children carry no component prefix).")
}

func (i *AutoGatePlanInstaller) Annotate(a infer.Annotator) {
	a.Describe(&i.ID, "The SDK's handle for the installer (its URN in the Go SDK).")
	a.Describe(&i.Cluster, "As the resource's `cluster`: the cluster the installer was created in.")
	a.Describe(&i.Parent, "As the resource's `parent`.")
}

func (a *AutoGatePlanArgs) Annotate(an infer.Annotator) {
	an.Describe(&a.Installers, "Every earlier registration the plan answered `remember` for (as its answer's `installer`), in registration order. "+
		"Earlier registrations whose answer is not known yet may be added as they are: those that are no installer are ignored.")
	an.Describe(&a.DependsOn, "The IDs of installers the resource already depends on.")
}

func (g *AutoGatePlanGate) Annotate(a infer.Annotator) {
	a.Describe(&g.Key, "The batch key: one gate resource per key; later registrations with the same key depend on it.")
	a.Describe(&g.Name, "The gate's Pulumi name, after what it guards.")
	a.Describe(&g.Type, "The gate's type token (`readiness:index:AdmissionReady`).")
	a.Describe(&g.Args, "The gate's inputs.")
	a.Describe(&g.After, "IDs of the installers the gate must depend on.")
	a.Describe(&g.AfterGates, "Keys of gates (earlier in this answer or an earlier one) the gate must depend on.")
	a.Describe(&g.Reason, "One line for logs: what waits for what.")
	a.Describe(&g.ArgsFrom, "Inputs the SDK sets from installers' outputs before it registers the gate (unknown in a preview).")
}

func (r *AutoGatePlanResult) Annotate(a infer.Annotator) {
	a.Describe(&r.Remember, "The resource can block others: add it to `installers` of later calls.")
	a.Describe(&r.Installer, "With `remember`: the object to send as that installer's `object` in later calls, trimmed to what the rules read "+
		"(a CRD without its schemas, a webhook configuration without its caBundle).")
	a.Describe(&r.Warnings, "What the plan could not gate and why.")
}

// Invoke decides. Discovery that fails or takes long counts as "unknown": the rules then gate
// (an extra gate on a served kind passes at once; a missing one lets a race through).
func (f *AutoGatePlan) Invoke(ctx context.Context, req infer.FunctionRequest[AutoGatePlanArgs]) (infer.FunctionResponse[AutoGatePlanResult], error) {
	return infer.FunctionResponse[AutoGatePlanResult]{Output: decidePlan(req.Input, planCluster(ctx))}, nil
}

// planCluster is what the plan asks the cluster: discovery through the provider's clients, or
// "unknown" to everything when the provider has no cluster configured.
func planCluster(ctx context.Context) autogate.Cluster {
	cfg := infer.GetConfig[Config](ctx)
	if clients, err := cfg.Clients(); err == nil {
		return discoveryCluster{ctx: ctx, clients: clients}
	}
	return unknownCluster{namespace: "default"}
}

// decidePlan is the answer for one registration, as the function's types carry it.
func decidePlan(in AutoGatePlanArgs, cluster autogate.Cluster) AutoGatePlanResult {
	input := autogate.Input{
		Resource: autogate.Resource{
			Type: in.Resource.Type, Name: in.Resource.Name, ParentType: deref(in.Resource.ParentType), Object: in.Resource.Object,
			Cluster: deref(in.Resource.Cluster), Parent: deref(in.Resource.Parent),
		},
		DependsOn: in.DependsOn,
	}
	for _, i := range in.Installers {
		input.Installers = append(input.Installers, autogate.Installer{ID: i.ID, Type: i.Type, Name: i.Name, Object: i.Object, Cluster: deref(i.Cluster), Parent: deref(i.Parent)})
	}
	if o := in.Options; o != nil {
		input.Options = autogate.Options{
			Timeout: deref(o.Timeout), StableFor: deref(o.StableFor), FailureGrace: deref(o.FailureGrace), Namespaces: o.Namespaces,
		}
	}
	plan := autogate.Decide(input, cluster, webhookMayIntercept)
	out := AutoGatePlanResult{Remember: plan.Remember, Installer: plan.Installer, Gates: []AutoGatePlanGate{}, Warnings: plan.Warnings}
	if out.Warnings == nil {
		out.Warnings = []string{}
	}
	for _, g := range plan.Gates {
		out.Gates = append(out.Gates, AutoGatePlanGate{
			Key: g.Key, Name: g.Name, Type: g.Type, Args: withPurpose(g.Args, in.Resource, g.Reason),
			After: nonNil(g.After), AfterGates: nonNil(g.AfterGates), Reason: g.Reason, ArgsFrom: argsFrom(g.ArgsFrom),
		})
	}
	return out
}

// AutoGatePlanBatch is autoGatePlan for many registrations in one invoke, each answered as
// autoGatePlan answers it alone. The TypeScript SDK sends the plan calls that are due at the
// same moment as one batch: the engine converts an invoke's arguments several times on their
// way to the provider, and 200 separate calls, each carrying every installer seen so far,
// cost the engine more CPU than the rest of the stack's `up` (issue #24's speed goal).
type AutoGatePlanBatch struct{}

type AutoGatePlanBatchItem struct {
	Resource   AutoGatePlanResource `pulumi:"resource"`
	Installers []int                `pulumi:"installers,optional"`
	DependsOn  []string             `pulumi:"dependsOn,optional"`
	Options    *AutoGatePlanOptions `pulumi:"options,optional"`
}

type AutoGatePlanBatchArgs struct {
	Installers []AutoGatePlanInstaller `pulumi:"installers,optional"`
	Plans      []AutoGatePlanBatchItem `pulumi:"plans"`
}

type AutoGatePlanBatchResult struct {
	Gates   []AutoGatePlanGate   `pulumi:"gates"`
	Results []AutoGatePlanAnswer `pulumi:"results"`
}

// AutoGatePlanAnswer is autoGatePlan's answer for one plan of a batch, its gates named by their
// index into the batch's gates (one per key: 200 ExternalSecrets behind one gate carry it once).
type AutoGatePlanAnswer struct {
	Remember  bool           `pulumi:"remember"`
	Installer map[string]any `pulumi:"installer,optional"`
	Gates     []int          `pulumi:"gates"`
	Warnings  []string       `pulumi:"warnings"`
}

func (f *AutoGatePlanBatch) Annotate(a infer.Annotator) {
	a.Describe(f, "`autoGatePlan` for many registrations in one call: each of `plans` is answered as `autoGatePlan` answers it alone. "+
		"Installers shared by several plans are sent once, in `installers`, and named by their index. Called by the SDKs; see docs/autogate.md.")
}

func (i *AutoGatePlanBatchItem) Annotate(a infer.Annotator) {
	a.Describe(&i.Resource, "The registration, as `autoGatePlan`'s `resource`.")
	a.Describe(&i.Installers, "This plan's installers, in order, as indexes into the batch's `installers`.")
	a.Describe(&i.DependsOn, "As `autoGatePlan`'s `dependsOn`.")
	a.Describe(&i.Options, "As `autoGatePlan`'s `options`.")
}

func (a *AutoGatePlanBatchArgs) Annotate(an infer.Annotator) {
	an.Describe(&a.Installers, "Every installer any of the plans names, once.")
	an.Describe(&a.Plans, "The plan calls, each answered alone.")
}

func (r *AutoGatePlanBatchResult) Annotate(a infer.Annotator) {
	a.Describe(&r.Gates, "Every gate the answers name, once per key: as the first plan (in order) that needs it answers it.")
	a.Describe(&r.Results, "One answer per plan, in order, as `autoGatePlan` answers it but with its gates as indexes into `gates`.")
}

func (r *AutoGatePlanAnswer) Annotate(a infer.Annotator) {
	a.Describe(r, "`autoGatePlan`'s answer for one plan of a batch.")
	a.Describe(&r.Remember, "As `autoGatePlan`'s `remember`.")
	a.Describe(&r.Installer, "As `autoGatePlan`'s `installer`.")
	a.Describe(&r.Gates, "The plan's gates, in order, as indexes into the batch's `gates`.")
	a.Describe(&r.Warnings, "As `autoGatePlan`'s `warnings`.")
}

// Invoke answers every plan. Discovery answers are shared within the batch: a kind not served
// would otherwise refresh discovery once per plan.
func (f *AutoGatePlanBatch) Invoke(ctx context.Context, req infer.FunctionRequest[AutoGatePlanBatchArgs]) (infer.FunctionResponse[AutoGatePlanBatchResult], error) {
	out, err := decideBatch(req.Input, newMemoCluster(planCluster(ctx)))
	if err != nil {
		return infer.FunctionResponse[AutoGatePlanBatchResult]{}, err
	}
	return infer.FunctionResponse[AutoGatePlanBatchResult]{Output: out}, nil
}

// decideBatch answers each plan of a batch alone, with its installers resolved from their
// indexes; a gate key several answers name is sent once, as the first of them answers it (an
// SDK makes one gate per key, from the first answer that names it).
func decideBatch(in AutoGatePlanBatchArgs, cluster autogate.Cluster) (AutoGatePlanBatchResult, error) {
	out := AutoGatePlanBatchResult{Gates: []AutoGatePlanGate{}, Results: make([]AutoGatePlanAnswer, 0, len(in.Plans))}
	byKey := map[string]int{}
	for n, item := range in.Plans {
		args := AutoGatePlanArgs{Resource: item.Resource, DependsOn: item.DependsOn, Options: item.Options}
		for _, i := range item.Installers {
			if i < 0 || i >= len(in.Installers) {
				return AutoGatePlanBatchResult{}, fmt.Errorf("plan %d (%s %s) names installer %d of %d", n, item.Resource.Type, item.Resource.Name, i, len(in.Installers))
			}
			args.Installers = append(args.Installers, in.Installers[i])
		}
		r := decidePlan(args, cluster)
		answer := AutoGatePlanAnswer{Remember: r.Remember, Installer: r.Installer, Gates: []int{}, Warnings: r.Warnings}
		for _, g := range r.Gates {
			at, ok := byKey[g.Key]
			if !ok {
				at = len(out.Gates)
				byKey[g.Key] = at
				out.Gates = append(out.Gates, g)
			}
			answer.Gates = append(answer.Gates, at)
		}
		out.Results = append(out.Results, answer)
	}
	return out, nil
}

// memoCluster remembers a cluster's answers for one batch: the batch is one moment, as
// concurrent single calls joined in one discovery lookup were.
type memoCluster struct {
	autogate.Cluster
	serves    map[schema.GroupKind]memoServes
	resources map[schema.GroupVersionKind]memoResource
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
		a.served, a.known = m.Cluster.Serves(gk)
		m.serves[gk] = a
	}
	return a.served, a.known
}

func (m *memoCluster) Resource(gvk schema.GroupVersionKind) (string, bool, bool) {
	a, ok := m.resources[gvk]
	if !ok {
		r, namespaced, known := m.Cluster.Resource(gvk)
		a = memoResource{resource: r, namespaced: namespaced, known: known}
		m.resources[gvk] = a
	}
	return a.resource, a.namespaced, a.known
}

// withPurpose is a gate's inputs with its `purpose`: the user's resource it was added for (its
// Pulumi type and name: a batch gate names the first it holds) and why, quoted if it times out.
func withPurpose(args map[string]any, res AutoGatePlanResource, reason string) map[string]any {
	out := make(map[string]any, len(args)+1)
	for k, v := range args {
		out[k] = v
	}
	out["purpose"] = fmt.Sprintf("autoGate added it for %s %s: %s", res.Type, res.Name, reason)
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
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

func argsFrom(in []autogate.ArgFrom) []AutoGatePlanArgFrom {
	out := []AutoGatePlanArgFrom{}
	for _, a := range in {
		out = append(out, AutoGatePlanArgFrom{Arg: a.Arg, Installer: a.Installer, Output: a.Output})
	}
	return out
}
