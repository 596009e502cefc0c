package provider

import (
	"context"
	_ "embed"
	"fmt"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/readiness-io/pulumi-readiness/provider/internal/session"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/status"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/verdict"
)

// RolloutReady waits like `kubectl rollout status` for a Deployment, StatefulSet or DaemonSet,
// or for a Job to complete.
type RolloutReady struct {
	gate[RolloutReadyArgs, RolloutReadyState]
}

type RolloutReadyArgs struct {
	Kind      string  `pulumi:"kind" provider:"replaceOnChanges"`
	Name      string  `pulumi:"name" provider:"replaceOnChanges"`
	Namespace *string `pulumi:"namespace,optional" provider:"replaceOnChanges"`
	GateArgs
}

type RolloutReadyState struct {
	RolloutReadyArgs
	Replicas          int    `pulumi:"replicas"`
	UpdatedReplicas   int    `pulumi:"updatedReplicas"`
	ReadyReplicas     int    `pulumi:"readyReplicas"`
	AvailableReplicas int    `pulumi:"availableReplicas"`
	Revision          string `pulumi:"revision"`
}

//go:embed descriptions/rollout_ready.md
var rolloutReadyDoc string

func (g *RolloutReady) Annotate(a infer.Annotator) {
	a.Describe(g, markdown(rolloutReadyDoc))
}

func (a *RolloutReadyArgs) Annotate(an infer.Annotator) {
	an.Describe(&a.Kind, "`Deployment`, `StatefulSet`, `DaemonSet` or `Job`.")
	an.Describe(&a.Name, "The workload's name.")
	an.Describe(&a.Namespace, "The namespace; the provider's default namespace if unset.")
}

func (s *RolloutReadyState) Annotate(a infer.Annotator) {
	a.Describe(&s.Replicas, "status.replicas (DaemonSet: desired scheduled pods; Job: active pods).")
	a.Describe(&s.UpdatedReplicas, "Replicas at the current revision.")
	a.Describe(&s.ReadyReplicas, "Ready replicas (Job: succeeded pods).")
	a.Describe(&s.AvailableReplicas, "Available replicas.")
	a.Describe(&s.Revision, "The rolled-out revision (Deployment revision annotation, StatefulSet updateRevision).")
}

var (
	_ = (infer.CustomCheck[RolloutReadyArgs])((*RolloutReady)(nil))
	_ = (infer.CustomRead[RolloutReadyArgs, RolloutReadyState])((*RolloutReady)(nil))
)

func (*RolloutReady) Check(ctx context.Context, req infer.CheckRequest) (infer.CheckResponse[RolloutReadyArgs], error) {
	return checkGate(ctx, req, func(args RolloutReadyArgs, failures []p.CheckFailure) []p.CheckFailure {
		if _, ok := rolloutKinds[args.Kind]; !ok && isKnown(req.NewInputs, "kind") {
			failures = append(failures, p.CheckFailure{Property: "kind",
				Reason: fmt.Sprintf("%q is not Deployment, StatefulSet, DaemonSet or Job (use ResourceReady for other kinds)", args.Kind)})
		}
		failures = append(failures, nameFailures(req.NewInputs, "name", args.Name, "namespace", args.Namespace)...)
		return failures
	})
}

func (g *RolloutReady) Create(ctx context.Context, req infer.CreateRequest[RolloutReadyArgs]) (infer.CreateResponse[RolloutReadyState], error) {
	return createGate(ctx, req.Name, req.DryRun, req.Inputs.GateArgs, RolloutReadyState{RolloutReadyArgs: req.Inputs}, "rollout", rolloutBuilder(req.Inputs))
}

func (g *RolloutReady) Read(ctx context.Context, req infer.ReadRequest[RolloutReadyArgs, RolloutReadyState]) (infer.ReadResponse[RolloutReadyArgs, RolloutReadyState], error) {
	return readGate(ctx, req, rolloutBuilder(req.Inputs))
}

func rolloutBuilder(a RolloutReadyArgs) builder[RolloutReadyState] {
	return func(r *session.Run) (evaluation, func(*RolloutReadyState), error) {
		k, ok := rolloutKinds[a.Kind]
		if !ok {
			return nil, nil, fmt.Errorf("kind: %q is not Deployment, StatefulSet, DaemonSet or Job", a.Kind)
		}
		e := &rolloutEval{r: r, eval: k.eval,
			t: session.Target{GVK: k.gv.WithKind(a.Kind), Namespace: r.DefaultNamespace(a.Namespace), Name: a.Name}}
		return e, e.fill, nil
	}
}

type rolloutEval struct {
	r    *session.Run
	t    session.Target
	eval func(*unstructured.Unstructured) status.Rollout
	last status.Rollout
}

func (e *rolloutEval) what() string { return "rollout of " + e.t.String() }

func (e *rolloutEval) check(context.Context) verdict.Result {
	objs, pending := e.r.Objects(e.t)
	if pending != nil {
		return *pending
	}
	if len(objs) == 0 {
		return verdict.Result{Message: "not found (not created yet)"}
	}
	ro := e.eval(objs[0])
	e.last = ro
	if ro.Failed {
		return verdict.Result{Failed: fmt.Errorf("%s: %s", e.t, ro.Message)}
	}
	return verdict.Result{Ready: ro.Ready, Message: ro.Message,
		Hint: "kubectl describe " + e.t.GVK.Kind + " " + e.t.Name + " -n " + e.t.Namespace + " (events: image pulls, scheduling, probes)"}
}

func (e *rolloutEval) fill(s *RolloutReadyState) {
	s.Replicas, s.UpdatedReplicas = int(e.last.Replicas), int(e.last.UpdatedReplicas)
	s.ReadyReplicas, s.AvailableReplicas, s.Revision = int(e.last.ReadyReplicas), int(e.last.AvailableReplicas), e.last.Revision
}

func (e *rolloutEval) subject() (string, string) { return e.t.Namespace, e.t.Name }

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
