package realnode

import (
	"context"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/readiness-io/pulumi-readiness/internal/charts"
	"github.com/readiness-io/pulumi-readiness/internal/reportstack"
	"github.com/readiness-io/pulumi-readiness/internal/stack"
	"github.com/readiness-io/pulumi-readiness/internal/stacktest"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
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
	releaseReport{
		name: "report001", release: "external-secrets", namespace: "external-secrets",
		install: func(ctx *pulumi.Context) (*stack.HelmRelease, error) {
			return reportstack.ExternalSecretsRelease(ctx, chart)
		},
		objects: reportstack.ExternalSecrets001,
		failure: `failed calling webhook "validate.externalsecret.external-secrets.io"`,
		checkGated: func(t *testing.T, mode string, s auto.Stack) {
			ready := webhookPodReadyAt(t, "external-secrets", "app.kubernetes.io/name=external-secrets-webhook")
			for _, ns := range reportstack.Namespaces001 {
				stacktest.NotBefore(t, "ExternalSecret in "+ns, stacktest.CreatedAt(t, reportstack.ExternalSecret001(ns)), ready)
			}
		},
		destroy: func(t *testing.T, s auto.Stack) {
			testenv.CRDCachesReady(t, "external-secrets.io") // the release deletes its CRDs (see there)
			stacktest.Destroy(t, s)
			testenv.CRDsGone(t, "external-secrets.io")
			testenv.PodsGone(t, "external-secrets")
		},
	}.run(t, stacktest.Prepare(t))
}
