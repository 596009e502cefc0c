package provider

import (
	"context"
	"fmt"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/kube"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/status"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/wait"
)

// ExternalSecretReady waits until an ExternalSecret has synced for its current generation and
// its target Secret exists: the ExternalSecret + Secret pair no single-object wait checks.
type ExternalSecretReady struct{}

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

func (g *ExternalSecretReady) Annotate(a infer.Annotator) {
	a.Describe(g, "Waits until an ExternalSecret (external-secrets.io v1, or v1beta1 on older installs) has `Ready=True` "+
		"for its current generation and its target Secret exists. Progress shows ESO's reason (e.g. `SecretSyncedError`). "+
		"Secret values are never read into outputs, logs or errors.")
}

func (a *ExternalSecretReadyArgs) Annotate(an infer.Annotator) {
	an.Describe(&a.Name, "The ExternalSecret's name.")
	an.Describe(&a.Namespace, "The namespace; the provider's default namespace if unset.")
}

func (s *ExternalSecretReadyState) Annotate(a infer.Annotator) {
	a.Describe(&s.SecretName, "The target Secret's name (spec.target.name, else the ExternalSecret's name).")
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
	return createGate(ctx, req.DryRun, req.Inputs.GateArgs, ExternalSecretReadyState{ExternalSecretReadyArgs: req.Inputs}, "externalsecret", externalSecretBuilder(req.Inputs))
}

func (g *ExternalSecretReady) Read(ctx context.Context, req infer.ReadRequest[ExternalSecretReadyArgs, ExternalSecretReadyState]) (infer.ReadResponse[ExternalSecretReadyArgs, ExternalSecretReadyState], error) {
	return readGate(ctx, req, externalSecretBuilder(req.Inputs))
}

func externalSecretBuilder(a ExternalSecretReadyArgs) builder[ExternalSecretReadyState] {
	return func(r *run) (evaluation, func(*ExternalSecretReadyState), error) {
		e := &externalSecretEval{r: r, namespace: r.defaultNamespace(a.Namespace), name: a.Name}
		return e, e.fill, nil
	}
}

type externalSecretEval struct {
	r               *run
	namespace, name string
	es              *unstructured.Unstructured
	secretName      string
}

func (e *externalSecretEval) what() string {
	return fmt.Sprintf("ExternalSecret %s/%s", e.namespace, e.name)
}

// esVersions are tried in order: v1 on current installs, v1beta1 on older ones.
var esVersions = []string{"v1", "v1beta1"}

func (e *externalSecretEval) check(context.Context) wait.Result {
	var objs []*unstructured.Unstructured
	var pending *wait.Result
	for _, v := range esVersions {
		gvk := schema.GroupVersionKind{Group: "external-secrets.io", Version: v, Kind: "ExternalSecret"}
		if _, err := e.r.clients.Mapping(gvk); err != nil {
			continue
		}
		objs, pending = e.r.objects(target{gvk: gvk, namespace: e.namespace, name: e.name})
		break
	}
	if objs == nil && pending == nil {
		if _, err := e.r.clients.Mapping(schema.GroupVersionKind{Group: "external-secrets.io", Version: "v1", Kind: "ExternalSecret"}); err != nil {
			p := e.r.kindPending(schema.GroupVersionKind{Group: "external-secrets.io", Version: "v1", Kind: "ExternalSecret"}, &kube.NoKindError{
				GVK: schema.GroupVersionKind{Group: "external-secrets.io", Version: "v1", Kind: "ExternalSecret"}})
			p.Message = "External Secrets' CRDs are not installed: " + p.Message
			return *p
		}
	}
	if pending != nil {
		return *pending
	}
	if len(objs) == 0 {
		return wait.Result{Message: "ExternalSecret not found (not created yet)"}
	}
	es := objs[0]
	secretName, _, _ := unstructured.NestedString(es.Object, "spec", "target", "name")
	if secretName == "" {
		secretName = es.GetName()
	}
	// Watch the target Secret before Ready=True, so its arrival is seen without a late list.
	sec, secPending := e.r.objects(target{gvk: secretGVK, namespace: e.namespace, name: secretName})
	ok, msg := status.ConditionHolds(es, "Ready", "True")
	if !ok {
		return wait.Result{Message: msg, Hint: "kubectl describe externalsecret " + e.name + " -n " + e.namespace +
			" (is the SecretStore ready, does the remote key exist?)"}
	}
	if secPending != nil {
		return *secPending
	}
	if len(sec) == 0 {
		return wait.Result{Message: fmt.Sprintf("Ready=True, but target Secret %s does not exist yet", secretName)}
	}
	e.es, e.secretName = es, secretName
	return wait.Result{Ready: true}
}

func (e *externalSecretEval) fill(s *ExternalSecretReadyState) {
	s.SecretName = e.secretName
	s.RefreshTime, _, _ = unstructured.NestedString(e.es.Object, "status", "refreshTime")
	s.SyncedResourceVersion, _, _ = unstructured.NestedString(e.es.Object, "status", "syncedResourceVersion")
}

// Update applies a new timeout without waiting again (see updateGate); other changes replace.
func (*ExternalSecretReady) Update(_ context.Context, req infer.UpdateRequest[ExternalSecretReadyArgs, ExternalSecretReadyState]) (infer.UpdateResponse[ExternalSecretReadyState], error) {
	return updateGate(req, func(s *ExternalSecretReadyState, in ExternalSecretReadyArgs) { s.ExternalSecretReadyArgs = in })
}

func (e *externalSecretEval) subject() (string, string) { return e.namespace, e.name }
