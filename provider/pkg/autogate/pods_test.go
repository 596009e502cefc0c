package autogate

import (
	"bytes"
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

func podOfYAML(t *testing.T, y string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(y), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

type podOfCase struct {
	name     string
	kind     string
	workload string
	objName  string // PodOf's name argument
	ns       string
	want     string // the Pod as YAML; empty means ok=false
}

var podOfCases = []podOfCase{
	{
		name: "deployment: its ReplicaSet's pod, pod-template-hash",
		kind: "apps/Deployment", ns: "prod",
		workload: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata:
      labels: {app: web}
      annotations: {sidecar.istio.io/inject: "true"}
    spec:
      containers: [{name: app, image: nginx}]
`,
		want: `
apiVersion: v1
kind: Pod
metadata:
  name: web-autogate-gt4z2
  namespace: prod
  labels: {app: web, pod-template-hash: autogate}
  annotations: {sidecar.istio.io/inject: "true"}
spec:
  containers: [{name: app, image: nginx}]
`,
	},
	{
		name: "deployment named by the caller, long name cut to 63",
		kind: "apps/Deployment", ns: "prod", objName: strings.Repeat("a", 60),
		workload: `
spec:
  template:
    metadata: {labels: {app: web, pod-template-hash: user}}
    spec: {containers: [{name: app, image: nginx}]}
`,
		want: `
apiVersion: v1
kind: Pod
metadata:
  name: ` + strings.Repeat("a", 58) + `gt4z2
  namespace: prod
  labels: {app: web, pod-template-hash: autogate}
spec: {containers: [{name: app, image: nginx}]}
`,
	},
	{
		name: "replicaset: GetPodFromTemplate copies labels, annotations, finalizers only",
		kind: "apps/ReplicaSet", ns: "prod",
		workload: `
metadata: {name: rs, labels: {owner: only}, annotations: {owner: only}}
spec:
  template:
    metadata:
      name: ignored
      namespace: ignored
      labels: {app: rs}
      finalizers: [example.com/keep]
    spec: {containers: [{name: app, image: nginx}]}
`,
		want: `
apiVersion: v1
kind: Pod
metadata:
  name: rs-gt4z2
  namespace: prod
  labels: {app: rs}
  finalizers: [example.com/keep]
spec: {containers: [{name: app, image: nginx}]}
`,
	},
	{
		name: "statefulset: a container mounts a volumeClaimTemplate, the pod gets the PVC volume",
		kind: "apps/StatefulSet", ns: "prod",
		workload: `
metadata: {name: web}
spec:
  serviceName: web-svc
  selector: {matchLabels: {app: web}}
  volumeClaimTemplates:
  - metadata: {name: data}
    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: app
        image: nginx
        volumeMounts: [{name: data, mountPath: /data}]
`,
		want: `
apiVersion: v1
kind: Pod
metadata:
  name: web-1
  namespace: prod
  labels:
    app: web
    statefulset.kubernetes.io/pod-name: web-1
    apps.kubernetes.io/pod-index: "1"
    controller-revision-hash: web-autogate
spec:
  hostname: web-1
  subdomain: web-svc
  containers:
  - name: app
    image: nginx
    volumeMounts: [{name: data, mountPath: /data}]
  volumes:
  - name: data
    persistentVolumeClaim: {claimName: data-web-1}
`,
	},
	{
		name: "statefulset: a volume named like a claim template is replaced, others kept; ordinals.start; no serviceName",
		kind: "apps/StatefulSet", ns: "prod",
		workload: `
metadata: {name: db}
spec:
  ordinals: {start: 3}
  volumeClaimTemplates:
  - metadata: {name: data}
  - metadata: {name: logs}
  template:
    metadata: {labels: {app: db}}
    spec:
      subdomain: from-template
      containers:
      - name: db
        image: postgres
        volumeMounts: [{name: data, mountPath: /data}, {name: logs, mountPath: /logs}, {name: config, mountPath: /etc/db}]
      volumes:
      - {name: data, emptyDir: {}}
      - {name: config, configMap: {name: db-config}}
`,
		want: `
apiVersion: v1
kind: Pod
metadata:
  name: db-4
  namespace: prod
  labels:
    app: db
    statefulset.kubernetes.io/pod-name: db-4
    apps.kubernetes.io/pod-index: "4"
    controller-revision-hash: db-autogate
spec:
  hostname: db-4
  containers:
  - name: db
    image: postgres
    volumeMounts: [{name: data, mountPath: /data}, {name: logs, mountPath: /logs}, {name: config, mountPath: /etc/db}]
  volumes:
  - {name: data, persistentVolumeClaim: {claimName: data-db-4}}
  - {name: logs, persistentVolumeClaim: {claimName: logs-db-4}}
  - {name: config, configMap: {name: db-config}}
`,
	},
	{
		name: "statefulset with a long name: pod name and hostname stay DNS labels, claim named as the controller does",
		kind: "apps/StatefulSet", ns: "prod",
		workload: `
metadata: {name: ` + strings.Repeat("s", 63) + `}
spec:
  volumeClaimTemplates: [{metadata: {name: data}}]
  template:
    metadata: {labels: {app: s}}
    spec: {containers: [{name: app, image: nginx}]}
`,
		want: `
apiVersion: v1
kind: Pod
metadata:
  name: ` + strings.Repeat("s", 61) + `-1
  namespace: prod
  labels:
    app: s
    statefulset.kubernetes.io/pod-name: ` + strings.Repeat("s", 61) + `-1
    apps.kubernetes.io/pod-index: "1"
    controller-revision-hash: ` + strings.Repeat("s", 63) + `
spec:
  hostname: ` + strings.Repeat("s", 61) + `-1
  containers: [{name: app, image: nginx}]
  volumes:
  - {name: data, persistentVolumeClaim: {claimName: data-` + strings.Repeat("s", 63) + `-1}}
`,
	},
	{
		name: "daemonset: daemon tolerations, generation and hash labels, affinity to one node",
		kind: "apps/DaemonSet", ns: "kube-system",
		workload: `
metadata: {name: agent, annotations: {deprecated.daemonset.template.generation: "4"}}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      tolerations: [{key: dedicated, operator: Equal, value: infra, effect: NoSchedule}]
      containers: [{name: agent, image: agent}]
`,
		want: `
apiVersion: v1
kind: Pod
metadata:
  name: agent-gt4z2
  namespace: kube-system
  labels: {app: agent, pod-template-generation: "4", controller-revision-hash: autogate}
spec:
  containers: [{name: agent, image: agent}]
  tolerations:
  - {key: dedicated, operator: Equal, value: infra, effect: NoSchedule}
  - {key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute}
  - {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute}
  - {key: node.kubernetes.io/disk-pressure, operator: Exists, effect: NoSchedule}
  - {key: node.kubernetes.io/memory-pressure, operator: Exists, effect: NoSchedule}
  - {key: node.kubernetes.io/pid-pressure, operator: Exists, effect: NoSchedule}
  - {key: node.kubernetes.io/unschedulable, operator: Exists, effect: NoSchedule}
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms: [{matchFields: [{key: metadata.name, operator: In, values: [autogate]}]}]
`,
	},
	{
		name: "daemonset with hostNetwork: network-unavailable too; a matching toleration replaced, required affinity replaced",
		kind: "apps/DaemonSet", ns: "kube-system",
		workload: `
metadata: {name: cni}
spec:
  template:
    metadata: {labels: {app: cni}}
    spec:
      hostNetwork: true
      tolerations: [{key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 300}]
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms: [{matchExpressions: [{key: kubernetes.io/os, operator: In, values: [linux]}]}]
          preferredDuringSchedulingIgnoredDuringExecution:
          - {weight: 1, preference: {matchExpressions: [{key: zone, operator: In, values: [a]}]}}
      containers: [{name: cni, image: cni}]
`,
		want: `
apiVersion: v1
kind: Pod
metadata:
  name: cni-gt4z2
  namespace: kube-system
  labels: {app: cni, pod-template-generation: "1", controller-revision-hash: autogate}
spec:
  hostNetwork: true
  containers: [{name: cni, image: cni}]
  tolerations:
  - {key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute}
  - {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute}
  - {key: node.kubernetes.io/disk-pressure, operator: Exists, effect: NoSchedule}
  - {key: node.kubernetes.io/memory-pressure, operator: Exists, effect: NoSchedule}
  - {key: node.kubernetes.io/pid-pressure, operator: Exists, effect: NoSchedule}
  - {key: node.kubernetes.io/unschedulable, operator: Exists, effect: NoSchedule}
  - {key: node.kubernetes.io/network-unavailable, operator: Exists, effect: NoSchedule}
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms: [{matchFields: [{key: metadata.name, operator: In, values: [autogate]}]}]
      preferredDuringSchedulingIgnoredDuringExecution:
      - {weight: 1, preference: {matchExpressions: [{key: zone, operator: In, values: [a]}]}}
`,
	},
	{
		name: "job: selector labels of the API server, tracking finalizer",
		kind: "batch/Job", ns: "prod",
		workload: `
metadata: {name: migrate}
spec:
  template:
    metadata: {labels: {app: migrate}}
    spec:
      restartPolicy: Never
      containers: [{name: m, image: migrate}]
`,
		want: `
apiVersion: v1
kind: Pod
metadata:
  name: migrate-gt4z2
  namespace: prod
  labels:
    app: migrate
    job-name: migrate
    batch.kubernetes.io/job-name: migrate
    controller-uid: a0706a7e-0000-4000-8000-000000000000
    batch.kubernetes.io/controller-uid: a0706a7e-0000-4000-8000-000000000000
  finalizers: [batch.kubernetes.io/job-tracking]
spec:
  restartPolicy: Never
  containers: [{name: m, image: migrate}]
`,
	},
	{
		name: "job with manualSelector: no generated labels",
		kind: "batch/Job", ns: "prod",
		workload: `
metadata: {name: manual}
spec:
  manualSelector: true
  selector: {matchLabels: {app: manual}}
  template:
    metadata: {labels: {app: manual}, finalizers: [batch.kubernetes.io/job-tracking]}
    spec: {restartPolicy: Never, containers: [{name: m, image: m}]}
`,
		want: `
apiVersion: v1
kind: Pod
metadata:
  name: manual-gt4z2
  namespace: prod
  labels: {app: manual}
  finalizers: [batch.kubernetes.io/job-tracking]
spec: {restartPolicy: Never, containers: [{name: m, image: m}]}
`,
	},
	{
		name: "indexed job: index 0 annotation and label, hostname, env, failure count, name <job>-0-",
		kind: "batch/Job", ns: "prod",
		workload: `
metadata: {name: work}
spec:
  completionMode: Indexed
  completions: 3
  backoffLimitPerIndex: 1
  template:
    spec:
      subdomain: work-svc
      restartPolicy: Never
      initContainers: [{name: init, image: init}]
      containers:
      - {name: main, image: main, env: [{name: A, value: b}]}
      - {name: own, image: own, env: [{name: JOB_COMPLETION_INDEX, value: "7"}]}
`,
		want: `
apiVersion: v1
kind: Pod
metadata:
  name: work-0-gt4z2
  namespace: prod
  labels:
    job-name: work
    batch.kubernetes.io/job-name: work
    controller-uid: a0706a7e-0000-4000-8000-000000000000
    batch.kubernetes.io/controller-uid: a0706a7e-0000-4000-8000-000000000000
    batch.kubernetes.io/job-completion-index: "0"
  annotations:
    batch.kubernetes.io/job-completion-index: "0"
    batch.kubernetes.io/job-index-failure-count: "0"
  finalizers: [batch.kubernetes.io/job-tracking]
spec:
  hostname: work-0
  subdomain: work-svc
  restartPolicy: Never
  initContainers:
  - name: init
    image: init
    env: [{name: JOB_COMPLETION_INDEX, valueFrom: {fieldRef: {fieldPath: "metadata.labels['batch.kubernetes.io/job-completion-index']"}}}]
  containers:
  - name: main
    image: main
    env:
    - {name: A, value: b}
    - {name: JOB_COMPLETION_INDEX, valueFrom: {fieldRef: {fieldPath: "metadata.labels['batch.kubernetes.io/job-completion-index']"}}}
  - {name: own, image: own, env: [{name: JOB_COMPLETION_INDEX, value: "7"}]}
`,
	},
	{
		name: "cronjob: the pod of its Job <cronjob>-<minutes>; the jobTemplate's own labels stay on the Job",
		kind: "batch/CronJob", ns: "prod",
		workload: `
metadata: {name: nightly}
spec:
  schedule: "0 3 * * *"
  jobTemplate:
    metadata: {labels: {team: data}, annotations: {note: job-only}}
    spec:
      template:
        metadata: {labels: {app: nightly}}
        spec: {restartPolicy: OnFailure, containers: [{name: task, image: task}]}
`,
		want: `
apiVersion: v1
kind: Pod
metadata:
  name: nightly-29000000-gt4z2
  namespace: prod
  labels:
    app: nightly
    job-name: nightly-29000000
    batch.kubernetes.io/job-name: nightly-29000000
    controller-uid: a0706a7e-0000-4000-8000-000000000000
    batch.kubernetes.io/controller-uid: a0706a7e-0000-4000-8000-000000000000
  finalizers: [batch.kubernetes.io/job-tracking]
spec: {restartPolicy: OnFailure, containers: [{name: task, image: task}]}
`,
	},
	{
		name: "pod: itself, named from generateName",
		kind: "/Pod", ns: "prod",
		workload: `
apiVersion: v1
kind: Pod
metadata: {generateName: one-off-, labels: {app: x}}
spec: {containers: [{name: x, image: x}]}
`,
		want: `
apiVersion: v1
kind: Pod
metadata: {name: one-off-gt4z2, namespace: prod, labels: {app: x}}
spec: {containers: [{name: x, image: x}]}
`,
	},
	{
		name: "pod: itself, the caller's name",
		kind: "/Pod", ns: "prod", objName: "given",
		workload: `
metadata: {labels: {app: x}}
spec: {containers: [{name: x, image: x}]}
`,
		want: `
apiVersion: v1
kind: Pod
metadata: {name: given, namespace: prod, labels: {app: x}}
spec: {containers: [{name: x, image: x}]}
`,
	},
	{
		name: "deployment without a template", kind: "apps/Deployment", ns: "prod",
		workload: `{metadata: {name: d}, spec: {replicas: 1}}`,
	},
	{
		name: "statefulset whose template has no spec", kind: "apps/StatefulSet", ns: "prod",
		workload: `{metadata: {name: s}, spec: {template: {metadata: {labels: {app: s}}}}}`,
	},
	{
		name: "cronjob without a jobTemplate", kind: "batch/CronJob", ns: "prod",
		workload: `{metadata: {name: c}, spec: {schedule: "* * * * *"}}`,
	},
	{
		name: "cronjob whose jobTemplate has no pod template", kind: "batch/CronJob", ns: "prod",
		workload: `{metadata: {name: c}, spec: {jobTemplate: {spec: {completions: 1}}}}`,
	},
	{
		name: "not a workload", kind: "/ConfigMap", ns: "prod",
		workload: `{metadata: {name: c}, data: {template: {spec: {}}}}`,
	},
}

func TestPodOf(t *testing.T) {
	for _, tc := range podOfCases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := PodOf(tc.kind, podOfYAML(t, tc.workload), tc.objName, tc.ns)
			if tc.want == "" {
				if ok || got != nil {
					t.Fatalf("PodOf = %v, %v; want nil, false", got, ok)
				}
				return
			}
			if !ok {
				t.Fatal("PodOf: ok = false")
			}
			if g, w := podOfJSON(t, got), podOfJSON(t, podOfYAML(t, tc.want)); g != w {
				t.Errorf("PodOf:\n got %s\nwant %s", g, w)
			}
			podOfCheckValid(t, got)
		})
	}
}

// TestPodOfDoesNotMutateInput checks that PodOf leaves the workload as it was, and that the Pod
// shares nothing with it: changing every map and list of the Pod leaves the workload unchanged.
func TestPodOfDoesNotMutateInput(t *testing.T) {
	for _, tc := range podOfCases {
		t.Run(tc.name, func(t *testing.T) {
			workload := podOfYAML(t, tc.workload)
			before := podOfYAML(t, tc.workload)
			pod, _ := PodOf(tc.kind, workload, tc.objName, tc.ns)
			if !reflect.DeepEqual(workload, before) {
				t.Fatalf("PodOf changed its input:\n got %s\nwant %s", podOfJSON(t, workload), podOfJSON(t, before))
			}
			podOfScribble(pod)
			if !reflect.DeepEqual(workload, before) {
				t.Fatalf("the Pod shares values with its workload:\n got %s\nwant %s", podOfJSON(t, workload), podOfJSON(t, before))
			}
		})
	}
}

func TestPodOfCronJobJob(t *testing.T) {
	cj := podOfYAML(t, `
metadata: {name: nightly, labels: {cron: only}}
spec:
  jobTemplate:
    metadata: {labels: {team: data}, annotations: {note: job-only}}
    spec: {completions: 2, template: {spec: {containers: [{name: task, image: task}]}}}
`)
	job, ok := podOfCronJobJob(cj, "nightly")
	if !ok {
		t.Fatal("no Job")
	}
	want := podOfYAML(t, `
apiVersion: batch/v1
kind: Job
metadata:
  name: nightly-29000000
  labels: {team: data}
  annotations: {note: job-only, batch.kubernetes.io/cronjob-scheduled-timestamp: "2025-02-19T21:20:00Z"}
spec: {completions: 2, template: {spec: {containers: [{name: task, image: task}]}}}
`)
	if g, w := podOfJSON(t, job), podOfJSON(t, want); g != w {
		t.Errorf("podOfCronJobJob:\n got %s\nwant %s", g, w)
	}
}

func TestPodOfLongJobNames(t *testing.T) {
	long := strings.Repeat("j", 70)
	pod, ok := PodOf("batch/Job", podOfYAML(t, `
spec:
  completionMode: Indexed
  completions: 1
  template: {spec: {restartPolicy: Never, containers: [{name: j, image: j}]}}
`), long, "prod")
	if !ok {
		t.Fatal("no Pod")
	}
	md := podOfMap(pod, "metadata")
	// podGenerateNameWithIndex keeps "-0-" and names.SimpleNameGenerator the 5 random characters.
	if got, want := podOfStr(md, "name"), strings.Repeat("j", 55)+"-0-gt4z2"; got != want {
		t.Errorf("name = %q, want %q", got, want)
	}
	if got, want := podOfStr(podOfMap(pod, "spec"), "hostname"), strings.Repeat("j", 61)+"-0"; got != want {
		t.Errorf("hostname = %q, want %q", got, want)
	}
	podOfCheckValid(t, pod)
}

var (
	podOfDNSLabel     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	podOfDNSSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	podOfLabelValueRE = regexp.MustCompile(`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`)
)

// podOfCheckValid decodes pod strictly into a corev1.Pod (every field is one of a Pod) and checks
// the names and label values the API server validates.
func podOfCheckValid(t *testing.T, pod map[string]any) {
	t.Helper()
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var p corev1.Pod
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("not a Pod: %v\n%s", err, raw)
	}
	if len(p.Name) > 253 || !podOfDNSSubdomain.MatchString(p.Name) {
		t.Errorf("invalid pod name %q", p.Name)
	}
	if len(p.Name) > 63 {
		t.Errorf("pod name %q is longer than the generated names of the controllers", p.Name)
	}
	if p.Spec.Hostname != "" && (len(p.Spec.Hostname) > 63 || !podOfDNSLabel.MatchString(p.Spec.Hostname)) {
		t.Errorf("invalid hostname %q", p.Spec.Hostname)
	}
	for k, v := range p.Labels {
		if len(v) > 63 || !podOfLabelValueRE.MatchString(v) {
			t.Errorf("invalid value %q of label %s", v, k)
		}
	}
	if len(p.OwnerReferences) > 0 {
		t.Errorf("ownerReferences set: %v", p.OwnerReferences)
	}
	mounts := map[string]bool{}
	for _, v := range p.Spec.Volumes {
		mounts[v.Name] = true
	}
	for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
		for _, m := range c.VolumeMounts {
			if !mounts[m.Name] {
				t.Errorf("container %s mounts %s, which is no volume of the Pod", c.Name, m.Name)
			}
		}
	}
}

// podOfScribble changes every map and list reachable from v.
func podOfScribble(v any) {
	switch t := v.(type) {
	case map[string]any:
		if t == nil {
			return
		}
		for k, e := range t {
			podOfScribble(e)
			if s, ok := e.(string); ok {
				t[k] = s + "!"
			}
		}
		t["scribbled"] = true
	case []any:
		for i, e := range t {
			podOfScribble(e)
			if s, ok := e.(string); ok {
				t[i] = s + "!"
			}
		}
	}
}

func podOfJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
