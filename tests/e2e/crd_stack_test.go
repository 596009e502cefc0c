package e2e

import (
	"context"
	"fmt"
	"strings"
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
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/sdk/go/readiness"
)

// TestCrdReadyStack is field report 002's "no matches for kind": the custom resource is
// created only after CrdReady returned, while its CRD is installed a few seconds late.
func TestCrdReadyStack(t *testing.T) {
	ctx := context.Background()
	env := prepare(t)
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
		obj, err := stack.NewKubeObject(ctx, "widget", widget, pulumi.DependsOn([]pulumi.Resource{gate}))
		if err != nil {
			return err
		}
		ctx.Export("kinds", gate.Kinds)
		ctx.Export("servedVersions", gate.ServedVersions)
		ctx.Export("widgetCreatedAt", obj.CreatedAt)
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
		time.Sleep(3 * time.Second) // the CRD arrives late, as from a slow Helm release
		crdAt = time.Now()
		testenv.Apply(t, testenv.CRD(group, "Widget", "widgets"))
	}()
	res, out := up(t, s)
	if crdAt.IsZero() {
		t.Fatal("up finished before the CRD was installed")
	}
	createdAt := outputTime(t, res, "widgetCreatedAt")
	if !createdAt.After(crdAt) {
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

// TestWithoutTheGateTheStackFails proves the gate is what makes the difference: the same
// custom resource with no CrdReady in front fails with "no matches for kind".
func TestWithoutTheGateTheStackFails(t *testing.T) {
	ctx := context.Background()
	env := prepare(t)
	group := fmt.Sprintf("nogate%d.readiness.test", time.Now().UnixNano()%1_000_000)
	program := func(ctx *pulumi.Context) error {
		_, err := stack.NewKubeObject(ctx, "widget",
			fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata: {name: w1, namespace: default}", group))
		return err
	}
	s, err := env.Stack(ctx, "nogate", "dev", string(testenv.CP.Kubeconfig), program)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(3 * time.Second)
		testenv.Apply(t, testenv.CRD(group, "Widget", "widgets"))
	}()
	var out strings.Builder
	_, err = s.Up(ctx, optup.ProgressStreams(&out))
	if err == nil {
		t.Fatal("up succeeded without a gate: the test no longer reproduces the race")
	}
	if !strings.Contains(out.String()+err.Error(), "no matches for kind") {
		t.Errorf("up failed, but not with \"no matches for kind\": %v\n%s", err, out.String())
	}
	_, _ = s.Destroy(ctx, optdestroy.Remove())
}

// TestCrdReadyConversionStack: a Go program gates a custom resource written through a
// non-storage version on CrdReady's conversion proof, with its own conversionProbes object,
// while the conversion webhook (on 127.0.0.1, registered by URL) starts late.
func TestCrdReadyConversionStack(t *testing.T) {
	env := prepare(t)
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
		obj, err := stack.NewKubeObject(ctx, "widget", fmt.Sprintf("apiVersion: %s/v2\nkind: Widget\nmetadata: {name: w1, namespace: default}\nspec: {count: 3}", group),
			pulumi.DependsOn([]pulumi.Resource{gate}))
		if err != nil {
			return err
		}
		ctx.Export("conversionVerified", gate.ConversionVerified)
		ctx.Export("widgetCreatedAt", obj.CreatedAt)
		return nil
	}
	s := newStack(t, env, "conversion", program)
	var startedAt time.Time
	go func() {
		time.Sleep(3 * time.Second)
		startedAt = time.Now()
		if err := wh.Start(); err != nil {
			t.Error(err)
		}
	}()
	res, _ := up(t, s)
	if startedAt.IsZero() {
		t.Fatal("up finished before the conversion webhook served")
	}
	createdAt := outputTime(t, res, "widgetCreatedAt")
	if !createdAt.After(startedAt) {
		t.Errorf("the Widget was created at %s, before the conversion webhook served (%s)", createdAt, startedAt)
	}
	if got := fmt.Sprint(res.Outputs["conversionVerified"].Value); got != "["+name+"]" {
		t.Errorf("conversionVerified = %s", got)
	}
}
