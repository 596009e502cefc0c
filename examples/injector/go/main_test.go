package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/readiness-io/pulumi-readiness/examples/internal/run"
	"github.com/readiness-io/pulumi-readiness/internal/charts"
	"github.com/readiness-io/pulumi-readiness/internal/controlplane"
	"github.com/readiness-io/pulumi-readiness/internal/fakes"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, controlplane.Options{})) }

// TestProgram runs the example as it is against the local control plane. Linkerd's charts are
// not among the rendered charts: config chartPath is charts.LinkerdShaped, the proxy injector's
// MutatingWebhookConfiguration (failurePolicy Ignore), Deployment and Service, its webhook sent
// to a server on 127.0.0.1 that injects a `linkerd-proxy` container. That server starts
// serving 5 s after Linkerd's release is deployed, as the injector pod does; at that moment the
// test checks that only the gate holds the workload back (the release is done, `web` does not
// exist) and that a Pod created now would run without a proxy, silently (the dry-run admits it
// uninjected). After `up`, every Pod of `web` must carry the proxy.
func TestProgram(t *testing.T) {
	wh := testenv.NewWebhook(t)
	wh.Mode.Store("inject:linkerd-proxy")
	dir, err := charts.LinkerdShaped(t.TempDir(), wh.Webhook)
	if err != nil {
		t.Fatal(err)
	}
	issuer, err := fakes.IssueCertificate("identity.linkerd.cluster.local", 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	s := run.Stack(t, "readiness-example-injector", map[string]string{"chartPath": dir,
		"trustAnchorPEM": string(issuer.CAPEM), "issuerCrtPEM": string(issuer.CertPEM), "issuerKeyPEM": string(issuer.KeyPEM)}, Program)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- serveAfterRelease(ctx, wh, 5*time.Second) }()
	res := run.Up(t, s)
	cancel()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if got := res.Outputs["injectorFailurePolicy"].Value; got != "Ignore" {
		t.Errorf("injectorFailurePolicy = %v, want Ignore", got)
	}
	pods, err := testenv.CP.Client.CoreV1().Pods("apps").List(context.Background(), metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) == 0 {
		t.Fatal("web has no Pods")
	}
	for _, p := range pods.Items {
		if !hasContainer(p.Spec.Containers, "linkerd-proxy") {
			t.Errorf("Pod %s runs without linkerd-proxy: the gate let web through before the injector served", p.Name)
		}
	}
	run.Destroy(t, s)
}

// serveAfterRelease plays Linkerd's injector pod: it starts serving `after` Linkerd's control
// plane release is deployed, after checking that the gate mattered (gateHeld).
func serveAfterRelease(ctx context.Context, wh *testenv.Webhook, after time.Duration) error {
	client := testenv.CP.Client
	for {
		secs, err := client.CoreV1().Secrets("linkerd").List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,status=deployed"})
		if err == nil && releaseDeployed(secs.Items, "linkerd-control-plane") {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("up ended before Linkerd's release was deployed")
		case <-time.After(100 * time.Millisecond):
		}
	}
	select {
	case <-ctx.Done():
		return fmt.Errorf("up ended before the injector served")
	case <-time.After(after):
	}
	// Whatever the checks find, the injector then serves, so that `up` ends and the test reports.
	err := gateHeld(ctx)
	return errors.Join(err, wh.Webhook.Start())
}

// gateHeld checks, while the injector is down and Linkerd's release is deployed, that only the
// gate holds `web` back and that a Pod created now would run without a proxy.
func gateHeld(ctx context.Context) error {
	client := testenv.CP.Client
	if _, err := client.AppsV1().Deployments("apps").Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		return fmt.Errorf("web exists (or cannot be read: %v) before the injector serves: the gate did not hold it", err)
	}
	probe := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "uninjected-", Namespace: "apps"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.local/web:1"}}}}
	got, err := client.CoreV1().Pods("apps").Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		return fmt.Errorf("dry-run of a Pod in apps while the injector is down: %w", err)
	}
	if hasContainer(got.Spec.Containers, "linkerd-proxy") {
		return fmt.Errorf("a Pod was injected before the injector served: the test's injector is not what the gate waited for")
	}
	return nil
}

// releaseDeployed says whether Helm's records hold a deployed revision of a release whose name
// starts with prefix (pulumi-kubernetes auto-names releases: linkerd-control-plane-1a2b3c4d).
func releaseDeployed(records []corev1.Secret, prefix string) bool {
	for _, s := range records {
		if strings.HasPrefix(s.Labels["name"], prefix) {
			return true
		}
	}
	return false
}

func hasContainer(cs []corev1.Container, name string) bool {
	for _, c := range cs {
		if c.Name == name {
			return true
		}
	}
	return false
}
