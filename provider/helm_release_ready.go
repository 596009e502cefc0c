package provider

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/helmrelease"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/wait"
)

// HelmReleaseReady is `helm --wait` that also waits for webhooks: it reads a release's stored
// record and waits for every object of its manifest.
type HelmReleaseReady struct{}

type HelmReleaseReadyArgs struct {
	Name      string         `pulumi:"name" provider:"replaceOnChanges"`
	Namespace *string        `pulumi:"namespace,optional" provider:"replaceOnChanges"`
	Probe     map[string]any `pulumi:"probe,optional" provider:"replaceOnChanges"`
	GateArgs
}

type HelmReleaseReadyState struct {
	HelmReleaseReadyArgs
	Revision   int      `pulumi:"revision"`
	Chart      string   `pulumi:"chart"`
	AppVersion string   `pulumi:"appVersion"`
	Objects    int      `pulumi:"objects"`
	Webhooks   []string `pulumi:"webhooks"`
}

func (g *HelmReleaseReady) Annotate(a infer.Annotator) {
	a.Describe(g, "Waits until every object of a Helm release is ready: the newest deployed revision's stored record "+
		"(`sh.helm.release.v1.<name>.v<N>`) is read, and its CRDs must be Established, its Deployments/StatefulSets/"+
		"DaemonSets rolled out, its webhook configurations serving (probed with a dry-run create derived from their rules, "+
		"or `probe`), and everything else kstatus Current. Progress lists what is still pending. Release values and "+
		"manifests are never kept or shown.")
}

func (a *HelmReleaseReadyArgs) Annotate(an infer.Annotator) {
	an.Describe(&a.Name, "The release name.")
	an.Describe(&a.Namespace, "The release's namespace; the provider's default namespace if unset.")
	an.Describe(&a.Probe, "An object (manifest map) the release's webhooks intercept, used instead of a probe derived from their rules.")
}

func (s *HelmReleaseReadyState) Annotate(a infer.Annotator) {
	a.Describe(&s.Revision, "The release revision that was waited for.")
	a.Describe(&s.Chart, "The chart as `name-version`.")
	a.Describe(&s.AppVersion, "The chart's appVersion.")
	a.Describe(&s.Objects, "How many objects the release's manifest holds.")
	a.Describe(&s.Webhooks, "The release's webhook configurations.")
}

var (
	_ = (infer.CustomCheck[HelmReleaseReadyArgs])((*HelmReleaseReady)(nil))
	_ = (infer.CustomRead[HelmReleaseReadyArgs, HelmReleaseReadyState])((*HelmReleaseReady)(nil))
)

func (*HelmReleaseReady) Check(ctx context.Context, req infer.CheckRequest) (infer.CheckResponse[HelmReleaseReadyArgs], error) {
	return checkGate(ctx, req, func(args HelmReleaseReadyArgs, failures []p.CheckFailure) []p.CheckFailure {
		failures = append(failures, nameFailures(req.NewInputs, "name", args.Name, "namespace", args.Namespace)...)
		if len(args.Name) > 53 {
			failures = append(failures, p.CheckFailure{Property: "name", Reason: "Helm release names are at most 53 characters"})
		}
		return failures
	})
}

func (g *HelmReleaseReady) Create(ctx context.Context, req infer.CreateRequest[HelmReleaseReadyArgs]) (infer.CreateResponse[HelmReleaseReadyState], error) {
	return createGate(ctx, req.DryRun, req.Inputs.GateArgs, HelmReleaseReadyState{HelmReleaseReadyArgs: req.Inputs}, "helmrelease", helmBuilder(req.Inputs))
}

func (g *HelmReleaseReady) Read(ctx context.Context, req infer.ReadRequest[HelmReleaseReadyArgs, HelmReleaseReadyState]) (infer.ReadResponse[HelmReleaseReadyArgs, HelmReleaseReadyState], error) {
	return readGate(ctx, req, helmBuilder(req.Inputs))
}

func (*HelmReleaseReady) Update(_ context.Context, req infer.UpdateRequest[HelmReleaseReadyArgs, HelmReleaseReadyState]) (infer.UpdateResponse[HelmReleaseReadyState], error) {
	return updateGate(req, func(s *HelmReleaseReadyState, in HelmReleaseReadyArgs) { s.HelmReleaseReadyArgs = in })
}

func helmBuilder(a HelmReleaseReadyArgs) builder[HelmReleaseReadyState] {
	return func(r *run) (evaluation, func(*HelmReleaseReadyState), error) {
		e := &helmEval{r: r, name: a.Name, namespace: r.defaultNamespace(a.Namespace), probe: a.Probe}
		return e, e.fill, nil
	}
}

type helmEval struct {
	r               *run
	name, namespace string
	probe           map[string]any
	rel             *helmrelease.Release
	checks          []objectCheck
}

type objectCheck struct {
	ref  helmrelease.ObjectRef
	eval evaluation
}

func (e *helmEval) what() string { return fmt.Sprintf("Helm release %s/%s", e.namespace, e.name) }

// load finds the newest deployed revision. Release records are read directly (never through
// the shared Secret cache, which drops values) and decoded only to object references.
func (e *helmEval) load(ctx context.Context) *wait.Result {
	list, err := e.r.clients.Typed.CoreV1().Secrets(e.namespace).List(ctx, metav1.ListOptions{
		LabelSelector: "owner=helm,name=" + e.name})
	if err != nil {
		return &wait.Result{Message: "listing the release's records: " + err.Error(), Poll: true}
	}
	var best *helmrelease.Release
	for _, s := range list.Items {
		if s.Labels["status"] != "deployed" {
			continue
		}
		rel, err := helmrelease.Decode(s.Data["release"])
		if err != nil {
			return &wait.Result{Failed: fmt.Errorf("%s: record %s: %v", e.what(), s.Name, err)}
		}
		if best == nil || rel.Revision > best.Revision {
			best = rel
		}
	}
	if best == nil {
		return &wait.Result{Message: fmt.Sprintf("no deployed revision of release %q yet (%d records)", e.name, len(list.Items)), Poll: true,
			Hint: "is the release installed in this namespace (helm list -n " + e.namespace + ")?"}
	}
	e.rel = best
	for _, ref := range best.Objects {
		e.checks = append(e.checks, objectCheck{ref: ref, eval: e.checkFor(ref)})
	}
	return nil
}

func (e *helmEval) checkFor(ref helmrelease.ObjectRef) evaluation {
	ns := ref.Namespace
	if ns == "" {
		ns = e.namespace
	}
	gv, _ := schema.ParseGroupVersion(ref.APIVersion)
	switch {
	case ref.Kind == "CustomResourceDefinition" && gv.Group == "apiextensions.k8s.io":
		return newCrdEval(e.r, CrdReadyArgs{Names: []string{ref.Name}})
	case gv.Group == "apps" && (ref.Kind == "Deployment" || ref.Kind == "StatefulSet" || ref.Kind == "DaemonSet"):
		k := rolloutKinds[ref.Kind]
		return &rolloutEval{r: e.r, eval: k.eval, t: target{gvk: gv.WithKind(ref.Kind), namespace: ns, name: ref.Name}}
	case gv.Group == "admissionregistration.k8s.io" && (ref.Kind == "ValidatingWebhookConfiguration" || ref.Kind == "MutatingWebhookConfiguration"):
		a := WebhookReadyArgs{Probe: e.probe}
		if ref.Kind == "ValidatingWebhookConfiguration" {
			a.ValidatingWebhookConfiguration = &ref.Name
		} else {
			a.MutatingWebhookConfiguration = &ref.Name
		}
		w := &webhookEval{r: e.r, args: a, minEndpoints: 1, deriveProbeIn: e.namespace}
		if e.probe != nil {
			w.probe = &prober{r: e.r, obj: unstructuredOf(e.probe)}
		}
		return w
	}
	name := ref.Name
	oe, err := newObjectsEval(e.r, ResourceReadyArgs{APIVersion: ref.APIVersion, Kind: ref.Kind, Namespace: &ns, Name: &name})
	if err != nil {
		return failedEval{name: ref.String(), err: err}
	}
	return oe
}

func (e *helmEval) check(ctx context.Context) wait.Result {
	if e.rel == nil {
		if res := e.load(ctx); res != nil {
			return *res
		}
	}
	var pending []string
	poll := false
	for _, c := range e.checks {
		res := c.eval.check(ctx)
		if res.Failed != nil {
			return wait.Result{Failed: fmt.Errorf("%s: %s: %w", e.what(), c.ref, res.Failed)}
		}
		if !res.Ready {
			pending = append(pending, c.ref.String()+": "+res.Message)
			poll = poll || res.Poll || res.Unsynced
		}
	}
	if len(pending) > 0 {
		sort.Strings(pending)
		return wait.Result{Message: fmt.Sprintf("revision %d: %d of %d objects pending: %s", e.rel.Revision, len(pending), len(e.checks),
			strings.Join(pending, "; ")), Poll: poll}
	}
	return wait.Result{Ready: true}
}

// maxBackoff: a release with webhooks is probed like WebhookReady.
func (e *helmEval) maxBackoff() time.Duration { return 250 * time.Millisecond }

func (e *helmEval) fill(s *HelmReleaseReadyState) {
	s.Revision, s.Chart, s.AppVersion, s.Objects = e.rel.Revision, e.rel.Chart+"-"+e.rel.ChartVersion, e.rel.App, len(e.rel.Objects)
	s.Webhooks = []string{}
	for _, w := range e.rel.Webhooks {
		s.Webhooks = append(s.Webhooks, w.GetName())
	}
}

// failedEval reports an object the gate cannot judge (a malformed manifest entry).
type failedEval struct {
	name string
	err  error
}

func (f failedEval) what() string                      { return f.name }
func (f failedEval) check(context.Context) wait.Result { return wait.Result{Failed: f.err} }
