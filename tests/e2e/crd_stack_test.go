package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto/optdestroy"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/readiness-io/pulumi-readiness/internal/fakes"
	"github.com/readiness-io/pulumi-readiness/internal/stack"
	"github.com/readiness-io/pulumi-readiness/internal/stacktest"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/sdk/go/readiness"
)

// TestCrdReadyStack is field report 002's "no matches for kind": the custom resource is
// created only after CrdReady returned, while its CRD is installed a few seconds late.
func TestCrdReadyStack(t *testing.T) {
	ctx := context.Background()
	env := stacktest.Prepare(t)
	group := fmt.Sprintf("e2e%d.readiness.test", time.Now().UnixNano()%1_000_000)
	widget := fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata: {name: w1, namespace: default}\nspec: {size: 3}", group)

	program := func(ctx *pulumi.Context) error {
		gate, err := readiness.NewCrdReady(ctx, "widgets-crd", &readiness.CrdReadyArgs{
			Names:   pulumi.StringArray{pulumi.String("widgets." + group)},
			Timeout: pulumi.String("2m"),
		})
		if err != nil {
			return err
		}
		obj, err := stack.NewKube(ctx, "widget", widget, pulumi.DependsOn([]pulumi.Resource{gate}))
		if err != nil {
			return err
		}
		ctx.Export("kinds", gate.Kinds)
		ctx.Export("servedVersions", gate.ServedVersions)
		ctx.Export("widgetCreatedAt", obj.CreationTimestamp())
		return nil
	}
	s, err := env.Stack(ctx, "crd", "dev", string(testenv.CP.Kubeconfig), program)
	if err != nil {
		t.Fatal(err)
	}

	// Preview: the CRD does not exist, and the gate neither blocks nor fails.
	pv, err := s.Preview(ctx, optpreview.Diff())
	if err != nil {
		t.Fatalf("preview: %v\n%s", err, pv.StdErr)
	}
	if pv.ChangeSummary["create"] < 3 {
		t.Errorf("preview change summary %v: want the stack, the gate and the object created", pv.ChangeSummary)
	}

	var crdAt time.Time
	go func() {
		stacktest.SleepToSecond(crdLate) // the CRD arrives late, as from a slow Helm release
		crdAt = time.Now()
		testenv.Apply(t, testenv.CRD(group, "Widget", "widgets"))
	}()
	res, out := stacktest.Up(t, s)
	if crdAt.IsZero() {
		t.Fatal("up finished before the CRD was installed")
	}
	createdAt := stacktest.OutputTime(t, res, "widgetCreatedAt")
	if stacktest.CreatedBefore(createdAt, crdAt) {
		t.Errorf("the Widget was created at %s, before its CRD (%s)", createdAt, crdAt)
	}
	if got := fmt.Sprint(res.Outputs["kinds"].Value); got != "[Widget]" {
		t.Errorf("kinds output = %s", got)
	}
	if got := fmt.Sprint(res.Outputs["servedVersions"].Value); got != "["+group+"/v1]" {
		t.Errorf("servedVersions output = %s", got)
	}
	if !strings.Contains(out, "readiness:index:CrdReady") {
		t.Errorf("up output does not show the gate:\n%s", out)
	}

	// A second up with nothing changed does not wait or change anything.
	res2, err := s.Up(ctx)
	if err != nil {
		t.Fatalf("second up: %v", err)
	}
	if res2.Summary.ResourceChanges != nil && (*res2.Summary.ResourceChanges)["create"]+(*res2.Summary.ResourceChanges)["replace"] > 0 {
		t.Errorf("second up changed resources: %v", *res2.Summary.ResourceChanges)
	}
	if _, err := s.Destroy(ctx, optdestroy.Remove()); err != nil {
		t.Fatalf("destroy: %v", err)
	}
}

// crdLate is how late the CRD arrives, as from a slow Helm release: longer than pulumi-kubernetes
// retries creating an object whose kind is not served (v4.32.0: tries 0, 1, 3, 7, 15 and 31 s after
// the first, "Retry #0" to "#5", then the error at 63 s), so that only the gate makes the stack wait.
const crdLate = 45 * time.Second

// signalWriter closes seen the first time what it is given contains needle (pulumi up's progress).
type signalWriter struct {
	needle string
	seen   chan struct{}
	once   sync.Once
	mu     sync.Mutex
	text   strings.Builder
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.text.Write(p)
	if strings.Contains(w.text.String(), w.needle) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

// TestWithoutTheGateTheStackFails proves the gate is what makes the difference: the same
// custom resource with no CrdReady in front fails with "no matches for kind" once
// pulumi-kubernetes stopped retrying, before the CRD arrives crdLate after its first try.
func TestWithoutTheGateTheStackFails(t *testing.T) {
	ctx := context.Background()
	env := stacktest.Prepare(t)
	group := fmt.Sprintf("nogate%d.readiness.test", time.Now().UnixNano()%1_000_000)
	program := func(ctx *pulumi.Context) error {
		_, err := stack.NewKube(ctx, "widget",
			fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata: {name: w1, namespace: default}", group))
		return err
	}
	s, err := env.Stack(ctx, "nogate", "dev", string(testenv.CP.Kubeconfig), program)
	if err != nil {
		t.Fatal(err)
	}
	// The CRD arrives crdLate after pulumi-kubernetes' first try ("Retry #0 ... no matches for kind").
	out := &signalWriter{needle: "Retry #0", seen: make(chan struct{})}
	upDone := make(chan struct{})
	crdInstalled := make(chan bool, 1)
	go func() {
		select {
		case <-out.seen:
		case <-upDone:
			crdInstalled <- false
			return
		}
		select {
		case <-time.After(crdLate):
			testenv.Apply(t, testenv.CRD(group, "Widget", "widgets"))
			crdInstalled <- true
		case <-upDone:
			crdInstalled <- false
		}
	}()
	_, err = s.Up(ctx, optup.ProgressStreams(out))
	close(upDone)
	installed := <-crdInstalled
	if err == nil {
		t.Fatalf("up succeeded without a gate (CRD installed: %v): the test no longer reproduces the race\n%s", installed, out.text.String())
	}
	// pulumi-kubernetes' own words once it stopped retrying (a try after the CRD came would pass).
	for _, want := range []string{"the apiVersion for this resource does not exist", "no matches for kind"} {
		if !strings.Contains(out.text.String()+err.Error(), want) {
			t.Errorf("up failed, but not with %q: %v\n%s", want, err, out.text.String())
		}
	}
	t.Logf("without the gate up failed; the CRD had come %s after the first try during up: %v", crdLate, installed)
	_, _ = s.Destroy(ctx, optdestroy.Remove())
}

// TestCrdReadyConversionStack: a Go program gates a custom resource written through a
// non-storage version on CrdReady's conversion proof, with its own conversionProbes object,
// while the conversion webhook (on 127.0.0.1, registered by URL) starts late.
func TestCrdReadyConversionStack(t *testing.T) {
	env := stacktest.Prepare(t)
	wh, err := fakes.NewWebhook()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(wh.Close)
	group := fmt.Sprintf("conv%d.readiness.test", time.Now().UnixNano()%1_000_000)
	name := "widgets." + group
	testenv.Apply(t, testenv.ConversionCRD{Group: group, Kind: "Widget", Plural: "widgets", URL: wh.ConvertURL(), CABundle: wh.CABundle()}.Doc())
	t.Cleanup(func() { // no controller may keep calling a webhook that is gone
		ri := testenv.Dynamic(t).Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
		_, _ = ri.Patch(context.Background(), name, types.MergePatchType, []byte(`{"spec":{"conversion":{"strategy":"None","webhook":null}}}`), metav1.PatchOptions{})
		_ = ri.Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	program := func(ctx *pulumi.Context) error {
		gate, err := readiness.NewCrdReady(ctx, "widgets-crd", &readiness.CrdReadyArgs{
			Names:      pulumi.StringArray{pulumi.String(name)},
			Conversion: pulumi.Bool(true),
			ConversionProbes: pulumi.MapArray{pulumi.Map{
				"apiVersion": pulumi.String(group + "/v2"), "kind": pulumi.String("Widget"),
				"metadata": pulumi.Map{"namespace": pulumi.String("default")},
				"spec":     pulumi.Map{"count": pulumi.Int(5)},
			}},
			Timeout: pulumi.String("2m"),
		})
		if err != nil {
			return err
		}
		obj, err := stack.NewKube(ctx, "widget", fmt.Sprintf("apiVersion: %s/v2\nkind: Widget\nmetadata: {name: w1, namespace: default}\nspec: {count: 3}", group),
			pulumi.DependsOn([]pulumi.Resource{gate}))
		if err != nil {
			return err
		}
		ctx.Export("conversionVerified", gate.ConversionVerified)
		ctx.Export("widgetCreatedAt", obj.CreationTimestamp())
		return nil
	}
	s := stacktest.NewStack(t, env, "conversion", program)
	var startedAt time.Time
	go func() {
		stacktest.SleepToSecond(3 * time.Second)
		startedAt = time.Now()
		if err := wh.Start(); err != nil {
			t.Error(err)
		}
	}()
	res, _ := stacktest.Up(t, s)
	if startedAt.IsZero() {
		t.Fatal("up finished before the conversion webhook served")
	}
	createdAt := stacktest.OutputTime(t, res, "widgetCreatedAt")
	if stacktest.CreatedBefore(createdAt, startedAt) {
		t.Errorf("the Widget was created at %s, before the conversion webhook served (%s)", createdAt, startedAt)
	}
	if got := fmt.Sprint(res.Outputs["conversionVerified"].Value); got != "["+name+"]" {
		t.Errorf("conversionVerified = %s", got)
	}
}
