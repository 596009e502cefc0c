package provider

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/pulumi/pulumi-go-provider/infer"

	"github.com/readiness-io/pulumi-readiness/provider/internal/session"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/autogate"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/kube"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/planner"
)

// AutoGateDecide is autoGate's one call: the SDK's transform sends the facts of one Kubernetes
// registration (and the program-order places and kubernetes providers it has not sent yet), and
// the answer is that registration's gates, once every fact the decision needs is in. The
// decisions of one program run share a session (pkg/planner) in this provider process, which
// lives for the whole update: the SDKs keep no rule, no order and no wait of their own.
type AutoGateDecide struct{}

type AutoGateDecideArgs struct {
	Session      string                  `pulumi:"session"`
	Options      *AutoGateSessionOptions `pulumi:"options,optional"`
	Entries      []AutoGateEntry         `pulumi:"entries,optional"`
	Clusters     []AutoGateCluster       `pulumi:"clusters,optional"`
	Registration AutoGateRegistration    `pulumi:"registration"`
}

type AutoGateSessionOptions struct {
	Timeout      *string  `pulumi:"timeout,optional"`
	StableFor    *string  `pulumi:"stableFor,optional"`
	FailureGrace *string  `pulumi:"failureGrace,optional"`
	Namespaces   []string `pulumi:"namespaces,optional"`
	Installers   []string `pulumi:"installers,optional"`
	Settle       *string  `pulumi:"settle,optional"`
	PlanTimeout  *string  `pulumi:"planTimeout,optional"`
	Retried      *bool    `pulumi:"retried,optional"`
}

type AutoGateEntry struct {
	Order   int     `pulumi:"order"`
	Type    string  `pulumi:"type"`
	Name    string  `pulumi:"name"`
	Cluster *string `pulumi:"cluster,optional"`
}

type AutoGateCluster struct {
	ID             string  `pulumi:"id"`
	Name           *string `pulumi:"name,optional"`
	Kubeconfig     *string `pulumi:"kubeconfig,optional" provider:"secret"`
	Context        *string `pulumi:"context,optional"`
	Namespace      *string `pulumi:"namespace,optional"`
	SelectsCluster *string `pulumi:"cluster,optional"`
	RendersTo      *string `pulumi:"renderYamlToDirectory,optional"`
	Unknown        *bool   `pulumi:"unknown,optional"`
	Planner        *bool   `pulumi:"planner,optional"`
}

type AutoGateRegistration struct {
	ID         string         `pulumi:"id"`
	Type       string         `pulumi:"type"`
	Name       string         `pulumi:"name"`
	Object     map[string]any `pulumi:"object,optional"`
	Parent     *string        `pulumi:"parent,optional"`
	ParentType *string        `pulumi:"parentType,optional"`
	DependsOn  []string       `pulumi:"dependsOn,optional"`
	Cluster    *string        `pulumi:"cluster,optional"`
	Order      *int           `pulumi:"order,optional"`
	Awaits     []string       `pulumi:"awaits,optional"`
	Excluded   *bool          `pulumi:"excluded,optional"`
}

type AutoGateDecideResult struct {
	Gates    []AutoGatePlanGate `pulumi:"gates"`
	Warnings []string           `pulumi:"warnings"`
	Provider string             `pulumi:"provider"`
}

func (f *AutoGateDecide) Annotate(a infer.Annotator) {
	a.Describe(f, "The decision behind the SDKs' `autoGate`, one call per Kubernetes registration: its facts in, its gates out, once "+
		"every fact the decision needs is in (the registrations written above it, a component's children). The calls of one program run "+
		"share a session in the provider process. Called by the SDKs; see docs/autogate.md.")
}

func (a *AutoGateDecideArgs) Annotate(an infer.Annotator) {
	an.Describe(&a.Session, "The program run's session: every call of one run names the same (the SDK makes it once per autoGate).")
	an.Describe(&a.Options, "autoGate's options (the first call of a session sets them).")
	an.Describe(&a.Entries, "Places in program order not sent yet: the SDK sends each once, with whichever call is next.")
	an.Describe(&a.Clusters, "Kubernetes providers not sent yet, each once: the stack's configuration for the default one (`id` \"\").")
	an.Describe(&a.Registration, "The registration to decide.")
}

func (o *AutoGateSessionOptions) Annotate(a infer.Annotator) {
	a.Describe(&o.Timeout, "Passed to every gate (a Go duration).")
	a.Describe(&o.StableFor, "Passed to every gate that takes it.")
	a.Describe(&o.FailureGrace, "Passed to every gate that takes it.")
	a.Describe(&o.Namespaces, "Only objects in these namespaces are gated (all if empty).")
	a.Describe(&o.Installers, "Only these installers (Pulumi names) count (all if empty).")
	a.Describe(&o.Settle, "How long a component's children settle after the last one arrived (default 200ms).")
	a.Describe(&o.PlanTimeout, "Bounds each wait of a decision (default 2m): past it the decision is made with a warning.")
	a.Describe(&o.Retried, "The SDK gave every Kubernetes registration the program's error hook (docs/retry.md): the AdmissionReady gates "+
		"in front of an object's own create are then `retried`.")
}

func (e *AutoGateEntry) Annotate(a infer.Annotator) {
	a.Describe(e, "A Kubernetes registration the program wrote, by its place in program order.")
	a.Describe(&e.Cluster, "Its kubernetes provider's URN; unset for the default one; \"?\" when not known yet.")
}

func (c *AutoGateCluster) Annotate(a infer.Annotator) {
	a.Describe(c, "A kubernetes provider's configuration as pulumi-kubernetes reads it.")
	a.Describe(&c.ID, "The provider's URN; \"\" for the default kubernetes provider (the stack's `kubernetes:` configuration).")
	a.Describe(&c.SelectsCluster, "Its `cluster` setting.")
	a.Describe(&c.Unknown, "Its configuration is not known yet (a preview).")
	a.Describe(&c.Planner, "The readiness provider answering is configured for this cluster (passed to autoGate).")
}

func (r *AutoGateRegistration) Annotate(a infer.Annotator) {
	a.Describe(r, "A Kubernetes registration as the SDK's transform sees it.")
	a.Describe(&r.ID, "Its URN.")
	a.Describe(&r.Object, "Its props as plain JSON, unknown values left out.")
	a.Describe(&r.Parent, "Its parent's URN (unset at the top level).")
	a.Describe(&r.DependsOn, "The URNs it depends on.")
	a.Describe(&r.Cluster, "Its kubernetes provider's URN; unset for the default one.")
	a.Describe(&r.Order, "Its place in program order; unset for a kubernetes component's child.")
	a.Describe(&r.Awaits, "URNs that register first: the children of components the SDK renders in-process that it depends on; for a child of such a component, all its children (itself too), and it does not settle.")
	a.Describe(&r.Excluded, "The program keeps autoGate off it.")
}

func (r *AutoGateDecideResult) Annotate(a infer.Annotator) {
	a.Describe(&r.Gates, "The gates it must depend on (the SDK makes one per key).")
	a.Describe(&r.Warnings, "What could not be gated, or was decided without a fact, and why.")
	a.Describe(&r.Provider, "The readiness provider to make the gates with: \"\" for the one autoGate uses; else a name for one the SDK "+
		"makes, configured as the registration's kubernetes provider.")
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

// withPurpose is a gate's inputs with its `purpose`: the user's resource it was added for (its
// Pulumi type and name: a batch gate names the first it holds) and why, quoted if it times out.
func withPurpose(args map[string]any, typ, name, reason string) map[string]any {
	out := make(map[string]any, len(args)+1)
	for k, v := range args {
		out[k] = v
	}
	out["purpose"] = fmt.Sprintf("autoGate added it for %s %s: %s", typ, name, reason)
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func argsFrom(in []autogate.ArgFrom) []AutoGatePlanArgFrom {
	out := []AutoGatePlanArgFrom{}
	for _, a := range in {
		out = append(out, AutoGatePlanArgFrom{Arg: a.Arg, Installer: a.Installer, Output: a.Output})
	}
	return out
}

var (
	sessionsMu sync.Mutex
	sessions   = map[string]*planner.Session{}
)

func sessionFor(id string, o *AutoGateSessionOptions) (*planner.Session, error) {
	sessionsMu.Lock()
	defer sessionsMu.Unlock()
	if s := sessions[id]; s != nil {
		return s, nil
	}
	opts := planner.Options{}
	if o != nil {
		opts.Rules = autogate.Options{Timeout: deref(o.Timeout), StableFor: deref(o.StableFor), FailureGrace: deref(o.FailureGrace), Namespaces: o.Namespaces,
			Retried: deref(o.Retried)}
		opts.Installers = o.Installers
		for _, d := range []struct {
			name string
			in   *string
			out  *time.Duration
		}{{"settle", o.Settle, &opts.Settle}, {"planTimeout", o.PlanTimeout, &opts.Timeout}} {
			if v := deref(d.in); v != "" {
				dur, err := time.ParseDuration(v)
				if err != nil || dur <= 0 {
					return nil, fmt.Errorf("autoGate option %s: %q is not a positive duration", d.name, v)
				}
				*d.out = dur
			}
		}
	}
	s := planner.New(opts)
	sessions[id] = s
	return s, nil
}

// Invoke records the facts and answers once the registration is decided.
func (f *AutoGateDecide) Invoke(ctx context.Context, req infer.FunctionRequest[AutoGateDecideArgs]) (infer.FunctionResponse[AutoGateDecideResult], error) {
	in := req.Input
	s, err := sessionFor(in.Session, in.Options)
	if err != nil {
		return infer.FunctionResponse[AutoGateDecideResult]{}, err
	}
	var entries []planner.Entry
	for _, e := range in.Entries {
		entries = append(entries, planner.Entry{Order: e.Order, Type: e.Type, Name: e.Name, Cluster: deref(e.Cluster)})
	}
	s.Announce(entries)
	var clusters []planner.Cluster
	for _, c := range in.Clusters {
		clusters = append(clusters, planner.Cluster{ID: c.ID, Name: deref(c.Name), Kubeconfig: deref(c.Kubeconfig), Context: deref(c.Context),
			Namespace: deref(c.Namespace), SelectsCluster: deref(c.SelectsCluster), RendersTo: deref(c.RendersTo), Unknown: deref(c.Unknown), Planner: deref(c.Planner)})
	}
	s.AddClusters(clusters)
	r := in.Registration
	reg := planner.Registration{ID: r.ID, Type: r.Type, Name: r.Name, Object: r.Object, Parent: deref(r.Parent), ParentType: deref(r.ParentType),
		DependsOn: r.DependsOn, Cluster: deref(r.Cluster), Order: -1, Awaits: r.Awaits, Excluded: deref(r.Excluded)}
	if r.Order != nil {
		reg.Order = *r.Order
	}
	if reg.Object == nil {
		reg.Object = map[string]any{}
	}
	out := AutoGateDecideResult{Gates: []AutoGatePlanGate{}, Warnings: []string{}}
	c, err := s.Cluster(reg.Cluster)
	if err != nil {
		return infer.FunctionResponse[AutoGateDecideResult]{}, err
	}
	target := gateCluster(c, infer.GetConfig[Config](ctx))
	if target.skip != "" {
		// Recorded all the same (excluded): registrations written below it do not wait for it in vain.
		reg.Excluded = true
		s.Register(reg, nil)
		out.Warnings = append(out.Warnings, fmt.Sprintf("%s %s is not gated: %s", r.Type, r.Name, target.skip))
		return infer.FunctionResponse[AutoGateDecideResult]{Output: out}, nil
	}
	cluster := newMemoCluster(target.cluster(ctx))
	// Register asks decide from this goroutine only: the memo needs no lock.
	var began, decided time.Time
	decide := func(in autogate.Input) autogate.Plan {
		began = time.Now()
		defer func() { decided = time.Now() }()
		return autogate.Decide(in, cluster, webhookMayIntercept)
	}
	received := time.Now()
	answer := s.Register(reg, decide)
	if session.Tracing() && !began.IsZero() {
		session.Trace("autoGateDecide "+r.Name, "%s: waited %s for the places above, decided in %s (%v), %d gates",
			r.Type, began.Sub(received), decided.Sub(began), cluster.spent, len(answer.Gates))
	}
	for _, g := range answer.Gates {
		out.Gates = append(out.Gates, AutoGatePlanGate{Key: g.Key, Name: g.Name, Type: g.Type, Args: withPurpose(g.Args, r.Type, r.Name, g.Reason),
			After: nonNil(g.After), AfterGates: nonNil(g.AfterGates), Reason: g.Reason, ArgsFrom: argsFrom(g.ArgsFrom)})
	}
	out.Warnings = append(out.Warnings, answer.Warnings...)
	out.Provider = target.provider
	if target.provider == "" {
		// The gates are this provider's own: their first rounds may begin now (head_start.go).
		if clients, err := infer.GetConfig[Config](ctx).Clients(); err == nil {
			for _, g := range answer.Gates {
				beginHeadStart(in.Session, g, clients)
			}
		}
	}
	return infer.FunctionResponse[AutoGateDecideResult]{Output: out}, nil
}

// gateTarget is where a cluster's objects are gated: the readiness provider the SDK makes the
// gates with ("" for autoGate's own) and the settings the plan reads that cluster with (nil: the
// answering provider's own clients); or why its objects cannot be gated.
type gateTarget struct {
	provider string
	settings *kube.Settings
	skip     string
}

// gateCluster decides gateTarget from a kubernetes provider's configuration, as pulumi-kubernetes
// reads it (its provider.go Configure: kubeconfig, context, and a namespace that overrides the
// context's; `cluster` and renderYamlToDirectory), never guessing: a cluster a readiness provider
// cannot select, or one it cannot know yet, is not gated (and the warning says so).
func gateCluster(c planner.Cluster, own Config) gateTarget {
	what := "the stack's kubernetes provider"
	if c.ID != "" {
		what = "its kubernetes provider " + c.Name
	}
	switch {
	case c.Planner:
		return gateTarget{}
	case c.RendersTo != "":
		return gateTarget{skip: what + " renders YAML to a directory (renderYamlToDirectory) and talks to no cluster"}
	case c.SelectsCluster != "":
		return gateTarget{skip: what + " selects kubeconfig cluster " + c.SelectsCluster +
			" (its `cluster` setting), which a readiness provider cannot; gate its objects by hand with a readiness provider for that cluster"}
	case c.Unknown:
		return gateTarget{skip: what + "'s kubeconfig is not known in a preview (decided at up)"}
	}
	settings := &kube.Settings{Kubeconfig: c.Kubeconfig, Context: c.Context, Namespace: c.Namespace}
	if c.ID == "" {
		if c.Kubeconfig == deref(own.Kubeconfig) && c.Context == deref(own.Context) && c.Namespace == deref(own.Namespace) {
			return gateTarget{} // the readiness configuration names the same cluster and namespace
		}
		return gateTarget{provider: "autogate-default", settings: settings}
	}
	return gateTarget{provider: "autogate-" + c.Name, settings: settings}
}

// cluster is what the plan asks the target's cluster.
func (t gateTarget) cluster(ctx context.Context) autogate.Cluster {
	if t.settings == nil {
		return planCluster(ctx)
	}
	clients, err := clientsFor(*t.settings)
	if err != nil {
		ns := t.settings.Namespace
		if ns == "" {
			ns = "default"
		}
		return unknownCluster{namespace: ns}
	}
	return discoveryCluster{ctx: ctx, clients: clients}
}

var (
	targetClientsMu sync.Mutex
	targetClients   = map[kube.Settings]*kube.Clients{}
)

// clientsFor are the process's clients for a kubernetes provider's settings (one set per cluster
// and namespace: discovery and the webhook listing are cached with them).
func clientsFor(s kube.Settings) (*kube.Clients, error) {
	targetClientsMu.Lock()
	defer targetClientsMu.Unlock()
	if c := targetClients[s]; c != nil {
		return c, nil
	}
	cfg, ns, err := kube.LoadConfig(s)
	if err != nil {
		return nil, err
	}
	c, err := kube.NewClients(cfg, ns, s.ReachTimeout)
	if err != nil {
		return nil, err
	}
	targetClients[s] = c
	return c, nil
}
