package provider

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/readiness-io/pulumi-readiness/internal/controlplane"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

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

func TestServiceReadyWaitsForReadyEndpoints(t *testing.T) {
	ns := testenv.Namespace(t, "svc")
	s := newServer(t)
	ch := createAsync(t, s, "ServiceReady", props("name", "web", "namespace", ns, "port", "https", "timeout", "90s"))
	testenv.Apply(t, fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: web, namespace: %s}
spec:
  selector: {app: web}
  ports: [{name: https, port: 443, targetPort: https}]`, ns))
	mustNotReturn(t, ch, time.Second) // a Service with no pods behind it
	testenv.Apply(t, deployment(ns, "web", "registry.local/web:1", 1))
	r := await(t, ch, 90*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := r.resp.Properties.Get("readyEndpoints").AsNumber(); got != 1 {
		t.Errorf("readyEndpoints = %v", got)
	}
}

func TestNodesReadyWaitsForALateNode(t *testing.T) {
	s := newServer(t)
	nodes, err := testenv.CP.Client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := len(nodes.Items) + 1
	ch := createAsync(t, s, "NodesReady", props("minCount", want, "selector", "type=kwok", "timeout", "90s"))
	mustNotReturn(t, ch, time.Second)
	if err := testenv.CP.AddNode(context.Background(), fmt.Sprintf("late-node-%d", time.Now().UnixNano()%100000)); err != nil {
		t.Fatal(err)
	}
	r := await(t, ch, 60*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := r.resp.Properties.Get("readyNodes").AsNumber(); int(got) < want {
		t.Errorf("readyNodes = %v, want %d", got, want)
	}
}

const externalSecretCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: externalsecrets.external-secrets.io}
spec:
  group: external-secrets.io
  scope: Namespaced
  names: {kind: ExternalSecret, plural: externalsecrets, singular: externalsecret, listKind: ExternalSecretList, shortNames: [es]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}`

func TestExternalSecretReadyNeedsConditionAndTargetSecret(t *testing.T) {
	ns := testenv.Namespace(t, "eso")
	s := newServer(t)
	ch := createAsync(t, s, "ExternalSecretReady", props("name", "ghcr", "namespace", ns, "timeout", "90s"))
	mustNotReturn(t, ch, 500*time.Millisecond) // ESO's CRDs are not even installed
	if _, err := testenv.Dynamic(t).Resource(crdResource).Get(context.Background(), "externalsecrets.external-secrets.io", metav1.GetOptions{}); err != nil {
		testenv.Apply(t, externalSecretCRD)
	}
	waitServed(t, "external-secrets.io")
	es := testenv.Apply(t, fmt.Sprintf(`apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: ghcr, namespace: %s}
spec:
  secretStoreRef: {name: vault, kind: ClusterSecretStore}
  target: {name: ghcr-pull-secret}
  data: [{secretKey: token, remoteRef: {key: ghcr}}]`, ns))[0]
	setStatus(t, es, map[string]any{"conditions": []any{
		map[string]any{"type": "Ready", "status": "False", "reason": "SecretSyncedError", "message": "could not get secret data from provider"}}})
	mustNotReturn(t, ch, time.Second)
	setStatus(t, es, map[string]any{"refreshTime": time.Now().UTC().Format(time.RFC3339), "syncedResourceVersion": "1-abc",
		"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "SecretSynced", "message": "Secret was synced"}}})
	mustNotReturn(t, ch, time.Second) // Ready=True, but the target Secret is not there yet
	const marker = "MARKER-s3cr3t-VALUE"
	testenv.Apply(t, fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: ghcr-pull-secret, namespace: %s}\nstringData: {token: %s}", ns, marker))
	r := await(t, ch, 30*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := r.resp.Properties.Get("secretName").AsString(); got != "ghcr-pull-secret" {
		t.Errorf("secretName = %q", got)
	}
	if got := r.resp.Properties.Get("syncedResourceVersion").AsString(); got != "1-abc" {
		t.Errorf("syncedResourceVersion = %q", got)
	}
	if strings.Contains(fmt.Sprint(r.resp.Properties), marker) {
		t.Error("outputs contain the Secret's value")
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
