package realnode

import (
	"bufio"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/readiness-io/pulumi-readiness/internal/charts"
	"github.com/readiness-io/pulumi-readiness/internal/reportstack"
	"github.com/readiness-io/pulumi-readiness/internal/stack"
	"github.com/readiness-io/pulumi-readiness/internal/stacktest"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

// TestRealFieldReport002IngressNginx: ingress-nginx's real chart (4.15.1, hooks and all) by a
// waiting helm.sh/v3 Release, its webhook served by a real pod (the stand-in image: the
// controller needs nginx), which listens 10 s after the pod became Ready, as the report
// measured. Helm's wait ends before that, so without a gate the report's Ingress fails with
// the real `failed calling webhook`; HelmReleaseReady and autoGate's line make it pass, the
// Ingress created after the webhook pod said it listens.
func TestRealFieldReport002IngressNginx(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	chart := installable(ctx, t, charts.IngressNginxChart)
	releaseReport{
		name: "report002", release: "ingress-nginx", namespace: "ingress-nginx",
		install: func(ctx *pulumi.Context) (*stack.HelmRelease, error) {
			return reportstack.IngressNginxRelease(ctx, chart)
		},
		objects: reportstack.Ingress002,
		failure: `failed calling webhook "validate.nginx.ingress.kubernetes.io"`,
		checkGated: func(t *testing.T, mode string, s auto.Stack) {
			listening := loggedAt(ctx, t, "ingress-nginx", "app.kubernetes.io/component=controller", "admission webhook listening")
			stacktest.NotBefore(t, "the Ingress", stacktest.CreatedAt(t, `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web, namespace: apps}`), listening)
		},
	}.run(t, stacktest.Prepare(t))
}

// loggedAt is when the first pod matching selector in ns logged a line containing msg (the
// container runtime's timestamp, read through the kubelet).
func loggedAt(ctx context.Context, t *testing.T, ns, selector, msg string) time.Time {
	t.Helper()
	pods, err := testenv.CP.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("no pod %s in %s: %v", selector, ns, err)
	}
	raw, err := testenv.CP.Client.CoreV1().Pods(ns).GetLogs(pods.Items[0].Name, &corev1.PodLogOptions{Timestamps: true}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("logs of %s: %v", pods.Items[0].Name, err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	for sc.Scan() {
		stamp, line, _ := strings.Cut(sc.Text(), " ")
		if strings.Contains(line, msg) {
			at, err := time.Parse(time.RFC3339Nano, stamp)
			if err != nil {
				t.Fatalf("log line %q: %v", sc.Text(), err)
			}
			return at
		}
	}
	t.Fatalf("pod %s never logged %q:\n%s", pods.Items[0].Name, msg, raw)
	return time.Time{}
}
