package realnode

import (
	"context"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/readiness-io/pulumi-readiness/internal/charts"
	"github.com/readiness-io/pulumi-readiness/internal/reportstack"
	"github.com/readiness-io/pulumi-readiness/internal/stacktest"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/sdk/go/readiness"
)

// TestRealFieldReport001ExternalSecrets: External Secrets v0.11.0 (the report's version) as real
// pods, installed by a helm.sh/v3 Release of its real chart, then the report's four
// ExternalSecrets. The Release does not wait (skipAwait, as users set it when Helm's wait
// hangs their stack), so without a gate the API server calls the chart's webhook before its
// pod serves and the stack fails with the report's error. HelmReleaseReady, and autoGate's
// line in a gate-free program, make it pass: every ExternalSecret is admitted by the real
// webhook, created after the webhook pod became Ready.
func TestRealFieldReport001ExternalSecrets(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	chart := installable(ctx, t, charts.ExternalSecretsChart)
	env := stacktest.Prepare(t)

	// The three programs: no gate, a hand-placed HelmReleaseReady, and autoGate's one line.
	program := func(mode string) pulumi.RunFunc {
		return func(ctx *pulumi.Context) error {
			if mode == "autogate" {
				if err := readiness.AutoGate(ctx, &readiness.AutoGateOptions{Timeout: "4m"}); err != nil {
					return err
				}
			}
			release, err := reportstack.ExternalSecretsRelease(ctx, chart)
			if err != nil {
				return err
			}
			var before pulumi.Resource = release
			if mode == "gate" {
				if before, err = readiness.NewHelmReleaseReady(ctx, "external-secrets-ready", &readiness.HelmReleaseReadyArgs{
					Name: pulumi.String("external-secrets"), Namespace: pulumi.String("external-secrets"),
					Timeout: pulumi.String("4m"), Triggers: pulumi.Array{release.Revision()},
				}, reportstack.After(release)); err != nil {
					return err
				}
			}
			return reportstack.ExternalSecrets001(ctx, before)
		}
	}
	destroy := func(s auto.Stack) {
		testenv.CRDCachesReady(t, "external-secrets.io") // the release deletes its CRDs (see there)
		stacktest.Destroy(t, s)
	}

	s := stacktest.NewStack(t, env, "report001", program("none"))
	began := time.Now()
	_, err := stacktest.UpErr(s)
	t.Logf("without a gate: up returned after %s", time.Since(began).Round(time.Millisecond))
	stacktest.RequireFailure(t, err, `failed calling webhook "validate.externalsecret.external-secrets.io"`)
	t.Logf("the real webhook's error: %s", firstLine(err.Error(), "failed calling webhook"))
	destroy(s)

	for _, mode := range []string{"gate", "autogate"} {
		g := stacktest.NewStack(t, env, "report001"+mode, program(mode))
		began := time.Now()
		stacktest.Up(t, g)
		t.Logf("%s: up in %s", mode, time.Since(began).Round(time.Millisecond))
		ready := webhookPodReadyAt(t, "external-secrets", "app.kubernetes.io/name=external-secrets-webhook")
		for _, ns := range reportstack.Namespaces001 {
			stacktest.NotBefore(t, "ExternalSecret in "+ns, stacktest.CreatedAt(t, reportstack.ExternalSecret001(ns)), ready)
		}
		if mode == "autogate" {
			if gates := stacktest.GatesOf(t, g); len(gates) == 0 {
				t.Fatal("autoGate placed no gate")
			} else {
				t.Logf("autoGate's gates: %v", gates)
			}
		}
		destroy(g)
	}
}
