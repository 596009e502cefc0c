package realnode

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

// webhookPodReadyAt is when the (one) pod matching selector in ns last became Ready, as the
// kubelet reported it.
func webhookPodReadyAt(t *testing.T, ns, selector string) time.Time {
	t.Helper()
	pods, err := testenv.CP.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("no pod %s in %s: %v", selector, ns, err)
	}
	for _, c := range pods.Items[0].Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	t.Fatalf("pod %s is not Ready", pods.Items[0].Name)
	return time.Time{}
}

// firstLine is the first line of s that contains sub, trimmed.
func firstLine(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// createdLines keeps the lines of pulumi up's output that say a resource was created or
// failed, with how long it took.
func createdLines(out string) string {
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, " created (") || strings.Contains(l, "failed") || strings.Contains(l, "error:") {
			keep = append(keep, strings.TrimSpace(l))
		}
	}
	return strings.Join(keep, "\n")
}
