package status

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestGeneric(t *testing.T) {
	tests := map[string]struct {
		doc           string
		ready, failed bool
		msg           string
	}{
		"custom resource with no status (kstatus would say Current)": {doc: `
apiVersion: example.io/v1
kind: Gateway
metadata: {name: g, generation: 1}
spec: {}`, msg: "no status reported yet"},
		"custom resource Ready=True": {doc: `
apiVersion: example.io/v1
kind: Gateway
metadata: {name: g, generation: 2}
status: {conditions: [{type: Ready, status: "True", observedGeneration: 2}]}`, ready: true},
		"custom resource stale Ready": {doc: `
apiVersion: example.io/v1
kind: Gateway
metadata: {name: g, generation: 3}
status: {observedGeneration: 3, conditions: [{type: Ready, status: "True", observedGeneration: 2}]}`, msg: "stale"},
		"custom resource Ready=False": {doc: `
apiVersion: example.io/v1
kind: Gateway
metadata: {name: g, generation: 1}
status: {conditions: [{type: Ready, status: "False", reason: Pending, message: waiting}]}`, msg: "Ready=False (Pending: waiting)"},
		"custom resource with observedGeneration only": {doc: `
apiVersion: example.io/v1
kind: Gateway
metadata: {name: g, generation: 1}
status: {observedGeneration: 1}`, ready: true},
		"custom resource stalled": {doc: `
apiVersion: example.io/v1
kind: Gateway
metadata: {name: g, generation: 1}
status: {conditions: [{type: Stalled, status: "True", reason: BadConfig, message: broken}]}`, failed: true, msg: "Failed"},
		"configmap": {doc: `
apiVersion: v1
kind: ConfigMap
metadata: {name: c}`, ready: true},
		"deployment in progress": {doc: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: d, generation: 1}
spec: {replicas: 2}
status: {observedGeneration: 1, replicas: 2, updatedReplicas: 2, readyReplicas: 1, availableReplicas: 1}`, msg: "InProgress"},
		"pod running ready": {doc: `
apiVersion: v1
kind: Pod
metadata: {name: p}
status: {phase: Running, conditions: [{type: Ready, status: "True"}]}`, ready: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := Generic(fromYAML(t, tc.doc))
			if r.Ready != tc.ready || r.Failed != tc.failed {
				t.Errorf("Generic = %+v, want ready=%v failed=%v", r, tc.ready, tc.failed)
			}
			if !strings.Contains(r.Message, tc.msg) {
				t.Errorf("message %q lacks %q", r.Message, tc.msg)
			}
		})
	}
	if r := Generic(nil); r.Ready || r.Message != "not found" {
		t.Errorf("Generic(nil) = %+v", r)
	}
}

func TestPVC(t *testing.T) {
	pending := fromYAML(t, "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: c}\nstatus: {phase: Pending}")
	bound := fromYAML(t, "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: c}\nstatus: {phase: Bound}")
	lost := fromYAML(t, "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: c}\nstatus: {phase: Lost}")
	tests := []struct {
		obj           *unstructured.Unstructured
		mode          string
		strict        bool
		ready, failed bool
	}{
		{pending, "WaitForFirstConsumer", false, true, false},
		{pending, "WaitForFirstConsumer", true, false, false},
		{pending, "Immediate", false, false, false},
		{pending, "", false, false, false},
		{bound, "Immediate", true, true, false},
		{lost, "", false, false, true},
	}
	for i, tc := range tests {
		r := PVC(tc.obj, tc.mode, tc.strict)
		if r.Ready != tc.ready || r.Failed != tc.failed {
			t.Errorf("case %d: PVC = %+v", i, r)
		}
	}
}

func TestRollouts(t *testing.T) {
	tests := map[string]struct {
		eval          func(*unstructured.Unstructured) Rollout
		doc           string
		ready, failed bool
		msg           string
	}{
		"deployment not observed": {DeploymentRollout, `
metadata: {generation: 2}
spec: {replicas: 2}
status: {observedGeneration: 1}`, false, false, "observe generation 2"},
		"deployment updating": {DeploymentRollout, `
metadata: {generation: 2}
spec: {replicas: 3}
status: {observedGeneration: 2, replicas: 4, updatedReplicas: 2, availableReplicas: 3}`, false, false, "2 of 3 updated"},
		"deployment old replicas": {DeploymentRollout, `
metadata: {generation: 2}
spec: {replicas: 3}
status: {observedGeneration: 2, replicas: 4, updatedReplicas: 3, availableReplicas: 3}`, false, false, "1 old replicas"},
		"deployment done": {DeploymentRollout, `
metadata: {generation: 2, annotations: {deployment.kubernetes.io/revision: "2"}}
spec: {replicas: 3}
status: {observedGeneration: 2, replicas: 3, updatedReplicas: 3, readyReplicas: 3, availableReplicas: 3}`, true, false, "3 of 3"},
		"deployment deadline": {DeploymentRollout, `
metadata: {generation: 1}
spec: {replicas: 1}
status: {observedGeneration: 1, conditions: [{type: Progressing, status: "False", reason: ProgressDeadlineExceeded, message: 'ReplicaSet "x" has timed out progressing.'}]}`, false, true, "ProgressDeadlineExceeded"},
		"statefulset partition": {StatefulSetRollout, `
metadata: {generation: 1}
spec: {replicas: 3, updateStrategy: {type: RollingUpdate, rollingUpdate: {partition: 2}}}
status: {observedGeneration: 1, replicas: 3, readyReplicas: 3, updatedReplicas: 1, currentRevision: a, updateRevision: b}`, true, false, "partitioned"},
		"statefulset updating": {StatefulSetRollout, `
metadata: {generation: 1}
spec: {replicas: 2}
status: {observedGeneration: 1, replicas: 2, readyReplicas: 2, updatedReplicas: 1, currentRevision: a, updateRevision: b}`, false, false, "revision b"},
		"statefulset done": {StatefulSetRollout, `
metadata: {generation: 1}
spec: {replicas: 2}
status: {observedGeneration: 1, replicas: 2, readyReplicas: 2, updatedReplicas: 2, currentRevision: b, updateRevision: b}`, true, false, "2 of 2"},
		"daemonset partial": {DaemonSetRollout, `
metadata: {generation: 1}
status: {observedGeneration: 1, desiredNumberScheduled: 3, updatedNumberScheduled: 3, numberAvailable: 2}`, false, false, "2 of 3"},
		"job complete": {JobDone, `
status: {succeeded: 1, conditions: [{type: Complete, status: "True"}]}`, true, false, "Complete"},
		"job failed": {JobDone, `
status: {failed: 4, conditions: [{type: Failed, status: "True", reason: BackoffLimitExceeded, message: Job has reached the specified backoff limit}]}`, false, true, "BackoffLimitExceeded"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := tc.eval(fromYAML(t, tc.doc))
			if r.Ready != tc.ready || r.Failed != tc.failed || !strings.Contains(r.Message, tc.msg) {
				t.Errorf("got %+v, want ready=%v failed=%v msg~%q", r, tc.ready, tc.failed, tc.msg)
			}
		})
	}
}

func TestReadyEndpoints(t *testing.T) {
	slice := func(doc string) *unstructured.Unstructured { return fromYAML(t, doc) }
	slices := []*unstructured.Unstructured{
		slice(`
ports: [{name: https, port: 10250, protocol: TCP}]
endpoints:
- {addresses: [10.244.0.5], conditions: {ready: true}}
- {addresses: [10.244.0.6], conditions: {ready: false}}
- {addresses: [10.244.0.7]}`),
		slice(`
ports: [{name: metrics, port: 8080}]
endpoints:
- {addresses: [10.244.0.8], conditions: {ready: true}}
- {addresses: [10.244.0.9], conditions: {ready: true, terminating: true}}`),
	}
	for _, tc := range []struct {
		port string
		want int
	}{{"", 3}, {"https", 2}, {"10250", 2}, {"metrics", 1}, {"9999", 0}} {
		if n, _ := ReadyEndpoints(slices, tc.port); n != tc.want {
			t.Errorf("ReadyEndpoints(port %q) = %d, want %d", tc.port, n, tc.want)
		}
	}
	if _, ports := ReadyEndpoints(slices, ""); strings.Join(ports, ",") != "https:10250/TCP,metrics:8080/TCP" {
		t.Errorf("ports = %v", ports)
	}
}
