package provider

import (
	"context"
	_ "embed"
	"errors"
	"fmt"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/readiness-io/pulumi-readiness/provider/internal/session"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/kube"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/status"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/verdict"
)

// ExternalSecretReady waits until an ExternalSecret has synced for its current generation and
// its target Secret exists: the ExternalSecret + Secret pair no single-object wait checks.
type ExternalSecretReady struct {
	gate[ExternalSecretReadyArgs, ExternalSecretReadyState]
}

type ExternalSecretReadyArgs struct {
	Name      string  `pulumi:"name" provider:"replaceOnChanges"`
	Namespace *string `pulumi:"namespace,optional" provider:"replaceOnChanges"`
	GateArgs
}

type ExternalSecretReadyState struct {
	ExternalSecretReadyArgs
	SecretName            string `pulumi:"secretName"`
	RefreshTime           string `pulumi:"refreshTime"`
	SyncedResourceVersion string `pulumi:"syncedResourceVersion"`
}

//go:embed descriptions/external_secret_ready.md
var externalSecretReadyDoc string

func (g *ExternalSecretReady) Annotate(a infer.Annotator) {
	a.Describe(g, markdown(externalSecretReadyDoc))
}

func (a *ExternalSecretReadyArgs) Annotate(an infer.Annotator) {
	an.Describe(&a.Name, "The ExternalSecret's name.")
	an.Describe(&a.Namespace, "The namespace; the provider's default namespace if unset.")
}

func (s *ExternalSecretReadyState) Annotate(a infer.Annotator) {
	a.Describe(&s.SecretName, "The target's name (spec.target.name, else the ExternalSecret's name).")
	a.Describe(&s.RefreshTime, "status.refreshTime: when ESO last synced it.")
	a.Describe(&s.SyncedResourceVersion, "status.syncedResourceVersion.")
}

var (
	_ = (infer.CustomCheck[ExternalSecretReadyArgs])((*ExternalSecretReady)(nil))
	_ = (infer.CustomRead[ExternalSecretReadyArgs, ExternalSecretReadyState])((*ExternalSecretReady)(nil))
)

func (*ExternalSecretReady) Check(ctx context.Context, req infer.CheckRequest) (infer.CheckResponse[ExternalSecretReadyArgs], error) {
	return checkGate(ctx, req, func(args ExternalSecretReadyArgs, failures []p.CheckFailure) []p.CheckFailure {
		failures = append(failures, nameFailures(req.NewInputs, "name", args.Name, "namespace", args.Namespace)...)
		return failures
	})
}

func (g *ExternalSecretReady) Create(ctx context.Context, req infer.CreateRequest[ExternalSecretReadyArgs]) (infer.CreateResponse[ExternalSecretReadyState], error) {
	return createGate(ctx, req.Name, req.DryRun, req.Inputs.GateArgs, ExternalSecretReadyState{ExternalSecretReadyArgs: req.Inputs}, "externalsecret", externalSecretBuilder(req.Inputs))
}

func (g *ExternalSecretReady) Read(ctx context.Context, req infer.ReadRequest[ExternalSecretReadyArgs, ExternalSecretReadyState]) (infer.ReadResponse[ExternalSecretReadyArgs, ExternalSecretReadyState], error) {
	return readGate(ctx, req, externalSecretBuilder(req.Inputs))
}

func externalSecretBuilder(a ExternalSecretReadyArgs) builder[ExternalSecretReadyState] {
	return func(r *session.Run) (evaluation, func(*ExternalSecretReadyState), error) {
		e := &externalSecretEval{r: r, namespace: r.DefaultNamespace(a.Namespace), name: a.Name}
		return e, e.fill, nil
	}
}

type externalSecretEval struct {
	r               *session.Run
	namespace, name string
	es              *unstructured.Unstructured
	secretName      string
}

func (e *externalSecretEval) what() string {
	return fmt.Sprintf("ExternalSecret %s/%s", e.namespace, e.name)
}

// externalSecretGK is resolved at whichever version the server prefers (v1 on current installs,
// v1beta1 on older ones): the fields read here are the same in both.
var externalSecretGK = schema.GroupKind{Group: "external-secrets.io", Kind: "ExternalSecret"}

func (e *externalSecretEval) check(context.Context) verdict.Result {
	m, err := e.r.Clients.MappingAnyVersion(externalSecretGK)
	if err != nil {
		var nk *kube.NoKindError
		if errors.As(err, &nk) {
			p := e.r.KindPending(externalSecretGK.WithVersion(""), nk)
			if p.Failed == nil {
				p.Message = "External Secrets' CRDs are not installed: " + p.Message
			}
			return *p
		}
	}
	gvk := externalSecretGK.WithVersion("v1")
	if m != nil {
		gvk = m.GroupVersionKind
	}
	objs, pending := e.r.Objects(session.Target{GVK: gvk, Namespace: e.namespace, Name: e.name})
	if pending != nil {
		return *pending
	}
	if len(objs) == 0 {
		return verdict.Result{Message: "ExternalSecret not found (not created yet)"}
	}
	es := objs[0]
	tgt, none := externalSecretTarget(es)
	// Watch the target before the sync is reported, so its arrival is seen without a late list.
	var sec []*unstructured.Unstructured
	var secPending *verdict.Result
	if !none {
		sec, secPending = e.r.Objects(tgt)
		if secPending != nil && secPending.Failed != nil {
			return *secPending // RBAC on the target fails at once, not after the sync
		}
	}
	ok, msg := status.ExternalSecretSynced(es)
	if !ok {
		return verdict.Result{Message: msg, Hint: "kubectl describe externalsecret " + e.name + " -n " + e.namespace +
			" (is the SecretStore ready, does the remote key exist?)"}
	}
	if secPending != nil {
		return *secPending
	}
	if !none && len(sec) == 0 {
		return verdict.Result{Message: fmt.Sprintf("%s, but target %s does not exist yet", msg, tgt)}
	}
	e.es, e.secretName = es, tgt.Name
	return verdict.Result{Ready: true, Message: msg}
}

// externalSecretTarget is the object an ExternalSecret writes: the Secret spec.target.name (else
// the ExternalSecret's own name), or the kind spec.target.manifest names; none is true with
// creationPolicy None, where ESO writes nothing the gate could check.
func externalSecretTarget(es *unstructured.Unstructured) (t session.Target, none bool) {
	name, _, _ := unstructured.NestedString(es.Object, "spec", "target", "name")
	if name == "" {
		name = es.GetName()
	}
	t = session.Target{GVK: session.SecretGVK, Namespace: es.GetNamespace(), Name: name}
	if av, _, _ := unstructured.NestedString(es.Object, "spec", "target", "manifest", "apiVersion"); av != "" {
		kind, _, _ := unstructured.NestedString(es.Object, "spec", "target", "manifest", "kind")
		if gv, err := schema.ParseGroupVersion(av); err == nil && kind != "" {
			t.GVK = gv.WithKind(kind)
		}
	}
	policy, _, _ := unstructured.NestedString(es.Object, "spec", "target", "creationPolicy")
	return t, policy == "None"
}

func (e *externalSecretEval) fill(s *ExternalSecretReadyState) {
	s.SecretName = e.secretName
	s.RefreshTime, _, _ = unstructured.NestedString(e.es.Object, "status", "refreshTime")
	s.SyncedResourceVersion, _, _ = unstructured.NestedString(e.es.Object, "status", "syncedResourceVersion")
}

func (e *externalSecretEval) subject() (string, string) { return e.namespace, e.name }
