package status

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Rollout figures, as outputs.
type Rollout struct {
	Result
	Replicas, UpdatedReplicas, ReadyReplicas, AvailableReplicas int64
	Revision                                                    string
}

func nestedInt(obj *unstructured.Unstructured, fields ...string) int64 {
	v, _, _ := unstructured.NestedInt64(obj.Object, fields...)
	return v
}

// observed reports whether the controller has seen the current spec.
func observed(obj *unstructured.Unstructured) (bool, string) {
	og, found, _ := unstructured.NestedInt64(obj.Object, "status", "observedGeneration")
	if !found || og < obj.GetGeneration() {
		return false, fmt.Sprintf("waiting for the controller to observe generation %d (observed %d)", obj.GetGeneration(), og)
	}
	return true, ""
}

// DeploymentRollout follows `kubectl rollout status`: the new ReplicaSet has all replicas
// updated and available and no old replicas remain; ProgressDeadlineExceeded fails.
func DeploymentRollout(obj *unstructured.Unstructured) Rollout {
	if obj == nil {
		return Rollout{Result: Result{Message: "not found"}}
	}
	want := int64(1)
	if v, found, _ := unstructured.NestedInt64(obj.Object, "spec", "replicas"); found {
		want = v
	}
	r := Rollout{Replicas: nestedInt(obj, "status", "replicas"), UpdatedReplicas: nestedInt(obj, "status", "updatedReplicas"),
		ReadyReplicas: nestedInt(obj, "status", "readyReplicas"), AvailableReplicas: nestedInt(obj, "status", "availableReplicas"),
		Revision: obj.GetAnnotations()["deployment.kubernetes.io/revision"]}
	if ok, msg := observed(obj); !ok {
		r.Message = msg
		return r
	}
	if c, ok := FindCondition(obj, "Progressing"); ok && c.Reason == "ProgressDeadlineExceeded" {
		r.Failed, r.Message = true, fmt.Sprintf("rollout failed: %s", c)
		return r
	}
	switch {
	case r.UpdatedReplicas < want:
		r.Message = fmt.Sprintf("%d of %d updated replicas are available", r.UpdatedReplicas, want)
	case r.Replicas > r.UpdatedReplicas:
		r.Message = fmt.Sprintf("%d old replicas are pending termination", r.Replicas-r.UpdatedReplicas)
	case r.AvailableReplicas < r.UpdatedReplicas:
		r.Message = fmt.Sprintf("%d of %d updated replicas are available", r.AvailableReplicas, r.UpdatedReplicas)
	default:
		r.Ready, r.Message = true, fmt.Sprintf("%d of %d replicas updated and available", r.AvailableReplicas, want)
	}
	return r
}

// StatefulSetRollout follows `kubectl rollout status` for RollingUpdate StatefulSets, honouring
// a partition (only ordinals at or above it are updated); OnDelete ones see statefulSetOnDelete.
func StatefulSetRollout(obj *unstructured.Unstructured) Rollout {
	if obj == nil {
		return Rollout{Result: Result{Message: "not found"}}
	}
	want := int64(1)
	if v, found, _ := unstructured.NestedInt64(obj.Object, "spec", "replicas"); found {
		want = v
	}
	r := Rollout{Replicas: nestedInt(obj, "status", "replicas"), UpdatedReplicas: nestedInt(obj, "status", "updatedReplicas"),
		ReadyReplicas: nestedInt(obj, "status", "readyReplicas"), AvailableReplicas: nestedInt(obj, "status", "availableReplicas")}
	r.Revision, _, _ = unstructured.NestedString(obj.Object, "status", "updateRevision")
	if ok, msg := observed(obj); !ok {
		r.Message = msg
		return r
	}
	if strategy, _, _ := unstructured.NestedString(obj.Object, "spec", "updateStrategy", "type"); strategy == "OnDelete" {
		return statefulSetOnDelete(r, want)
	}
	if r.ReadyReplicas < want {
		r.Message = fmt.Sprintf("%d of %d pods ready", r.ReadyReplicas, want)
		return r
	}
	partition, _, _ := unstructured.NestedInt64(obj.Object, "spec", "updateStrategy", "rollingUpdate", "partition")
	if partition > 0 {
		if r.UpdatedReplicas < want-partition {
			r.Message = fmt.Sprintf("partitioned rollout: %d of %d pods at or above ordinal %d updated", r.UpdatedReplicas, want-partition, partition)
			return r
		}
		r.Ready, r.Message = true, fmt.Sprintf("partitioned rollout done: %d pods updated", r.UpdatedReplicas)
		return r
	}
	current, _, _ := unstructured.NestedString(obj.Object, "status", "currentRevision")
	if r.Revision != current {
		r.Message = fmt.Sprintf("waiting for the update to revision %s to finish (%d updated)", r.Revision, r.UpdatedReplicas)
		return r
	}
	r.Ready, r.Message = true, fmt.Sprintf("%d of %d pods ready at revision %s", r.ReadyReplicas, want, r.Revision)
	return r
}

// statefulSetOnDelete judges an OnDelete StatefulSet, which `kubectl rollout status` refuses:
// the controller never replaces a pod itself, so after a template change the old pods keep
// running (and stay ready) until someone deletes them. status.updatedReplicas is the
// controller's count of pods whose controller-revision-hash is status.updateRevision; the set
// is rolled out when every wanted pod is at that revision and ready, and no extra pod remains.
func statefulSetOnDelete(r Rollout, want int64) Rollout {
	switch {
	case r.UpdatedReplicas < want:
		r.Message = fmt.Sprintf("OnDelete update strategy: %d of %d pods run revision %s; the controller replaces the others "+
			"only once they are deleted (kubectl delete pod)", r.UpdatedReplicas, want, r.Revision)
	case r.Replicas > want:
		r.Message = fmt.Sprintf("%d extra pods are pending termination", r.Replicas-want)
	case r.ReadyReplicas < want:
		r.Message = fmt.Sprintf("%d of %d pods ready at revision %s (OnDelete update strategy)", r.ReadyReplicas, want, r.Revision)
	default:
		r.Ready, r.Message = true, fmt.Sprintf("%d of %d pods ready at revision %s (OnDelete update strategy)", r.ReadyReplicas, want, r.Revision)
	}
	return r
}

// DaemonSetRollout follows `kubectl rollout status`: every scheduled node runs an updated,
// available pod. For OnDelete (which kubectl refuses) the same holds, and progress says that
// the old pods must be deleted.
func DaemonSetRollout(obj *unstructured.Unstructured) Rollout {
	if obj == nil {
		return Rollout{Result: Result{Message: "not found"}}
	}
	desired := nestedInt(obj, "status", "desiredNumberScheduled")
	r := Rollout{Replicas: desired, UpdatedReplicas: nestedInt(obj, "status", "updatedNumberScheduled"),
		ReadyReplicas: nestedInt(obj, "status", "numberReady"), AvailableReplicas: nestedInt(obj, "status", "numberAvailable")}
	if ok, msg := observed(obj); !ok {
		r.Message = msg
		return r
	}
	onDelete := ""
	if strategy, _, _ := unstructured.NestedString(obj.Object, "spec", "updateStrategy", "type"); strategy == "OnDelete" {
		// `kubectl rollout status` refuses OnDelete; say what the wait needs instead.
		onDelete = " (OnDelete update strategy: the controller replaces an old pod only once it is deleted: kubectl delete pod)"
	}
	switch {
	case r.UpdatedReplicas < desired:
		r.Message = fmt.Sprintf("%d of %d scheduled pods updated%s", r.UpdatedReplicas, desired, onDelete)
	case r.AvailableReplicas < desired:
		r.Message = fmt.Sprintf("%d of %d updated pods available", r.AvailableReplicas, desired)
	default:
		r.Ready, r.Message = true, fmt.Sprintf("%d of %d scheduled pods updated and available", r.AvailableReplicas, desired)
	}
	return r
}

// JobDone is complete when the Job has Complete=True; Failed=True fails fast with its reason.
func JobDone(obj *unstructured.Unstructured) Rollout {
	if obj == nil {
		return Rollout{Result: Result{Message: "not found"}}
	}
	r := Rollout{Replicas: nestedInt(obj, "status", "active"), ReadyReplicas: nestedInt(obj, "status", "succeeded"),
		AvailableReplicas: nestedInt(obj, "status", "succeeded")}
	if c, ok := FindCondition(obj, "Failed"); ok && c.Status == "True" {
		r.Failed, r.Message = true, fmt.Sprintf("Job failed: %s", c)
		return r
	}
	if c, ok := FindCondition(obj, "Complete"); ok && c.Status == "True" {
		r.Ready, r.Message = true, fmt.Sprintf("Complete (%d succeeded)", r.ReadyReplicas)
		return r
	}
	r.Message = fmt.Sprintf("running: %d active, %d succeeded, %d failed", r.Replicas, r.ReadyReplicas, nestedInt(obj, "status", "failed"))
	return r
}
