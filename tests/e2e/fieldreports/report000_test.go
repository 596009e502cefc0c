package fieldreports

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/readiness-io/pulumi-readiness/internal/charts"
	"github.com/readiness-io/pulumi-readiness/internal/fakes"
	"github.com/readiness-io/pulumi-readiness/internal/stack"
	"github.com/readiness-io/pulumi-readiness/internal/stacktest"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/internal/tools"
	"github.com/readiness-io/pulumi-readiness/sdk/go/readiness"
)

// TestFieldReport000CertManagerSecretMount: a helm.sh/v3:Release of cert-manager, a Certificate
// and a Deployment mounting its TLS Secret, all by pulumi-kubernetes. Without a gate the
// Deployment's pod is started before cert-manager issued the Secret: the kubelet reports the
// report's `MountVolume.SetUp failed for volume "tls" : secret "ai-ops-agent-tls" not found`,
// and the Deployment, whose rollout pulumi-kubernetes awaits, does not become available within
// the stack's timeout (the pod waits out the kubelet's backoff). With CertificateReady between
// them the pod mounts the Secret at once.
func TestFieldReport000CertManagerSecretMount(t *testing.T) {
	ctx := context.Background()
	env := stacktest.Prepare(t)
	// cert-manager's CRDs as a separate step (crds.enabled=false): other tests of this package
	// install the same CRDs, which a release could not adopt.
	crds, err := tools.ModuleCRDs(ctx, tools.CertManagerModule, "deploy/crds")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range crds {
		if _, err := testenv.Resource(t, c).Create(ctx, c, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	wh := testenv.NewWebhook(t)
	wh.Start(t) // cert-manager's own webhook is not this report's story: it serves from the start
	objs, err := charts.Rendered("cert-manager")
	if err != nil {
		t.Fatal(err)
	}
	chart, err := charts.Write(t.TempDir(), "cert-manager", charts.Prepare(charts.WithoutCRDs(objs), wh.Webhook))
	if err != nil {
		t.Fatal(err)
	}
	ns := testenv.Namespace(t, "ai-ops")
	program := func(gated bool) pulumi.RunFunc {
		return func(ctx *pulumi.Context) error {
			release, err := stack.NewHelmRelease(ctx, "cert-manager", pulumi.Map{
				"chart": pulumi.String(chart), "name": pulumi.String("cert-manager"),
				"namespace": pulumi.String("cert-manager"), "createNamespace": pulumi.Bool(true), "timeout": pulumi.Int(180),
			})
			if err != nil {
				return err
			}
			cert, err := stack.NewKube(ctx, "ai-ops-agent-cert", `apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: ai-ops-agent, namespace: `+ns+`}
spec: {secretName: ai-ops-agent-tls, dnsNames: [ai-ops-agent.example.test], issuerRef: {name: vault-issuer, kind: ClusterIssuer}}`,
				pulumi.DependsOn([]pulumi.Resource{release}))
			if err != nil {
				return err
			}
			var before pulumi.Resource = cert
			if gated {
				if before, err = readiness.NewCertificateReady(ctx, "ai-ops-agent-tls", &readiness.CertificateReadyArgs{
					Name: pulumi.String("ai-ops-agent"), Namespace: pulumi.String(ns), Timeout: pulumi.String("2m"),
				}, pulumi.DependsOn([]pulumi.Resource{cert})); err != nil {
					return err
				}
			}
			_, err = stack.NewKube(ctx, "ai-ops-agent", `apiVersion: apps/v1
kind: Deployment
metadata: {name: ai-ops-agent, namespace: `+ns+`}
spec:
  selector: {matchLabels: {app: ai-ops-agent}}
  template:
    metadata:
      labels: {app: ai-ops-agent}
      annotations: {`+fakes.KubeletMountAnnotation+`: 1h}
    spec:
      nodeSelector: {type: kwok}
      containers: [{name: agent, image: registry.local/agent:1, volumeMounts: [{name: tls, mountPath: /etc/tls, readOnly: true}]}]
      volumes: [{name: tls, secret: {secretName: ai-ops-agent-tls}}]`, pulumi.DependsOn([]pulumi.Resource{before}))
			return err
		}
	}

	run := func(gated bool) (*fakes.Kubelet, error) {
		s := stacktest.NewStack(t, env, "report000", program(gated))
		k := fakes.PlayKubelet(testenv.CP.Client, ns, "app=ai-ops-agent", nil)
		issuer := fakes.IssueWhenCreated(testenv.Dynamic(t), ns, "ai-ops-agent", "ai-ops-agent-tls", 12*time.Second, nil)
		_, err := stacktest.UpErr(s)
		_ = k.Stop()
		if ierr := issuer.Stop(); ierr != nil {
			t.Fatal(ierr)
		}
		stacktest.Destroy(t, s)
		_ = testenv.CP.Client.CoreV1().Secrets(ns).Delete(context.Background(), "ai-ops-agent-tls", metav1.DeleteOptions{})
		return k, err
	}

	// Without the gate: the kubelet's FailedMount (the Secret arrives at +12 s).
	began := time.Now()
	k, err := run(false)
	t.Logf("without the gate: up returned after %s (err: %v) with %d failed mounts", time.Since(began).Round(time.Second), err != nil, len(k.FailedMounts()))
	if fm := k.FailedMounts(); len(fm) == 0 || !strings.Contains(fm[0], `MountVolume.SetUp failed for volume "tls" : secret "ai-ops-agent-tls" not found`) {
		t.Fatalf("without the gate the pod must meet the report's FailedMount; kubelet saw %q", fm)
	}
	// With the gate: no failed mount.
	k, err = run(true)
	if err != nil {
		t.Fatal(err)
	}
	if fm := k.FailedMounts(); len(fm) != 0 {
		t.Fatalf("with CertificateReady the pod must mount its Secret at once; kubelet saw %q", fm)
	}
}
