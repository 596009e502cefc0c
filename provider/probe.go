package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/kube"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/wait"
)

// prober proves a webhook answers with server-side dry-run creates: nothing is persisted.
// Two consecutive answers are required so a flapping webhook does not pass.
type prober struct {
	r    *run
	obj  *unstructured.Unstructured
	good int
}

const probesNeeded = 2

func (p *prober) step(ctx context.Context) wait.Result {
	answered, msg := p.once(ctx)
	if !answered {
		p.good = 0
		return wait.Result{Message: "dry-run probe: " + msg, Poll: true,
			Hint: "kubectl get pods,endpointslices -n <webhook namespace>; the webhook's logs"}
	}
	p.good++
	if p.good < probesNeeded {
		return wait.Result{Message: fmt.Sprintf("dry-run probe answered (%s); confirming", msg), Poll: true}
	}
	return wait.Result{Ready: true, Message: "dry-run probe answered: " + msg}
}

// once dry-run creates the probe and says whether the webhook answered.
func (p *prober) once(ctx context.Context) (bool, string) {
	obj := p.obj.DeepCopy()
	m, err := p.r.clients.Mapping(obj.GroupVersionKind())
	if err != nil {
		var nk *kube.NoKindError
		if errors.As(err, &nk) {
			return false, nk.Error()
		}
		return false, err.Error()
	}
	if obj.GetName() == "" && obj.GetGenerateName() == "" {
		obj.SetGenerateName("readiness-probe-")
	}
	ri := p.r.clients.Dynamic.Resource(m.Resource)
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if obj.GetNamespace() == "" {
			obj.SetNamespace(p.r.clients.Namespace)
		}
		_, err = ri.Namespace(obj.GetNamespace()).Create(ctx, obj, dryRun)
	} else {
		_, err = ri.Create(ctx, obj, dryRun)
	}
	return ClassifyProbe(err)
}

// ClassifyProbe maps a dry-run create's outcome to "did the webhook answer?", with the cause
// spelled out as cmctl does.
func ClassifyProbe(err error) (bool, string) {
	if err == nil {
		return true, "admitted"
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "denied the request"):
		return true, "denied by the webhook (it answered): " + msg
	case apierrors.IsAlreadyExists(err):
		return true, "admitted (the object already exists)"
	case strings.Contains(msg, "no endpoints available for service"):
		return false, "no ready pods behind the webhook Service: " + msg
	case strings.Contains(msg, "connection refused"):
		return false, "connection refused (pod up, webhook server not listening yet): " + msg
	case strings.Contains(msg, "x509") || strings.Contains(msg, "certificate"):
		return false, "TLS error (caBundle not injected yet, or the serving certificate is wrong): " + msg
	case strings.Contains(msg, "context deadline exceeded") || strings.Contains(msg, "Timeout") || strings.Contains(msg, "timeout"):
		return false, "the webhook did not answer in time: " + msg
	case strings.Contains(msg, "service \"") && strings.Contains(msg, "not found"):
		return false, "the webhook Service is not created yet: " + msg
	case strings.Contains(msg, "failed calling webhook"):
		return false, "the API server could not call the webhook: " + msg
	case apierrors.IsInvalid(err):
		return false, "the probe object is invalid (schema validation, before validating webhooks run): " + msg
	}
	return false, msg
}
