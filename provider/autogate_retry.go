package provider

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pulumi/pulumi-go-provider/infer"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/readiness-io/pulumi-readiness/provider/internal/session"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/admission"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/kube"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/planner"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/retry"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/wait"
)

// AutoGateRetry is the decision behind the SDKs' error hook (issue 50): a Kubernetes object's
// create or update that failed because the API server could not call a webhook, or could not be
// reached, is tried again once the object's own admission is proven again (AdmissionReady's proof:
// every webhook that intercepts it answers, failurePolicy Ignore ones called directly); never a
// verdict (a denial, an invalid object, a quota or RBAC refusal).
type AutoGateRetry struct{}

type AutoGateRetryArgs struct {
	Type            string          `pulumi:"type"`
	Name            string          `pulumi:"name"`
	FailedOperation string          `pulumi:"failedOperation"`
	Errors          []string        `pulumi:"errors"`
	Object          map[string]any  `pulumi:"object,optional" provider:"secret"`
	Cluster         AutoGateCluster `pulumi:"cluster"`
	Timeout         *string         `pulumi:"timeout,optional"`
}

type AutoGateRetryResult struct {
	Retry bool   `pulumi:"retry"`
	Why   string `pulumi:"why"`
}

func (f *AutoGateRetry) Annotate(a infer.Annotator) {
	a.Describe(f, "The decision behind the SDKs' error hook (`autoGate`, `autoRetry`), one call per failed step of a Kubernetes object: "+
		"retry only a create or update the API server could not admit because it could not call a webhook (connection refused, no "+
		"endpoints, timeout, TLS) or could not be reached, and only once the object's own admission is proven again; never a denial, "+
		"an invalid object, a quota or RBAC refusal; at most 5 tries. Called by the SDKs; see docs/retry.md.")
}

func (a *AutoGateRetryArgs) Annotate(an infer.Annotator) {
	an.Describe(&a.Type, "The failed registration's type token.")
	an.Describe(&a.Name, "The failed registration's name (for messages).")
	an.Describe(&a.FailedOperation, "create, update or delete, as the engine's error hook says.")
	an.Describe(&a.Errors, "The step's failures so far, newest first, as the engine's error hook gives them.")
	an.Describe(&a.Object, "The object as the step sent it (the engine's checked inputs).")
	an.Describe(&a.Cluster, "Its kubernetes provider's configuration, as autoGate sends it.")
	an.Describe(&a.Timeout, "How long the object's admission may take to be proven again (a Go duration, default 5m).")
}

func (r *AutoGateRetryResult) Annotate(a infer.Annotator) {
	a.Describe(&r.Retry, "Try the step again now.")
	a.Describe(&r.Why, "Why, for the program's log: never the failure's text.")
}

// defaultRetryProof bounds the wait for the object's admission to be proven again.
const defaultRetryProof = 5 * time.Minute

// Invoke classifies the newest failure (retry.Decide) and, when it may be retried, waits until
// the object is admitted again.
func (f *AutoGateRetry) Invoke(ctx context.Context, req infer.FunctionRequest[AutoGateRetryArgs]) (infer.FunctionResponse[AutoGateRetryResult], error) {
	in := req.Input
	answer := func(retry bool, why string) (infer.FunctionResponse[AutoGateRetryResult], error) {
		return infer.FunctionResponse[AutoGateRetryResult]{Output: AutoGateRetryResult{Retry: retry, Why: why}}, nil
	}
	v := retry.Decide(in.Type, in.FailedOperation, in.Errors)
	if !v.Retry {
		return answer(false, v.Why)
	}
	if msg := admission.ManifestProblem(in.Object, true); msg != "" {
		return answer(false, "not retried: the object as sent cannot be dry-run: "+msg)
	}
	timeout := defaultRetryProof
	if d := deref(in.Timeout); d != "" {
		t, err := time.ParseDuration(d)
		if err != nil || t <= 0 {
			return answer(false, fmt.Sprintf("not retried: timeout %q is not a positive duration", d))
		}
		timeout = t
	}
	c := in.Cluster
	target := gateCluster(planner.Cluster{ID: c.ID, Name: deref(c.Name), Kubeconfig: deref(c.Kubeconfig), Context: deref(c.Context),
		Namespace: deref(c.Namespace), SelectsCluster: deref(c.SelectsCluster), RendersTo: deref(c.RendersTo), Unknown: deref(c.Unknown),
		Planner: deref(c.Planner)}, infer.GetConfig[Config](ctx))
	if target.skip != "" {
		return answer(false, "not retried: "+target.skip)
	}
	var clients *kube.Clients
	var err error
	if target.settings == nil {
		clients, err = infer.GetConfig[Config](ctx).Clients()
	} else {
		clients, err = clientsFor(*target.settings)
	}
	if err != nil {
		return answer(false, "not retried: "+err.Error())
	}
	began := time.Now()
	// The trace (READINESS_TRACE) names the object as AdmissionReady's proof does.
	what := "retry of " + retryTarget(in.Object)
	session.Trace(what, "hook called: %s", v.Why)
	if v.Webhook == "" {
		// The API server itself was not reached: wait until it answers again, then prove on
		// connections of its own, not behind one opened while it was down or starting.
		if err := clients.AwaitServing(ctx, timeout); err != nil {
			return answer(false, fmt.Sprintf("not retried: %s; %v", v.Why, err))
		}
		session.Trace(what, "API server answering after %dms", time.Since(began).Milliseconds())
		fresh, err := clients.Fresh()
		if err != nil {
			return answer(false, "not retried: "+err.Error())
		}
		defer fresh.Close()
		clients = fresh
	}
	if err := proveAdmission(ctx, clients, in.Object, max(timeout-time.Since(began), time.Millisecond)); err != nil {
		var te *wait.TimeoutError
		if errors.As(err, &te) {
			return answer(false, fmt.Sprintf("not retried: %s; its admission was not proven again: %v", v.Why, err))
		}
		return answer(false, fmt.Sprintf("not retried: %s; proving its admission again failed: %v", v.Why, err))
	}
	session.Trace(what, "admission proven again after %dms", time.Since(began).Milliseconds())
	return answer(true, fmt.Sprintf("%s; admitted again after %s (try %d of %d)", v.Why, time.Since(began).Round(time.Millisecond), len(in.Errors)+1, retry.MaxAttempts))
}

// retryTarget names the failed object for the trace: its kind and namespace/name.
func retryTarget(obj map[string]any) string {
	u := &unstructured.Unstructured{Object: obj}
	return u.GetKind() + " " + inputName(u)
}

// proveAdmission waits, at most timeout, until obj is admitted as AdmissionReady admits it (two
// rounds in a row); a verdict (a denial) fails at once.
func proveAdmission(ctx context.Context, clients *kube.Clients, obj map[string]any, timeout time.Duration) error {
	r := session.New(ctx, clients)
	defer r.Close()
	e, _, err := admissionBuilder(AdmissionReadyArgs{Objects: []map[string]any{obj}})(r)
	if err != nil {
		return err
	}
	took, err := r.Reach(ctx, e.what(), timeout)
	if err != nil {
		return err
	}
	_, err = r.Wait(ctx, wait.Spec{What: e.what(), Timeout: max(timeout-took, time.Millisecond), Check: e.check,
		MaxBackoff: maxBackoffOf(e), Recheck: maxBackoffOf(e)})
	return err
}
