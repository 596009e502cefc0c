package status

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

// Result is a pure evaluation's verdict on one object.
type Result struct {
	Ready   bool
	Message string
	// Failed is set for terminal states that waiting cannot fix (kstatus Failed, a failed Job,
	// a Deployment past its progress deadline).
	Failed bool
}

// builtinGroups are API groups whose kinds kstatus knows or whose objects are complete when
// created; custom resources (any other group) need evidence from their controller.
var builtinGroups = map[string]bool{
	"": true, "apps": true, "batch": true, "policy": true, "autoscaling": true, "networking.k8s.io": true,
	"rbac.authorization.k8s.io": true, "storage.k8s.io": true, "apiextensions.k8s.io": true,
	"admissionregistration.k8s.io": true, "scheduling.k8s.io": true, "coordination.k8s.io": true,
	"discovery.k8s.io": true, "node.k8s.io": true, "certificates.k8s.io": true, "apiregistration.k8s.io": true,
}

// Generic is the default gate: kstatus' Current, with one correction. kstatus counts a custom
// resource with no status as Current (its "anything else is Current" fallback), which passes
// exactly the objects no controller has looked at yet. Here a custom resource is ready only
// once its controller reported: a Ready condition that holds, or status.observedGeneration equal
// to the generation when it has no Ready condition.
func Generic(obj *unstructured.Unstructured) Result {
	if obj == nil {
		return Result{Message: "not found"}
	}
	if obj.GetDeletionTimestamp() != nil {
		return Result{Message: "being deleted"}
	}
	res, err := kstatus.Compute(obj)
	if err != nil {
		return Result{Message: "kstatus: " + err.Error()}
	}
	switch res.Status {
	case kstatus.FailedStatus:
		return Result{Failed: true, Message: fmt.Sprintf("Failed: %s", res.Message)}
	case kstatus.CurrentStatus:
	default:
		msg := fmt.Sprintf("%s: %s", res.Status, res.Message)
		if len(Conditions(obj)) > 0 {
			msg += " [" + SummarizeConditions(obj) + "]"
		}
		return Result{Message: msg}
	}
	group := obj.GroupVersionKind().Group
	if builtinGroups[group] {
		return Result{Ready: true, Message: "Current: " + res.Message}
	}
	if c, ok := FindCondition(obj, "Ready"); ok {
		if IsStale(obj, c) {
			return Result{Message: fmt.Sprintf("%s is stale (observedGeneration %d < generation %d)", c, c.ObservedGeneration, obj.GetGeneration())}
		}
		if strings.EqualFold(c.Status, "True") {
			return Result{Ready: true, Message: c.String()}
		}
		return Result{Message: c.String()}
	}
	og, found, _ := unstructured.NestedInt64(obj.Object, "status", "observedGeneration")
	if found && og >= obj.GetGeneration() {
		return Result{Ready: true, Message: fmt.Sprintf("observedGeneration %d is current", og)}
	}
	if found {
		return Result{Message: fmt.Sprintf("status.observedGeneration %d < generation %d (controller has not caught up)", og, obj.GetGeneration())}
	}
	if len(Conditions(obj)) > 0 {
		return Result{Ready: true, Message: "Current: " + SummarizeConditions(obj)}
	}
	return Result{Message: "no status reported yet (its controller has not processed it; a custom resource with no Ready condition or observedGeneration is not treated as ready)"}
}

// PVC applies field report 003's rule: a PersistentVolumeClaim that is Pending only because its
// StorageClass binds on first consumer is as ready as it can be before a pod uses it.
// bindingMode is the StorageClass's volumeBindingMode ("" when unknown).
func PVC(obj *unstructured.Unstructured, bindingMode string, strict bool) Result {
	if obj == nil {
		return Result{Message: "not found"}
	}
	phase, _, _ := unstructured.NestedString(obj.Object, "status", "phase")
	switch phase {
	case "Bound":
		return Result{Ready: true, Message: "Bound"}
	case "Lost":
		return Result{Failed: true, Message: "Lost: the bound volume no longer exists"}
	}
	if phase == "Pending" && bindingMode == "WaitForFirstConsumer" && !strict {
		return Result{Ready: true, Message: "Pending, and its StorageClass binds on first consumer (WaitForFirstConsumer): ready for a pod to use it"}
	}
	if phase == "" {
		phase = "no phase yet"
	}
	return Result{Message: phase}
}
