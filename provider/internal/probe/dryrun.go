package probe

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/readiness-io/pulumi-readiness/provider/internal/session"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/admission"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/kube"
)

// Request is the probe's dry-run create as the API server matches webhooks against it.
func (p *Webhook) Request() (admission.Request, error) {
	m, err := p.r.Clients.Mapping(p.obj.GroupVersionKind())
	if err != nil {
		return admission.Request{}, err
	}
	return RequestFor(p.r, p.obj, m, false), nil
}

// RequestFor is the request of a dry-run create (or, with update, apply) of obj, as the API
// server matches webhooks against it: its resource at every served version, namespace, labels.
func RequestFor(r *session.Run, obj *unstructured.Unstructured, m *meta.RESTMapping, update bool) admission.Request {
	q := admission.Request{GVR: m.Resource, Labels: obj.GetLabels(), Update: update}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		q.Namespace = obj.GetNamespace()
		if q.Namespace == "" {
			q.Namespace = r.Clients.Namespace
		}
	}
	if all, err := r.Clients.Mapper.RESTMappings(obj.GroupVersionKind().GroupKind()); err == nil {
		for _, o := range all {
			if o.Resource != q.GVR && o.Resource.Group == q.GVR.Group && o.Resource.Resource == q.GVR.Resource {
				q.Equivalents = append(q.Equivalents, o.Resource)
			}
		}
	}
	return q
}

// once dry-run creates the probe and says whether the target webhooks answered.
func (p *Webhook) once(ctx context.Context) admission.ProbeOutcome {
	obj := p.obj.DeepCopy()
	m, err := p.r.Clients.Mapping(obj.GroupVersionKind())
	if err != nil {
		var nk *kube.NoKindError
		if errors.As(err, &nk) {
			return admission.ProbeOutcome{Why: nk.Error()}
		}
		return admission.ProbeOutcome{Why: err.Error()}
	}
	if obj.GetName() == "" && obj.GetGenerateName() == "" {
		obj.SetGenerateName("readiness-probe-")
	}
	ri := p.r.Clients.Dynamic.Resource(m.Resource)
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	where := ""
	var out *unstructured.Unstructured
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if obj.GetNamespace() == "" {
			obj.SetNamespace(p.r.Clients.Namespace)
		}
		where = " in namespace " + obj.GetNamespace()
		out, err = ri.Namespace(obj.GetNamespace()).Create(ctx, obj, dryRun)
	} else {
		obj.SetNamespace("") // a derived probe of a cluster-scoped kind
		out, err = ri.Create(ctx, obj, dryRun)
	}
	if err != nil && (apierrors.IsUnauthorized(err) || (apierrors.IsForbidden(err) && strings.Contains(err.Error(), "cannot create resource"))) {
		res := m.Resource.Resource
		if m.Resource.Group != "" {
			res += "." + m.Resource.Group
		}
		return admission.ProbeOutcome{Terminal: fmt.Errorf("the provider may not dry-run create the probe %s%s: %s; grant verb `create` on resource %q%s "+
			"to the provider's identity (a dry-run persists nothing)", obj.GetKind(), where, admission.StableMessage(obj, err.Error()), res, where)}
	}
	o := admission.ClassifyProbe(err, p.Target)
	if err != nil && admission.IsSecret(obj) {
		// A webhook's answer may quote the Secret probe in any escaping: keep only its verdict.
		o.Why = strings.ReplaceAll(o.Why, err.Error(), "(the API server's message is not shown: the probe is a Secret)")
	}
	o.Why = admission.StableMessage(obj, o.Why)
	if o.Invalid {
		why := "give a `probe` that passes schema validation"
		if p.Derived {
			why = fmt.Sprintf("the %s derived from the webhook's rules is rejected by schema validation; give `probe` (an object the webhook intercepts that is valid for its schema)", obj.GetKind())
		}
		o.Terminal = fmt.Errorf("%s: %s", o.Why, why)
	}
	if p.Expect != nil && o.Answered {
		p.judgeExpect(&o, obj, out, err)
	}
	return o
}

// judgeExpect requires expect to hold on the admitted probe's dry-run result out; the result is
// dropped afterwards, and never quoted for a Secret.
func (p *Webhook) judgeExpect(o *admission.ProbeOutcome, obj, out *unstructured.Unstructured, err error) {
	if err != nil || out == nil {
		o.Answered = false
		o.Why = "expect needs an admitted dry-run result, and there is none: " + o.Why
		o.Hint = "give a `probe` the webhooks admit (generateName: a fixed name that exists already is not created)"
		return
	}
	v := p.Expect.Judge(obj, out)
	switch {
	case v.Terminal != "":
		o.Terminal = errors.New(v.Terminal)
	case !v.Held:
		o.Answered, o.Why, o.Hint = false, "admitted, but "+admission.StableMessage(obj, v.Why), v.Hint
	default:
		o.ExpectHeld, o.Why = true, "admitted, and the result satisfies expect"
	}
}
