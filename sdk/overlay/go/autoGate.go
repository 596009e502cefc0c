// Hand-written (sdk/overlay/go, copied here by `make sdk`): edit the overlay, not the copy.

package readiness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"
	"weak"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/common/tokens"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/internals"

	"github.com/readiness-io/pulumi-readiness/sdk/go/readiness/internal"
)

// AutoGateOptions tune AutoGate; every field is optional.
type AutoGateOptions struct {
	// Provider is the readiness provider for the plan and for the gates of objects of the default
	// kubernetes provider (the default readiness provider if nil).
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
	// Settle is how long a component's children (Chart v4, ConfigGroup, ...) settle after the last
	// one arrived, so that a webhook configuration of the same chart registered after a child
	// still counts. Default 200ms.
	Settle time.Duration
	// NoRetry keeps AutoGate's error hook off: a create or update the API server could not admit
	// because it could not call a webhook, or could not be reached, then fails the `up` (see
	// docs/retry.md).
	NoRetry bool
}

// AutoRetryOptions tune AutoRetry; every field is optional.
type AutoRetryOptions struct {
	// Provider is the readiness provider that decides and proves (the default one if nil).
	Provider pulumi.ProviderResource
	// Timeout bounds each wait for an object's admission to be proven again (a Go duration,
	// default 5m).
	Timeout string
}

// retryHookName is the one error hook a program registers (AutoGate or AutoRetry).
const retryHookName = "readiness-retry"

// OptOutAnnotation set to "false" in an object's metadata.annotations keeps AutoGate off it.
const OptOutAnnotation = "readiness.io/auto-gate"

// AutoGate puts the right readiness gate in front of every Kubernetes resource registered after
// it that needs one. Call it once, at the top of the program. It only adds dependsOn entries.
// Every decision is the provider's (readiness:index:autoGateDecide): this file sends it the
// facts of each registration and wires the gates it answers. See docs/autogate.md.
func AutoGate(ctx *pulumi.Context, opts *AutoGateOptions) error {
	var o AutoGateOptions
	if opts != nil {
		o = *opts
	}
	g := newAutoGate(ctx, o)
	if !o.NoRetry {
		if !errorHooksSupported(ctx) {
			_ = ctx.Log.Warn("autoGate: this Pulumi CLI has no error hooks (3.217 or later has): a create that fails after its gate passed "+
				"is not retried (docs/retry.md); set NoRetry to silence this", nil)
		} else if err := g.registerRetryHook(); err != nil {
			return err
		}
	}
	if err := ctx.RegisterStackTransformation(g.recordOrder); err != nil {
		return err
	}
	return ctx.RegisterResourceTransform(g.transform)
}

// AutoRetry, for a program that places its gates by hand (no AutoGate), gives every Kubernetes
// resource registered after it the error hook AutoGate gives: a create or update the API server
// could not admit because it could not call a webhook (connection refused, no endpoints, timeout,
// TLS) or could not be reached is tried again once the object's own admission is proven again;
// never a denial, an invalid object, a quota or RBAC refusal. Every decision is the provider's
// (readiness:index:autoGateRetry). Needs a Pulumi CLI with error hooks (3.217 or later). See
// docs/retry.md.
func AutoRetry(ctx *pulumi.Context, opts *AutoRetryOptions) error {
	var o AutoRetryOptions
	if opts != nil {
		o = *opts
	}
	g := newAutoGate(ctx, AutoGateOptions{Provider: o.Provider, Timeout: o.Timeout})
	g.retryOnly = true
	if !errorHooksSupported(ctx) {
		return fmt.Errorf("readiness: AutoRetry needs error hooks, which this Pulumi CLI lacks (3.217 or later has them; docs/retry.md)")
	}
	if err := g.registerRetryHook(); err != nil {
		return err
	}
	return ctx.RegisterResourceTransform(g.transform)
}

// retryHooks are the programs (contexts) that registered the hook; weak, so that a process that
// runs many programs (the Automation API) keeps none of them alive.
var (
	retryHooksMu sync.Mutex
	retryHooks   = map[weak.Pointer[pulumi.Context]]bool{}
)

// errorHooksSupported is whether the engine said it supports error hooks. The Go SDK keeps that
// unexported, and a hook it cannot register fails every registration that names it; read it by
// reflection, and assume yes if the field is not there (a later SDK).
func errorHooksSupported(ctx *pulumi.Context) bool {
	st := reflect.ValueOf(ctx).Elem().FieldByName("state")
	if !st.IsValid() || st.Kind() != reflect.Pointer || st.IsNil() {
		return true
	}
	f := st.Elem().FieldByName("supportsErrorHooks")
	if !f.IsValid() || f.Kind() != reflect.Bool {
		return true
	}
	return f.Bool()
}

// registerRetryHook registers the program's error hook, once: AutoGate and AutoRetry both called
// is an error, not two hooks of one name.
func (g *autoGate) registerRetryHook() error {
	retryHooksMu.Lock()
	defer retryHooksMu.Unlock()
	if retryHooks[weak.Make(g.ctx)] {
		return fmt.Errorf("readiness: the error hook is registered already: call AutoGate or AutoRetry once per program")
	}
	hook, err := g.ctx.RegisterErrorHook(retryHookName, g.onError)
	if err != nil {
		return err
	}
	retryHooks[weak.Make(g.ctx)] = true
	g.retryHook = hook
	return nil
}

// onError asks the provider whether the failed step may be tried again; the provider waits until
// the object is admitted again before it says yes. A preview is never retried: it proves nothing.
func (g *autoGate) onError(a *pulumi.ErrorHookArgs) (bool, error) {
	if g.ctx.DryRun() {
		return false, nil
	}
	g.mu.Lock()
	cluster, known := g.clusterOf[string(a.URN)]
	g.mu.Unlock()
	if !known {
		_ = g.ctx.Log.Warn(fmt.Sprintf("readiness: %s %s failed to %s and is not retried: its cluster is not known to the error hook", a.Type, a.Name, a.FailedOperation), nil)
		return false, nil
	}
	facts, err := g.factsOf(cluster)
	if err != nil {
		return false, err
	}
	call := &AutoGateRetryArgs{Type: string(a.Type), Name: a.Name, FailedOperation: a.FailedOperation, Errors: a.Errors,
		Object: a.NewInputs.Mappable(), Cluster: facts}
	if g.opts.Timeout != "" {
		call.Timeout = &g.opts.Timeout
	}
	var invokeOpts []pulumi.InvokeOption
	if g.opts.Provider != nil {
		invokeOpts = append(invokeOpts, pulumi.Provider(g.opts.Provider))
	}
	r, err := AutoGateRetry(g.ctx, call, invokeOpts...)
	if err != nil {
		return false, err
	}
	msg := fmt.Sprintf("readiness: %s of %s %s: %s", a.FailedOperation, a.Type, a.Name, r.Why)
	if r.Retry {
		_ = g.ctx.Log.Info(msg, nil)
	} else {
		_ = g.ctx.Log.Warn(msg, nil)
	}
	return r.Retry, nil
}

// factsOf are the facts of cluster id as the plan got them (or gets them now).
func (g *autoGate) factsOf(id string) (AutoGateCluster, error) {
	g.mu.Lock()
	f, ok := g.clusterFacts[id]
	g.mu.Unlock()
	if ok {
		return f, nil
	}
	if _, err := g.clusterFactsOnce(id); err != nil {
		return AutoGateCluster{}, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if f, ok = g.clusterFacts[id]; !ok {
		return AutoGateCluster{}, fmt.Errorf("readiness: the facts of cluster %q are being read by a decision", id)
	}
	return f, nil
}

// withRetryHook adds the program's error hook to a registration's options.
func (g *autoGate) withRetryHook(opts pulumi.ResourceOptions) pulumi.ResourceOptions {
	var b pulumi.ResourceHookBinding
	if opts.Hooks != nil {
		b = *opts.Hooks
	}
	b.OnError = append(slices.Clone(b.OnError), g.retryHook)
	opts.Hooks = &b
	return opts
}

func newAutoGate(ctx *pulumi.Context, opts AutoGateOptions) *autoGate {
	id := make([]byte, 8)
	_, _ = rand.Read(id)
	return &autoGate{ctx: ctx, opts: opts, session: ctx.Stack() + "-" + hex.EncodeToString(id),
		orderOf: map[string]int{}, componentDeps: map[string][]pulumi.Resource{}, clusterSent: map[string]bool{}, clusterFacts: map[string]AutoGateCluster{},
		gates: map[string]*autoGateEntry{}, providers: map[string]*autoGateProvider{}, known: map[string]pulumi.Resource{},
		clusterOf: map[string]string{}}
}

type autoGate struct {
	ctx         *pulumi.Context
	opts        AutoGateOptions
	session     string
	planTimeout time.Duration // 0: autoGatePlanTimeout
	// retryHook is the program's error hook (nil: NoRetry); retryOnly: AutoRetry, no gates.
	retryHook *pulumi.ErrorHook
	retryOnly bool

	mu sync.Mutex
	// Program order, as the program makes its resources (recordOrder): places not sent yet are
	// sent with the next call.
	order         []*autoGatePlace
	orderOf       map[string]int // by registrationKey
	sentUpTo      int
	componentDeps map[string][]pulumi.Resource // in-process components a registration depends on, by registrationKey
	clusterSent   map[string]bool
	gates         map[string]*autoGateEntry    // by key
	providers     map[string]*autoGateProvider // readiness providers for other clusters, by name
	known         map[string]pulumi.Resource   // the program's resources by URN (a gate depends on the handle)
	clusterFacts  map[string]AutoGateCluster
	clusterOf     map[string]string // a registration's cluster by its URN, for the error hook
}

// autoGateEntry is one gate resource, shared by every registration with its key.
type autoGateEntry struct {
	res pulumi.Resource
	err error
}

// autoGatePlace is a place in program order, with the registration's explicit kubernetes provider
// and, once known, its cluster.
type autoGatePlace struct {
	place     AutoGateEntry
	prov      pulumi.ProviderResource
	resolved  chan struct{} // closed once the cluster is known (place.Cluster set before)
	resolving bool          // g.mu
	sent      bool          // g.mu
}

type autoGateProvider struct {
	once sync.Once
	prov pulumi.ProviderResource
	err  error
}

// registrationKey names a registration in both transforms: the program's and the engine's.
func registrationKey(typ, name, parentName string) string {
	return typ + "::" + name + "::" + parentName
}

// inProcessComponents are the component types the SDK renders in the program's process: their
// children register after them, once rendered.
var inProcessComponents = map[string]bool{
	"kubernetes:helm.sh/v3:Chart": true, "kubernetes:yaml:ConfigFile": true, "kubernetes:yaml:ConfigGroup": true,
}

// recordOrder notes the program's Kubernetes registrations in the order the program makes them
// (the legacy transformation runs inside RegisterResource): the Go SDK sends registrations
// concurrently, each once its inputs resolve, so the engine's order is not the program's. It
// also notes the in-process components a registration depends on, as the program wrote them
// (the SDK sends such a dependency as the children it has so far: none for an unrendered Chart
// v3), and gives each of the program's Kubernetes resources a transform of its own that changes
// nothing: the engine records in the state the dependsOn a stack transform adds only for a
// registration that carries transforms of its own (source_eval.go, RegisterResource), and
// `destroy` needs it.
func (g *autoGate) recordOrder(args *pulumi.ResourceTransformationArgs) *pulumi.ResourceTransformationResult {
	if !strings.HasPrefix(args.Type, "kubernetes:") {
		return nil
	}
	if _, custom := args.Resource.(pulumi.CustomResource); !custom {
		return nil
	}
	ro, err := pulumi.NewResourceOptions(args.Opts...)
	if err == nil {
		parentType, parent := "", ""
		if named, ok := ro.Parent.(interface {
			PulumiResourceName() string
			PulumiResourceType() string
		}); ok && !isNil(ro.Parent) {
			parentType, parent = named.PulumiResourceType(), named.PulumiResourceName()
		}
		key := registrationKey(args.Type, args.Name, parent)
		var comps []pulumi.Resource
		for _, d := range ro.DependsOn {
			if named, ok := d.(interface{ PulumiResourceType() string }); ok && inProcessComponents[named.PulumiResourceType()] {
				comps = append(comps, d)
			}
		}
		g.mu.Lock()
		if _, dup := g.orderOf[key]; !dup && !strings.HasPrefix(parentType, "kubernetes:") { // a component's child settles instead
			g.orderOf[key] = len(g.order)
			p := &autoGatePlace{place: AutoGateEntry{Order: len(g.order), Type: args.Type, Name: args.Name}, resolved: make(chan struct{})}
			if ro.Provider != nil && !isNil(ro.Provider) {
				p.prov = ro.Provider
			} else {
				close(p.resolved)
			}
			g.order = append(g.order, p)
		}
		if len(comps) > 0 {
			g.componentDeps[key] = comps
		}
		g.mu.Unlock()
	}
	return &pulumi.ResourceTransformationResult{Props: args.Props, Opts: append(slices.Clone(args.Opts), pulumi.Transforms([]pulumi.ResourceTransform{keepAsIs}))}
}

func keepAsIs(context.Context, *pulumi.ResourceTransformArgs) *pulumi.ResourceTransformResult {
	return nil
}

func (g *autoGate) transform(c context.Context, args *pulumi.ResourceTransformArgs) (res *pulumi.ResourceTransformResult) {
	if !args.Custom || !strings.HasPrefix(args.Type, "kubernetes:") {
		return nil
	}
	defer func() {
		if r := recover(); r != nil {
			res = g.fail(args, fmt.Errorf("%v", r))
		}
	}()
	var gates []pulumi.Resource
	var err error
	if g.retryOnly {
		if err := g.noteCluster(c, args); err != nil {
			_ = g.ctx.Log.Warn(fmt.Sprintf("readiness: %s %s gets no error hook: %v", args.Type, args.Name, err), nil)
			return nil
		}
	} else if gates, err = g.decide(c, args); err != nil {
		return g.fail(args, err)
	}
	if len(gates) == 0 && g.retryHook == nil {
		return nil
	}
	opts := args.Opts
	if len(gates) > 0 {
		opts.DependsOn = append(slices.Clone(opts.DependsOn), gates...)
	}
	if g.retryHook != nil {
		opts = g.withRetryHook(opts)
	}
	return &pulumi.ResourceTransformResult{Props: args.Props, Opts: opts}
}

// noteCluster records the registration's cluster for the error hook (AutoRetry: no decision).
func (g *autoGate) noteCluster(c context.Context, args *pulumi.ResourceTransformArgs) error {
	parentURN, err := g.urnOf(c, args.Opts.Parent)
	if err != nil {
		return err
	}
	cluster, err := g.urnOf(c, args.Opts.Provider)
	if err != nil {
		return err
	}
	g.mu.Lock()
	g.clusterOf[g.selfURN(parentURN, args.Type, args.Name)] = clusterID(cluster)
	g.mu.Unlock()
	return nil
}

// decide sends the registration's facts and returns the gates the provider answers.
func (g *autoGate) decide(c context.Context, args *pulumi.ResourceTransformArgs) ([]pulumi.Resource, error) {
	object, _ := plainValue(c, args.Props)
	obj, _ := object.(map[string]any)
	parentURN, err := g.urnOf(c, args.Opts.Parent)
	if err != nil {
		return nil, err
	}
	reg := AutoGateRegistration{Id: g.selfURN(parentURN, args.Type, args.Name), Type: args.Type, Name: args.Name, Object: obj}
	if parentURN != "" && resource.URN(parentURN).Type() != resource.RootStackType {
		pt := string(resource.URN(parentURN).Type())
		reg.Parent, reg.ParentType = &parentURN, &pt
	}
	for _, d := range args.Opts.DependsOn {
		u, err := g.urnOf(c, d)
		if err != nil {
			return nil, err
		}
		if u != "" {
			reg.DependsOn = append(reg.DependsOn, u)
		}
	}
	cluster, err := g.urnOf(c, args.Opts.Provider)
	if err != nil {
		return nil, err
	}
	cluster = clusterID(cluster)
	if cluster != "" {
		reg.Cluster = &cluster
	}
	g.mu.Lock()
	g.clusterOf[reg.Id] = cluster
	g.mu.Unlock()
	key := registrationKey(args.Type, args.Name, parentName(parentURN))
	g.mu.Lock()
	if at, ok := g.orderOf[key]; ok {
		reg.Order = &at
	}
	comps := g.componentDeps[key]
	g.mu.Unlock()
	for _, comp := range comps {
		reg.Awaits = append(reg.Awaits, g.childURNs(c, comp)...)
	}
	if g.opts.Exclude != nil && g.opts.Exclude(args.Type, args.Name) {
		excluded := true
		reg.Excluded = &excluded
	}
	call := &AutoGateDecideArgs{Session: g.session, Options: g.options(), Registration: reg, Entries: g.unsentPlaces(c, reg.Order)}
	facts, err := g.clusterFactsOnce(cluster)
	if err != nil {
		g.unsend(call)
		return nil, err
	}
	call.Clusters = facts
	answer, err := g.ask(call)
	if err != nil {
		g.unsend(call)
		return nil, err
	}
	for _, w := range answer.Warnings {
		_ = g.ctx.Log.Warn("autoGate: "+w, nil)
	}
	if len(answer.Gates) == 0 {
		return nil, nil
	}
	prov, err := g.gateProvider(answer.Provider, cluster)
	if err != nil {
		return nil, err
	}
	var out []pulumi.Resource
	for _, spec := range answer.Gates {
		gate, err := g.gate(spec, prov)
		if err != nil {
			return nil, err
		}
		out = append(out, gate)
	}
	return out, nil
}

func (g *autoGate) options() *AutoGateSessionOptions {
	o := &AutoGateSessionOptions{Namespaces: g.opts.Namespaces, Installers: g.opts.Installers}
	set := func(v string) *string {
		if v == "" {
			return nil
		}
		return &v
	}
	o.Timeout, o.StableFor, o.FailureGrace = set(g.opts.Timeout), set(g.opts.StableFor), set(g.opts.FailureGrace)
	if g.opts.Settle > 0 {
		o.Settle = set(g.opts.Settle.String())
	}
	if g.planTimeout > 0 {
		o.PlanTimeout = set(g.planTimeout.String())
	}
	if g.retryHook != nil {
		retried := true // every Kubernetes registration gets the hook: the provider may count on its retry
		o.Retried = &retried
	}
	return o
}

// unsentPlaces are the program-order places no call has carried yet whose cluster is known (an
// explicit provider not registered within a second is another cluster, "?"). A call waits only for
// those written above its registration: the provider needs no other, and a component's child is
// not held while a provider's URN resolves.
func (g *autoGate) unsentPlaces(c context.Context, order *int) []AutoGateEntry {
	g.mu.Lock()
	var open []*autoGatePlace
	for _, p := range g.order[g.sentUpTo:] {
		if !p.sent {
			open = append(open, p)
		}
	}
	g.mu.Unlock()
	for _, p := range open {
		g.resolveOnce(c, p)
		if order != nil && p.place.Order < *order {
			<-p.resolved
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []AutoGateEntry
	for _, p := range open {
		select {
		case <-p.resolved:
			if !p.sent {
				p.sent = true
				out = append(out, p.place)
			}
		default:
		}
	}
	for g.sentUpTo < len(g.order) && g.order[g.sentUpTo].sent {
		g.sentUpTo++
	}
	return out
}

// unsend puts back the places and cluster facts a failed call carried: the next call carries
// them (the provider never heard of them, and registrations below would wait for them in vain).
func (g *autoGate) unsend(call *AutoGateDecideArgs) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, e := range call.Entries {
		g.order[e.Order].sent = false
		g.sentUpTo = min(g.sentUpTo, e.Order)
	}
	for _, c := range call.Clusters {
		delete(g.clusterSent, c.Id)
	}
}

// resolveOnce starts resolving p's cluster, once.
func (g *autoGate) resolveOnce(c context.Context, p *autoGatePlace) {
	g.mu.Lock()
	start := p.prov != nil && !p.resolving
	p.resolving = true
	g.mu.Unlock()
	if !start {
		return
	}
	go func() {
		u := "?"
		done := make(chan string, 1)
		go func() { v, _ := g.urnOf(c, p.prov); done <- v }()
		select {
		case v := <-done:
			u = clusterID(v)
		case <-time.After(time.Second):
		}
		if u != "" {
			p.place.Cluster = &u
		}
		close(p.resolved)
	}()
}

// clusterID is a kubernetes provider's URN as the plan names its cluster: "" for the engine's
// default provider.
func clusterID(urn string) string {
	if urn == "" {
		return ""
	}
	if name := resource.URN(urn).Name(); name == "default" || strings.HasPrefix(name, "default_") {
		return ""
	}
	return urn
}

// clusterFactsOnce are the facts of the cluster, the first time a call names it: the stack's
// kubernetes configuration for the default provider, an explicit provider's inputs as the
// engine holds them (its kubeconfig is sent as it is and never shown).
func (g *autoGate) clusterFactsOnce(id string) ([]AutoGateCluster, error) {
	g.mu.Lock()
	sent := g.clusterSent[id]
	g.clusterSent[id] = true
	g.mu.Unlock()
	if sent {
		return nil, nil
	}
	f := AutoGateCluster{Id: id}
	str := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	yes := true
	switch {
	case id == "" && g.opts.Provider != nil:
		f.Planner = &yes
	case id == "":
		cfg := func(k string) string { v, _ := g.ctx.GetConfig("kubernetes:" + k); return v }
		f.Kubeconfig, f.Context, f.Namespace = str(cfg("kubeconfig")), str(cfg("context")), str(cfg("namespace"))
		f.Cluster, f.RenderYamlToDirectory = str(cfg("cluster")), str(cfg("renderYamlToDirectory"))
	default:
		state, err := g.registeredState(id)
		if err != nil {
			g.mu.Lock()
			delete(g.clusterSent, id)
			g.mu.Unlock()
			return nil, err
		}
		s := func(k string) *string { v, _ := state[k].(string); return str(v) }
		f.Name = str(resource.URN(id).Name())
		f.Kubeconfig, f.Context, f.Namespace, f.Cluster, f.RenderYamlToDirectory = s("kubeconfig"), s("context"), s("namespace"), s("cluster"), s("renderYamlToDirectory")
		if g.ctx.DryRun() && f.Kubeconfig == nil && state["kubeconfig"] != nil {
			f.Unknown = &yes
		}
	}
	g.mu.Lock()
	g.clusterFacts[id] = f
	g.mu.Unlock()
	return []AutoGateCluster{f}, nil
}

// gateProvider is the readiness provider the answer names: autoGate's own for "", else one made
// once per name, configured as the cluster's kubernetes provider.
func (g *autoGate) gateProvider(name, cluster string) (pulumi.ProviderResource, error) {
	if name == "" {
		return g.opts.Provider, nil
	}
	g.mu.Lock()
	p := g.providers[name]
	if p == nil {
		p = &autoGateProvider{}
		g.providers[name] = p
	}
	f := g.clusterFacts[cluster]
	g.mu.Unlock()
	p.once.Do(func() {
		args := &ProviderArgs{}
		if f.Kubeconfig != nil {
			args.Kubeconfig = pulumi.ToSecret(pulumi.String(*f.Kubeconfig)).(pulumi.StringOutput)
		}
		if f.Context != nil {
			args.Context = pulumi.String(*f.Context)
		}
		if f.Namespace != nil {
			args.Namespace = pulumi.String(*f.Namespace)
		}
		p.prov, p.err = NewProvider(g.ctx, name, args)
		if p.err == nil {
			_ = g.ctx.Log.Info("autoGate: objects of "+cluster+" are gated by readiness provider "+name+", configured as their kubernetes provider", nil)
		}
	})
	return p.prov, p.err
}

// ask is one call, bounded: a call that never answers fails the registration, never holds it.
func (g *autoGate) ask(call *AutoGateDecideArgs) (*AutoGateDecideResult, error) {
	timeout := g.planTimeout
	if timeout <= 0 {
		timeout = autoGatePlanTimeout
	}
	var invokeOpts []pulumi.InvokeOption
	if g.opts.Provider != nil {
		invokeOpts = append(invokeOpts, pulumi.Provider(g.opts.Provider))
	}
	type answer struct {
		r   *AutoGateDecideResult
		err error
	}
	// The provider's own waits (the cluster's facts, in-process children, the places above) are
	// bounded by timeout each.
	bound := 3*timeout + min(timeout, 30*time.Second)
	ch := make(chan answer, 1)
	go func() {
		r, err := AutoGateDecide(g.ctx, call, invokeOpts...)
		ch <- answer{r, err}
	}()
	select {
	case a := <-ch:
		return a.r, a.err
	case <-time.After(bound):
		return nil, fmt.Errorf("the plan call for %s %s did not answer within %s", call.Registration.Type, call.Registration.Name, bound)
	}
}

// autoGatePlanTimeout bounds each wait of a decision (as in TypeScript and Python).
const autoGatePlanTimeout = 2 * time.Minute

// fail makes the registration fail with err, naming the object: letting it through ungated would
// be a false ready. A Go transform returns no error, so the registration gets a dependency whose
// URN is that error: the SDK fails to marshal it and the engine fails the registration.
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

// childURNs are the URNs the engine gives the children of in-process component d, recursively,
// once the SDK rendered them (Chart v3's Ready output; ConfigFile and ConfigGroup v1's Resources).
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
		} else if _, custom := r.(pulumi.CustomResource); custom && strings.HasPrefix(named.PulumiResourceType(), "kubernetes:") {
			out = append(out, engineURN(g.ctx.Stack(), g.ctx.Project(), parent, named.PulumiResourceType(), named.PulumiResourceName()))
		}
	}
	return out
}

// gate returns the gate resource of spec's key, registering it the first time (at the top level:
// a gate inside a component whose child waits for it would deadlock).
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
		if r, ok := g.known[id]; ok {
			deps = append(deps, r)
		} else {
			deps = append(deps, g.registered(id)) // a component's child, known by URN only
		}
	}
	opts := []pulumi.ResourceOption{pulumi.DependsOn(deps)}
	if prov != nil {
		opts = append(opts, pulumi.Provider(prov))
	}
	// The SDK's own defaults (version, plugin download URL), as every hand-written gate has.
	opts = internal.PkgResourceDefaultOpts(opts)
	props := pulumi.ToMap(spec.Args)
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

// autoGateResource is a gate registered by token (its outputs are not read here).
type autoGateResource struct {
	pulumi.CustomResourceState
}

// autoGateInstaller is an installer known only by its URN (a component's child) as a dependency.
type autoGateInstaller struct {
	pulumi.CustomResourceState
	urn pulumi.URNOutput
}

func (i *autoGateInstaller) URN() pulumi.URNOutput { return i.urn }

// registered is the resource of URN urn as a dependency that resolves once the engine finished
// registering it in this deployment: the gate then starts after it exists (on an update, after
// its new state: `ResourceReady exists` must not see the old configuration and pass early).
func (g *autoGate) registered(urn string) pulumi.Resource {
	out := pulumi.String(urn).ToStringOutput().ApplyT(func(u string) (pulumi.URN, error) {
		_, err := g.registeredState(u)
		return pulumi.URN(u), err
	}).(pulumi.URNOutput)
	return &autoGateInstaller{urn: out}
}

// autoGateRegisteredWait bounds registeredState (as in TypeScript).
const autoGateRegisteredWait = 30 * time.Minute

// registeredState asks the engine for the resource's outputs (its built-in getResource answers
// once the resource's step finished in this deployment) until it answers; any error other than
// "unknown resource" ends it. No event for "that registration finished" reaches the SDK from
// outside the code that registers it (here, the kubernetes plugin's Construct).
func (g *autoGate) registeredState(urn string) (map[string]any, error) {
	deadline := time.Now().Add(autoGateRegisteredWait)
	for delay := 50 * time.Millisecond; ; delay = min(2*delay, time.Second) {
		var got struct {
			URN   string         `pulumi:"urn"`
			State map[string]any `pulumi:"state"`
		}
		// Raw: a resource's state may hold secrets (a Release's values, a provider's kubeconfig).
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

// outputOf is an installer's output at a dotted path, read once the engine created it (an
// autonamed installer's name exists nowhere else); unknown in a preview.
func (g *autoGate) outputOf(urn, path string) pulumi.Input {
	if g.ctx.DryRun() {
		return pulumi.UnsafeUnknownOutput(nil)
	}
	return pulumi.String(urn).ToStringOutput().ApplyT(func(u string) (string, error) {
		state, err := g.registeredState(u)
		if err != nil {
			return "", err
		}
		var v any = state
		for _, p := range strings.Split(path, ".") {
			m, _ := v.(map[string]any)
			v = m[p]
		}
		if s, ok := v.(string); ok && s != "" {
			return s, nil
		}
		return "", fmt.Errorf("autoGate: %s has no output %s to name its gate with", u, path)
	}).(pulumi.StringOutput)
}

// urnOf is r's URN ("" for nil), and remembers r under it.
func (g *autoGate) urnOf(c context.Context, r pulumi.Resource) (string, error) {
	if r == nil || isNil(r) {
		return "", nil
	}
	res, err := internals.UnsafeAwaitOutput(c, r.URN())
	if err != nil {
		return "", err
	}
	u, _ := res.Value.(pulumi.URN)
	if u != "" {
		g.mu.Lock()
		g.known[string(u)] = r
		g.mu.Unlock()
	}
	return string(u), nil
}

// selfURN is the URN the engine gives the registration.
func (g *autoGate) selfURN(parentURN, typ, name string) string {
	return engineURN(g.ctx.Stack(), g.ctx.Project(), parentURN, typ, name)
}

// engineURN is a URN as the engine makes it: the parent's qualified type prefixes the type,
// except for the stack itself.
func engineURN(stack, project, parentURN, typ, name string) string {
	var parentType tokens.Type
	if parentURN != "" {
		if qt := resource.URN(parentURN).QualifiedType(); qt != resource.RootStackType {
			parentType = qt
		}
	}
	return string(resource.NewURN(tokens.QName(stack), tokens.PackageName(project), parentType, tokens.Type(typ), name))
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

// plainValue turns transform props into plain JSON values; unknown values are left out (ok false).
func plainValue(c context.Context, v any) (any, bool) {
	switch x := v.(type) {
	case nil:
		return nil, true
	case pulumi.Map:
		return plainMap(c, x), true
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
		return plainList(c, x), true
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

func plainMap[M ~map[string]pulumi.Input](c context.Context, x M) map[string]any {
	m := map[string]any{}
	for k, e := range x {
		if pv, ok := plainValue(c, e); ok {
			m[k] = pv
		}
	}
	return m
}

func plainList[L ~[]pulumi.Input](c context.Context, x L) []any {
	out := make([]any, 0, len(x))
	for _, e := range x {
		pv, _ := plainValue(c, e)
		out = append(out, pv)
	}
	return out
}
