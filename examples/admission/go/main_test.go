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
// serving 8 s after the webhook Deployment is available, as the pod does). AdmissionReady must
// see the webhook down first (its `deniers` output) and the ExternalSecrets are created after it
// answered. The apps' namespaces exist beforehand, as on the report's cluster.
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
	for _, ns := range []string{"hello-world", "nodejs-demo", "storage-validator"} {
		testenv.Apply(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: "+ns+"}")
	}
	s := run.Stack(t, "readiness-example-admission", map[string]string{"chartPath": chart}, Program)
	serve := fakes.ServeWhenAvailable(testenv.CP.Client, wh.Webhook, "external-secrets", "external-secrets-webhook", 8*time.Second, nil)
	res := run.Up(t, s)
	if err := serve.Stop(); err != nil {
		t.Fatal(err)
	}
	if wh.Calls.Load() == 0 {
		t.Error("up succeeded without External Secrets' webhooks ever answering")
	}
	if d, _ := res.Outputs["webhooksThatWereDown"].Value.([]any); len(d) == 0 {
		t.Errorf("webhooksThatWereDown = %v: the gate never met the webhook down, so it proved nothing here", res.Outputs["webhooksThatWereDown"].Value)
	}
	run.Destroy(t, s) // the chart's webhook intercepts deletes too: it still serves
}
