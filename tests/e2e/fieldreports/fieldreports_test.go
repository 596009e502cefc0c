package fieldreports

// Field reports 000, 001 and 002 as stacks of what users run: the charts' real objects installed
// by pulumi-kubernetes (helm.sh/v3:Release of a local chart wrapping the rendered chart, see
// internal/charts), then the objects that report failed to create, made by pulumi-kubernetes
// too. Without the gate the stack fails with the report's error as pulumi-kubernetes reports
// it; with the gate it succeeds. What the test plays itself is what no process here runs: the
// charts' webhook servers (internal/fakes, on 127.0.0.1, serving late) and cert-manager.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/events"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/readiness-io/pulumi-readiness/internal/charts"
	"github.com/readiness-io/pulumi-readiness/internal/fakes"
	"github.com/readiness-io/pulumi-readiness/internal/stack"
	"github.com/readiness-io/pulumi-readiness/internal/stacktest"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/sdk/go/readiness"
)

// TestFieldReport002IngressNginxWebhook: a helm.sh/v3:Release of ingress-nginx, then an Ingress.
// Helm's own wait (Deployment ready) returns before the admission webhook serves, so the
// Ingress fails with `failed calling webhook "validate.nginx.ingress.kubernetes.io" ...
// connection refused`; HelmReleaseReady between them waits for the webhook. The gated stack
// is rebuilt (up + destroy) five times in a row, as field report 004's rebuild loop does.
func TestFieldReport002IngressNginxWebhook(t *testing.T) {
	env := stacktest.Prepare(t)
	wh := testenv.NewWebhook(t)
	chart, err := charts.Local(t.TempDir(), "ingress-nginx", wh.Webhook)
	if err != nil {
		t.Fatal(err)
	}
	program := func(gated bool) pulumi.RunFunc {
		return func(ctx *pulumi.Context) error {
			release, err := stack.NewHelmRelease(ctx, "ingress-nginx", pulumi.Map{
				"chart": pulumi.String(chart), "name": pulumi.String("ingress-nginx"),
				"namespace": pulumi.String("ingress-nginx"), "createNamespace": pulumi.Bool(true),
				"timeout": pulumi.Int(180),
			})
			if err != nil {
				return err
			}
			var before pulumi.Resource = release
			if gated {
				gate, err := readiness.NewHelmReleaseReady(ctx, "ingress-nginx-ready", &readiness.HelmReleaseReadyArgs{
					Name: pulumi.String("ingress-nginx"), Namespace: pulumi.String("ingress-nginx"),
					Timeout: pulumi.String("2m"), Triggers: pulumi.Array{release.Revision()},
				}, pulumi.DependsOn([]pulumi.Resource{release}))
				if err != nil {
					return err
				}
				before = gate
			}
			ns, err := stack.NewKube(ctx, "apps", "apiVersion: v1\nkind: Namespace\nmetadata: {name: apps}")
			if err != nil {
				return err
			}
			_, err = stack.NewKube(ctx, "web", `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: web
  namespace: apps
  # No ingress controller runs here to fill status.loadBalancer, which pulumi-kubernetes' own
  # Ingress await waits for; the webhook is what this report is about.
  annotations: {pulumi.com/skipAwait: "true"}
spec:
  ingressClassName: nginx
  rules:
  - host: web.example.test
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]}`,
				pulumi.DependsOn([]pulumi.Resource{before, ns}))
			return err
		}
	}

	// Without the gate: the webhook is not serving yet when pulumi-kubernetes creates the Ingress.
	s := stacktest.NewStack(t, env, "report002", program(false))
	stop := stacktest.ServeWhenAvailable(t, wh, "ingress-nginx", "ingress-nginx-controller", -1)
	_, err = stacktest.UpErr(s)
	stop()
	stacktest.RequireFailure(t, err, `failed calling webhook "validate.nginx.ingress.kubernetes.io"`, "connection refused")
	stacktest.Destroy(t, s)

	// With the gate, rebuilt five times: the webhook serves 5 s after the controller is available.
	g := stacktest.NewStack(t, env, "report002gated", program(true))
	for i := 1; i <= 5; i++ {
		stop := stacktest.ServeWhenAvailable(t, wh, "ingress-nginx", "ingress-nginx-controller", 5*time.Second)
		_, err := stacktest.UpErr(g)
		stop()
		if err != nil {
			t.Fatalf("rebuild %d: %v", i, err)
		}
		if wh.Calls.Load() == 0 {
			t.Fatalf("rebuild %d: the Ingress was created without the webhook ever answering", i)
		}
		stacktest.Destroy(t, g)
		wh.Stop()
		wh.Calls.Store(0)
	}
}

// TestFieldReport001ExternalSecretsWebhook: a helm.sh/v3:Release of External Secrets (with its
// CRDs), then ExternalSecrets in four namespaces that depend on the release, as the report's
// stack did. `dependsOn` on the release is not enough: they fail with `failed calling webhook
// "validate.externalsecret.external-secrets.io"`. HelmReleaseReady between them makes the
// rebuild succeed.
func TestFieldReport001ExternalSecretsWebhook(t *testing.T) {
	env := stacktest.Prepare(t)
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
	program := func(gated bool) pulumi.RunFunc {
		return func(ctx *pulumi.Context) error {
			release, err := stack.NewHelmRelease(ctx, "external-secrets", pulumi.Map{
				"chart": pulumi.String(chart), "name": pulumi.String("external-secrets"),
				"namespace": pulumi.String("external-secrets"), "createNamespace": pulumi.Bool(true),
				"timeout": pulumi.Int(180),
			})
			if err != nil {
				return err
			}
			deps := []pulumi.Resource{release}
			if gated {
				gate, err := readiness.NewHelmReleaseReady(ctx, "external-secrets-ready", &readiness.HelmReleaseReadyArgs{
					Name: pulumi.String("external-secrets"), Namespace: pulumi.String("external-secrets"),
					Timeout: pulumi.String("2m"), Triggers: pulumi.Array{release.Revision()},
				}, pulumi.DependsOn([]pulumi.Resource{release}))
				if err != nil {
					return err
				}
				deps = []pulumi.Resource{gate}
			}
			for _, ns := range namespaces {
				opts := []pulumi.ResourceOption{pulumi.DependsOn(deps)}
				if ns != "default" {
					n, err := stack.NewKube(ctx, "ns-"+ns, "apiVersion: v1\nkind: Namespace\nmetadata: {name: "+ns+"}")
					if err != nil {
						return err
					}
					opts = append(opts, pulumi.DependsOn([]pulumi.Resource{n}))
				}
				if _, err := stack.NewKube(ctx, "ghcr-pull-secret-"+ns, `apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: ghcr-pull-secret, namespace: `+ns+`}
spec:
  refreshInterval: 1h
  secretStoreRef: {kind: ClusterSecretStore, name: pulumi-esc}
  target: {name: ghcr-pull-secret}
  dataFrom: [{extract: {key: ghcr}}]`, opts...); err != nil {
					return err
				}
			}
			return nil
		}
	}
	// The chart's webhook also intercepts DELETE: destroy while it serves.
	cleanup := func(s auto.Stack) {
		testenv.CRDCachesReady(t, "external-secrets.io") // the release deletes its CRDs (see there)
		_ = wh.Webhook.Start()
		stacktest.Destroy(t, s)
		wh.Stop()
	}

	s := stacktest.NewStack(t, env, "report001", program(false))
	stop := stacktest.ServeWhenAvailable(t, wh, "external-secrets", "external-secrets-webhook", -1)
	_, err = stacktest.UpErr(s)
	stop()
	stacktest.RequireFailure(t, err, `failed calling webhook "validate.externalsecret.external-secrets.io"`)
	cleanup(s)

	g := stacktest.NewStack(t, env, "report001gated", program(true))
	stop = stacktest.ServeWhenAvailable(t, wh, "external-secrets", "external-secrets-webhook", 5*time.Second)
	_, err = stacktest.UpErr(g)
	stop()
	if err != nil {
		t.Fatal(err)
	}
	cleanup(g)
}

// TestGateAfterAFailedRelease: a Release that pulumi-kubernetes fails (Helm's wait times out on a
// Deployment that never becomes ready) fails the stack with Helm's error at once; the gate that
// depends on it is never created, so nothing hangs on it.
func TestGateAfterAFailedRelease(t *testing.T) {
	env := stacktest.Prepare(t)
	chart, err := charts.Write(t.TempDir(), "stuck", []*unstructured.Unstructured{testenv.Object(t, `apiVersion: apps/v1
kind: Deployment
metadata: {name: stuck, namespace: stuck}
spec:
  selector: {matchLabels: {app: stuck}}
  template:
    metadata: {labels: {app: stuck}, annotations: {`+fakes.KubeletMountAnnotation+`: 1h}}
    spec: {nodeSelector: {type: kwok}, containers: [{name: app, image: registry.local/stuck:1}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	s := stacktest.NewStack(t, env, "failedrelease", func(ctx *pulumi.Context) error {
		release, err := stack.NewHelmRelease(ctx, "stuck", pulumi.Map{"chart": pulumi.String(chart), "name": pulumi.String("stuck"),
			"namespace": pulumi.String("stuck"), "createNamespace": pulumi.Bool(true), "timeout": pulumi.Int(10)})
		if err != nil {
			return err
		}
		_, err = readiness.NewHelmReleaseReady(ctx, "stuck-ready", &readiness.HelmReleaseReadyArgs{
			Name: pulumi.String("stuck"), Namespace: pulumi.String("stuck"), Timeout: pulumi.String("10m"),
		}, pulumi.DependsOn([]pulumi.Resource{release}))
		return err
	})
	_, err = stacktest.UpErr(s)
	stacktest.RequireFailure(t, err, "kubernetes:helm.sh/v3:Release", "stuck")
	if strings.Contains(err.Error(), "HelmReleaseReady stuck-ready creating") {
		t.Fatalf("the gate after a failed release was started:\n%v", err)
	}
}

// TestChartV4IngressNginxWebhook: report 002 with helm.sh/v4:Chart, which renders the chart and
// creates each object as a child resource (pulumi-kubernetes awaits each: the controller
// Deployment's rollout) and writes no Helm release record, so HelmReleaseReady cannot gate it.
// ChartReady, given the Chart's `resources` output as it is, checks those objects by
// HelmReleaseReady's rules, webhooks included: the Ingress waits for the webhook; without it
// the Ingress fails as with a Release.
func TestChartV4IngressNginxWebhook(t *testing.T) {
	env := stacktest.Prepare(t)
	wh := testenv.NewWebhook(t)
	chart, err := charts.Local(t.TempDir(), "ingress-nginx", wh.Webhook)
	if err != nil {
		t.Fatal(err)
	}
	program := func(gated bool) pulumi.RunFunc {
		return func(ctx *pulumi.Context) error {
			c, err := stack.NewChart(ctx, "ingress-nginx", pulumi.Map{"chart": pulumi.String(chart), "namespace": pulumi.String("ingress-nginx")})
			if err != nil {
				return err
			}
			var before pulumi.Resource = c
			if gated {
				gate, err := readiness.NewChartReady(ctx, "ingress-nginx-ready", &readiness.ChartReadyArgs{
					Resources: c.Resources, Timeout: pulumi.String("2m")})
				if err != nil {
					return err
				}
				before = gate
				ctx.Export("objects", gate.Objects)
				ctx.Export("webhooks", gate.Webhooks)
			}
			_, err = stack.NewKube(ctx, "web", `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web, namespace: default, annotations: {pulumi.com/skipAwait: "true"}}
spec:
  ingressClassName: nginx
  rules: [{host: web.example.test, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]}}]`,
				pulumi.DependsOn([]pulumi.Resource{before}))
			return err
		}
	}
	// A Chart v4 creates no namespace: the release's (made here as by an earlier step of the stack).
	nsObj := testenv.Object(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: ingress-nginx}")
	if _, err := testenv.Resource(t, nsObj).Create(context.Background(), nsObj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	s := stacktest.NewStack(t, env, "chartv4", program(false))
	_, err = stacktest.UpErr(s)
	stacktest.RequireFailure(t, err, `failed calling webhook "validate.nginx.ingress.kubernetes.io"`, "connection refused")
	stacktest.Destroy(t, s)

	g := stacktest.NewStack(t, env, "chartv4gated", program(true))
	// A first preview: the Chart's resources are unknown, and the gate must not refuse them.
	if _, err := g.Preview(context.Background()); err != nil {
		t.Fatalf("preview: %v", err)
	}
	// The webhook serves 3 s after the gate's create began: after everything the Chart itself
	// awaited, so the Ingress succeeds only if the gate held it for the webhook.
	evs := make(chan events.EngineEvent)
	go func() {
		started := false
		for e := range evs {
			if pre := e.ResourcePreEvent; pre != nil && !started && pre.Metadata.Type == "readiness:index:ChartReady" && pre.Metadata.Op == "create" {
				started = true
				time.AfterFunc(3*time.Second, func() { _ = wh.Webhook.Start() }) // its error shows as the Ingress's
			}
		}
	}()
	var out strings.Builder
	res, err := g.Up(context.Background(), optup.EventStreams(evs), optup.ProgressStreams(&out))
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if wh.Calls.Load() == 0 {
		t.Fatal("the Ingress was created without the webhook ever answering")
	}
	// Every object of the chart was checked, the webhook configuration among them.
	if n, _ := res.Outputs["objects"].Value.(float64); n < 10 {
		t.Errorf("objects = %v: the gate did not get the chart's objects", res.Outputs["objects"].Value)
	}
	if hooks := fmt.Sprint(res.Outputs["webhooks"].Value); hooks != "[ingress-nginx-admission]" {
		t.Errorf("webhooks = %s, want [ingress-nginx-admission]", hooks)
	}
	stacktest.Destroy(t, g)
	wh.Stop()
}

// TestReleaseUpgradeGateWaitsAgain: HelmReleaseReady with `triggers` on the Release's revision.
// An upgrade (new values: Helm writes revision 2) replaces the gate, which waits again: here for
// the webhook, down during the upgrade as while a new controller pod starts.
func TestReleaseUpgradeGateWaitsAgain(t *testing.T) {
	env := stacktest.Prepare(t)
	wh := testenv.NewWebhook(t)
	chart, err := charts.Local(t.TempDir(), "ingress-nginx", wh.Webhook)
	if err != nil {
		t.Fatal(err)
	}
	program := func(replicaCount int) pulumi.RunFunc {
		return func(ctx *pulumi.Context) error {
			release, err := stack.NewHelmRelease(ctx, "ingress-nginx", pulumi.Map{
				"chart": pulumi.String(chart), "name": pulumi.String("ingress-nginx"),
				"namespace": pulumi.String("ingress-nginx"), "createNamespace": pulumi.Bool(true), "timeout": pulumi.Int(180),
				"values": pulumi.Map{"controller": pulumi.Map{"replicaCount": pulumi.Int(replicaCount)}},
			})
			if err != nil {
				return err
			}
			_, err = readiness.NewHelmReleaseReady(ctx, "ingress-nginx-ready", &readiness.HelmReleaseReadyArgs{
				Name: pulumi.String("ingress-nginx"), Namespace: pulumi.String("ingress-nginx"),
				Timeout: pulumi.String("2m"), Triggers: pulumi.Array{release.Revision()},
			}, pulumi.DependsOn([]pulumi.Resource{release}))
			ctx.Export("revision", release.Revision())
			return err
		}
	}
	wh.Start(t)
	s := stacktest.NewStack(t, env, "upgrade", program(1))
	if _, err := stacktest.UpErr(s); err != nil {
		t.Fatal(err)
	}
	wh.Stop()
	s2 := stacktest.NewStack(t, env, "upgrade", program(2))
	served := make(chan time.Time, 1)
	go func() {
		// The upgraded controller's webhook listens 3 s after Helm wrote revision 2.
		for {
			if _, err := testenv.CP.Client.CoreV1().Secrets("ingress-nginx").Get(context.Background(),
				"sh.helm.release.v1.ingress-nginx.v2", metav1.GetOptions{}); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond) // the harness watches for the upgrade
		}
		time.Sleep(3 * time.Second)
		wh.Start(t)
		served <- time.Now()
	}()
	var out strings.Builder
	res, err := s2.Up(context.Background(), optup.ProgressStreams(&out))
	returned := time.Now()
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "readiness:index:HelmReleaseReady ingress-nginx-ready replaced") {
		t.Errorf("the gate was not replaced by the new revision:\n%s", out.String())
	}
	if rev := res.Outputs["revision"].Value; rev != float64(2) {
		t.Fatalf("revision after the upgrade = %v, want 2", rev)
	}
	if at := <-served; returned.Before(at) {
		t.Fatalf("the upgraded release's gate returned (%s) before its webhook served (%s)", returned, at)
	}
	stacktest.Destroy(t, s2)
	wh.Stop()
}

// TestConfigGroupOrdersCRDsBeforeTheirObjects: yaml/v2:ConfigGroup holding a CRD and an object of
// its kind succeeds with no gate: pulumi-kubernetes creates the CRD first and retries the object
// while its kind is not served yet. (A CRD that another step installs is what CrdReady is for.)
func TestConfigGroupOrdersCRDsBeforeTheirObjects(t *testing.T) {
	env := stacktest.Prepare(t)
	group := fmt.Sprintf("cg%d.readiness.test", time.Now().UnixNano()%1_000_000)
	yaml := testenv.CRD(group, "Widget", "widgets") + "\n---\napiVersion: " + group + "/v1\nkind: Widget\nmetadata: {name: w1, namespace: default}\nspec: {size: 1}\n"
	s := stacktest.NewStack(t, env, "configgroup", func(ctx *pulumi.Context) error {
		_, err := stack.NewConfigGroup(ctx, "app", pulumi.Map{"yaml": pulumi.String(yaml)})
		return err
	})
	if _, err := stacktest.UpErr(s); err != nil {
		t.Fatal(err)
	}
	w := testenv.Object(t, "apiVersion: "+group+"/v1\nkind: Widget\nmetadata: {name: w1, namespace: default}")
	if _, err := testenv.Resource(t, w).Get(context.Background(), "w1", metav1.GetOptions{}); err != nil {
		t.Fatalf("the ConfigGroup's Widget: %v", err)
	}
	stacktest.Destroy(t, s)
}
