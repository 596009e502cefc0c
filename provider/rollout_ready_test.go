package provider

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/readiness-io/pulumi-readiness/internal/controlplane"
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

func deployment(ns, name, image string, replicas int) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %[2]s, namespace: %[1]s}
spec:
  replicas: %[4]d
  selector: {matchLabels: {app: %[2]s}}
  template:
    metadata: {labels: {app: %[2]s}}
    spec:
      nodeSelector: {type: kwok}
      tolerations: [{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}]
      containers: [{name: app, image: %[3]s, ports: [{name: https, containerPort: 8443}]}]`, ns, name, image, replicas)
}

func TestRolloutReadyDeploymentAndNewImage(t *testing.T) {
	ns := testenv.Namespace(t, "ro")
	s := newServer(t)
	ch := createAsync(t, s, "RolloutReady", props("kind", "Deployment", "name", "web", "namespace", ns, "timeout", "90s"))
	mustNotReturn(t, ch, 500*time.Millisecond) // not created yet
	d := testenv.Apply(t, deployment(ns, "web", "registry.local/web:1", 2))[0]
	r := await(t, ch, 90*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := r.resp.Properties.Get("availableReplicas").AsNumber(); got != 2 {
		t.Errorf("availableReplicas = %v", got)
	}
	// A new image: the gate waits for revision 2 to roll out.
	patch := `{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"registry.local/web:2"}]}}}}`
	if _, err := testenv.Resource(t, d).Patch(context.Background(), "web", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	r = await(t, createAsync(t, s, "RolloutReady", props("kind", "Deployment", "name", "web", "namespace", ns, "timeout", "90s")), 90*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := r.resp.Properties.Get("revision").AsString(); got != "2" {
		t.Errorf("revision = %q, want 2 (the new image's rollout)", got)
	}
}

func TestRolloutReadyJobFailsFast(t *testing.T) {
	ns := testenv.Namespace(t, "job")
	s := newServer(t)
	ch := createAsync(t, s, "RolloutReady", props("kind", "Job", "name", "build", "namespace", ns, "timeout", "10m"))
	job := testenv.Apply(t, fmt.Sprintf(`apiVersion: batch/v1
kind: Job
metadata: {name: build, namespace: %s}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      nodeSelector: {type: kwok}
      containers: [{name: build, image: registry.local/builder:1}]`, ns))[0]
	// Play the Job controller's verdict on the status subresource (kwok's pods never exit).
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := testenv.Resource(t, job).Get(context.Background(), "build", metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := time.Now().UTC().Format(time.RFC3339)
		failed := func(typ string) map[string]any {
			return map[string]any{"type": typ, "status": "True", "reason": "BackoffLimitExceeded",
				"message": "Job has reached the specified backoff limit", "lastTransitionTime": now, "lastProbeTime": now}
		}
		st, _ := cur.Object["status"].(map[string]any)
		if st == nil {
			st = map[string]any{}
		}
		st["failed"], st["active"] = int64(1), int64(0)
		if _, ok := st["startTime"]; !ok {
			st["startTime"] = now
		}
		st["conditions"] = []any{failed("FailureTarget"), failed("Failed")}
		cur.Object["status"] = st
		_, err = testenv.Resource(t, job).UpdateStatus(context.Background(), cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	r := await(t, ch, 60*time.Second)
	if r.err == nil || !strings.Contains(r.err.Error(), "BackoffLimitExceeded") {
		t.Fatalf("want a fast failure quoting BackoffLimitExceeded, got %v", r.err)
	}
}

func TestRolloutReadyLatePodsStatefulSetAndJob(t *testing.T) {
	ns := testenv.Namespace(t, "late")
	s := newServer(t)
	// Pods that become ready 3 s after they start (kwok's pod-ready stage honours the annotation).
	late := strings.Replace(deployment(ns, "slow", "registry.local/slow:1", 2),
		"    metadata: {labels: {app: slow}}",
		"    metadata: {labels: {app: slow}, annotations: {"+controlplane.PodReadyDelayAnnotation+": 3s}}", 1)
	testenv.Apply(t, late)
	ch := createAsync(t, s, "RolloutReady", props("kind", "Deployment", "name", "slow", "namespace", ns, "timeout", "90s"))
	mustNotReturn(t, ch, 1500*time.Millisecond) // pods exist but are not ready yet
	if r := await(t, ch, 60*time.Second); r.err != nil {
		t.Fatal(r.err)
	}
	pods, err := testenv.CP.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=slow"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if !podReady(p.Status.Conditions) {
			t.Errorf("gate passed while pod %s is not ready", p.Name)
		}
	}

	testenv.Apply(t, fmt.Sprintf(`apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: %s}
spec:
  serviceName: db
  replicas: 2
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      nodeSelector: {type: kwok}
      containers: [{name: db, image: registry.local/db:1}]`, ns))
	r := await(t, createAsync(t, s, "RolloutReady", props("kind", "StatefulSet", "name", "db", "namespace", ns, "timeout", "90s")), 90*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := r.resp.Properties.Get("readyReplicas").AsNumber(); got != 2 {
		t.Errorf("StatefulSet readyReplicas = %v", got)
	}

	testenv.Apply(t, fmt.Sprintf(`apiVersion: batch/v1
kind: Job
metadata: {name: build-image, namespace: %s}
spec:
  template:
    spec:
      restartPolicy: Never
      nodeSelector: {type: kwok}
      containers: [{name: build, image: registry.local/builder:1}]`, ns))
	if r := await(t, createAsync(t, s, "RolloutReady", props("kind", "Job", "name", "build-image", "namespace", ns, "timeout", "90s")), 90*time.Second); r.err != nil {
		t.Fatal(r.err)
	}
}

func podReady(conds []corev1.PodCondition) bool {
	for _, c := range conds {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
