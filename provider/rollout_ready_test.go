package provider

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

func statefulSet(ns, name string, replicas int, strategy, placement string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: StatefulSet
metadata: {name: %[1]s, namespace: %[2]s}
spec:
  serviceName: %[1]s
  replicas: %[3]d
  updateStrategy: {type: %[4]s}
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s}}
    spec:
      %[5]s
      containers: [{name: app, image: registry.local/app:1}]`, name, ns, replicas, strategy, placement)
}

func newImage(t *testing.T, obj *unstructured.Unstructured, image string) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"containers":[{"name":"app","image":%q}]}}}}`, image)
	if _, err := testenv.Resource(t, obj).Patch(context.Background(), obj.GetName(), types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func deletePods(t *testing.T, ns, selector string) {
	t.Helper()
	if err := testenv.CP.Client.CoreV1().Pods(ns).DeleteCollection(context.Background(), metav1.DeleteOptions{GracePeriodSeconds: new(int64)},
		metav1.ListOptions{LabelSelector: selector}); err != nil {
		t.Fatal(err)
	}
}

// TestRolloutReadyOnDelete (item 12): after a template change, an OnDelete StatefulSet's ready
// pods all run the old revision and an OnDelete DaemonSet's updated count stays short until
// the pods are deleted. The gate must not pass the first (it did) and must say, for both, that
// the pods need deleting; once they are deleted and replaced, it passes.
func TestRolloutReadyOnDelete(t *testing.T) {
	ns := testenv.Namespace(t, "ondelete")
	s := newServer(t)
	rollout := func(kind, name, timeout string) <-chan gateResult {
		return createAsync(t, s, "RolloutReady", props("kind", kind, "name", name, "namespace", ns, "timeout", timeout))
	}

	sts := testenv.Apply(t, statefulSet(ns, "db", 2, "OnDelete", "nodeSelector: {type: kwok}"))[0]
	mustPass(t, rollout("StatefulSet", "db", "90s"))
	newImage(t, sts, "registry.local/app:2")
	pollUntil(t, "the StatefulSet controller observes the new template", func() bool {
		o, err := testenv.CP.Client.AppsV1().StatefulSets(ns).Get(context.Background(), "db", metav1.GetOptions{})
		return err == nil && o.Status.ObservedGeneration == 2 && o.Status.UpdateRevision != o.Status.CurrentRevision && o.Status.ReadyReplicas == 2
	})
	mustFailWith(t, rollout("StatefulSet", "db", "3s"), "0 of 2 pods run revision", "kubectl delete pod")
	mustFailWith(t, defaultGate(t, ns, "apps/v1", "StatefulSet", "db", "3s"), "kstatus says Current, but", "deleted")
	ch := rollout("StatefulSet", "db", "90s")
	deletePods(t, ns, "app=db")
	r := mustPass(t, ch)
	if got := r.resp.Properties.Get("updatedReplicas").AsNumber(); got != 2 {
		t.Errorf("updatedReplicas = %v, want 2", got)
	}

	ds := testenv.Apply(t, fmt.Sprintf(`apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: %s}
spec:
  updateStrategy: {type: OnDelete}
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      nodeSelector: {type: kwok}
      containers: [{name: app, image: registry.local/app:1}]`, ns))[0]
	mustPass(t, rollout("DaemonSet", "agent", "90s"))
	newImage(t, ds, "registry.local/app:2")
	mustFailWith(t, rollout("DaemonSet", "agent", "3s"), "OnDelete update strategy", "kubectl delete pod")
	ch = rollout("DaemonSet", "agent", "90s")
	deletePods(t, ns, "app=agent")
	mustPass(t, ch)
}
