package provider

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

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
