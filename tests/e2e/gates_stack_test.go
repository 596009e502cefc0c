package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto/optdestroy"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/readiness-io/pulumi-readiness/internal/stack"
	"github.com/readiness-io/pulumi-readiness/internal/stacktest"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/internal/tools"
	"github.com/readiness-io/pulumi-readiness/sdk/go/readiness"
)

// TestWebhookReadyStackRebuilds is field report 001: ExternalSecret-like objects in several
// namespaces depend on WebhookReady; the webhook starts serving late on every rebuild. Five
// rebuilds in a row succeed with no retry; without the gate the same stack fails.
func TestWebhookReadyStackRebuilds(t *testing.T) {
	ctx := context.Background()
	env := stacktest.Prepare(t)
	group := fmt.Sprintf("eso%d.readiness.test", time.Now().UnixNano()%1_000_000)
	testenv.Apply(t, testenv.CRD(group, "Widget", "widgets"))
	namespaces := []string{testenv.Namespace(t, "hello-world"), testenv.Namespace(t, "nodejs-demo"), testenv.Namespace(t, "storage")}
	cfg := "eso-" + strings.Split(group, ".")[0]

	program := func(gated bool) pulumi.RunFunc {
		return func(ctx *pulumi.Context) error {
			var deps []pulumi.Resource
			if gated {
				gate, err := readiness.NewWebhookReady(ctx, "eso-webhook", &readiness.WebhookReadyArgs{
					ValidatingWebhookConfiguration: pulumi.String(cfg),
					Probe: pulumi.Map{"apiVersion": pulumi.String(group + "/v1"), "kind": pulumi.String("Widget"),
						"metadata": pulumi.Map{"name": pulumi.String("probe"), "namespace": pulumi.String(namespaces[0])}},
					Timeout: pulumi.String("2m"),
				})
				if err != nil {
					return err
				}
				deps = append(deps, gate)
			}
			for _, ns := range namespaces {
				if _, err := stack.NewKube(ctx, "ghcr-pull-secret-"+ns, fmt.Sprintf(
					"apiVersion: %s/v1\nkind: Widget\nmetadata: {name: ghcr-pull-secret, namespace: %s}\nspec: {secretStoreRef: vault}", group, ns),
					pulumi.DependsOn(deps)); err != nil {
					return err
				}
			}
			return nil
		}
	}

	// run brings the stack up with the webhook serving late after the up began; late 0: not
	// before the up returns.
	run := func(name string, gated bool, late time.Duration) error {
		wh := testenv.NewWebhook(t)
		wh.Register(t, cfg, group)
		defer func() {
			wh.Stop()
			_ = testenv.Dynamic(t).Resource(schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1",
				Resource: "validatingwebhookconfigurations"}).Delete(context.Background(), cfg, metav1.DeleteOptions{})
		}()
		s, err := env.Stack(ctx, "eso", name, string(testenv.CP.Kubeconfig), program(gated))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _, _ = s.Destroy(ctx, optdestroy.Remove()) }()
		upDone, served := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(served)
			if late == 0 {
				return
			}
			select {
			case <-time.After(late): // the webhook pod becomes ready late, as after a Helm install
				wh.Start(t)
			case <-upDone:
			}
		}()
		var out strings.Builder
		_, err = s.Up(ctx, optup.ProgressStreams(&out))
		close(upDone)
		<-served
		if err != nil {
			return fmt.Errorf("%w\n%s", err, out.String())
		}
		return nil
	}

	// Without the gate the webhook does not serve during the up at all: the dependents meet it
	// down however slowly the engine creates them on a loaded machine (3 s late, a cold CI run once
	// created them after it served, and the stack rightly passed).
	if err := run("nogate", false, 0); err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
		t.Fatalf("without the gate the stack must fail with `failed calling webhook`; got %v", err)
	}
	for i := 1; i <= 5; i++ {
		if err := run(fmt.Sprintf("rebuild%d", i), true, 3*time.Second); err != nil {
			t.Fatalf("rebuild %d failed: %v", i, err)
		}
	}
}

// TestCertificateReadyStack is field report 000: the Deployment mounting the TLS Secret is
// created only after cert-manager issued it. The order is read from the objects' own records.
func TestCertificateReadyStack(t *testing.T) {
	ctx := context.Background()
	env := stacktest.Prepare(t)
	crds, err := tools.ModuleCRDs(ctx, tools.CertManagerModule, "deploy/crds")
	if err != nil {
		t.Fatal(err)
	}
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	for _, c := range crds {
		if _, err := testenv.Dynamic(t).Resource(crdGVR).Create(ctx, c, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	ns := testenv.Namespace(t, "ai-ops")
	program := func(ctx *pulumi.Context) error {
		cert, err := stack.NewKube(ctx, "ai-ops-agent-cert", fmt.Sprintf(`apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: ai-ops-agent, namespace: %s}
spec: {secretName: ai-ops-agent-tls, dnsNames: [ai-ops-agent.example.test], issuerRef: {name: ca-issuer, kind: ClusterIssuer}}`, ns))
		if err != nil {
			return err
		}
		gate, err := readiness.NewCertificateReady(ctx, "ai-ops-agent-tls", &readiness.CertificateReadyArgs{
			Name: pulumi.String("ai-ops-agent"), Namespace: pulumi.String(ns), Timeout: pulumi.String("2m"),
			StableFor: pulumi.String("1s"), // issued, and still issued a second later
		}, pulumi.DependsOn([]pulumi.Resource{cert}))
		if err != nil {
			return err
		}
		dep, err := stack.NewKube(ctx, "ai-ops-agent", fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: ai-ops-agent, namespace: %s}
spec:
  selector: {matchLabels: {app: ai-ops-agent}}
  template:
    metadata: {labels: {app: ai-ops-agent}}
    spec:
      nodeSelector: {type: kwok}
      containers: [{name: agent, image: registry.local/agent:1}]
      volumes: [{name: tls, secret: {secretName: ai-ops-agent-tls}}]`, ns), pulumi.DependsOn([]pulumi.Resource{gate}))
		if err != nil {
			return err
		}
		ctx.Export("secretName", gate.SecretName)
		ctx.Export("deploymentCreatedAt", dep.CreationTimestamp())
		return nil
	}
	s := stacktest.NewStack(t, env, "certs", program)

	// Play cert-manager: once the Certificate exists, issue it after a delay.
	var secretAt time.Time
	issued := make(chan error, 1)
	go func() {
		issued <- func() error {
			certGVR := schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificates"}
			for i := 0; i < 300; i++ {
				cur, err := testenv.Dynamic(t).Resource(certGVR).Namespace(ns).Get(ctx, "ai-ops-agent", metav1.GetOptions{})
				if err == nil {
					c := testenv.IssueCertificate(t, "ai-ops-agent.example.test", 48*time.Hour)
					stacktest.SleepToSecond(2 * time.Second) // issuance takes a while
					secretAt = time.Now()
					sec := testenv.Object(t, fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: ai-ops-agent-tls, namespace: %s}\ntype: kubernetes.io/tls", ns))
					sec.Object["data"] = map[string]any{"tls.crt": base64.StdEncoding.EncodeToString(c.CertPEM), "tls.key": base64.StdEncoding.EncodeToString(c.KeyPEM)}
					if _, err := testenv.Resource(t, sec).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
						return err
					}
					now := time.Now().UTC().Format(time.RFC3339)
					cur.Object["status"] = map[string]any{"revision": int64(1), "notAfter": c.NotAfter.UTC().Format(time.RFC3339),
						"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Ready", "message": "issued",
							"observedGeneration": cur.GetGeneration(), "lastTransitionTime": now}}}
					_, err = testenv.Dynamic(t).Resource(certGVR).Namespace(ns).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
					return err
				}
				time.Sleep(100 * time.Millisecond) // the harness waits for the stack to create the Certificate
			}
			return fmt.Errorf("the stack never created the Certificate")
		}()
	}()
	res, _ := stacktest.Up(t, s)
	if err := <-issued; err != nil {
		t.Fatal(err)
	}
	depAt := stacktest.OutputTime(t, res, "deploymentCreatedAt")
	if stacktest.CreatedBefore(depAt, secretAt.Add(time.Second)) {
		t.Errorf("the Deployment (%s) was created before its TLS Secret (%s) held for stableFor 1s", depAt, secretAt)
	}
	if res.Outputs["secretName"].Value != "ai-ops-agent-tls" {
		t.Errorf("secretName = %v", res.Outputs["secretName"].Value)
	}
}
