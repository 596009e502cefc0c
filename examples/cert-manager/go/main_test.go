package main

import (
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

// TestProgram runs the example as it is against the local control plane: cert-manager's real
// chart (rendered, its webhooks sent to a server on 127.0.0.1 that starts serving 3 s after the
// webhook Deployment is available, as the pod does), cert-manager's issuing played.
func TestProgram(t *testing.T) {
	wh := testenv.NewWebhook(t)
	chart, err := charts.Local(t.TempDir(), "cert-manager", wh.Webhook)
	if err != nil {
		t.Fatal(err)
	}
	s := run.Stack(t, "readiness-example-cert-manager", map[string]string{"chartPath": chart}, Program)
	serve := fakes.ServeWhenAvailable(testenv.CP.Client, wh.Webhook, "cert-manager", "cert-manager-webhook", 3*time.Second, nil)
	issue := fakes.IssueWhenCreated(testenv.Dynamic(t), "default", "ai-ops-agent", "ai-ops-agent-tls", 2*time.Second, nil)
	res := run.Up(t, s)
	if err := issue.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := serve.Stop(); err != nil {
		t.Fatal(err)
	}
	if wh.Calls.Load() == 0 {
		t.Error("up succeeded without cert-manager's webhooks ever answering")
	}
	if v, _ := res.Outputs["certificateExpires"].Value.(string); v == "" {
		t.Errorf("certificateExpires = %v, want the issued certificate's notAfter", res.Outputs["certificateExpires"].Value)
	}
	run.Destroy(t, s)
}
