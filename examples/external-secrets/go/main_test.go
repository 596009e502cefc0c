package main

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/readiness-io/pulumi-readiness/examples/internal/run"
	"github.com/readiness-io/pulumi-readiness/internal/charts"
	"github.com/readiness-io/pulumi-readiness/internal/controlplane"
	"github.com/readiness-io/pulumi-readiness/internal/fakes"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, controlplane.Options{})) }

// TestProgram runs the example as it is against the local control plane: External Secrets'
// real chart with its CRDs (rendered, its webhooks sent to a server on 127.0.0.1 that starts
// serving 3 s after the webhook Deployment is available, as the pod does), its controller's
// syncs played. The apps' namespaces exist beforehand, as on the report's cluster.
func TestProgram(t *testing.T) {
	wh := testenv.NewWebhook(t)
	crds, err := charts.ExternalSecretsCRDs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	chart, err := charts.Local(t.TempDir(), "external-secrets", wh.Webhook, crds...)
	if err != nil {
		t.Fatal(err)
	}
	namespaces := []string{"default", "hello-world", "nodejs-demo", "storage-validator"}
	for _, ns := range namespaces[1:] {
		testenv.Apply(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: "+ns+"}")
	}
	s := run.Stack(t, "readiness-example-external-secrets", map[string]string{"chartPath": chart}, Program)
	serve := fakes.ServeWhenAvailable(testenv.CP.Client, wh.Webhook, "external-secrets", "external-secrets-webhook", 3*time.Second, nil)
	sync := fakes.SyncExternalSecrets(testenv.Dynamic(t), "ghcr-pull-secret", namespaces, time.Second)
	run.Up(t, s)
	if err := sync.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := serve.Stop(); err != nil {
		t.Fatal(err)
	}
	if wh.Calls.Load() == 0 {
		t.Error("up succeeded without External Secrets' webhooks ever answering")
	}
	run.Destroy(t, s) // the chart's webhook intercepts deletes too: it still serves
}
