package main

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apiextensions"
	helmv3 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/helm/v3"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8smeta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/readiness-io/pulumi-readiness/examples/internal/run"
	"github.com/readiness-io/pulumi-readiness/internal/charts"
	"github.com/readiness-io/pulumi-readiness/internal/fakes"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/sdk/go/readiness"
)

// TestAutoGateChartV3WithKeptCRDs is issue 47's Go-only shape: field report 001 written with a
// `helm/v3` Chart, which the Go SDK renders in the program's process, on a cluster that kept
// External Secrets' CRDs from an earlier install (a rebuild). The Chart registers its children
// (its webhook configuration among them) after the ExternalSecret that dependsOn it was sent;
// AutoGate decides the ExternalSecret once every child was planned, so it waits for the chart's
// webhook to admit it, as in TypeScript and Python.
func TestAutoGateChartV3WithKeptCRDs(t *testing.T) {
	wh := testenv.NewWebhook(t)
	crds, err := charts.ExternalSecretsCRDs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range crds { // kept from an earlier install: served before the program runs
		if _, err := testenv.Resource(t, c).Create(context.Background(), c, k8smeta.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { // the package's other test installs them with its release
		for _, c := range crds {
			_ = testenv.Resource(t, c).Delete(context.Background(), c.GetName(), k8smeta.DeleteOptions{})
		}
		testenv.CRDsGone(t, "external-secrets.io")
	})
	esGVR := schema.GroupVersionResource{Group: "external-secrets.io", Version: "v1beta1", Resource: "externalsecrets"}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if _, err := testenv.Dynamic(t).Resource(esGVR).Namespace("default").List(context.Background(), k8smeta.ListOptions{}); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("External Secrets' CRDs are not served: %v", err)
		}
	}
	chart, err := charts.Local(t.TempDir(), "external-secrets", wh.Webhook) // the chart without them
	if err != nil {
		t.Fatal(err)
	}
	const ns = "external-secrets" // where the rendered chart puts its objects
	testenv.Apply(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: "+ns+"}")
	t.Cleanup(func() { // after the stack's destroy: the package's other test's release creates it
		_ = testenv.CP.Client.CoreV1().Namespaces().Delete(context.Background(), ns, k8smeta.DeleteOptions{})
		for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			if _, err := testenv.CP.Client.CoreV1().Namespaces().Get(context.Background(), ns, k8smeta.GetOptions{}); apierrors.IsNotFound(err) {
				return
			}
		}
		t.Errorf("namespace %s was not deleted in 2 minutes", ns)
	})
	s := run.Stack(t, "readiness-example-autogate-chart-v3", nil, func(ctx *pulumi.Context) error {
		if err := readiness.AutoGate(ctx, &readiness.AutoGateOptions{Timeout: "2m"}); err != nil {
			return err
		}
		eso, err := helmv3.NewChart(ctx, "external-secrets", helmv3.ChartArgs{
			Path: pulumi.String(chart), Namespace: pulumi.String(ns), SkipCRDRendering: pulumi.Bool(true),
		})
		if err != nil {
			return err
		}
		_, err = apiextensions.NewCustomResource(ctx, "ghcr-pull-secret", &apiextensions.CustomResourceArgs{
			ApiVersion: pulumi.String("external-secrets.io/v1beta1"), Kind: pulumi.String("ExternalSecret"),
			Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String("ghcr-pull-secret"), Namespace: pulumi.String("default")},
			OtherFields: map[string]any{"spec": map[string]any{
				"secretStoreRef": map[string]any{"name": "vault", "kind": "ClusterSecretStore"},
				"target":         map[string]any{"name": "ghcr-pull-secret"},
				"data":           []any{map[string]any{"secretKey": "x", "remoteRef": map[string]any{"key": "ghcr"}}},
			}},
		}, pulumi.DependsOn([]pulumi.Resource{eso}))
		return err
	})
	var mu sync.Mutex
	var served time.Time
	serve := fakes.ServeWhenAvailable(testenv.CP.Client, wh.Webhook, ns, "external-secrets-webhook", 3*time.Second,
		func() { mu.Lock(); served = time.Now(); mu.Unlock() })
	res := run.Up(t, s)
	if err := serve.Stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if served.IsZero() {
		t.Fatal("up succeeded before External Secrets' webhook served")
	}
	es, err := testenv.Dynamic(t).Resource(esGVR).Namespace("default").Get(context.Background(), "ghcr-pull-secret", k8smeta.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created := es.GetCreationTimestamp().Time; created.Before(served.Truncate(time.Second)) {
		t.Errorf("the ExternalSecret was created at %s, before the chart's webhook served (%s):\n%s", created, served, res.StdOut)
	}
	run.Destroy(t, s)
}
