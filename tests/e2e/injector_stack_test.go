package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/readiness-io/pulumi-readiness/internal/stack"
	"github.com/readiness-io/pulumi-readiness/internal/stacktest"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/sdk/go/readiness"
)

// TestInjectorExpectStack: a Go program gates a workload on a sidecar injector (a mutating
// webhook with failurePolicy Ignore on 127.0.0.1) by WebhookReady's `expect`. While the injector
// is down the API server admits Pods unmutated, which would start the workload without its
// sidecar; the gate returns only once the dry-run result carries the injected container. The
// injector refuses the gate's direct calls, so the mutation is the only proof.
func TestInjectorExpectStack(t *testing.T) {
	env := stacktest.Prepare(t)
	ns := testenv.Namespace(t, "inject")
	testenv.ServiceAccountReady(t, ns)
	injector := testenv.NewWebhook(t)
	cfg := "injector-" + ns
	injector.RegisterPods(t, "MutatingWebhookConfiguration", cfg, "Ignore", ns)
	injector.Mode.Store("inject:sidecar")
	injector.RefuseDirect.Store(true)

	program := func(ctx *pulumi.Context) error {
		gate, err := readiness.NewWebhookReady(ctx, "injector", &readiness.WebhookReadyArgs{
			MutatingWebhookConfiguration: pulumi.String(cfg),
			Probe: pulumi.Map{"apiVersion": pulumi.String("v1"), "kind": pulumi.String("Pod"),
				"metadata": pulumi.Map{"generateName": pulumi.String("probe-"), "namespace": pulumi.String(ns)},
				"spec": pulumi.Map{"containers": pulumi.Array{pulumi.Map{
					"name": pulumi.String("app"), "image": pulumi.String("readiness.invalid/app")}}}},
			Expect:       pulumi.String("object.spec.containers.exists(c, c.name == 'sidecar')"),
			FailureGrace: pulumi.String("5s"), // a denial while the injector warms up is forgiven
			Timeout:      pulumi.String("2m"),
		})
		if err != nil {
			return err
		}
		dep, err := stack.NewKube(ctx, "web", fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata: {name: web-config, namespace: %s}
data: {stage: after-injector}`, ns), pulumi.DependsOn([]pulumi.Resource{gate}))
		if err != nil {
			return err
		}
		ctx.Export("probed", gate.Probed)
		ctx.Export("failurePolicy", gate.FailurePolicy)
		ctx.Export("createdAt", dep.CreationTimestamp())
		return nil
	}
	s := stacktest.NewStack(t, env, "injector", program)
	var startedAt time.Time
	go func() {
		stacktest.SleepToSecond(3 * time.Second) // the injector's pod starts serving late
		startedAt = time.Now()
		injector.Start(t)
	}()
	res, _ := stacktest.Up(t, s)
	if startedAt.IsZero() {
		t.Fatal("up finished before the injector served: a Pod admitted unmutated passed the gate")
	}
	createdAt := stacktest.OutputTime(t, res, "createdAt")
	if stacktest.CreatedBefore(createdAt, startedAt) {
		t.Errorf("the workload's object was created at %s, before the injector served (%s)", createdAt, startedAt)
	}
	if res.Outputs["probed"].Value != true || res.Outputs["failurePolicy"].Value != "Ignore" {
		t.Errorf("outputs: probed %v, failurePolicy %v", res.Outputs["probed"].Value, res.Outputs["failurePolicy"].Value)
	}
}
