package autogate

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// podAdmission applies rule 2 to a workload's pods: a stack webhook that intercepts the CREATE
// of its pods (a sidecar injector, a pod policy) is called by the workload's controller, not for
// the workload itself, so the workload waits for an admitted dry-run of the Pod its controller
// makes from it (PodOf: the labels, names, volumes and tolerations each controller adds). One
// gate per webhook and namespace.
func (d *decider) podAdmission() {
	kind := d.gvk.Group + "/" + d.gvk.Kind
	if _, ok := podTemplateKinds[kind]; !ok || d.gvk.Kind == "Pod" {
		return
	}
	pod, ok := PodOf(kind, d.in.Resource.Object, d.objectName(), d.namespace)
	if !ok {
		return
	}
	req := Request{
		GVR:       schema.GroupVersionResource{Version: "v1", Resource: "pods"},
		Namespace: d.namespace,
		Labels:    stringMap(pod, "metadata", "labels"),
	}
	d.eachInterceptingConfig(req, func(inst *Installer, hooks []string, existsKey string) {
		key := fmt.Sprintf("auto-admission-pods-%s-%s%s", slugOr(d.namespace, "cluster"), slug(inst.Name), hookSuffix(inst, hooks))
		d.podsAdmitted = true
		d.add(Gate{
			Key: key, Name: key, Type: TypeAdmissionReady,
			Args:       d.admissionArgs(pod, false),
			After:      []string{inst.ID},
			AfterGates: []string{existsKey},
			Reason:     fmt.Sprintf("the pods of %s wait for webhook %s of %s to admit a Pod like them", d.what(), hooks[0], inst.Name),
		})
	})
}

// podTemplateKinds are the workloads whose pod spec rule 3 reads, and where it is.
var podTemplateKinds = map[string][]string{
	"/Pod":             {"spec"},
	"apps/Deployment":  {"spec", "template", "spec"},
	"apps/StatefulSet": {"spec", "template", "spec"},
	"apps/DaemonSet":   {"spec", "template", "spec"},
	"apps/ReplicaSet":  {"spec", "template", "spec"},
	"batch/Job":        {"spec", "template", "spec"},
	"batch/CronJob":    {"spec", "jobTemplate", "spec", "template", "spec"},
}
