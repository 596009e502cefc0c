package autogate

import (
	"fmt"
	"strconv"
	"time"
)

// PodOf and its helpers rebuild, as plain JSON, the Pod that a workload's controller creates,
// following the kube-controller-manager of Kubernetes v1.34 (k8s.io/kubernetes
// pkg/controller/...), so that an admission webhook and the API server's validation see, in a
// dry run, the object they will see when the controller creates the real Pod.
//
// What the controllers take from the API server at run time (uids, template hashes, revision
// names, the random suffix of generateName, the node a DaemonSet pod goes to, the time a CronJob
// fires) gets the stable, valid placeholders below.
//
// ownerReferences are left out on purpose: the controllers set a controller reference with
// blockOwnerDeletion, which the API server only accepts from whoever may update the owner's
// finalizers, and which would point to an object that does not exist yet. No admission rule of
// the API server needs it.
const (
	// podOfUID stands for the workload's metadata.uid (a Job's controller-uid labels).
	podOfUID = "a0706a7e-0000-4000-8000-000000000000"
	// podOfHash stands for controller.ComputeHash (pod-template-hash, controller-revision-hash).
	podOfHash = "autogate"
	// podOfRandom stands for the 5 characters names.SimpleNameGenerator appends to generateName
	// (from utilrand's alphabet).
	podOfRandom = "gt4z2"
	// podOfNode stands for the node a DaemonSet pod is pinned to.
	podOfNode = "autogate"
	// podOfScheduled stands for the time a CronJob fires (whole minutes, UTC).
	podOfScheduled = int64(29_000_000 * 60)
)

// Limits of the names involved (k8s.io/apimachinery validation, apiserver names package).
const (
	podOfMaxLabel     = 63                  // a DNS label, a label value
	podOfMaxSubdomain = 253                 // a DNS subdomain
	podOfMaxGenerated = podOfMaxLabel - 5   // names.MaxGeneratedNameLength
	podOfDefaultName  = "autogate-workload" // when the workload has no name at all
)

// PodOf is the Pod that the controller of a workload creates from it, as plain JSON
// (map[string]any, the shape of decoded YAML/JSON: maps, []any, strings, float64, bools).
// kind is "apps/Deployment", "apps/ReplicaSet", "apps/StatefulSet", "apps/DaemonSet", "batch/Job",
// "batch/CronJob" ("/Pod" returns the object itself).
// workload is the workload object as plain JSON (namespace already resolved and passed in ns; its
// metadata.name may be given in name).
// ok is false when the workload has no pod template.
//
// The Pod is the first one the controller would create (ordinal spec.ordinals.start of a
// StatefulSet, completion index 0 of an Indexed Job), with metadata.name set (not generateName:
// a dry run needs a name) and without ownerReferences. workload is not modified.
func PodOf(kind string, workload map[string]any, name, ns string) (pod map[string]any, ok bool) {
	given := name
	if name == "" {
		name = podOfStr(podOfMap(workload, "metadata"), "name")
	}
	if name == "" {
		name = podOfDefaultName
	}
	switch kind {
	case "/Pod":
		pod, ok = podOfPod(workload, given)
	case "apps/ReplicaSet":
		pod, ok = podOfReplicaSet(workload, name)
	case "apps/Deployment":
		pod, ok = podOfDeployment(workload, name)
	case "apps/StatefulSet":
		pod, ok = podOfStatefulSet(workload, name)
	case "apps/DaemonSet":
		pod, ok = podOfDaemonSet(workload, name)
	case "batch/Job":
		pod, ok = podOfJob(workload, name)
	case "batch/CronJob":
		pod, ok = podOfCronJob(workload, name)
	}
	if !ok {
		return nil, false
	}
	if ns != "" {
		// RealPodControl.CreatePods creates the Pod in the workload's namespace.
		podOfMetadata(pod)["namespace"] = ns
	}
	return pod, true
}

// podOfPod is a bare Pod: a copy of it, named given if given, else as the API server names a Pod
// that only has a generateName (names.SimpleNameGenerator).
func podOfPod(obj map[string]any, given string) (map[string]any, bool) {
	pod, _ := podOfCopy(obj).(map[string]any)
	if pod == nil {
		return nil, false
	}
	pod["apiVersion"], pod["kind"] = "v1", "Pod"
	md := podOfMetadata(pod)
	switch {
	case given != "":
		md["name"] = given
	case podOfStr(md, "name") != "":
	case podOfStr(md, "generateName") != "":
		md["name"] = podOfGeneratedName(podOfStr(md, "generateName"))
	default:
		md["name"] = podOfDefaultName
	}
	delete(md, "generateName")
	return pod, true
}

// podOfReplicaSet follows replicaset.manageReplicas: podControl.CreatePods(rs.Spec.Template, rs).
func podOfReplicaSet(rs map[string]any, name string) (map[string]any, bool) {
	tmpl, ok := podOfTemplate(rs, "spec", "template")
	if !ok {
		return nil, false
	}
	return podOfFromTemplate(tmpl, name, ""), true
}

// podOfDeployment follows deployment.getNewReplicaSet (the ReplicaSet it creates), then
// podOfReplicaSet.
func podOfDeployment(d map[string]any, name string) (map[string]any, bool) {
	tmpl, ok := podOfTemplate(d, "spec", "template")
	if !ok {
		return nil, false
	}
	// newRSTemplate.Labels = CloneAndAddLabel(..., DefaultDeploymentUniqueLabelKey, podTemplateSpecHash)
	podOfLabels(tmpl)["pod-template-hash"] = podOfHash
	// generateReplicaSetName(d.Name, podTemplateSpecHash)
	rsName := podOfTruncate(name, podOfMaxSubdomain-1-len(podOfHash)) + "-" + podOfHash
	return podOfFromTemplate(tmpl, rsName, ""), true
}

// podOfStatefulSet follows statefulset.newVersionedStatefulSetPod for the ordinal the controller
// makes next on a scale-up (start + replicas): newStatefulSetPod (GetPodFromTemplate,
// initIdentity, updateStorage) and setPodRevision. Not the first ordinal: once the set exists,
// its Pod <set>-<start> does too, and the dry-run create of an existing Pod would be refused
// (AlreadyExists) after the webhooks, or turned into an update the webhooks see differently.
func podOfStatefulSet(set map[string]any, name string) (map[string]any, bool) {
	tmpl, ok := podOfTemplate(set, "spec", "template")
	if !ok {
		return nil, false
	}
	spec := podOfMap(set, "spec")
	// getStartOrdinal: spec.ordinals.start, else 0; replicas default to 1.
	replicas := 1
	if _, set := spec["replicas"]; set {
		replicas = podOfInt(spec, "replicas")
	}
	ordinal := podOfInt(podOfMap(spec, "ordinals"), "start") + replicas
	pod := podOfFromTemplate(tmpl, name, "")
	md, podSpec := podOfMetadata(pod), podOfMap(pod, "spec")

	// initIdentity -> updateIdentity: pod.Name = getPodName(set, ordinal) ("<set>-<ordinal>"),
	// kept a DNS label since it is also the hostname.
	podName := podOfLabelName(name, "-"+strconv.Itoa(ordinal))
	md["name"] = podName
	labels := podOfLabels(pod)
	labels["statefulset.kubernetes.io/pod-name"] = podName         // apps.StatefulSetPodNameLabel
	labels["apps.kubernetes.io/pod-index"] = strconv.Itoa(ordinal) // apps.PodIndexLabel (gate GA, locked on)
	// initIdentity: Spec.Hostname = pod.Name, Spec.Subdomain = set.Spec.ServiceName.
	podSpec["hostname"] = podName
	if svc := podOfStr(spec, "serviceName"); svc != "" {
		podSpec["subdomain"] = svc
	} else {
		delete(podSpec, "subdomain")
	}

	// updateStorage: one PVC volume per volumeClaimTemplate, named after the template, claiming
	// getPersistentVolumeClaimName ("<template>-<set>-<ordinal>"); it replaces a pod volume of the
	// same name. (The controller ranges over a map; the order is that of the templates here.)
	claims := map[string]bool{}
	volumes := []any{}
	for _, c := range podOfList(spec, "volumeClaimTemplates") {
		claim := podOfStr(podOfMap(c, "metadata"), "name")
		if claim == "" || claims[claim] {
			continue
		}
		claims[claim] = true
		volumes = append(volumes, map[string]any{
			"name": claim,
			"persistentVolumeClaim": map[string]any{
				"claimName": fmt.Sprintf("%s-%s-%d", claim, name, ordinal),
			},
		})
	}
	if len(claims) > 0 {
		current, _ := podSpec["volumes"].([]any)
		for _, v := range current {
			if vm, _ := v.(map[string]any); !claims[podOfStr(vm, "name")] {
				volumes = append(volumes, v)
			}
		}
		podSpec["volumes"] = volumes
	}

	// setPodRevision: controller-revision-hash = the revision's name,
	// history.ControllerRevisionName(set.Name, hash) = "<set>-<hash>".
	labels["controller-revision-hash"] = podOfLabelValue(name + "-" + podOfHash)
	return pod, true
}

// podOfDaemonSet follows daemon.syncNodes: util.CreatePodTemplate (tolerations, generation and
// hash labels), util.ReplaceDaemonSetPodNodeNameNodeAffinity, then podControl.CreatePods.
func podOfDaemonSet(ds map[string]any, name string) (map[string]any, bool) {
	tmpl, ok := podOfTemplate(ds, "spec", "template")
	if !ok {
		return nil, false
	}
	spec := podOfMap(tmpl, "spec")
	podOfDaemonTolerations(spec)
	labels := podOfLabels(tmpl)
	// util.GetTemplateGeneration reads the deprecated.daemonset.template.generation annotation,
	// which the API server sets to spec.templateGeneration, at least 1 on create
	// (daemonSetStrategy.PrepareForCreate).
	gen, err := strconv.ParseInt(podOfStr(podOfMap(ds, "metadata", "annotations"), "deprecated.daemonset.template.generation"), 10, 64)
	if err != nil || gen < 1 {
		gen = 1
	}
	labels["pod-template-generation"] = strconv.FormatInt(gen, 10) // extensions.DaemonSetTemplateGenerationKey
	labels["controller-revision-hash"] = podOfHash                 // apps.DefaultDaemonSetUniqueLabelKey
	spec["affinity"] = podOfNodeAffinity(podOfMap(spec, "affinity"), podOfNode)
	return podOfFromTemplate(tmpl, name, ""), true
}

// podOfDaemonTolerations follows util.AddOrUpdateDaemonPodTolerations.
func podOfDaemonTolerations(spec map[string]any) {
	add := func(key, effect string) {
		podOfAddToleration(spec, map[string]any{"key": key, "operator": "Exists", "effect": effect})
	}
	add("node.kubernetes.io/not-ready", "NoExecute")
	add("node.kubernetes.io/unreachable", "NoExecute")
	add("node.kubernetes.io/disk-pressure", "NoSchedule")
	add("node.kubernetes.io/memory-pressure", "NoSchedule")
	add("node.kubernetes.io/pid-pressure", "NoSchedule")
	add("node.kubernetes.io/unschedulable", "NoSchedule")
	if hostNetwork, _ := spec["hostNetwork"].(bool); hostNetwork {
		add("node.kubernetes.io/network-unavailable", "NoSchedule")
	}
}

// podOfAddToleration follows v1helper.AddOrUpdateTolerationInPodSpec: a toleration with the same
// key, effect, operator and value (Toleration.MatchToleration) is replaced, else it is appended.
func podOfAddToleration(spec map[string]any, tol map[string]any) {
	var out []any
	updated := false
	for _, t := range podOfList(spec, "tolerations") {
		if podOfStr(t, "key") == podOfStr(tol, "key") && podOfStr(t, "effect") == podOfStr(tol, "effect") &&
			podOfStr(t, "operator") == podOfStr(tol, "operator") && podOfStr(t, "value") == podOfStr(tol, "value") {
			out = append(out, tol)
			updated = true
			continue
		}
		out = append(out, t)
	}
	if !updated {
		out = append(out, tol)
	}
	spec["tolerations"] = out
}

// podOfNodeAffinity follows util.ReplaceDaemonSetPodNodeNameNodeAffinity: the required node
// affinity becomes one term matching the node's metadata.name.
func podOfNodeAffinity(affinity map[string]any, node string) map[string]any {
	terms := []any{map[string]any{"matchFields": []any{map[string]any{
		"key": "metadata.name", "operator": "In", "values": []any{node},
	}}}}
	if affinity == nil {
		affinity = map[string]any{}
	}
	na := podOfMap(affinity, "nodeAffinity")
	if na == nil {
		na = map[string]any{}
		affinity["nodeAffinity"] = na
	}
	req := podOfMap(na, "requiredDuringSchedulingIgnoredDuringExecution")
	if req == nil {
		na["requiredDuringSchedulingIgnoredDuringExecution"] = map[string]any{"nodeSelectorTerms": terms}
	} else {
		req["nodeSelectorTerms"] = terms
	}
	return affinity
}

// podOfJob follows the API server's jobStrategy.PrepareForCreate (generateSelector) and then
// job.manageJob for the first pod (completion index 0 of an Indexed Job).
func podOfJob(job map[string]any, name string) (map[string]any, bool) {
	tmpl, ok := podOfTemplate(job, "spec", "template")
	if !ok {
		return nil, false
	}
	spec := podOfMap(job, "spec")
	labels := podOfLabels(tmpl)
	// generateSelectorIfNeeded: unless spec.manualSelector, the template gets the job-name and
	// controller-uid labels (legacy and batch.kubernetes.io/), where not already set.
	if manual, _ := spec["manualSelector"].(bool); !manual {
		for key, value := range map[string]string{
			"job-name": podOfLabelValue(name), "batch.kubernetes.io/job-name": podOfLabelValue(name),
			"controller-uid": podOfUID, "batch.kubernetes.io/controller-uid": podOfUID,
		} {
			if _, found := labels[key]; !found {
				labels[key] = value
			}
		}
	}
	indexed := podOfStr(spec, "completionMode") == "Indexed"
	podSpec := podOfMap(tmpl, "spec")
	if indexed {
		// addCompletionIndexEnvVariables
		for _, key := range []string{"initContainers", "containers"} {
			for _, c := range podOfList(podSpec, key) {
				podOfAddIndexEnv(c)
			}
		}
	}
	// appendJobCompletionFinalizerIfNotFound
	md := podOfMetadata(tmpl)
	finalizers, _ := md["finalizers"].([]any)
	if !podOfHas(finalizers, "batch.kubernetes.io/job-tracking") {
		md["finalizers"] = append(finalizers, "batch.kubernetes.io/job-tracking")
	}
	generateName := ""
	if indexed {
		const index = 0
		annotations := podOfMap(md, "annotations")
		if annotations == nil {
			annotations = map[string]any{}
			md["annotations"] = annotations
		}
		// addCompletionIndexAnnotation, addCompletionIndexLabel (PodIndexLabel: GA, locked on)
		annotations["batch.kubernetes.io/job-completion-index"] = strconv.Itoa(index)
		labels["batch.kubernetes.io/job-completion-index"] = strconv.Itoa(index)
		// template.Spec.Hostname = "<job>-<index>" (kept a DNS label)
		podSpec["hostname"] = podOfLabelName(name, "-"+strconv.Itoa(index))
		// podGenerateNameWithIndex(job.Name, index)
		generateName = podOfIndexedGenerateName(name, index)
		// hasBackoffLimitPerIndex -> addIndexFailureCountAnnotation: 0 failures for a first pod.
		if spec["backoffLimitPerIndex"] != nil {
			annotations["batch.kubernetes.io/job-index-failure-count"] = "0"
		}
	}
	return podOfFromTemplate(tmpl, name, generateName), true
}

// podOfAddIndexEnv follows addCompletionIndexEnvVariable: JOB_COMPLETION_INDEX from the
// completion index label (PodIndexLabel on), unless the container already sets it.
func podOfAddIndexEnv(container map[string]any) {
	env := podOfList(container, "env")
	for _, e := range env {
		if podOfStr(e, "name") == "JOB_COMPLETION_INDEX" {
			return
		}
	}
	list, _ := container["env"].([]any)
	container["env"] = append(list, map[string]any{
		"name": "JOB_COMPLETION_INDEX",
		"valueFrom": map[string]any{"fieldRef": map[string]any{
			"fieldPath": "metadata.labels['batch.kubernetes.io/job-completion-index']",
		}},
	})
}

// podOfIndexedGenerateName follows podGenerateNameWithIndex.
func podOfIndexedGenerateName(job string, index int) string {
	appendIndex := "-" + strconv.Itoa(index) + "-"
	prefix := job + appendIndex
	if len(prefix) > podOfMaxGenerated {
		prefix = prefix[:podOfMaxGenerated-len(appendIndex)] + appendIndex
	}
	return prefix
}

// podOfCronJob follows cronjob.getJobFromTemplate2 (the Job it creates at the scheduled time),
// then podOfJob.
func podOfCronJob(cj map[string]any, name string) (map[string]any, bool) {
	job, ok := podOfCronJobJob(cj, name)
	if !ok {
		return nil, false
	}
	return podOfJob(job, podOfStr(podOfMetadata(job), "name"))
}

// podOfCronJobJob is the Job of getJobFromTemplate2: the labels and annotations of the
// jobTemplate, the CronJobsScheduledAnnotation (in UTC here, not spec.timeZone), the name
// getJobName "<cronjob>-<scheduled time in minutes>", and the jobTemplate's spec.
func podOfCronJobJob(cj map[string]any, name string) (map[string]any, bool) {
	jt := podOfMap(cj, "spec", "jobTemplate")
	if jt == nil {
		return nil, false
	}
	jt, _ = podOfCopy(jt).(map[string]any)
	jtMeta := podOfMap(jt, "metadata")
	labels, _ := podOfCopy(podOfMap(jtMeta, "labels")).(map[string]any)
	annotations, _ := podOfCopy(podOfMap(jtMeta, "annotations")).(map[string]any)
	if annotations == nil {
		annotations = map[string]any{}
	}
	annotations["batch.kubernetes.io/cronjob-scheduled-timestamp"] = time.Unix(podOfScheduled, 0).UTC().Format(time.RFC3339)
	md := map[string]any{
		"name":        podOfLabelName(name, fmt.Sprintf("-%d", podOfScheduled/60)),
		"annotations": annotations,
	}
	if labels != nil {
		md["labels"] = labels
	}
	spec, _ := jt["spec"].(map[string]any)
	if spec == nil {
		return nil, false
	}
	return map[string]any{"apiVersion": "batch/v1", "kind": "Job", "metadata": md, "spec": spec}, true
}

// podOfFromTemplate follows controller.GetPodFromTemplate: the template's labels, annotations and
// finalizers, its spec, generateName getPodsPrefix(owner) ("<owner>-") unless generateName is
// given, and names that generateName as names.SimpleNameGenerator does. tmpl is a copy it owns.
func podOfFromTemplate(tmpl map[string]any, owner, generateName string) map[string]any {
	tmd := podOfMap(tmpl, "metadata")
	md := map[string]any{}
	for _, key := range []string{"labels", "annotations"} {
		if m, _ := tmd[key].(map[string]any); len(m) > 0 {
			md[key] = m
		}
	}
	if f, _ := tmd["finalizers"].([]any); len(f) > 0 {
		md["finalizers"] = f
	}
	if generateName == "" {
		generateName = owner + "-"
		if len(generateName) > podOfMaxSubdomain { // getPodsPrefix: the dash only if it fits
			generateName = owner
		}
	}
	md["name"] = podOfGeneratedName(generateName)
	spec, _ := tmpl["spec"].(map[string]any)
	return map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec}
}

// podOfGeneratedName follows names.SimpleNameGenerator.GenerateName: the base cut to
// MaxGeneratedNameLength, then 5 random characters.
func podOfGeneratedName(base string) string {
	if len(base) > podOfMaxGenerated {
		base = base[:podOfMaxGenerated]
	}
	return base + podOfRandom
}

// podOfTemplate is a deep copy of the pod template at path, which must have a spec.
func podOfTemplate(obj map[string]any, path ...string) (map[string]any, bool) {
	tmpl := podOfMap(obj, path...)
	if podOfMap(tmpl, "spec") == nil {
		return nil, false
	}
	cp, _ := podOfCopy(tmpl).(map[string]any)
	return cp, true
}

// podOfLabelName is base+suffix as a DNS label: base cut so that it fits in 63 characters.
func podOfLabelName(base, suffix string) string {
	return podOfTruncate(base, podOfMaxLabel-len(suffix)) + suffix
}

// podOfLabelValue is s cut to a valid label value.
func podOfLabelValue(s string) string {
	return podOfTruncate(s, podOfMaxLabel)
}

// podOfTruncate cuts s to n characters, without a trailing '-', '.' or '_'.
func podOfTruncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:max(n, 0)]
	for len(s) > 0 && (s[len(s)-1] == '-' || s[len(s)-1] == '.' || s[len(s)-1] == '_') {
		s = s[:len(s)-1]
	}
	return s
}

// podOfMetadata is pod's metadata map, created if missing.
func podOfMetadata(obj map[string]any) map[string]any {
	md, _ := obj["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		obj["metadata"] = md
	}
	return md
}

// podOfLabels is the metadata.labels map of obj (a pod or a template), created if missing.
func podOfLabels(obj map[string]any) map[string]any {
	md := podOfMetadata(obj)
	labels, _ := md["labels"].(map[string]any)
	if labels == nil {
		labels = map[string]any{}
		md["labels"] = labels
	}
	return labels
}

func podOfMap(m map[string]any, path ...string) map[string]any {
	for _, p := range path {
		if m == nil {
			return nil
		}
		m, _ = m[p].(map[string]any)
	}
	return m
}

func podOfList(m map[string]any, key string) []map[string]any {
	list, _ := m[key].([]any)
	out := make([]map[string]any, 0, len(list))
	for _, it := range list {
		if im, ok := it.(map[string]any); ok {
			out = append(out, im)
		}
	}
	return out
}

func podOfStr(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

func podOfInt(m map[string]any, key string) int {
	switch n := m[key].(type) {
	case float64:
		return int(n)
	case int:
		return n
	case int64:
		return int(n)
	}
	return 0
}

func podOfHas(list []any, s string) bool {
	for _, it := range list {
		if it == s {
			return true
		}
	}
	return false
}

// podOfCopy deep-copies a JSON value (and the Go-built maps and slices of strings that may stand
// in for one).
func podOfCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		if t == nil {
			return t
		}
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = podOfCopy(e)
		}
		return out
	case []any:
		if t == nil {
			return t
		}
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = podOfCopy(e)
		}
		return out
	case map[string]string:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = e
		}
		return out
	case []string:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = e
		}
		return out
	case []map[string]any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = podOfCopy(e)
		}
		return out
	}
	return v
}
