package provider

import (
	"context"
	"fmt"
	"strings"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/readiness-io/pulumi-readiness/provider/internal/session"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/admission"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/helmrelease"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/verdict"
)

// renderedObjects checks the objects a chart rendered, by the rules of `helm --wait` plus
// webhooks: CRDs Established, workloads rolled out, webhook configurations serving (proven by a
// probe), everything else by ResourceReady's default rules with PersistentVolumeClaims Bound.
// HelmReleaseReady gives it a release manifest's objects, ChartReady a Chart v4's children.
//
// The one helper two gates share in the provider root rather than a package of its own: it
// builds the other gates' evaluations (CrdReady's, RolloutReady's, WebhookReady's,
// ResourceReady's), which live here, and a package under provider/ would have to import them
// back up.
type renderedObjects struct {
	checks []objectCheck
}

type objectCheck struct {
	ref  helmrelease.ObjectRef
	eval evaluation
}

// newRenderedObjects makes one check per object. namespace is where objects that name none are
// (a release's namespace) and where probes derived from webhook rules are dry-run created; probe,
// when set, is the object every webhook configuration is probed with instead.
func newRenderedObjects(r *session.Run, namespace string, probe map[string]any, refs []helmrelease.ObjectRef) *renderedObjects {
	o := &renderedObjects{}
	for _, ref := range refs {
		o.checks = append(o.checks, objectCheck{ref: ref, eval: checkFor(r, namespace, probe, ref)})
	}
	return o
}

// checkFor is the check of one rendered object.
func checkFor(r *session.Run, namespace string, probe map[string]any, ref helmrelease.ObjectRef) evaluation {
	ns := ref.Namespace
	if ns == "" {
		ns = namespace
	}
	gv, _ := schema.ParseGroupVersion(ref.APIVersion)
	switch {
	case ref.Kind == "CustomResourceDefinition" && gv.Group == "apiextensions.k8s.io":
		// Conversion webhooks are not proven here (no conversionProbes to give, and a minimal object
		// denied by the chart's own validating webhook would fail the release): CrdReady does that.
		off := false
		return newCrdEval(r, CrdReadyArgs{Names: []string{ref.Name}, Conversion: &off})
	case gv.Group == "apps" && (ref.Kind == "Deployment" || ref.Kind == "StatefulSet" || ref.Kind == "DaemonSet"):
		k := rolloutKinds[ref.Kind]
		return &rolloutEval{r: r, eval: k.eval, t: session.Target{GVK: gv.WithKind(ref.Kind), Namespace: ns, Name: ref.Name}}
	case gv.Group == session.VWCGVK.Group && (ref.Kind == session.VWCGVK.Kind || ref.Kind == session.MWCGVK.Kind):
		a := WebhookReadyArgs{Probe: probe}
		if ref.Kind == session.VWCGVK.Kind {
			a.ValidatingWebhookConfiguration = &ref.Name
		} else {
			a.MutatingWebhookConfiguration = &ref.Name
		}
		w := &webhookEval{r: r, args: a, minEndpoints: 1, deriveProbeIn: namespace, composite: true}
		if probe != nil {
			w.probe = w.newProber((&unstructured.Unstructured{Object: probe}).DeepCopy())
		}
		return w
	}
	// Everything else by ResourceReady's default rules (kstatus and the kind's own rule), with
	// PersistentVolumeClaims Bound as helm --wait wants them: never weaker than helm --wait.
	name, strictPvc := ref.Name, true
	oe, err := newObjectsEval(r, ResourceReadyArgs{APIVersion: ref.APIVersion, Kind: ref.Kind, Namespace: &ns, Name: &name, StrictPvc: &strictPvc})
	if err != nil {
		return failedEval{name: ref.String(), err: err}
	}
	return oe
}

// judge gathers each object's state, then decides (helmrelease.JudgeObjects). Gathering stops at
// the first verdict: the whole fails on it. what names the whole in errors; revision is the
// release revision (0: none, a Chart v4's objects).
func (o *renderedObjects) judge(ctx context.Context, what string, revision int) verdict.Result {
	objs := helmrelease.Objects{What: what, Revision: revision, Total: len(o.checks)}
	var slow []string // for the trace: the objects whose check took a while
	if session.Tracing() {
		defer func() {
			if len(slow) > 0 {
				session.Trace(what, "of the check, slow objects: %s", strings.Join(slow, ", "))
			}
		}()
	}
	for _, c := range o.checks {
		began := time.Now()
		res := c.eval.check(ctx)
		if took := time.Since(began); session.Tracing() && took > 2*time.Millisecond {
			slow = append(slow, fmt.Sprintf("%s %dus", c.ref, took.Microseconds()))
		}
		objs.States = append(objs.States, helmrelease.ObjectState{Ref: c.ref, Result: res})
		if res.Failed != nil {
			break
		}
	}
	return helmrelease.JudgeObjects(objs)
}

// probeFailures validates the `probe` input that every webhook configuration is proven with.
func probeFailures(inputs property.Map, probe map[string]any) []p.CheckFailure {
	if probe == nil || !isKnown(inputs, "probe") {
		return nil
	}
	if msg := admission.ManifestProblem(probe, false); msg != "" {
		return []p.CheckFailure{{Property: "probe", Reason: "the probe must be a manifest the API server can create: " + msg}}
	}
	return nil
}

// failedEval reports an object the gate cannot judge (a malformed manifest entry).
type failedEval struct {
	name string
	err  error
}

func (f failedEval) what() string                         { return f.name }
func (f failedEval) check(context.Context) verdict.Result { return verdict.Result{Failed: f.err} }
