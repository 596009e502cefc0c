package autogate

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/readiness-io/pulumi-readiness/internal/charts"
	"github.com/readiness-io/pulumi-readiness/internal/fakes"
	"github.com/readiness-io/pulumi-readiness/internal/stack"
	"github.com/readiness-io/pulumi-readiness/internal/stacktest"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/sdk/go/readiness"
)

// TestAutoGateReleaseDependentsWaitForWhatTheyNeed: a helm.sh/v3 Release (not waiting) of a
// chart holding a CRD, the webhook configuration that validates its kind (served 3 s after the
// release installed) and a Deployment that never becomes available. What depends on the
// Release waits for what it needs of it, no more, on the real plugin:
//   - a custom resource of the chart's kind is created once the chart's webhook admits it, not
//     before (the webhook was called), though the release never becomes ready;
//   - near miss: a Deployment (its pods may call the release's services) keeps HelmReleaseReady,
//     which times out naming the release's Deployment, and is never created.
func TestAutoGateReleaseDependentsWaitForWhatTheyNeed(t *testing.T) {
	env := stacktest.Prepare(t)
	const ns, group = "ag-relneed", "relneed.autogate.test"
	testenv.Apply(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: "+ns+"}")
	hook := testenv.NewWebhook(t)
	chart, err := charts.Write(t.TempDir(), "relneed", []*unstructured.Unstructured{
		testenv.Object(t, testenv.CRD(group, "Gizmo", "gizmos")),
		testenv.Object(t, hook.ConfigurationFor("ValidatingWebhookConfiguration", "relneed", group, "gizmos")),
		testenv.Object(t, `apiVersion: apps/v1
kind: Deployment
metadata: {name: idle, namespace: `+ns+`}
spec:
  selector: {matchLabels: {app: idle}}
  template:
    metadata: {labels: {app: idle}, annotations: {`+fakes.KubeletMountAnnotation+`: 1h}}
    spec: {nodeSelector: {type: kwok}, containers: [{name: app, image: registry.local/idle:1}]}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	gizmo := "apiVersion: " + group + "/v1\nkind: Gizmo\nmetadata: {name: g1, namespace: " + ns + "}\nspec: {size: 1}"
	s := stacktest.NewStack(t, env, "relneed", func(ctx *pulumi.Context) error {
		if err := readiness.AutoGate(ctx, &readiness.AutoGateOptions{Timeout: "25s"}); err != nil {
			return err
		}
		rel, err := stack.NewHelmRelease(ctx, "relneed", pulumi.Map{"chart": pulumi.String(chart), "name": pulumi.String("relneed"),
			"namespace": pulumi.String(ns), "skipAwait": pulumi.Bool(true)})
		if err != nil {
			return err
		}
		after := pulumi.DependsOn([]pulumi.Resource{rel})
		if _, err := stack.NewKube(ctx, "gizmo", gizmo, after); err != nil {
			return err
		}
		_, err = stack.NewKube(ctx, "app", `apiVersion: apps/v1
kind: Deployment
metadata: {name: app, namespace: `+ns+`, annotations: {pulumi.com/skipAwait: "true"}}
spec:
  selector: {matchLabels: {app: app}}
  template:
    metadata: {labels: {app: app}}
    spec: {nodeSelector: {type: kwok}, containers: [{name: app, image: registry.local/app:1}]}`, after)
		return err
	})

	// The chart's webhook serves 3 s after the release installed its configuration.
	served := make(chan time.Time, 1)
	go func() {
		vwc := testenv.Dynamic(t).Resource(schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"})
		for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if _, err := vwc.Get(context.Background(), "relneed", metav1.GetOptions{}); err == nil {
				time.Sleep(3 * time.Second)
				hook.Start(t)
				served <- time.Now()
				return
			}
		}
		served <- time.Time{}
	}()
	_, err = stacktest.UpErr(s)
	stacktest.RequireFailure(t, err, "auto-helmrelease-"+ns+"-relneed", "timed out")
	if !strings.Contains(err.Error(), "idle") {
		t.Errorf("the release's gate timed out without naming the Deployment it waited for:\n%v", err)
	}
	at := <-served
	if at.IsZero() {
		t.Fatal("the release never installed its webhook configuration")
	}
	stacktest.NotBefore(t, "the Gizmo", stacktest.CreatedAt(t, gizmo), at)
	if hook.Calls.Load() == 0 {
		t.Error("the Gizmo was created without the chart's webhook answering for it")
	}
	if _, err := testenv.CP.Client.AppsV1().Deployments(ns).Get(context.Background(), "app", metav1.GetOptions{}); err == nil {
		t.Error("the Deployment after the Release was created though the release never became ready")
	}
	gates := stacktest.GatesOf(t, s)
	want := "AdmissionReady auto-admission-gizmos." + group + "-" + ns + "-relneed"
	found := false
	for _, g := range gates {
		found = found || g == want
		if strings.HasPrefix(g, "HelmReleaseReady") {
			t.Errorf("a HelmReleaseReady that timed out is in the state: %v", gates)
		}
	}
	if !found {
		t.Errorf("gates %v lack %s", gates, want)
	}
	testenv.CRDCachesReady(t, group)
	stacktest.Destroy(t, s)
}
