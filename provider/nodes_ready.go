package provider

import (
	"context"
	_ "embed"
	"fmt"
	"strings"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/readiness-io/pulumi-readiness/provider/internal/session"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/status"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/verdict"
)

// NodesReady waits until enough nodes are Ready: the first gate of a cluster rebuild.
type NodesReady struct {
	gate[NodesReadyArgs, NodesReadyState]
}

type NodesReadyArgs struct {
	MinCount *int     `pulumi:"minCount,optional" provider:"replaceOnChanges"`
	Selector *string  `pulumi:"selector,optional" provider:"replaceOnChanges"`
	Tolerate []string `pulumi:"tolerate,optional" provider:"replaceOnChanges"`
	GateArgs
}

type NodesReadyState struct {
	NodesReadyArgs
	ReadyNodes int      `pulumi:"readyNodes"`
	Names      []string `pulumi:"names"`
}

//go:embed descriptions/nodes_ready.md
var nodesReadyDoc string

func (g *NodesReady) Annotate(a infer.Annotator) {
	a.Describe(g, markdown(nodesReadyDoc))
}

func (a *NodesReadyArgs) Annotate(an infer.Annotator) {
	an.Describe(&a.MinCount, "How many Ready nodes are needed (default 1).")
	an.Describe(&a.Selector, "A label selector nodes must match, such as `node-role.kubernetes.io/worker`.")
	an.Describe(&a.Tolerate, "Taint keys your pods tolerate, so that a node carrying one still counts, such as "+
		"`node-role.kubernetes.io/control-plane` on a single-node cluster.")
}

func (s *NodesReadyState) Annotate(a infer.Annotator) {
	a.Describe(&s.ReadyNodes, "How many matching nodes were Ready.")
	a.Describe(&s.Names, "The Ready nodes' names.")
}

var (
	_ = (infer.CustomCheck[NodesReadyArgs])((*NodesReady)(nil))
	_ = (infer.CustomRead[NodesReadyArgs, NodesReadyState])((*NodesReady)(nil))
)

func (*NodesReady) Check(ctx context.Context, req infer.CheckRequest) (infer.CheckResponse[NodesReadyArgs], error) {
	return checkGate(ctx, req, func(args NodesReadyArgs, failures []p.CheckFailure) []p.CheckFailure {
		if args.MinCount != nil && *args.MinCount < 1 {
			failures = append(failures, p.CheckFailure{Property: "minCount", Reason: "must be at least 1"})
		}
		if args.Selector != nil && isKnown(req.NewInputs, "selector") {
			if _, err := labels.Parse(*args.Selector); err != nil {
				failures = append(failures, p.CheckFailure{Property: "selector", Reason: fmt.Sprintf("invalid label selector %q: %v", *args.Selector, err)})
			}
		}
		return failures
	})
}

func (g *NodesReady) Create(ctx context.Context, req infer.CreateRequest[NodesReadyArgs]) (infer.CreateResponse[NodesReadyState], error) {
	return createGate(ctx, req.Name, req.DryRun, req.Inputs.GateArgs, NodesReadyState{NodesReadyArgs: req.Inputs}, "nodes", nodesBuilder(req.Inputs))
}

func (g *NodesReady) Read(ctx context.Context, req infer.ReadRequest[NodesReadyArgs, NodesReadyState]) (infer.ReadResponse[NodesReadyArgs, NodesReadyState], error) {
	return readGate(ctx, req, nodesBuilder(req.Inputs))
}

func nodesBuilder(a NodesReadyArgs) builder[NodesReadyState] {
	return func(r *session.Run) (evaluation, func(*NodesReadyState), error) {
		sel := labels.Everything()
		if a.Selector != nil {
			var err error
			if sel, err = labels.Parse(*a.Selector); err != nil {
				return nil, nil, fmt.Errorf("selector: %v", err)
			}
		}
		min := 1
		if a.MinCount != nil {
			min = *a.MinCount
		}
		e := &nodesEval{r: r, sel: sel, min: min, tolerate: a.Tolerate}
		return e, func(s *NodesReadyState) { s.ReadyNodes, s.Names = len(e.ready), e.ready }, nil
	}
}

type nodesEval struct {
	r        *session.Run
	sel      labels.Selector
	min      int
	tolerate []string
	ready    []string
}

func (e *nodesEval) what() string {
	if e.sel.Empty() {
		return fmt.Sprintf("%d Ready node(s)", e.min)
	}
	return fmt.Sprintf("%d Ready node(s) matching %q", e.min, e.sel)
}

func (e *nodesEval) check(context.Context) verdict.Result {
	nodes, pending := e.r.Objects(session.Target{GVK: schema.GroupVersionKind{Version: "v1", Kind: "Node"}, Selector: e.sel})
	if pending != nil {
		return *pending
	}
	var ready, notReady []string
	for _, n := range nodes {
		if ok, why := status.NodeSchedulable(n, e.tolerate); ok {
			ready = append(ready, n.GetName())
		} else {
			notReady = append(notReady, n.GetName()+": "+why)
		}
	}
	e.ready = ready
	if e.ready == nil {
		e.ready = []string{}
	}
	msg := fmt.Sprintf("%d of %d node(s) Ready and schedulable (%d registered)", len(ready), e.min, len(nodes))
	if len(notReady) > 0 {
		msg += "; not ready: " + strings.Join(notReady, ", ")
	}
	return verdict.Result{Ready: len(ready) >= e.min, Message: msg, Hint: "kubectl get nodes; are the kubelets joining?"}
}
