package provider

// Issue 21 ("Fail closed, round two"), items 1, 2, 3, 10 and 12, against the real API server:
// each test sets up the state that must not pass beside the one that must.

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/helmrelease"
)

// nowhere is a nodeSelector no node matches: the scheduler leaves such pods Pending and kwok
// never touches them, so a test can write their status itself.
const nowhere = "nodeSelector: {type: nowhere}"

// defaultGate runs ResourceReady in its default mode on one object.
func defaultGate(t *testing.T, ns, apiVersion, kind, name, timeout string) <-chan gateResult {
	return createAsync(t, newServer(t), "ResourceReady", props("apiVersion", apiVersion, "kind", kind, "namespace", ns, "name", name, "timeout", timeout))
}

// mustFailWith asserts a gate ended in an error naming every one of want.
func mustFailWith(t *testing.T, ch <-chan gateResult, want ...string) {
	t.Helper()
	r := await(t, ch, 60*time.Second)
	if r.err == nil {
		t.Fatalf("gate passed: %v", r.resp.Properties)
	}
	for _, w := range want {
		if !strings.Contains(r.err.Error(), w) {
			t.Errorf("error lacks %q: %v", w, r.err)
		}
	}
}

func mustPass(t *testing.T, ch <-chan gateResult) gateResult {
	t.Helper()
	r := await(t, ch, 90*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r
}

// writeStatus merges fields into obj's status through the status subresource, as its
// controller would.
func writeStatus(t *testing.T, obj *unstructured.Unstructured, fields map[string]any) {
	t.Helper()
	ri := testenv.Resource(t, obj)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := ri.Get(context.Background(), obj.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		st, _ := cur.Object["status"].(map[string]any)
		if st == nil {
			st = map[string]any{}
		}
		for k, v := range fields {
			st[k] = v
		}
		cur.Object["status"] = st
		_, err = ri.UpdateStatus(context.Background(), cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// pollUntil is test-side polling for a controller's state the test depends on.
func pollUntil(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached in 60s", what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func pod(ns, name, placement string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: %s, labels: {app: %s}}
spec:
  %s
  containers: [{name: app, image: registry.local/app:1}]`, name, ns, name, placement)
}

// TestResourceReadyKindRulesOnTheAPIServer: kstatus calls each of these Current; the default
// mode must not pass them (item 1). Each sits beside a state of the same kind that passes.
func TestResourceReadyKindRulesOnTheAPIServer(t *testing.T) {
	ns := testenv.Namespace(t, "kinds")

	t.Run("Pod: evicted fails, Succeeded fails, Running and Ready passes", func(t *testing.T) {
		evicted := testenv.Apply(t, pod(ns, "evicted", nowhere))[0]
		writeStatus(t, evicted, map[string]any{"phase": "Failed", "reason": "Evicted", "message": "The node was low on resource: memory."})
		mustFailWith(t, defaultGate(t, ns, "v1", "Pod", "evicted", "60s"), "Evicted", "will not run again")
		done := testenv.Apply(t, pod(ns, "done", nowhere))[0]
		writeStatus(t, done, map[string]any{"phase": "Succeeded", "conditions": []any{map[string]any{"type": "Ready", "status": "False", "reason": "PodCompleted"}}})
		mustFailWith(t, defaultGate(t, ns, "v1", "Pod", "done", "60s"), "phase Succeeded")
		testenv.Apply(t, pod(ns, "running", "nodeSelector: {type: kwok}"))
		mustPass(t, defaultGate(t, ns, "v1", "Pod", "running", "60s"))
	})

	t.Run("Job: started is not complete; Complete passes", func(t *testing.T) {
		testenv.Apply(t, fmt.Sprintf(`apiVersion: batch/v1
kind: Job
metadata: {name: stuck, namespace: %s}
spec:
  template:
    spec:
      restartPolicy: Never
      %s
      containers: [{name: build, image: registry.local/builder:1}]`, ns, nowhere))
		pollUntil(t, "the Job controller starts the Job", func() bool {
			j, err := testenv.CP.Client.BatchV1().Jobs(ns).Get(context.Background(), "stuck", metav1.GetOptions{})
			return err == nil && j.Status.StartTime != nil
		})
		mustFailWith(t, defaultGate(t, ns, "batch/v1", "Job", "stuck", "3s"), "not complete")
		testenv.Apply(t, fmt.Sprintf(`apiVersion: batch/v1
kind: Job
metadata: {name: quick, namespace: %s}
spec:
  template:
    spec:
      restartPolicy: Never
      nodeSelector: {type: kwok}
      containers: [{name: build, image: registry.local/builder:1}]`, ns))
		mustPass(t, defaultGate(t, ns, "batch/v1", "Job", "quick", "60s"))
	})

	t.Run("StatefulSet OnDelete: no pod ready does not pass", func(t *testing.T) {
		testenv.Apply(t, statefulSet(ns, "nopods", 1, "OnDelete", nowhere))
		mustFailWith(t, defaultGate(t, ns, "apps/v1", "StatefulSet", "nopods", "3s"), "0 of 1 pods ready")
		testenv.Apply(t, statefulSet(ns, "pods", 1, "OnDelete", "nodeSelector: {type: kwok}"))
		mustPass(t, defaultGate(t, ns, "apps/v1", "StatefulSet", "pods", "60s"))
	})

	t.Run("ReplicationController (no kstatus rule): no pod ready does not pass", func(t *testing.T) {
		rc := func(name, placement string) string {
			return fmt.Sprintf(`apiVersion: v1
kind: ReplicationController
metadata: {name: %[1]s, namespace: %[2]s}
spec:
  replicas: 1
  selector: {app: %[1]s}
  template:
    metadata: {labels: {app: %[1]s}}
    spec:
      %[3]s
      containers: [{name: app, image: registry.local/app:1}]`, name, ns, placement)
		}
		testenv.Apply(t, rc("rc-nowhere", nowhere))
		mustFailWith(t, defaultGate(t, ns, "v1", "ReplicationController", "rc-nowhere", "3s"), "0 of 1 replicas ready")
		testenv.Apply(t, rc("rc-kwok", "nodeSelector: {type: kwok}"))
		mustPass(t, defaultGate(t, ns, "v1", "ReplicationController", "rc-kwok", "60s"))
	})

	t.Run("Service LoadBalancer: no address does not pass; an address passes", func(t *testing.T) {
		svc := testenv.Apply(t, fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: lb, namespace: %s}
spec:
  type: LoadBalancer
  selector: {app: lb}
  ports: [{port: 443}]`, ns))[0]
		mustFailWith(t, defaultGate(t, ns, "v1", "Service", "lb", "3s"), "no ingress address")
		ch := defaultGate(t, ns, "v1", "Service", "lb", "60s")
		writeStatus(t, svc, map[string]any{"loadBalancer": map[string]any{"ingress": []any{map[string]any{"ip": "192.0.2.10"}}}})
		mustPass(t, ch)
	})

	t.Run("PersistentVolumeClaim: Lost fails (its volume is gone)", func(t *testing.T) {
		// A claim bound to a volume that does not exist: the PV controller itself marks it Lost.
		testenv.Apply(t, fmt.Sprintf(`apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: lost, namespace: %s, annotations: {pv.kubernetes.io/bind-completed: "yes"}}
spec:
  accessModes: [ReadWriteOnce]
  volumeName: pv-that-does-not-exist
  resources: {requests: {storage: 1Gi}}`, ns))
		pollUntil(t, "the PV controller marks the claim Lost", func() bool {
			c, err := testenv.CP.Client.CoreV1().PersistentVolumeClaims(ns).Get(context.Background(), "lost", metav1.GetOptions{})
			return err == nil && c.Status.Phase == corev1.ClaimLost
		})
		mustFailWith(t, defaultGate(t, ns, "v1", "PersistentVolumeClaim", "lost", "60s"), "Lost")
	})

	t.Run("the other kinds pass once their controllers say so", func(t *testing.T) {
		testenv.Apply(t, deployment(ns, "web", "registry.local/web:1", 2))
		testenv.Apply(t, fmt.Sprintf(`apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: rs, namespace: %[1]s}
spec:
  replicas: 1
  selector: {matchLabels: {app: rs}}
  template:
    metadata: {labels: {app: rs}}
    spec:
      nodeSelector: {type: kwok}
      containers: [{name: app, image: registry.local/app:1}]
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: ds, namespace: %[1]s}
spec:
  selector: {matchLabels: {app: ds}}
  template:
    metadata: {labels: {app: ds}}
    spec:
      nodeSelector: {type: kwok}
      containers: [{name: app, image: registry.local/app:1}]
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly, namespace: %[1]s}
spec:
  schedule: "@daily"
  jobTemplate: {spec: {template: {spec: {restartPolicy: Never, containers: [{name: app, image: registry.local/app:1}]}}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cm, namespace: %[1]s}
---
apiVersion: v1
kind: Secret
metadata: {name: sec, namespace: %[1]s}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: %[1]s}
spec: {selector: {app: web}, ports: [{port: 443}]}`, ns))
		for _, o := range [][3]string{{"apps/v1", "Deployment", "web"}, {"apps/v1", "ReplicaSet", "rs"}, {"apps/v1", "DaemonSet", "ds"},
			{"batch/v1", "CronJob", "nightly"}, {"v1", "ConfigMap", "cm"}, {"v1", "Secret", "sec"}, {"v1", "Service", "web"}} {
			mustPass(t, defaultGate(t, ns, o[0], o[1], o[2], "60s"))
		}
		group := widgetCRD(t)
		mustPass(t, createAsync(t, newServer(t), "ResourceReady", props("apiVersion", "apiextensions.k8s.io/v1", "kind", "CustomResourceDefinition",
			"name", "widgets."+group, "timeout", "60s")))
	})

	t.Run("PodDisruptionBudget: computed by the disruption controller passes", func(t *testing.T) {
		testenv.Apply(t, fmt.Sprintf(`apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: budget, namespace: %s}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: running}}`, ns))
		mustPass(t, defaultGate(t, ns, "policy/v1", "PodDisruptionBudget", "budget", "60s"))
	})
}

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

// TestServiceReadyCountsServingEndpoints (item 2): with publishNotReadyAddresses the real
// EndpointSlice controller lists a not-ready pod as ready=true, serving=false. ServiceReady
// must not count it (it did); a pod that is Ready is counted.
func TestServiceReadyCountsServingEndpoints(t *testing.T) {
	ns := testenv.Namespace(t, "pnra")
	testenv.Apply(t, fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: vault, namespace: %s}
spec:
  clusterIP: None
  publishNotReadyAddresses: true
  selector: {app: vault}
  ports: [{name: https, port: 8200}]`, ns))
	// Running with an IP, not Ready (its readiness probe fails): the kubelet's status, written
	// by the test on a pod no node runs.
	vault0 := testenv.Apply(t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: vault-0, namespace: %s, labels: {app: vault}}
spec:
  %s
  containers: [{name: vault, image: registry.local/vault:1, ports: [{name: https, containerPort: 8200}]}]`, ns, nowhere))[0]
	writeStatus(t, vault0, map[string]any{"phase": "Running", "podIP": "10.244.0.200", "podIPs": []any{map[string]any{"ip": "10.244.0.200"}},
		"conditions": []any{map[string]any{"type": "Ready", "status": "False", "reason": "ContainersNotReady"}}})
	pollUntil(t, "the EndpointSlice lists vault-0 as ready=true, serving=false", func() bool {
		l, err := testenv.CP.Client.DiscoveryV1().EndpointSlices(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=vault"})
		if err != nil {
			return false
		}
		for _, sl := range l.Items {
			for _, e := range sl.Endpoints {
				c := e.Conditions
				if c.Ready != nil && *c.Ready && c.Serving != nil && !*c.Serving {
					return true
				}
			}
		}
		return false
	})
	s := newServer(t)
	mustFailWith(t, createAsync(t, s, "ServiceReady", props("name", "vault", "namespace", ns, "timeout", "3s")), "0/1 ready endpoints")
	// WebhookReady counts the webhook Service's endpoints the same way.
	svc := property.New(property.NewMap(map[string]property.Value{"namespace": property.New(ns), "name": property.New("vault"), "port": property.New(8200.0)}))
	mustFailWith(t, createAsync(t, s, "WebhookReady", props("service", svc, "timeout", "3s")), "0/1 ready endpoints")

	ch := createAsync(t, s, "ServiceReady", props("name", "vault", "namespace", ns, "timeout", "90s"))
	testenv.Apply(t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: vault-1, namespace: %s, labels: {app: vault}}
spec:
  nodeSelector: {type: kwok}
  containers: [{name: vault, image: registry.local/vault:1, ports: [{name: https, containerPort: 8200}]}]`, ns))
	r := mustPass(t, ch)
	if got := r.resp.Properties.Get("readyEndpoints").AsNumber(); got != 1 {
		t.Errorf("readyEndpoints = %v, want 1 (vault-0 is not serving)", got)
	}
	// Past the endpoints (vault-1 counted), ready endpoints are not an answer: with no webhook
	// configuration pointing at the Service, nothing can show a webhook serves, so it waits.
	mustFailWith(t, createAsync(t, s, "WebhookReady", props("service", svc, "timeout", "3s")),
		fmt.Sprintf("no webhook configuration points at Service %s/vault:8200 yet", ns))
}

// taintedNode registers a kwok-managed node with the given taints and a label of its own.
func taintedNode(t *testing.T, pool string, taints ...corev1.Taint) string {
	t.Helper()
	name := fmt.Sprintf("%s-%d", pool, time.Now().UnixNano()%100000)
	q := resource.MustParse
	capacity := corev1.ResourceList{corev1.ResourceCPU: q("8"), corev1.ResourceMemory: q("32Gi"), corev1.ResourcePods: q("110")}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
			Labels:      map[string]string{"pool": pool, "kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}},
		Spec:   corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
	if _, err := testenv.CP.Client.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = testenv.CP.Client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	pollUntil(t, "kwok reports "+name+" Ready", func() bool {
		n, err := testenv.CP.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return true
			}
		}
		return false
	})
	return name
}

// TestNodesReadyTaints (item 3): a Ready node carrying a well-known NoSchedule taint is not
// schedulable; the taint is named; `tolerate` lets it count; a user's own taint does not count
// against it.
func TestNodesReadyTaints(t *testing.T) {
	s := newServer(t)
	nodes := func(pool, timeout string, tolerate ...string) <-chan gateResult {
		in := props("selector", "pool="+pool, "timeout", timeout)
		if len(tolerate) > 0 {
			in["tolerate"] = strs(tolerate...)
		}
		return createAsync(t, s, "NodesReady", in)
	}
	for _, taint := range []corev1.Taint{
		{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule},
		{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule},
		{Key: "ToBeDeletedByClusterAutoscaler", Value: "1700000000", Effect: corev1.TaintEffectNoSchedule},
	} {
		t.Run(taint.Key, func(t *testing.T) {
			pool := fmt.Sprintf("taint-%d", time.Now().UnixNano()%1000000)
			taintedNode(t, pool, taint)
			mustFailWith(t, nodes(pool, "3s"), "0 of 1 node(s) Ready and schedulable", "tainted "+taint.Key)
			r := mustPass(t, nodes(pool, "60s", taint.Key))
			if got := r.resp.Properties.Get("readyNodes").AsNumber(); got != 1 {
				t.Errorf("readyNodes = %v", got)
			}
		})
	}
	t.Run("network-unavailable, tainted by the node lifecycle controller", func(t *testing.T) {
		// A node no kwok heartbeats (kwok would report NetworkUnavailable=False): the test plays
		// its kubelet, Ready=True with NetworkUnavailable=True (a CNI not up yet), and the real
		// node lifecycle controller adds node.kubernetes.io/network-unavailable:NoSchedule.
		pool := fmt.Sprintf("net-%d", time.Now().UnixNano()%1000000)
		name := pool + "-node"
		api := testenv.CP.Client.CoreV1().Nodes()
		if _, err := api.Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": pool}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = api.Delete(context.Background(), name, metav1.DeleteOptions{}) })
		kubelet := func(network corev1.ConditionStatus) {
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				n, err := api.Get(context.Background(), name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				now := metav1.Now()
				n.Status.Conditions = []corev1.NodeCondition{
					{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now},
					{Type: corev1.NodeNetworkUnavailable, Status: network, Reason: "NoRouteCreated", LastHeartbeatTime: now, LastTransitionTime: now},
				}
				_, err = api.UpdateStatus(context.Background(), n, metav1.UpdateOptions{})
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		hasTaint := func(key string) bool {
			n, err := api.Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				return false
			}
			for _, tn := range n.Spec.Taints {
				if tn.Key == key {
					return true
				}
			}
			return false
		}
		kubelet(corev1.ConditionTrue)
		pollUntil(t, "the node lifecycle controller taints the node network-unavailable", func() bool {
			return hasTaint("node.kubernetes.io/network-unavailable") && !hasTaint("node.kubernetes.io/not-ready")
		})
		mustFailWith(t, nodes(pool, "3s"), "tainted node.kubernetes.io/network-unavailable:NoSchedule")
		ch := nodes(pool, "60s")
		kubelet(corev1.ConditionFalse) // the CNI is up: the controller removes the taint
		mustPass(t, ch)
	})
	t.Run("a user's own taint", func(t *testing.T) {
		pool := fmt.Sprintf("own-%d", time.Now().UnixNano()%1000000)
		taintedNode(t, pool, corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule})
		mustPass(t, nodes(pool, "60s"))
	})
}

// TestCertificateReadyRefusedRenewal (item 10): a Ready certificate whose renewal request was
// Denied still holds a valid certificate: the gate passes and refresh keeps it. The near miss: a
// Denied request for a changed spec (Ready is stale) still fails at once.
func TestCertificateReadyRefusedRenewal(t *testing.T) {
	installCertManagerCRDs(t)
	ns := testenv.Namespace(t, "renew")
	s := newServer(t)
	cert := testenv.Apply(t, certificate(ns, "web", "web-tls"))[0]
	c := testenv.IssueCertificate(t, "web.example.test", 48*time.Hour)
	setCertStatus(t, ns, "web", readyStatus(c, 1))
	writeTLSSecret(t, ns, "web-tls", c)
	csr := testenv.IssueCertificate(t, "web.example.test", time.Hour)
	cr := testenv.Apply(t, fmt.Sprintf(`apiVersion: cert-manager.io/v1
kind: CertificateRequest
metadata:
  name: web-2
  namespace: %s
  annotations: {cert-manager.io/certificate-name: web, cert-manager.io/certificate-revision: "2"}
spec:
  request: %s
  issuerRef: {name: vault-issuer, kind: ClusterIssuer}`, ns, base64.StdEncoding.EncodeToString(csr.CertPEM)))[0]
	now := time.Now().UTC().Format(time.RFC3339)
	writeStatus(t, cr, map[string]any{"conditions": []any{
		map[string]any{"type": "Denied", "status": "True", "reason": "PolicyDenied", "message": "renewals are frozen", "lastTransitionTime": now},
		map[string]any{"type": "Ready", "status": "False", "reason": "Denied", "message": "The CertificateRequest was denied by an approval controller", "lastTransitionTime": now},
	}})

	inputs := props("name", "web", "namespace", ns, "timeout", "30s")
	r := mustPass(t, createAsync(t, s, "CertificateReady", inputs))
	read, err := s.Read(p.ReadRequest{ID: r.resp.ID, Urn: urn("CertificateReady"), Properties: r.resp.Properties, Inputs: property.NewMap(inputs)})
	if err != nil {
		t.Fatalf("refresh failed on a refused renewal: %v", err)
	}
	if read.Properties.Get("notAfter").AsString() != c.NotAfter.UTC().Format(time.RFC3339) {
		t.Errorf("refresh outputs: %v", read.Properties)
	}

	// The spec changes (generation 2): Ready=True is now stale, and the request that would
	// issue the new spec was denied: that is a broken certificate.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := testenv.Resource(t, cert).Get(context.Background(), "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Object["spec"].(map[string]any)["dnsNames"] = []any{"www.example.test"}
		_, err = testenv.Resource(t, cert).Update(context.Background(), cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	mustFailWith(t, createAsync(t, s, "CertificateReady", props("name", "web", "namespace", ns, "timeout", "60s")), "denied", "PolicyDenied")
}

// TestHelmReleaseReadyNeverWeakerThanHelmWait (item 1): a release's LoadBalancer Service with
// no address, its claim Pending under a WaitForFirstConsumer class and its evicted Pod each
// keep helm --wait waiting; HelmReleaseReady must not pass them either.
func TestHelmReleaseReadyNeverWeakerThanHelmWait(t *testing.T) {
	ns := testenv.Namespace(t, "helmwait")
	sc := fmt.Sprintf("wffc-%d", time.Now().UnixNano()%1000000)
	testenv.Apply(t, fmt.Sprintf("apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: %s}\nprovisioner: example.test/none\nvolumeBindingMode: WaitForFirstConsumer", sc))
	t.Cleanup(func() {
		_ = testenv.CP.Client.StorageV1().StorageClasses().Delete(context.Background(), sc, metav1.DeleteOptions{})
	})
	lb := fmt.Sprintf("# Source: app/templates/svc.yaml\napiVersion: v1\nkind: Service\nmetadata: {name: lb, namespace: %s}\nspec: {type: LoadBalancer, selector: {app: lb}, ports: [{port: 443}]}", ns)
	pvc := fmt.Sprintf("# Source: app/templates/pvc.yaml\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data, namespace: %s}\nspec: {accessModes: [ReadWriteOnce], storageClassName: %s, resources: {requests: {storage: 1Gi}}}", ns, sc)
	evicted := "# Source: app/templates/pod.yaml\n" + pod(ns, "evicted", nowhere)
	svc := testenv.Apply(t, strings.SplitN(lb, "\n", 2)[1])[0]
	testenv.Apply(t, strings.SplitN(pvc, "\n", 2)[1])
	evictedPod := testenv.Apply(t, pod(ns, "evicted", nowhere))[0]

	s := newServer(t)
	rec := func(name string, docs ...string) {
		writeRecord(t, helmrelease.Record{Name: name, Namespace: ns, Revision: 1, Status: helmrelease.StatusDeployed, Description: "Install complete",
			Chart: "app", ChartVersion: "1.0.0", AppVersion: "1", Manifest: manifestOf(docs...)})
	}
	gate := func(name, timeout string) <-chan gateResult {
		return createAsync(t, s, "HelmReleaseReady", props("name", name, "namespace", ns, "timeout", timeout))
	}
	rec("waits", lb, pvc)
	mustFailWith(t, gate("waits", "3s"), "no ingress address", "Pending")

	writeStatus(t, evictedPod, map[string]any{"phase": "Failed", "reason": "Evicted", "message": "The node was low on resource: memory."})
	rec("evicted", evicted)
	mustFailWith(t, gate("evicted", "60s"), "Evicted")

	// The same Service with an address passes.
	writeStatus(t, svc, map[string]any{"loadBalancer": map[string]any{"ingress": []any{map[string]any{"ip": "192.0.2.10"}}}})
	rec("addressed", lb)
	mustPass(t, gate("addressed", "60s"))
}

// TestResourceReadyConditionWithoutObservedGeneration (Docs): a condition that carries no
// observedGeneration is not taken as current while status.observedGeneration is behind.
func TestResourceReadyConditionWithoutObservedGeneration(t *testing.T) {
	group := widgetCRD(t)
	w := testenv.Apply(t, fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata: {name: w, namespace: default}\nspec: {size: 1}", group))[0]
	ready := map[string]any{"type": "Ready", "status": "True", "reason": "Test", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
	w = setStatus(t, w, map[string]any{"observedGeneration": int64(1), "conditions": []any{ready}})
	w.Object["spec"] = map[string]any{"size": int64(2)} // generation 2
	w, err := testenv.Resource(t, w).Update(context.Background(), w, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t)
	in := props("apiVersion", group+"/v1", "kind", "Widget", "namespace", "default", "name", "w",
		"condition", map[string]property.Value{"type": property.New("Ready")}, "timeout", "3s")
	mustFailWith(t, createAsync(t, s, "ResourceReady", in), "status.observedGeneration 1 < generation 2")
	setStatus(t, w, map[string]any{"observedGeneration": int64(2), "conditions": []any{ready}})
	in["timeout"] = property.New("60s")
	mustPass(t, createAsync(t, s, "ResourceReady", in))
}
