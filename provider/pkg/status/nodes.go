package status

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// UnschedulableTaints are the well-known taint keys that mean "no ordinary pod lands here": the
// node lifecycle controller's (set from the node's conditions and spec.unschedulable), the cloud
// controller manager's, the cluster autoscaler's and Karpenter's (node being removed or not yet
// initialized), kubeadm's control-plane role, and the common CNIs' start-up taints (the node has
// no pod network yet). A taint of any other key is the user's own (dedicated=gpu, a kwok or
// spot marker): their pods tolerate it or not, and it does not make the node unready here.
var UnschedulableTaints = []string{
	"node.kubernetes.io/not-ready",
	"node.kubernetes.io/unreachable",
	"node.kubernetes.io/unschedulable",
	"node.kubernetes.io/network-unavailable",
	"node.kubernetes.io/memory-pressure",
	"node.kubernetes.io/disk-pressure",
	"node.kubernetes.io/pid-pressure",
	"node.kubernetes.io/out-of-service",
	"node.cloudprovider.kubernetes.io/uninitialized",
	"node.cloudprovider.kubernetes.io/shutdown",
	"node-role.kubernetes.io/control-plane",
	"node-role.kubernetes.io/master",
	"ToBeDeletedByClusterAutoscaler",
	"karpenter.sh/disrupted",
	"karpenter.sh/disruption",
	"karpenter.sh/unregistered",
	"node.cilium.io/agent-not-ready",
	"node.cloudprovider.kubernetes.io/network-unavailable",
}

// NodeSchedulable reports whether a Node can take ordinary pods: Ready=True, not cordoned, and
// no well-known UnschedulableTaints key with effect NoSchedule or NoExecute (PreferNoSchedule
// only steers). tolerate lists taint keys the caller's pods tolerate (such as
// node-role.kubernetes.io/control-plane for a single-node cluster); they do not count. The
// message says why a node does not count.
func NodeSchedulable(obj *unstructured.Unstructured, tolerate []string) (bool, string) {
	if obj == nil {
		return false, "not found"
	}
	ok, msg := ConditionHolds(obj, "Ready", "True")
	if !ok {
		return false, msg
	}
	if u, _, _ := unstructured.NestedBool(obj.Object, "spec", "unschedulable"); u {
		return false, "cordoned (spec.unschedulable)"
	}
	if t := blockingTaints(obj, tolerate); len(t) > 0 {
		return false, "Ready, but tainted " + strings.Join(t, ", ")
	}
	return true, "Ready and schedulable"
}

func blockingTaints(obj *unstructured.Unstructured, tolerate []string) []string {
	taints, _, _ := unstructured.NestedSlice(obj.Object, "spec", "taints")
	var out []string
	for _, t := range taints {
		m, _ := t.(map[string]any)
		key, effect := str(m["key"]), str(m["effect"])
		if effect != "NoSchedule" && effect != "NoExecute" {
			continue
		}
		if !containsFold(UnschedulableTaints, key) || containsFold(tolerate, key) {
			continue
		}
		s := key
		if v := str(m["value"]); v != "" {
			s += "=" + v
		}
		out = append(out, fmt.Sprintf("%s:%s", s, effect))
	}
	return out
}
