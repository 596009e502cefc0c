package provider

import (
	"context"
	_ "embed"
	"fmt"
	"maps"
	"slices"
	"strings"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/readiness-io/pulumi-readiness/provider/internal/session"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/verdict"
)

// SecretReady waits until a Secret exists with every required key non-empty. It watches that
// one Secret by name and never keeps its values: only key names reach outputs or messages.
type SecretReady struct {
	gate[SecretReadyArgs, SecretReadyState]
}

type SecretReadyArgs struct {
	Name         string   `pulumi:"name" provider:"replaceOnChanges"`
	Namespace    *string  `pulumi:"namespace,optional" provider:"replaceOnChanges"`
	RequiredKeys []string `pulumi:"requiredKeys,optional" provider:"replaceOnChanges"`
	Type         *string  `pulumi:"type,optional" provider:"replaceOnChanges"`
	GateArgs
}

type SecretReadyState struct {
	SecretReadyArgs
	Keys            []string `pulumi:"keys"`
	SecretType      string   `pulumi:"secretType"`
	ResourceVersion string   `pulumi:"resourceVersion"`
}

//go:embed descriptions/secret_ready.md
var secretReadyDoc string

func (g *SecretReady) Annotate(a infer.Annotator) {
	a.Describe(g, markdown(secretReadyDoc))
}

func (a *SecretReadyArgs) Annotate(an infer.Annotator) {
	an.Describe(&a.Name, "The Secret's name.")
	an.Describe(&a.Namespace, "The namespace; the provider's default namespace if unset.")
	an.Describe(&a.RequiredKeys, "Keys that must be present and non-empty (default: at least one key of any name).")
	an.Describe(&a.Type, "The Secret type it must have, such as `kubernetes.io/tls`.")
}

func (s *SecretReadyState) Annotate(a infer.Annotator) {
	a.Describe(&s.Keys, "The Secret's key names (never values).")
	a.Describe(&s.SecretType, "The Secret's type.")
	a.Describe(&s.ResourceVersion, "The resourceVersion seen ready.")
}

var (
	_ = (infer.CustomCheck[SecretReadyArgs])((*SecretReady)(nil))
	_ = (infer.CustomRead[SecretReadyArgs, SecretReadyState])((*SecretReady)(nil))
)

func (*SecretReady) Check(ctx context.Context, req infer.CheckRequest) (infer.CheckResponse[SecretReadyArgs], error) {
	return checkGate(ctx, req, func(args SecretReadyArgs, failures []p.CheckFailure) []p.CheckFailure {
		failures = append(failures, nameFailures(req.NewInputs, "name", args.Name, "namespace", args.Namespace)...)
		failures = append(failures, keyFailures(req.NewInputs, "requiredKeys", args.RequiredKeys)...)
		return failures
	})
}

func (g *SecretReady) Create(ctx context.Context, req infer.CreateRequest[SecretReadyArgs]) (infer.CreateResponse[SecretReadyState], error) {
	return createGate(ctx, req.Name, req.DryRun, req.Inputs.GateArgs, SecretReadyState{SecretReadyArgs: req.Inputs}, "secret", secretBuilder(req.Inputs))
}

func (g *SecretReady) Read(ctx context.Context, req infer.ReadRequest[SecretReadyArgs, SecretReadyState]) (infer.ReadResponse[SecretReadyArgs, SecretReadyState], error) {
	return readGate(ctx, req, secretBuilder(req.Inputs))
}

func secretBuilder(a SecretReadyArgs) builder[SecretReadyState] {
	return func(r *session.Run) (evaluation, func(*SecretReadyState), error) {
		e := &secretEval{r: r, namespace: r.DefaultNamespace(a.Namespace), name: a.Name, required: a.RequiredKeys, typ: deref(a.Type)}
		return e, func(s *SecretReadyState) {
			s.Keys, s.SecretType, s.ResourceVersion = secretKeys(e.secret), secretType(e.secret), e.secret.GetResourceVersion()
		}, nil
	}
}

// secretEval checks one Secret's presence, type and keys; CertificateReady reuses it.
type secretEval struct {
	r               *session.Run
	namespace, name string
	required        []string
	typ             string
	secret          *unstructured.Unstructured
}

func (e *secretEval) what() string { return fmt.Sprintf("Secret %s/%s", e.namespace, e.name) }

func (e *secretEval) check(context.Context) verdict.Result {
	objs, pending := e.r.Objects(session.Target{GVK: session.SecretGVK, Namespace: e.namespace, Name: e.name})
	if pending != nil {
		return *pending
	}
	if len(objs) == 0 {
		return verdict.Result{Message: fmt.Sprintf("secret %q not found (not created yet)", e.name),
			Hint: "is whatever writes this Secret (cert-manager, External Secrets, a chart) running and pointed at it?"}
	}
	s := objs[0]
	if e.typ != "" && secretType(s) != e.typ {
		return verdict.Result{Message: fmt.Sprintf("secret %q has type %s, want %s", e.name, secretType(s), e.typ)}
	}
	data, _, _ := unstructured.NestedMap(s.Object, "data")
	var missing []string
	for _, k := range e.required {
		if v, _ := data[k].(string); v == "" {
			missing = append(missing, k)
		}
	}
	if len(e.required) == 0 && len(data) == 0 {
		return verdict.Result{Message: fmt.Sprintf("secret %q has no keys yet", e.name)}
	}
	if len(missing) > 0 {
		return verdict.Result{Message: fmt.Sprintf("secret %q lacks non-empty %s (has: %s)", e.name,
			strings.Join(missing, ", "), strings.Join(secretKeys(s), ", "))}
	}
	e.secret = s
	return verdict.Result{Ready: true, Message: fmt.Sprintf("secret %q has %s", e.name, strings.Join(secretKeys(s), ", "))}
}

func secretKeys(s *unstructured.Unstructured) []string {
	data, _, _ := unstructured.NestedMap(s.Object, "data")
	return slices.Sorted(maps.Keys(data))
}

func secretType(s *unstructured.Unstructured) string {
	t, _, _ := unstructured.NestedString(s.Object, "type")
	if t == "" {
		return "Opaque"
	}
	return t
}
