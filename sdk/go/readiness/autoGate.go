// Hand-written (sdk/overlay/go, copied here by `make sdk`): edit the overlay, not the copy.

package readiness

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/common/tokens"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/internals"

	"github.com/readiness-io/pulumi-readiness/sdk/go/readiness/internal"
)

// AutoGateOptions tune AutoGate; every field is optional.
type AutoGateOptions struct {
	// Provider is the readiness provider for the plan and the gates (the default one if nil).
	Provider pulumi.ProviderResource
	// Timeout, StableFor and FailureGrace (Go durations) are passed to every gate AutoGate makes.
	Timeout, StableFor, FailureGrace string
	// Namespaces: only objects in these namespaces are gated (all if empty).
	Namespaces []string
	// Installers: only these installers (Pulumi resource names; a chart's child is
	// "<chart>:<namespace>/<name>") count (all if empty).
	Installers []string
	// Exclude returns true for a registration (type token, Pulumi name) that must never be gated.
	Exclude func(typ, name string) bool
	// Settle is how long a child of a component (Chart v4, ConfigGroup, ...) is held after the
	// last sibling registration, so that a webhook configuration of the same chart registered
	// after the child still counts. Default 200ms.
	Settle time.Duration
}

// OptOutAnnotation set to "false" in an object's metadata.annotations keeps AutoGate off it.
const OptOutAnnotation = "readiness.io/auto-gate"

const defaultSettle = 200 * time.Millisecond

// AutoGate puts the right readiness gate in front of every Kubernetes resource registered after
// it that needs one: a custom resource whose CRD the stack installs (or the cluster does not
// serve yet), an object a webhook configuration of the stack intercepts, a workload mounting a
// Secret that a Certificate or ExternalSecret of the stack produces, and what comes after a
// Helm v3 Release it depends on. Call it once, at the top of the program. It only adds
// dependsOn entries (a stack transform); the rules are the provider's function autoGatePlan.
// A resource that already depends on a readiness gate is left as it is. See docs/autogate.md.
func AutoGate(ctx *pulumi.Context, opts *AutoGateOptions) error {
	var o AutoGateOptions
	if opts != nil {
		o = *opts
	}
	g := newAutoGate(ctx, o)
	if err := ctx.RegisterStackTransformation(g.recordedDependencies); err != nil {
		return err
	}
	return ctx.RegisterResourceTransform(g.transform)
}

// recordedDependencies gives every Kubernetes resource the program registers a resource transform
// of its own that changes nothing. The engine records in the state the dependsOn a stack transform
// adds only for a registration that carries transforms of its own (source_eval.go, RegisterResource):
// without one, `destroy` would not know that a custom resource waited for its gate, and through it
// for the Release or Chart that runs its controller, and could delete them at the same time (a
// finalizer nobody removes then hangs the destroy). A component's children, registered by the
// kubernetes plugin, are not the program's to change: they keep their component's order.
//
// It also notes which components the SDK renders in this process (Chart v3, ConfigFile/ConfigGroup
// v1) a registration depends on, as the program wrote it: the Go SDK sends a dependency on such a
// component as the children it has so far (none, for a Chart v3 not rendered yet), so the
// engine's transform cannot see it (childrenPlanned).
func (g *autoGate) recordedDependencies(args *pulumi.ResourceTransformationArgs) *pulumi.ResourceTransformationResult {
	ro, roErr := pulumi.NewResourceOptions(args.Opts...)
	if roErr == nil {
		g.recordOrder(args, ro)
	}
	if !strings.HasPrefix(args.Type, "kubernetes:") {
		return nil
	}
	if _, custom := args.Resource.(pulumi.CustomResource); !custom {
		return nil
	}
	if roErr == nil {
		var comps []pulumi.Resource
		for _, d := range ro.DependsOn {
			if named, ok := d.(interface{ PulumiResourceType() string }); ok && inProcessComponents[named.PulumiResourceType()] {
				comps = append(comps, d)
			}
		}
		if len(comps) > 0 {
			parent := ""
			if named, ok := ro.Parent.(interface{ PulumiResourceName() string }); ok && ro.Parent != nil {
				parent = named.PulumiResourceName()
			}
			g.mu.Lock()
			g.componentDeps[registrationKey(args.Type, args.Name, parent)] = comps
			g.mu.Unlock()
		}
	}
	return &pulumi.ResourceTransformationResult{Props: args.Props, Opts: append(slices.Clone(args.Opts), pulumi.Transforms([]pulumi.ResourceTransform{keepAsIs}))}
}

func keepAsIs(context.Context, *pulumi.ResourceTransformArgs) *pulumi.ResourceTransformResult {
	return nil
}

func newAutoGate(ctx *pulumi.Context, opts AutoGateOptions) *autoGate {
	if opts.Settle <= 0 {
		opts.Settle = defaultSettle
	}
	g := &autoGate{ctx: ctx, opts: opts, gates: map[string]*autoGateEntry{}, families: map[string]*autoGateFamily{},
		known: map[string]pulumi.Resource{}, edges: map[string][]string{}, clusters: map[string]*autoGateCluster{}, planned: map[string]bool{},
		componentDeps: map[string][]pulumi.Resource{}, orderOf: map[string]int{}, providerOf: map[string]pulumi.ProviderResource{},
		plannedKeys: map[string]bool{}, installerOrder: map[string]int{}}
	g.planCond = sync.NewCond(&g.mu)
	return g
}

type autoGate struct {
	ctx         *pulumi.Context
	opts        AutoGateOptions
	planTimeout time.Duration // 0: autoGatePlanTimeout

	mu         sync.Mutex
	installers []AutoGatePlanInstaller
	earlier    []*autoGateSeen             // every registration so far, for webhook configurations that come late
	gates      map[string]*autoGateEntry   // by batch key
	families   map[string]*autoGateFamily  // children by parent URN
	known      map[string]pulumi.Resource  // resources by URN, as transforms saw them (dependsOn, parents)
	edges      map[string][]string         // every registration's dependsOn and parent URNs, by its URN
	clusters   map[string]*autoGateCluster // readiness providers for explicit kubernetes providers, by their URN
	// planned are the registrations whose first plan call returned (an installer among them is
	// then among installers), by URN; planCond wakes whoever waits for one (childrenPlanned).
	planned  map[string]bool
	planCond *sync.Cond
	// componentDeps are the in-process components registrations depend on, as the program made
	// them (Go values), by registrationKey.
	componentDeps map[string][]pulumi.Resource
	// Program order (recordOrder): the Kubernetes registrations outside kubernetes components, in
	// the order the program wrote them, by registrationKey, with their explicit provider (nil: the
	// default one); the keys whose first plan call returned.
	// orderMu guards order, orderOf and providerOf: recordOrder runs inside every RegisterResource,
	// a gate's too, which gate makes with mu held (lock order: mu, then orderMu).
	orderMu     sync.Mutex
	order       []string
	orderOf     map[string]int
	providerOf  map[string]pulumi.ProviderResource
	plannedKeys map[string]bool // mu
	// installerOrder is each installer's place in program order (-1: none), by its URN.
	installerOrder map[string]int
}

// registrationKey names a registration in both of its transforms: the program's (legacy) one
// and the engine's.
func registrationKey(typ, name, parentName string) string {
	return typ + "::" + name + "::" + parentName
}

// autoGateCluster is the readiness provider made for the cluster of one explicit kubernetes
// provider, configured as that provider is (kubeconfig, context, namespace).
type autoGateCluster struct {
	once sync.Once
	prov pulumi.ProviderResource
	skip string // why objects of that cluster cannot be gated ("" when they can)
	err  error
}

// autoGateEntry is one gate resource, shared by every registration with its key.
type autoGateEntry struct {
	res pulumi.Resource
	err error
}

// autoGateSeen is a registration whose decision took its installers already.
type autoGateSeen struct {
	res     AutoGatePlanResource
	pending bool // a component's child before its final decision (which will see later installers)
}

// autoGateFamily tracks a component's children: when the last one arrived, and how many are
// still at their first plan call (an installer among them is not known to the others yet).
type autoGateFamily struct {
	mu       sync.Mutex
	last     time.Time
	inFlight int
	landed   chan struct{} // closed (and replaced) whenever a first plan call returns
}

// autoGateResource is a gate registered by token (its outputs are not read here).
type autoGateResource struct {
	pulumi.CustomResourceState
}

// componentParent says whether a parent type is a kubernetes component whose children the
// plugin registers concurrently (in no guaranteed order).
func componentParent(parentType string) bool {
	return strings.HasPrefix(parentType, "kubernetes:")
}

func (g *autoGate) transform(c context.Context, args *pulumi.ResourceTransformArgs) (res *pulumi.ResourceTransformResult) {
	if !args.Custom || !strings.HasPrefix(args.Type, "kubernetes:") {
		return nil
	}
	if g.opts.Exclude != nil && g.opts.Exclude(args.Type, args.Name) {
		g.markPlanned(c, args)
		return nil
	}
	defer func() {
		if r := recover(); r != nil {
			res = g.fail(args, fmt.Errorf("%v", r))
		}
	}()
	gates, err := g.decide(c, args)
	if err != nil {
		return g.fail(args, err)
	}
	if len(gates) == 0 {
		return nil
	}
	opts := args.Opts
	opts.DependsOn = append(slices.Clone(opts.DependsOn), gates...)
	return &pulumi.ResourceTransformResult{Props: args.Props, Opts: opts}
}

// fail makes the registration fail with err, naming the object: autoGate could not decide
// which gates it needs, and letting it through ungated would be a false ready. A Go transform
// returns no error, so the registration gets a dependency whose URN is that error: the SDK
// fails to marshal it and the engine fails the registration (and `up`), with no wait.
func (g *autoGate) fail(args *pulumi.ResourceTransformArgs, err error) *pulumi.ResourceTransformResult {
	err = fmt.Errorf("autoGate could not decide the gates of %s %s, so it is not registered ungated: %w", args.Type, args.Name, err)
	_ = g.ctx.Log.Error(err.Error(), nil)
	opts := args.Opts
	opts.DependsOn = append(slices.Clone(opts.DependsOn), autoGateFailure(err))
	return &pulumi.ResourceTransformResult{Props: args.Props, Opts: opts}
}

// autoGateFailed is a dependency that never resolves to a URN: its URN is err.
type autoGateFailed struct {
	pulumi.CustomResourceState
	urn pulumi.URNOutput
}

func (f *autoGateFailed) URN() pulumi.URNOutput { return f.urn }

func autoGateFailure(err error) pulumi.Resource {
	urn := pulumi.String("").ToStringOutput().ApplyT(func(string) (pulumi.URN, error) { return "", err }).(pulumi.URNOutput)
	return &autoGateFailed{urn: urn}
}

func (g *autoGate) warn(msg string) {
	_ = g.ctx.Log.Warn("autoGate: "+msg, nil)
}

// decide returns the gate resources args must depend on, creating those not made yet.
func (g *autoGate) decide(c context.Context, args *pulumi.ResourceTransformArgs) ([]pulumi.Resource, error) {
	object, _ := plainValue(c, args.Props)
	obj, _ := object.(map[string]any)
	if obj == nil {
		obj = map[string]any{}
	}
	parentURN, err := g.urnOf(c, args.Opts.Parent)
	if err != nil {
		return nil, err
	}
	var dependsOn []string
	handGated := false
	for _, d := range args.Opts.DependsOn {
		u, err := g.urnOf(c, d)
		if err != nil {
			return nil, err
		}
		if u == "" {
			continue
		}
		dependsOn = append(dependsOn, u)
		if strings.HasPrefix(string(resource.URN(u).Type()), "readiness:") {
			handGated = true
		}
	}
	parentType := ""
	if parentURN != "" {
		if pt := string(resource.URN(parentURN).Type()); pt != string(resource.RootStackType) {
			parentType = pt
		}
	}
	self := g.selfURN(parentURN, args.Type, args.Name)
	key := registrationKey(args.Type, args.Name, parentName(parentURN))
	defer g.markPlannedURN(self) // every way out: nothing waits for it in vain (childrenPlanned)
	defer g.markPlannedKey(key)  // and waitEarlier
	res := AutoGatePlanResource{Type: args.Type, Name: args.Name, Object: obj}
	if parentType != "" {
		res.ParentType = &parentType
		p := parentURN
		res.Parent = &p
	}
	g.mu.Lock()
	g.edges[self] = append(slices.Clone(dependsOn), parentURN)
	g.mu.Unlock()
	cluster, prov, skip, err := g.clusterOf(c, args)
	if err != nil {
		return nil, err
	}
	if skip != "" {
		g.warn(fmt.Sprintf("%s %s is not gated: %s", args.Type, args.Name, skip))
		return nil, nil
	}
	if cluster != "" {
		res.Cluster = &cluster
	}

	seen := &autoGateSeen{res: res}
	child := componentParent(parentType)
	var fam *autoGateFamily
	land := func() { // once, and on every way out (an error, a panic): siblings wait for it
		if fam != nil {
			fam.land()
			fam = nil
		}
	}
	defer land()
	if child {
		// The child counts as arrived now, not when its first plan call returns: a slow call
		// for the chart's webhook configuration must keep its siblings' window open.
		fam = g.arrive(parentURN)
	}
	family := fam
	// A component the SDK renders in this process (Chart v3, ConfigFile/ConfigGroup v1) registers
	// its children after its own registration, and after a resource that depends on it may have
	// been sent: decide that resource once every child was planned (its installers known).
	g.childrenPlanned(c, args)
	// Only installers the program wrote above it count for a top-level registration (one written
	// below may depend on it: a cycle); a component's child counts its siblings too (settle).
	at := -1
	if !child {
		at = g.placeOf(key)
	}
	asked, known := g.snapshot(seen, true, true, at)
	plan, err := g.planWith(res, asked, dependsOn, prov)
	if err != nil {
		return nil, err
	}
	if plan.Remember && (len(g.opts.Installers) == 0 || slices.Contains(g.opts.Installers, args.Name)) {
		// The plan says what later decisions need of it (a CRD without its schemas); an older
		// provider does not: then the props, whole.
		remembered := obj
		if plan.Installer != nil {
			remembered = plan.Installer
		}
		inst := AutoGatePlanInstaller{Id: self, Type: args.Type, Name: args.Name, Object: remembered, Cluster: res.Cluster, Parent: res.Parent}
		g.mu.Lock()
		missed := g.missed(seen)
		g.installers = append(g.installers, inst)
		g.installerOrder[self] = g.placeOf(key)
		g.mu.Unlock()
		land()
		if strings.HasSuffix(args.Type, "WebhookConfiguration") {
			// A child's missed are those decided finally without it: top-level registrations,
			// or siblings whose group had settled before it arrived.
			g.warnIntercepted(inst, missed, prov)
		}
	}
	g.markPlannedURN(self)
	g.markPlannedKey(key)
	if child {
		land()
		// A sibling registered later (the chart's webhook configuration) may block this child:
		// decide once the component's registrations settle.
		g.settle(family)
		again, _ := g.snapshot(seen, false, false, -1)
		if plan, err = g.planWith(res, again, dependsOn, prov); err != nil {
			return nil, err
		}
	} else {
		if g.waitEarlier(c, args, key, cluster, known, asked) {
			// An installer the program wrote above it was planned after its question: ask again.
			again, _ := g.snapshot(seen, true, false, at)
			if plan, err = g.planWith(res, again, dependsOn, prov); err != nil {
				return nil, err
			}
		}
		// Final now: a webhook configuration written below it and known already did not hold it
		// (one known later warns itself, see missed).
		for _, hook := range g.finalize(seen, at) {
			g.warnIntercepted(hook, []AutoGatePlanResource{res}, prov)
		}
	}
	for _, w := range plan.Warnings {
		g.warn(w)
	}
	if handGated || len(plan.Gates) == 0 {
		return nil, nil
	}
	var out []pulumi.Resource
	left := map[string]bool{}
	for _, spec := range plan.Gates {
		if why := g.cycle(spec, self, left); why != "" {
			// The gate would wait for what it guards (an installer that depends on this
			// registration): left out, never a deadlock.
			left[spec.Key] = true
			g.warn(fmt.Sprintf("%s %s is not held by %s: %s", args.Type, args.Name, spec.Name, why))
			continue
		}
		gate, err := g.gate(spec, prov)
		if err != nil {
			return nil, err
		}
		out = append(out, gate)
	}
	return out, nil
}

// inProcessComponents are the component types the SDK renders in the program's process: their
// children register after them, once rendered.
var inProcessComponents = map[string]bool{
	"kubernetes:helm.sh/v3:Chart": true, "kubernetes:yaml:ConfigFile": true, "kubernetes:yaml:ConfigGroup": true,
}

// childrenPlanned waits until every child of each in-process component the registration
// depends on has had its first plan call answered (at most the plan timeout; then a warning
// says it was decided without them). Chart v3's children are its Ready output; ConfigFile and
// ConfigGroup v1 hold theirs in Resources (a ConfigGroup's ConfigFiles hold theirs).
func (g *autoGate) childrenPlanned(c context.Context, args *pulumi.ResourceTransformArgs) {
	parent := ""
	if u, err := g.urnOf(c, args.Opts.Parent); err == nil && u != "" && resource.URN(u).Type() != resource.RootStackType {
		parent = resource.URN(u).Name()
	}
	g.mu.Lock()
	comps := g.componentDeps[registrationKey(args.Type, args.Name, parent)]
	g.mu.Unlock()
	var want []string
	for _, comp := range comps {
		want = append(want, g.childURNs(c, comp)...)
	}
	if len(want) == 0 {
		return
	}
	timeout := g.planTimeout
	if timeout <= 0 {
		timeout = autoGatePlanTimeout
	}
	deadline := time.Now().Add(timeout)
	wake := time.AfterFunc(timeout, func() { g.mu.Lock(); g.planCond.Broadcast(); g.mu.Unlock() })
	defer wake.Stop()
	missing := ""
	g.mu.Lock()
	for _, u := range want {
		for !g.planned[u] && missing == "" {
			if time.Now().After(deadline) {
				missing = u
				break
			}
			g.planCond.Wait()
		}
	}
	g.mu.Unlock()
	if missing != "" {
		g.warn(fmt.Sprintf("%s %s was decided without every child of the components it depends on (%s had not registered "+
			"after %s): a webhook configuration or CRD among them does not count", args.Type, args.Name, missing, timeout))
	}
}

// childURNs are the URNs the engine gives the children of component d (an in-process one),
// recursively, once the SDK rendered them.
func (g *autoGate) childURNs(c context.Context, d pulumi.Resource) []string {
	parent, err := g.urnOf(c, d)
	if err != nil || parent == "" {
		return nil
	}
	v := reflect.ValueOf(d)
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return nil
	}
	var children []pulumi.Resource
	if f := v.FieldByName("Resources"); f.IsValid() {
		if m, ok := f.Interface().(map[string]pulumi.Resource); ok {
			for _, r := range m {
				children = append(children, r)
			}
		}
	}
	if f := v.FieldByName("Ready"); f.IsValid() {
		if o, ok := f.Interface().(pulumi.ResourceArrayOutput); ok && o.ElementType() != nil {
			if r, err := internals.UnsafeAwaitOutput(c, o); err == nil {
				rs, _ := r.Value.([]pulumi.Resource)
				children = append(children, rs...)
			}
		}
	}
	var out []string
	for _, r := range children {
		named, ok := r.(interface {
			PulumiResourceName() string
			PulumiResourceType() string
		})
		if !ok {
			continue
		}
		if inProcessComponents[named.PulumiResourceType()] {
			out = append(out, g.childURNs(c, r)...)
			continue
		}
		if _, custom := r.(pulumi.CustomResource); custom && strings.HasPrefix(named.PulumiResourceType(), "kubernetes:") {
			out = append(out, engineURN(g.ctx.Stack(), g.ctx.Project(), parent, named.PulumiResourceType(), named.PulumiResourceName()))
		}
	}
	return out
}

// markPlanned records a registration the transform lets through without a plan (excluded):
// nothing waits for it in vain.
func (g *autoGate) markPlanned(c context.Context, args *pulumi.ResourceTransformArgs) {
	parentURN, err := g.urnOf(c, args.Opts.Parent)
	if err != nil {
		return
	}
	g.markPlannedURN(g.selfURN(parentURN, args.Type, args.Name))
	g.markPlannedKey(registrationKey(args.Type, args.Name, parentName(parentURN)))
}

// recordOrder notes the program's Kubernetes registrations in program order (the legacy
// transformation runs as the program calls RegisterResource). The Go SDK sends registrations
// concurrently, each once its inputs resolve, so the engine's transform may see a Deployment
// before the Certificate written above it; waitEarlier puts them back in order.
func (g *autoGate) recordOrder(args *pulumi.ResourceTransformationArgs, ro *pulumi.ResourceOptions) {
	if !strings.HasPrefix(args.Type, "kubernetes:") {
		return
	}
	if _, custom := args.Resource.(pulumi.CustomResource); !custom {
		return
	}
	parent := ""
	if named, ok := ro.Parent.(interface {
		PulumiResourceName() string
		PulumiResourceType() string
	}); ok && ro.Parent != nil && !isNil(ro.Parent) {
		if componentParent(named.PulumiResourceType()) {
			return // a kubernetes component's child: its family settles (settle)
		}
		parent = named.PulumiResourceName()
	}
	key := registrationKey(args.Type, args.Name, parent)
	g.orderMu.Lock()
	defer g.orderMu.Unlock()
	if _, dup := g.orderOf[key]; dup {
		return
	}
	g.orderOf[key] = len(g.order)
	g.order = append(g.order, key)
	if ro.Provider != nil && !isNil(ro.Provider) {
		g.providerOf[key] = ro.Provider
	}
}

// waitEarlier waits until every registration the program wrote above key, for the same cluster,
// had its first plan call answered (its installer, if any, is then known), at most the plan
// timeout; it says whether an installer written above key was added after key's question (of
// asked installers). No deadlock: a resource written above key cannot wait for key's outputs
// (the program had not made key yet), and each waits only for those above it.
func (g *autoGate) waitEarlier(c context.Context, args *pulumi.ResourceTransformArgs, key, cluster string, asked int, sent []AutoGatePlanInstaller) bool {
	timeout := g.planTimeout
	if timeout <= 0 {
		timeout = autoGatePlanTimeout
	}
	g.orderMu.Lock()
	at, ok := g.orderOf[key]
	earlier := slices.Clone(g.order[:max(at, 0)])
	providers := maps.Clone(g.providerOf)
	g.orderMu.Unlock()
	if !ok {
		return false
	}
	// A registration of the same type is not waited for: no rule lets an object gate another of
	// its own kind (an ExternalSecret another, a CRD another), and 200 ExternalSecrets each
	// waiting for all before it cost more than the rest of the `up`.
	var wait []string
	for _, k := range earlier {
		if strings.SplitN(k, "::", 2)[0] != args.Type && g.clusterOfProvider(c, providers[k]) == cluster {
			wait = append(wait, k)
		}
	}
	deadline := time.Now().Add(timeout)
	wake := time.AfterFunc(timeout, func() { g.mu.Lock(); g.planCond.Broadcast(); g.mu.Unlock() })
	defer wake.Stop()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, k := range wait {
		for !g.plannedKeys[k] {
			if time.Now().After(deadline) {
				g.warn(fmt.Sprintf("%s %s was decided without %s, written above it, whose registration had not come after %s",
					args.Type, args.Name, strings.ReplaceAll(k, "::", " "), timeout))
				return false
			}
			g.planCond.Wait()
		}
	}
	for _, inst := range g.installers[min(asked, len(g.installers)):] {
		if o, ok := g.installerOrder[inst.Id]; ok && o >= 0 && o < at && inst.Type != args.Type &&
			!slices.ContainsFunc(sent, func(i AutoGatePlanInstaller) bool { return i.Id == inst.Id }) {
			return true
		}
	}
	return false
}

// clusterOfProvider is clusterOf's cluster for a registration with explicit provider prov (nil:
// the default one, ""). A provider still waiting for its own inputs (a kubeconfig from a cluster
// being made) is another cluster than that of the registration deciding now, whose provider is
// registered: its URN does not resolve at once, and it counts as "unknown".
func (g *autoGate) clusterOfProvider(c context.Context, prov pulumi.ProviderResource) string {
	if prov == nil {
		return ""
	}
	done := make(chan string, 1)
	go func() {
		u, err := g.urnOf(c, prov)
		if err != nil {
			u = "unknown"
		}
		done <- u
	}()
	select {
	case u := <-done:
		if name := resource.URN(u).Name(); u == "" || name == "default" || strings.HasPrefix(name, "default_") {
			return ""
		}
		return u
	case <-time.After(time.Second):
		return "unknown"
	}
}

// placeOf is key's place in program order (-1: none).
func (g *autoGate) placeOf(key string) int {
	g.orderMu.Lock()
	defer g.orderMu.Unlock()
	if at, ok := g.orderOf[key]; ok {
		return at
	}
	return -1
}

func (g *autoGate) markPlannedKey(key string) {
	g.mu.Lock()
	g.plannedKeys[key] = true
	g.planCond.Broadcast()
	g.mu.Unlock()
}

// parentName is the name part of a parent's URN ("" for none or the stack).
func parentName(parentURN string) string {
	if parentURN == "" || resource.URN(parentURN).Type() == resource.RootStackType {
		return ""
	}
	return resource.URN(parentURN).Name()
}

func isNil(r pulumi.Resource) bool {
	v := reflect.ValueOf(r)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

func (g *autoGate) markPlannedURN(urn string) {
	g.mu.Lock()
	g.planned[urn] = true
	g.planCond.Broadcast()
	g.mu.Unlock()
}

// cycle says why a gate would wait for the registration it guards ("" when it would not): an
// installer it comes after depends on that registration (through dependsOn or parents), or a
// gate it comes after was left out for that reason.
func (g *autoGate) cycle(spec AutoGatePlanGate, self string, left map[string]bool) string {
	for _, k := range spec.AfterGates {
		if left[k] {
			return "the gate it comes after was left out"
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, id := range spec.After {
		if id == self || g.reaches(id, self, map[string]bool{}) {
			return fmt.Sprintf("%s depends on it", id)
		}
	}
	return ""
}

// reaches says whether from depends on to through recorded dependsOn and parent edges (g.mu held).
func (g *autoGate) reaches(from, to string, seen map[string]bool) bool {
	if seen[from] {
		return false
	}
	seen[from] = true
	for _, next := range g.edges[from] {
		if next == to || (next != "" && g.reaches(next, to, seen)) {
			return true
		}
	}
	return false
}

// snapshot is the installers a decision sees, recording that it saw them (and, first, the
// registration itself), in one step: an installer added later knows who decided without it.
// (at: the registration's place in program order; installers written below it are left out;
// -1: none are). It also returns how many installers there were, written below or not.
func (g *autoGate) snapshot(seen *autoGateSeen, pending, first bool, at int) ([]AutoGatePlanInstaller, int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	seen.pending = pending
	if first {
		g.earlier = append(g.earlier, seen)
	}
	var out []AutoGatePlanInstaller
	for _, inst := range g.installers {
		if at < 0 || g.installerOrder[inst.Id] <= at {
			out = append(out, inst)
		}
	}
	return out, len(g.installers)
}

// finalize marks seen's decision final and returns the webhook configurations written below it
// (at) that are installers already: they did not hold it.
func (g *autoGate) finalize(seen *autoGateSeen, at int) []AutoGatePlanInstaller {
	g.mu.Lock()
	defer g.mu.Unlock()
	seen.pending = false
	var out []AutoGatePlanInstaller
	for _, inst := range g.installers {
		if at >= 0 && g.installerOrder[inst.Id] > at && strings.HasSuffix(inst.Type, "WebhookConfiguration") {
			out = append(out, inst)
		}
	}
	return out
}

// missed lists the registrations whose final decision cannot see an installer added now
// (g.mu held); self excepted.
func (g *autoGate) missed(self *autoGateSeen) []AutoGatePlanResource {
	var out []AutoGatePlanResource
	for _, s := range g.earlier {
		if s != self && !s.pending {
			out = append(out, s.res)
		}
	}
	return out
}

func (g *autoGate) planWith(res AutoGatePlanResource, installers []AutoGatePlanInstaller, dependsOn []string, prov pulumi.ProviderResource) (*AutoGatePlanResult, error) {
	opts := &AutoGatePlanOptions{Namespaces: g.opts.Namespaces}
	for _, f := range []struct {
		dst **string
		v   string
	}{{&opts.Timeout, g.opts.Timeout}, {&opts.StableFor, g.opts.StableFor}, {&opts.FailureGrace, g.opts.FailureGrace}} {
		if f.v != "" {
			v := f.v
			*f.dst = &v
		}
	}
	var invokeOpts []pulumi.InvokeOption
	if prov != nil {
		invokeOpts = append(invokeOpts, pulumi.Provider(prov))
	}
	type answer struct {
		plan *AutoGatePlanResult
		err  error
	}
	ch := make(chan answer, 1)
	go func() {
		p, err := AutoGatePlan(g.ctx, &AutoGatePlanArgs{Resource: res, Installers: installers, DependsOn: dependsOn, Options: opts}, invokeOpts...)
		ch <- answer{p, err}
	}()
	timeout := g.planTimeout
	if timeout == 0 {
		timeout = autoGatePlanTimeout
	}
	select {
	case a := <-ch:
		return a.plan, a.err
	case <-time.After(timeout):
		// A plan call that never answers must not hold the registration (and a component's
		// siblings) forever: the registration fails instead.
		return nil, fmt.Errorf("the plan call for %s %s did not answer within %s", res.Type, res.Name, timeout)
	}
}

// autoGatePlanTimeout bounds one plan call (as in TypeScript).
const autoGatePlanTimeout = 2 * time.Minute

// warnIntercepted warns about registrations made before a top-level webhook configuration that
// it intercepts: they were decided without it, so nothing held them for it.
func (g *autoGate) warnIntercepted(hook AutoGatePlanInstaller, before []AutoGatePlanResource, prov pulumi.ProviderResource) {
	for _, res := range before {
		if deref(res.Cluster) != deref(hook.Cluster) {
			continue
		}
		plan, err := g.planWith(res, []AutoGatePlanInstaller{hook}, nil, prov)
		if err != nil {
			continue
		}
		for _, gate := range plan.Gates {
			if gate.Type == "readiness:index:AdmissionReady" && slices.Contains(gate.After, hook.Id) {
				g.warn(fmt.Sprintf("%s %s was registered before %s %s, which intercepts it: it was not held for that webhook. "+
					"Register the webhook configuration (or what installs it) first, or give it a dependsOn on a readiness.AdmissionReady of it by hand",
					res.Type, res.Name, hook.Type, hook.Name))
				break
			}
		}
	}
}

// arrive records a child of parent arriving, at its first plan call.
func (g *autoGate) arrive(parent string) *autoGateFamily {
	g.mu.Lock()
	f := g.families[parent]
	if f == nil {
		f = &autoGateFamily{landed: make(chan struct{})}
		g.families[parent] = f
	}
	g.mu.Unlock()
	f.mu.Lock()
	f.last = time.Now()
	f.inFlight++
	f.mu.Unlock()
	return f
}

// land records that a child's first plan call returned (its installer, if any, is known).
func (f *autoGateFamily) land() {
	f.mu.Lock()
	f.inFlight--
	close(f.landed)
	f.landed = make(chan struct{})
	f.mu.Unlock()
}

// settle waits until no child of the family is at its first plan call and none arrived for Settle.
func (g *autoGate) settle(f *autoGateFamily) {
	for {
		f.mu.Lock()
		quietAt, inFlight, landed := f.last.Add(g.opts.Settle), f.inFlight, f.landed
		f.mu.Unlock()
		if inFlight > 0 {
			<-landed
			continue
		}
		d := time.Until(quietAt)
		if d <= 0 {
			return
		}
		time.Sleep(d)
	}
}

// gate returns the gate resource of spec's key, registering it the first time (at the top
// level: a gate inside a component whose child waits for it would deadlock).
func (g *autoGate) gate(spec AutoGatePlanGate, prov pulumi.ProviderResource) (pulumi.Resource, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if e, ok := g.gates[spec.Key]; ok {
		return e.res, e.err
	}
	var deps []pulumi.Resource
	for _, k := range spec.AfterGates {
		if e, ok := g.gates[k]; ok && e.err == nil {
			deps = append(deps, e.res)
		}
	}
	for _, id := range spec.After {
		// Installers the program passed as dependsOn are known resources; the others (a
		// chart's children) are known only by URN: a dependency on that URN once the engine
		// has registered it (as TypeScript does).
		if r, ok := g.known[id]; ok {
			deps = append(deps, r)
		} else {
			deps = append(deps, g.registered(id))
		}
	}
	opts := []pulumi.ResourceOption{pulumi.DependsOn(deps)}
	if prov != nil {
		opts = append(opts, pulumi.Provider(prov))
	}
	// The SDK's own defaults (version, plugin download URL), as every hand-written gate has:
	// one readiness provider per stack, not a second unversioned one.
	opts = internal.PkgResourceDefaultOpts(opts)
	props, _ := toInput(spec.Args).(pulumi.Map)
	if props == nil {
		props = pulumi.Map{}
	}
	for _, a := range spec.ArgsFrom {
		props[a.Arg] = g.outputOf(a.Installer, a.Output)
	}
	if objects, ok := props["objects"]; ok {
		// AdmissionReady's objects may be Secrets: secret from the start, as the provider stores them.
		props["objects"] = pulumi.ToSecret(objects)
	}
	var r autoGateResource
	err := g.ctx.RegisterResource(spec.Type, spec.Name, props, &r, opts...)
	e := &autoGateEntry{res: &r, err: err}
	g.gates[spec.Key] = e
	if err == nil {
		_ = g.ctx.Log.Info("autoGate: "+spec.Name+": "+spec.Reason, nil)
	}
	return e.res, e.err
}

// autoGateInstaller is an installer known only by its URN (a component's child) as a dependency.
type autoGateInstaller struct {
	pulumi.CustomResourceState
	urn pulumi.URNOutput
}

func (i *autoGateInstaller) URN() pulumi.URNOutput { return i.urn }

// registered is the installer of URN urn as a dependency whose URN resolves once the engine has
// finished registering it in this deployment: the SDK sends a gate's registration only after its
// dependencies' URNs resolve, so the gate starts after the installer exists (on an update, after
// its new state: `ResourceReady exists` must not see the old configuration and pass early).
func (g *autoGate) registered(urn string) pulumi.Resource {
	out := pulumi.String(urn).ToStringOutput().ApplyT(func(u string) (pulumi.URN, error) {
		return pulumi.URN(u), g.waitRegistered(u)
	}).(pulumi.URNOutput)
	return &autoGateInstaller{urn: out}
}

// autoGateRegisteredWait bounds waitRegistered (as in TypeScript).
const autoGateRegisteredWait = 30 * time.Minute

// waitRegistered asks the engine for the resource (its built-in getResource answers once the
// resource's step finished in this deployment) until it answers; any other error than
// "unknown resource" ends it. No event for "that registration finished" reaches the SDK from
// outside the code that registers it (here, the kubernetes plugin's Construct).
func (g *autoGate) waitRegistered(urn string) error {
	_, err := g.registeredState(urn)
	return err
}

// registeredState is waitRegistered that also returns the resource's outputs as the engine has them.
func (g *autoGate) registeredState(urn string) (map[string]any, error) {
	deadline := time.Now().Add(autoGateRegisteredWait)
	for delay := 50 * time.Millisecond; ; delay = min(2*delay, time.Second) {
		var got struct {
			URN   string         `pulumi:"urn"`
			State map[string]any `pulumi:"state"`
		}
		// Raw: a resource's state may hold secrets (a Release's values, a provider's kubeconfig);
		// only names are read from it, and a kubeconfig is passed on as a secret.
		_, err := g.ctx.InvokePackageRaw("pulumi:pulumi:getResource", struct {
			URN string `pulumi:"urn"`
		}{urn}, &got, "")
		if err == nil {
			return got.State, nil
		}
		if !strings.Contains(err.Error(), "unknown resource") || time.Now().After(deadline) {
			return nil, fmt.Errorf("waiting for the engine to register %s: %w", urn, err)
		}
		time.Sleep(delay)
	}
}

// outputOf is an installer's output at a dotted path, read once the engine has created it (an
// autonamed installer's name exists nowhere else); unknown in a preview, where it has none.
func (g *autoGate) outputOf(urn, path string) pulumi.Input {
	if g.ctx.DryRun() {
		return pulumi.UnsafeUnknownOutput(nil)
	}
	return pulumi.String(urn).ToStringOutput().ApplyT(func(u string) (string, error) {
		state, err := g.registeredState(u)
		if err != nil {
			return "", err
		}
		v, ok := atPath(state, path).(string)
		if !ok || v == "" {
			return "", fmt.Errorf("autoGate: %s has no output %s to name its gate with", u, path)
		}
		return v, nil
	}).(pulumi.StringOutput)
}

// atPath is the value at a dotted path of nested maps (nil when absent).
func atPath(v any, path string) any {
	for _, p := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

// clusterOf is the cluster a registration's kubernetes provider talks to: "" and the autoGate
// provider for the default one; for an explicit provider, its URN and a readiness provider
// configured as it is; skip says why the registration cannot be gated (its provider renders
// YAML, or names a kubeconfig cluster readiness cannot select): autoGate never guesses.
func (g *autoGate) clusterOf(c context.Context, args *pulumi.ResourceTransformArgs) (string, pulumi.ProviderResource, string, error) {
	if args.Opts.Provider == nil {
		prov, skip, err := g.defaultCluster()
		return "", prov, skip, err
	}
	urn, err := g.urnOf(c, args.Opts.Provider)
	if err != nil {
		return "", nil, "", err
	}
	if name := resource.URN(urn).Name(); urn == "" || name == "default" || strings.HasPrefix(name, "default_") {
		// The engine's default kubernetes provider: the stack's kubernetes configuration.
		prov, skip, err := g.defaultCluster()
		return "", prov, skip, err
	}
	g.mu.Lock()
	e := g.clusters[urn]
	if e == nil {
		e = &autoGateCluster{}
		g.clusters[urn] = e
	}
	g.mu.Unlock()
	e.once.Do(func() { e.prov, e.skip, e.err = g.clusterProvider(urn) })
	return urn, e.prov, e.skip, e.err
}

// defaultCluster is the readiness provider for the objects of the engine's default kubernetes
// provider: AutoGate's Provider when given; else the default readiness provider when the
// stack's kubernetes configuration names the same kubeconfig, context and namespace as its
// readiness configuration; else one configured as pulumi-kubernetes reads the stack's
// kubernetes configuration (its provider.go, Configure: kubernetes:kubeconfig, :context and
// :namespace, which overrides the context's), so that `kubernetes:namespace apps` gates objects
// in apps, and a kubeconfig set for kubernetes only gates them in its cluster.
func (g *autoGate) defaultCluster() (pulumi.ProviderResource, string, error) {
	if g.opts.Provider != nil {
		return g.opts.Provider, "", nil
	}
	g.mu.Lock()
	e := g.clusters[""]
	if e == nil {
		e = &autoGateCluster{}
		g.clusters[""] = e
	}
	g.mu.Unlock()
	e.once.Do(func() {
		// GetConfig: the raw values (a secret kubeconfig is compared here, never shown).
		cfg := func(key string) string { v, _ := g.ctx.GetConfig(key); return v }
		e.prov, e.skip, e.err = defaultClusterProvider(g.ctx, cfg)
	})
	return e.prov, e.skip, e.err
}

// defaultClusterProvider decides defaultCluster from the stack's configuration.
func defaultClusterProvider(ctx *pulumi.Context, cfg func(key string) string) (pulumi.ProviderResource, string, error) {
	switch {
	case cfg("kubernetes:renderYamlToDirectory") != "":
		return nil, "the stack's kubernetes provider renders YAML to a directory (kubernetes:renderYamlToDirectory) and talks to no cluster", nil
	case cfg("kubernetes:cluster") != "":
		return nil, "the stack's kubernetes provider selects kubeconfig cluster " + cfg("kubernetes:cluster") +
			" (kubernetes:cluster), which a readiness provider cannot; gate its objects by hand with a readiness.Provider for that cluster", nil
	}
	same := true
	for _, k := range []string{"kubeconfig", "context", "namespace"} {
		same = same && cfg("kubernetes:"+k) == cfg("readiness:"+k)
	}
	if same {
		return nil, "", nil
	}
	p, err := NewProvider(ctx, "autogate-default", configuredAs(func(k string) string { return cfg("kubernetes:" + k) }))
	if err != nil {
		return nil, "", err
	}
	_ = ctx.Log.Info("autoGate: objects of the stack's kubernetes provider are gated by readiness provider autogate-default, "+
		"configured as the stack's kubernetes configuration (kubeconfig, context, namespace)", nil)
	return p, "", nil
}

// configuredAs are a readiness provider's arguments for a kubernetes provider's configuration
// (cfg: "kubeconfig", "context", "namespace"; the kubeconfig passed on as a secret).
func configuredAs(cfg func(key string) string) *ProviderArgs {
	args := &ProviderArgs{}
	if v := cfg("kubeconfig"); v != "" {
		args.Kubeconfig = pulumi.ToSecret(pulumi.String(v)).(pulumi.StringOutput)
	}
	if v := cfg("context"); v != "" {
		args.Context = pulumi.String(v)
	}
	if v := cfg("namespace"); v != "" {
		args.Namespace = pulumi.String(v)
	}
	return args
}

// clusterProvider makes the readiness provider for the cluster of the kubernetes provider urn,
// from that provider's configuration as pulumi-kubernetes reads it.
func (g *autoGate) clusterProvider(urn string) (pulumi.ProviderResource, string, error) {
	state, err := g.registeredState(urn)
	if err != nil {
		return nil, "", err
	}
	name := resource.URN(urn).Name()
	cfg := func(k string) string { s, _ := state[k].(string); return s }
	if cfg("renderYamlToDirectory") != "" {
		return nil, "its kubernetes provider " + name + " renders YAML to a directory and talks to no cluster", nil
	}
	if cfg("cluster") != "" {
		return nil, "its kubernetes provider " + name + " selects kubeconfig cluster " + cfg("cluster") +
			", which a readiness provider cannot; gate its objects by hand with a readiness.Provider for that cluster", nil
	}
	if g.ctx.DryRun() && (cfg("kubeconfig") == "" && state["kubeconfig"] != nil) {
		return nil, "its kubernetes provider " + name + "'s kubeconfig is not known in a preview (decided at up)", nil
	}
	p, err := NewProvider(g.ctx, "autogate-"+name, configuredAs(cfg))
	if err != nil {
		return nil, "", err
	}
	_ = g.ctx.Log.Info("autoGate: objects of kubernetes provider "+name+" are gated by readiness provider autogate-"+name+", configured as it is", nil)
	return p, "", nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// urnOf is r's URN ("" for nil), and remembers r under it.
func (g *autoGate) urnOf(c context.Context, r pulumi.Resource) (string, error) {
	if r == nil {
		return "", nil
	}
	res, err := internals.UnsafeAwaitOutput(c, r.URN())
	if err != nil {
		return "", err
	}
	u, _ := res.Value.(pulumi.URN)
	if u == "" {
		return "", nil
	}
	g.mu.Lock()
	g.known[string(u)] = r
	g.mu.Unlock()
	return string(u), nil
}

// selfURN is the URN the engine gives the registration: the parent's qualified type prefixes
// the type, except for the stack itself.
func (g *autoGate) selfURN(parentURN, typ, name string) string {
	return engineURN(g.ctx.Stack(), g.ctx.Project(), parentURN, typ, name)
}

func engineURN(stack, project, parentURN, typ, name string) string {
	var parentType tokens.Type
	if parentURN != "" {
		if qt := resource.URN(parentURN).QualifiedType(); qt != resource.RootStackType {
			parentType = qt
		}
	}
	return string(resource.NewURN(tokens.QName(stack), tokens.PackageName(project), parentType, tokens.Type(typ), name))
}

// plainValue turns transform props into plain JSON values; unknown values are left out (ok false).
func plainValue(c context.Context, v any) (any, bool) {
	switch x := v.(type) {
	case nil:
		return nil, true
	case pulumi.Map:
		return plainMap(c, map[string]pulumi.Input(x)), true
	case map[string]pulumi.Input:
		return plainMap(c, x), true
	case map[string]any:
		m := map[string]any{}
		for k, e := range x {
			if pv, ok := plainValue(c, e); ok {
				m[k] = pv
			}
		}
		return m, true
	case pulumi.Array:
		return plainList(c, []pulumi.Input(x)), true
	case []pulumi.Input:
		return plainList(c, x), true
	case []any:
		out := make([]any, 0, len(x))
		for _, e := range x {
			pv, _ := plainValue(c, e)
			out = append(out, pv)
		}
		return out, true
	case pulumi.String:
		return string(x), true
	case pulumi.Float64:
		return float64(x), true
	case pulumi.Int:
		return float64(x), true
	case pulumi.Bool:
		return bool(x), true
	case string, float64, bool:
		return x, true
	case int:
		return float64(x), true
	case pulumi.Output:
		r, err := internals.UnsafeAwaitOutput(c, x)
		if err != nil || !r.Known {
			return nil, false
		}
		return plainValue(c, r.Value)
	}
	return nil, false
}

func plainMap(c context.Context, x map[string]pulumi.Input) map[string]any {
	m := map[string]any{}
	for k, e := range x {
		if pv, ok := plainValue(c, e); ok {
			m[k] = pv
		}
	}
	return m
}

func plainList(c context.Context, x []pulumi.Input) []any {
	out := make([]any, 0, len(x))
	for _, e := range x {
		pv, _ := plainValue(c, e)
		out = append(out, pv)
	}
	return out
}

// toInput turns the plan's plain JSON gate args into inputs.
func toInput(v any) pulumi.Input {
	switch x := v.(type) {
	case map[string]any:
		m := pulumi.Map{}
		for k, e := range x {
			m[k] = toInput(e)
		}
		return m
	case []any:
		a := pulumi.Array{}
		for _, e := range x {
			a = append(a, toInput(e))
		}
		return a
	case string:
		return pulumi.String(x)
	case float64:
		return pulumi.Float64(x)
	case int:
		return pulumi.Int(x)
	case bool:
		return pulumi.Bool(x)
	case nil:
		return nil
	}
	return pulumi.Any(v)
}
