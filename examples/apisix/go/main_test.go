package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/readiness-io/pulumi-readiness/examples/internal/run"
	"github.com/readiness-io/pulumi-readiness/internal/charts"
	"github.com/readiness-io/pulumi-readiness/internal/controlplane"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, controlplane.Options{})) }

var (
	routes        = schema.GroupVersionResource{Group: "apisix.apache.org", Version: "v2", Resource: "apisixroutes"}
	gatewayProxys = schema.GroupVersionResource{Group: "apisix.apache.org", Version: "v1alpha1", Resource: "gatewayproxies"}
)

// TestProgram runs the example as it is against the local control plane. The `apisix` umbrella
// chart is not among the rendered charts: config chartPath is charts.APISIXShaped, the rendered
// apisix-ingress-controller chart (its CRDs, Deployment, webhook configuration with every webhook
// Fail, sent to a server on 127.0.0.1) beside a gateway shaped as the umbrella's. That server
// plays the controller's webhook: it starts serving 3 s after the release is deployed (the
// report measured 7-10 s after the pod started). At that moment the test checks that only the
// gates hold the routes and the GatewayProxy back (the release is done, none of them exists)
// and that creating the GatewayProxy then fails the report's way (`failed calling webhook`).
// After `up`, all of them exist and the webhook answered.
func TestProgram(t *testing.T) {
	wh := testenv.NewWebhook(t)
	chart, err := charts.APISIXShaped(t.TempDir(), wh.Webhook)
	if err != nil {
		t.Fatal(err)
	}
	s := run.Stack(t, "readiness-example-apisix", map[string]string{"chartPath": chart}, Program)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dyn := testenv.Dynamic(t)
	served := make(chan error, 1)
	go func() { served <- serveAfterRelease(ctx, wh, dyn, 3*time.Second) }()
	run.Up(t, s)
	cancel()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if wh.Calls.Load() == 0 {
		t.Error("up succeeded without the ingress controller's webhooks ever answering")
	}
	for _, name := range []string{"hello-world", "nodejs-demo", "grafana"} {
		if _, err := dyn.Resource(routes).Namespace("apisix").Get(context.Background(), name, metav1.GetOptions{}); err != nil {
			t.Errorf("ApisixRoute %s: %v", name, err)
		}
	}
	if _, err := dyn.Resource(gatewayProxys).Namespace("apisix").Get(context.Background(), "apisix-config", metav1.GetOptions{}); err != nil {
		t.Errorf("GatewayProxy apisix-config: %v", err)
	}
	run.Destroy(t, s)
}

// serveAfterRelease plays the ingress controller's webhook server: it starts serving `after`
// the `apisix` release is deployed, after checking that the gates mattered (gatesHeld).
func serveAfterRelease(ctx context.Context, wh *testenv.Webhook, dyn dynamic.Interface, after time.Duration) error {
	client := testenv.CP.Client
	for {
		secs, err := client.CoreV1().Secrets("apisix").List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=apisix,status=deployed"})
		if err == nil && len(secs.Items) > 0 {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("up ended before the apisix release was deployed")
		case <-time.After(100 * time.Millisecond):
		}
	}
	select {
	case <-ctx.Done():
		return fmt.Errorf("up ended before the webhook served")
	case <-time.After(after):
	}
	// Whatever the checks find, the webhook then serves, so that `up` ends and the test reports.
	err := gatesHeld(ctx, dyn)
	return errors.Join(err, wh.Webhook.Start())
}

// gatesHeld checks, while the webhook is down and the release is deployed, that no route and no
// GatewayProxy exists, and that creating the GatewayProxy now fails as in the report.
func gatesHeld(ctx context.Context, dyn dynamic.Interface) error {
	var errs []error
	for _, name := range []string{"hello-world", "nodejs-demo", "grafana"} {
		if _, err := dyn.Resource(routes).Namespace("apisix").Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("ApisixRoute %s exists (or cannot be read: %v) before the webhook serves: the gate did not hold it", name, err))
		}
	}
	if _, err := dyn.Resource(gatewayProxys).Namespace("apisix").Get(ctx, "apisix-config", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("GatewayProxy apisix-config exists (or cannot be read: %v) before the webhook serves: the gate did not hold it", err))
	}
	proxy := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apisix.apache.org/v1alpha1", "kind": "GatewayProxy",
		"metadata": map[string]any{"name": "apisix-config", "namespace": "apisix"},
		"spec": map[string]any{"provider": map[string]any{"type": "ControlPlane", "controlPlane": map[string]any{
			"endpoints": []any{"http://apisix-admin.apisix.svc:9180"},
			"auth":      map[string]any{"type": "AdminKey", "adminKey": map[string]any{"value": "x"}}}}}}}
	_, err := dyn.Resource(gatewayProxys).Namespace("apisix").Create(ctx, proxy, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err == nil || !strings.Contains(err.Error(), `failed calling webhook "vgatewayproxy-v1alpha1.kb.io"`) || !strings.Contains(err.Error(), "connection refused") {
		errs = append(errs, fmt.Errorf("creating the GatewayProxy while the webhook is down: got %v, want the report's `failed calling webhook ... connection refused`", err))
	}
	return errors.Join(errs...)
}
