package realnode

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/readiness-io/pulumi-readiness/internal/charts"
	"github.com/readiness-io/pulumi-readiness/internal/reportstack"
	"github.com/readiness-io/pulumi-readiness/internal/stacktest"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/sdk/go/readiness"
)

// TestRealFieldReport000CertManagerSecretMount: cert-manager v1.11.5 as real pods (controller,
// webhook, cainjector, and the startupapicheck hook Helm runs), installed by a helm.sh/v3
// Release of its real chart; a CA issuer bootstrapped from a self-signed one (cert-manager's
// documented pattern); then the report's Certificate and a Deployment mounting its Secret.
// Without a gate the pod starts before cert-manager issued the Secret and the real kubelet
// reports the report's `MountVolume.SetUp failed for volume "tls" : secret "ai-ops-agent-tls"
// not found`. With CertificateReady, and with autoGate's line, the pod mounts it at once.
func TestRealFieldReport000CertManagerSecretMount(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	chart := installable(ctx, t, charts.CertManagerChart)
	env := stacktest.Prepare(t)
	const ns = "ai-ops"
	program := func(mode string) pulumi.RunFunc {
		return func(ctx *pulumi.Context) error {
			if mode == "autogate" {
				if err := readiness.AutoGate(ctx, &readiness.AutoGateOptions{Timeout: "3m"}); err != nil {
					return err
				}
			}
			release, err := reportstack.CertManagerRelease(ctx, chart, true)
			if err != nil {
				return err
			}
			cert, err := reportstack.Certificate000(ctx, release)
			if err != nil {
				return err
			}
			before := cert
			if mode == "gate" {
				if before, err = readiness.NewCertificateReady(ctx, "ai-ops-agent-tls", &readiness.CertificateReadyArgs{
					Name: pulumi.String("ai-ops-agent"), Namespace: pulumi.String(ns), Timeout: pulumi.String("3m"),
				}, reportstack.After(cert)); err != nil {
					return err
				}
			}
			return reportstack.Deployment000(ctx, before)
		}
	}

	for _, mode := range []string{"none", "gate", "autogate"} {
		s := stacktest.NewStack(t, env, "report000"+mode, program(mode))
		mounts := watchFailedMounts(ctx, t, ns)
		began := time.Now()
		var out strings.Builder
		_, err := s.Up(ctx, optup.ProgressStreams(&out))
		took := time.Since(began)
		failed := mounts()
		t.Logf("%s: what pulumi up showed:\n%s", mode, createdLines(out.String()))
		t.Logf("%s: up returned after %s (err: %v); the kubelet's FailedMount events: %d", mode, took.Round(time.Millisecond), err != nil, len(failed))
		switch mode {
		case "none":
			if len(failed) == 0 || !strings.Contains(failed[0], `MountVolume.SetUp failed for volume "tls" : secret "ai-ops-agent-tls" not found`) {
				t.Fatalf("without a gate the pod must meet the report's FailedMount; the kubelet said %q (up err: %v)", failed, err)
			}
		default:
			if err != nil {
				t.Fatalf("%v\n%s", err, out.String())
			}
			if len(failed) != 0 {
				t.Fatalf("with %s the pod must mount its Secret at once; the kubelet said %q", mode, failed)
			}
			if mode == "autogate" {
				t.Logf("autoGate's gates: %v", stacktest.GatesOf(t, s))
			}
		}
		testenv.CRDCachesReady(t, "cert-manager.io") // the release deletes its CRDs
		stacktest.Destroy(t, s)
		testenv.CRDsGone(t, "cert-manager.io")
		testenv.PodsGone(t, "cert-manager")
		dropLeases(ctx, t, "kube-system", "cert-manager")
	}
}

// dropLeases deletes cert-manager's leader Leases as a rebuilt cluster starts without them
// (controlplane.DropLeases says why). Real (a gate that dry-runs through the webhook waits it
// out), but not this test's story.
func dropLeases(ctx context.Context, t *testing.T, ns, prefix string) {
	t.Helper()
	if err := testenv.CP.DropLeases(ctx, ns, prefix); err != nil {
		t.Fatal(err)
	}
}

// watchFailedMounts collects the kubelet's FailedMount events in ns from now; the returned
// function stops and returns their messages.
func watchFailedMounts(ctx context.Context, t *testing.T, ns string) func() []string {
	t.Helper()
	w, err := testenv.CP.Client.CoreV1().Events(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "reason=FailedMount"})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var msgs []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if e, ok := ev.Object.(*corev1.Event); ok && e.Source.Component == "kubelet" {
				mu.Lock()
				msgs = append(msgs, e.Message)
				mu.Unlock()
			}
		}
	}()
	return func() []string {
		w.Stop()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return msgs
	}
}
