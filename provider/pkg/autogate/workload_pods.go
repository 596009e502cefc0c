package autogate

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// podAdmission applies rule 2 to a workload's pods: a stack webhook that intercepts the CREATE
// of its pods (a sidecar injector, a pod policy) is called by the workload's controller, not for
// the workload itself, so the workload waits for an admitted dry-run of a Pod like its template
// (its labels, annotations and spec, in its namespace). One gate per webhook and namespace.
func (d *decider) podAdmission() {
	path, ok := podTemplateKinds[d.gvk.Group+"/"+d.gvk.Kind]
	if !ok || d.gvk.Kind == "Pod" {
		return
	}
	podSpec, _ := mapAt(d.in.Resource.Object, path...)
	if podSpec == nil {
		return
	}
	tmplMeta, _ := mapAt(d.in.Resource.Object, append(slices.Clone(path[:len(path)-1]), "metadata")...)
	req := Request{
		GVR:       schema.GroupVersionResource{Version: "v1", Resource: "pods"},
		Namespace: d.namespace,
		Labels:    stringMap(tmplMeta, "labels"),
	}
	for i := range d.in.Installers {
		inst := &d.in.Installers[i]
		if kindOf(inst.Type, inst.Object) != webhookInstaller {
			continue
		}
		hooks := d.interceptingHooks(inst, req)
		if len(hooks) == 0 {
			continue
		}
		hook := hooks[0]
		existsKey := d.configExists(inst)
		md := map[string]any{"name": podName(d.objectName()), "namespace": d.namespace}
		for _, k := range []string{"labels", "annotations"} {
			if v, ok := tmplMeta[k]; ok {
				md[k] = v
			}
		}
		pod := map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": podSpec}
		key := fmt.Sprintf("auto-admission-pods-%s-%s%s", slugOr(d.namespace, "cluster"), slug(inst.Name), hookSuffix(inst, hooks))
		d.add(Gate{
			Key: key, Name: key, Type: TypeAdmissionReady,
			Args:       map[string]any{"objects": []any{pod}},
			After:      []string{inst.ID},
			AfterGates: []string{existsKey},
			Reason:     fmt.Sprintf("the pods of %s wait for webhook %s of %s to admit a Pod like them", d.what(), hook, inst.Name),
		})
	}
}

// podName names the dry-run Pod after its workload (a DNS label).
func podName(workload string) string {
	name := "autogate-" + workload
	if len(name) > 63 {
		name = strings.TrimRight(name[:63], "-.")
	}
	return name
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
