package status

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// kindRules hold what ready means for the built-in kinds kstatus has a rule for (and
// ReplicationController, which it has none for), from the kind's own controller, `kubectl
// rollout status` and Helm 3's ReadyChecker (`helm --wait`). Generic applies one beside kstatus:
// a terminal verdict of the rule fails, and kstatus' Current is proof only when the rule agrees.
// The rows kstatus v0.37.2 gets wrong, each pinned in kinds_test.go:
//   - Pod: phase Failed (evicted, OOM-killed) and Succeeded are Current; neither is Ready again.
//   - Job: Current as soon as it started; only Complete=True is done.
//   - StatefulSet: OnDelete is Current with no pod ready; no status at all (replicas 0) is Current.
//   - DaemonSet: OnDelete after a template change waits with no word of why.
//   - ReplicaSet: no status at all (replicas 0) is Current.
//   - Service: a LoadBalancer with no address is Current (helm --wait waits for one).
//   - PersistentVolumeClaim: Lost is InProgress (terminal: its volume is gone).
//   - PodDisruptionBudget: Current before the disruption controller computed it.
//   - CustomResourceDefinition: Established=True passes over NamesAccepted=False listed after it,
//     and over a rename the API server has not accepted yet (conditions carry no generation).
//
// ConfigMap, Secret and CronJob have no status to prove anything by: they are ready once they
// exist, which is all kstatus knows too (a CronJob's next run may still fail).
var kindRules = map[string]func(*unstructured.Unstructured) Result{
	"Pod":                        podRule,
	"batch/Job":                  jobRule,
	"apps/Deployment":            func(o *unstructured.Unstructured) Result { return DeploymentRollout(o).Result },
	"apps/StatefulSet":           func(o *unstructured.Unstructured) Result { return StatefulSetRollout(o).Result },
	"apps/DaemonSet":             func(o *unstructured.Unstructured) Result { return DaemonSetRollout(o).Result },
	"apps/ReplicaSet":            replicaSetRule,
	"ReplicationController":      replicaSetRule,
	"Service":                    serviceRule,
	"PersistentVolumeClaim":      pvcRule,
	"policy/PodDisruptionBudget": pdbRule,
	"apiextensions.k8s.io/CustomResourceDefinition": crdRule,
}

// kindRule returns the rule for obj's kind, or nil.
func kindRule(obj *unstructured.Unstructured) func(*unstructured.Unstructured) Result {
	gk := obj.GroupVersionKind().GroupKind()
	key := gk.Kind
	if gk.Group != "" {
		key = gk.Group + "/" + gk.Kind
	}
	return kindRules[key]
}

// podRule: a Pod is ready when Running with Ready=True (kstatus checks that). Failed and
// Succeeded are terminal: the kubelet never restarts such a pod, so waiting cannot make it
// Ready (helm --wait waits for Ready=True until its timeout).
func podRule(obj *unstructured.Unstructured) Result {
	phase, _, _ := unstructured.NestedString(obj.Object, "status", "phase")
	detail := ""
	if reason, _, _ := unstructured.NestedString(obj.Object, "status", "reason"); reason != "" {
		detail = ", " + reason
	}
	if msg, _, _ := unstructured.NestedString(obj.Object, "status", "message"); msg != "" {
		detail += ": " + msg
	}
	switch phase {
	case "Failed":
		return Result{Failed: true, Message: "Pod failed (phase Failed" + detail + "); it will not run again"}
	case "Succeeded":
		return Result{Failed: true, Message: "Pod ran to completion (phase Succeeded) and will never be Ready; to wait for completion, " +
			"use jsonPath {.status.phase} with value Succeeded"}
	}
	if ok, msg := ConditionHolds(obj, "Ready", "True"); !ok {
		return Result{Message: "phase " + phase + ", " + msg}
	}
	return Result{Ready: true, Message: "Running and Ready"}
}

// jobRule: a Job is done when Complete=True; Failed=True, or FailureTarget=True (the controller
// decided it failed and is stopping its pods), fails.
func jobRule(obj *unstructured.Unstructured) Result {
	if c, ok := FindCondition(obj, "FailureTarget"); ok && c.Status == "True" {
		return Result{Failed: true, Message: fmt.Sprintf("Job failed: %s", c)}
	}
	r := JobDone(obj).Result
	if !r.Ready && !r.Failed {
		if c, ok := FindCondition(obj, "Suspended"); ok && c.Status == "True" {
			r.Message = "suspended: " + c.String()
		}
		r.Message = "not complete: " + r.Message
	}
	return r
}

// replicaSetRule follows helm --wait and the ReplicaSet controller: the controller has observed
// the current generation, and every wanted replica exists, is ready and available, with no
// extra pods.
func replicaSetRule(obj *unstructured.Unstructured) Result {
	if _, found, _ := unstructured.NestedInt64(obj.Object, "status", "observedGeneration"); !found {
		return Result{Message: "no status yet (its controller has not observed it)"}
	}
	if ok, msg := observed(obj); !ok {
		return Result{Message: msg}
	}
	want := int64(1)
	if v, found, _ := unstructured.NestedInt64(obj.Object, "spec", "replicas"); found {
		want = v
	}
	replicas, ready, available := nestedInt(obj, "status", "replicas"), nestedInt(obj, "status", "readyReplicas"), nestedInt(obj, "status", "availableReplicas")
	if c, ok := FindCondition(obj, "ReplicaFailure"); ok && c.Status == "True" {
		return Result{Message: c.String()}
	}
	if replicas != want || ready < want || available < want {
		return Result{Message: fmt.Sprintf("%d of %d replicas ready, %d available, %d exist", ready, want, available, replicas)}
	}
	return Result{Ready: true, Message: fmt.Sprintf("%d of %d replicas ready and available", available, want)}
}

// serviceRule follows helm --wait: an ExternalName Service is ready; any other needs a
// clusterIP, and a LoadBalancer needs an address from its load balancer (or spec.externalIPs).
func serviceRule(obj *unstructured.Unstructured) Result {
	typ, _, _ := unstructured.NestedString(obj.Object, "spec", "type")
	if typ == "ExternalName" {
		return Result{Ready: true, Message: "ExternalName"}
	}
	if ip, _, _ := unstructured.NestedString(obj.Object, "spec", "clusterIP"); ip == "" {
		return Result{Message: "no clusterIP assigned yet"}
	}
	if typ != "LoadBalancer" {
		return Result{Ready: true, Message: "clusterIP assigned"}
	}
	if ips, _, _ := unstructured.NestedStringSlice(obj.Object, "spec", "externalIPs"); len(ips) > 0 {
		return Result{Ready: true, Message: "LoadBalancer with externalIPs " + strings.Join(ips, ", ")}
	}
	ingress, _, _ := unstructured.NestedSlice(obj.Object, "status", "loadBalancer", "ingress")
	var addrs []string
	for _, i := range ingress {
		m, _ := i.(map[string]any)
		if a := str(m["ip"]) + str(m["hostname"]); a != "" {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		return Result{Message: "LoadBalancer has no ingress address yet (status.loadBalancer.ingress is empty: is a load-balancer controller running?)"}
	}
	return Result{Ready: true, Message: "LoadBalancer at " + strings.Join(addrs, ", ")}
}

// pvcRule: Bound is ready; Lost (its volume is gone) is terminal.
func pvcRule(obj *unstructured.Unstructured) Result {
	return PVC(obj, "", true)
}

// pdbRule: a PodDisruptionBudget means something once the disruption controller computed it for
// the current generation (status.observedGeneration); a SyncFailed verdict means it could not.
// DisruptionAllowed=False is not a fault: a budget may allow no disruption right now.
func pdbRule(obj *unstructured.Unstructured) Result {
	if _, found, _ := unstructured.NestedInt64(obj.Object, "status", "observedGeneration"); !found {
		return Result{Message: "not computed yet (no status.observedGeneration from the disruption controller)"}
	}
	if ok, msg := observed(obj); !ok {
		return Result{Message: msg}
	}
	if c, ok := FindCondition(obj, "DisruptionAllowed"); ok && c.Reason == "SyncFailed" {
		return Result{Message: "the disruption controller could not compute it: " + c.String()}
	}
	return Result{Ready: true, Message: fmt.Sprintf("computed: %d disruptions allowed", nestedInt(obj, "status", "disruptionsAllowed"))}
}

// crdRule is CrdReady's rule (CRD: established, names accepted and matching the spec's, a
// version served); NamesAccepted=False fails (another CRD holds the names), in whatever order
// the conditions are listed.
func crdRule(obj *unstructured.Unstructured) Result {
	if c, ok := FindCondition(obj, "NamesAccepted"); ok && c.Status == "False" {
		return Result{Failed: true, Message: c.String()}
	}
	r := CRD(obj)
	return Result{Ready: r.Ready, Message: r.Message}
}
