package status

import (
	"strings"
	"testing"

	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

// kindCase is one state of a kind kstatus has a rule for. kstatusCurrent pins what kstatus
// v0.37.2 itself says, so a near miss that kstatus calls Current is visibly one Generic must
// catch on its own.
type kindCase struct {
	doc                   string
	ready, failed         bool
	msg                   string
	kstatusCurrent        bool
	kstatusCurrentChecked bool
}

func current(c kindCase) kindCase { c.kstatusCurrent, c.kstatusCurrentChecked = true, true; return c }

// TestGenericPerKind covers every kind kstatus v0.37.2 has a rule for (core.go's legacyTypes:
// Pod, Job, Deployment, StatefulSet, DaemonSet, ReplicaSet, Service, PersistentVolumeClaim,
// PodDisruptionBudget, CronJob, ConfigMap, Secret, CustomResourceDefinition) and
// ReplicationController: the states kstatus calls Current that are not ready (near misses),
// beside the states that must pass.
func TestGenericPerKind(t *testing.T) {
	tests := map[string]map[string]kindCase{
		"Pod": {
			"near miss: evicted (phase Failed)": current(kindCase{doc: `
apiVersion: v1
kind: Pod
metadata: {name: p, generation: 1}
status: {phase: Failed, reason: Evicted, message: "The node was low on resource: memory."}`, failed: true, msg: "Evicted"}),
			"near miss: Succeeded": current(kindCase{doc: `
apiVersion: v1
kind: Pod
metadata: {name: p}
status: {phase: Succeeded, conditions: [{type: Ready, status: "False", reason: PodCompleted}]}`, failed: true, msg: "Succeeded"}),
			"near miss: Running, Ready=False": {doc: `
apiVersion: v1
kind: Pod
metadata: {name: p}
status: {phase: Running, conditions: [{type: Ready, status: "False"}]}`, msg: "InProgress"},
			"Running and Ready": current(kindCase{doc: `
apiVersion: v1
kind: Pod
metadata: {name: p}
status: {phase: Running, conditions: [{type: Ready, status: "True"}]}`, ready: true}),
		},
		"Job": {
			"near miss: started, not complete": current(kindCase{doc: `
apiVersion: batch/v1
kind: Job
metadata: {name: j, generation: 1}
status: {startTime: "2026-11-23T00:00:00Z", active: 1}`, msg: "not complete"}),
			"near miss: FailureTarget (failing, pods stopping)": current(kindCase{doc: `
apiVersion: batch/v1
kind: Job
metadata: {name: j, generation: 1}
status: {startTime: "2026-11-23T00:00:00Z", failed: 7, conditions: [{type: FailureTarget, status: "True", reason: BackoffLimitExceeded}]}`,
				failed: true, msg: "BackoffLimitExceeded"}),
			"near miss: suspended": current(kindCase{doc: `
apiVersion: batch/v1
kind: Job
metadata: {name: j, generation: 2}
spec: {suspend: true}
status: {startTime: "2026-11-23T00:00:00Z", conditions: [{type: Suspended, status: "True", reason: JobSuspended}]}`, msg: "suspended"}),
			"Failed": {doc: `
apiVersion: batch/v1
kind: Job
metadata: {name: j, generation: 1}
status: {startTime: "2026-11-23T00:00:00Z", failed: 7, conditions: [{type: Failed, status: "True", reason: BackoffLimitExceeded}]}`,
				failed: true, msg: "BackoffLimitExceeded"},
			"Complete": current(kindCase{doc: `
apiVersion: batch/v1
kind: Job
metadata: {name: j, generation: 1}
status: {startTime: "2026-11-23T00:00:00Z", succeeded: 1, conditions: [{type: SuccessCriteriaMet, status: "True"}, {type: Complete, status: "True"}]}`, ready: true}),
		},
		"Deployment": {
			"near miss: new pods not available yet": {doc: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: d, generation: 2}
spec: {replicas: 2}
status: {observedGeneration: 2, replicas: 2, updatedReplicas: 2, readyReplicas: 1, availableReplicas: 1}`, msg: "InProgress"},
			"near miss: progress deadline exceeded": {doc: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: d, generation: 2}
spec: {replicas: 2}
status: {observedGeneration: 2, replicas: 2, updatedReplicas: 1, conditions: [{type: Progressing, status: "False", reason: ProgressDeadlineExceeded}]}`, failed: true},
			"rolled out": current(kindCase{doc: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: d, generation: 2}
spec: {replicas: 2}
status: {observedGeneration: 2, replicas: 2, updatedReplicas: 2, readyReplicas: 2, availableReplicas: 2,
  conditions: [{type: Progressing, status: "True", reason: NewReplicaSetAvailable}, {type: Available, status: "True"}]}`, ready: true}),
		},
		"StatefulSet": {
			"near miss: OnDelete, no pod ready": current(kindCase{doc: `
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: s, generation: 1}
spec: {replicas: 2, updateStrategy: {type: OnDelete}}
status: {observedGeneration: 1, replicas: 2, readyReplicas: 0, updatedReplicas: 2, currentRevision: s-1, updateRevision: s-1}`, msg: "0 of 2 pods ready"}),
			"near miss: OnDelete, ready pods all at the old revision": current(kindCase{doc: `
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: s, generation: 2}
spec: {replicas: 2, updateStrategy: {type: OnDelete}}
status: {observedGeneration: 2, replicas: 2, readyReplicas: 2, currentReplicas: 2, updatedReplicas: 0, currentRevision: s-1, updateRevision: s-2}`,
				msg: "only once they are deleted"}),
			"near miss: no status yet (replicas 0)": current(kindCase{doc: `
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: s, generation: 1}
spec: {replicas: 0, updateStrategy: {type: RollingUpdate, rollingUpdate: {partition: 0}}}`, msg: "observe generation 1"}),
			"near miss: rolling update, revisions differ": {doc: `
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: s, generation: 2}
spec: {replicas: 2, updateStrategy: {type: RollingUpdate}}
status: {observedGeneration: 2, replicas: 2, readyReplicas: 2, currentReplicas: 1, updatedReplicas: 1, currentRevision: s-1, updateRevision: s-2}`, msg: "InProgress"},
			"OnDelete, every pod at the new revision and ready": current(kindCase{doc: `
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: s, generation: 2}
spec: {replicas: 2, updateStrategy: {type: OnDelete}}
status: {observedGeneration: 2, replicas: 2, readyReplicas: 2, currentReplicas: 0, updatedReplicas: 2, currentRevision: s-1, updateRevision: s-2}`, ready: true}),
			"rolled out": current(kindCase{doc: `
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: s, generation: 2}
spec: {replicas: 2, updateStrategy: {type: RollingUpdate, rollingUpdate: {partition: 0}}}
status: {observedGeneration: 2, replicas: 2, readyReplicas: 2, availableReplicas: 2, currentReplicas: 2, updatedReplicas: 2, currentRevision: s-2, updateRevision: s-2}`, ready: true}),
		},
		"DaemonSet": {
			"near miss: OnDelete after a template change (waits, saying why)": {doc: `
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: d, generation: 2}
spec: {updateStrategy: {type: OnDelete}}
status: {observedGeneration: 2, desiredNumberScheduled: 2, currentNumberScheduled: 2, updatedNumberScheduled: 0, numberReady: 2, numberAvailable: 2}`,
				msg: "only once it is deleted"},
			"rolled out": current(kindCase{doc: `
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: d, generation: 2}
spec: {updateStrategy: {type: RollingUpdate}}
status: {observedGeneration: 2, desiredNumberScheduled: 2, currentNumberScheduled: 2, updatedNumberScheduled: 2, numberReady: 2, numberAvailable: 2}`, ready: true}),
		},
		"ReplicaSet": {
			"near miss: no status yet (replicas 0)": current(kindCase{doc: `
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: r, generation: 1}
spec: {replicas: 0}`, msg: "no status yet"}),
			"all replicas available": current(kindCase{doc: `
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: r, generation: 1}
spec: {replicas: 2}
status: {observedGeneration: 1, replicas: 2, fullyLabeledReplicas: 2, readyReplicas: 2, availableReplicas: 2}`, ready: true}),
		},
		"ReplicationController (no kstatus rule)": {
			"near miss: no pod ready": current(kindCase{doc: `
apiVersion: v1
kind: ReplicationController
metadata: {name: r, generation: 1}
spec: {replicas: 2}
status: {observedGeneration: 1, replicas: 2, fullyLabeledReplicas: 2, readyReplicas: 0, availableReplicas: 0}`, msg: "0 of 2 replicas ready"}),
			"all replicas available": current(kindCase{doc: `
apiVersion: v1
kind: ReplicationController
metadata: {name: r, generation: 1}
spec: {replicas: 2}
status: {observedGeneration: 1, replicas: 2, readyReplicas: 2, availableReplicas: 2}`, ready: true}),
		},
		"Service": {
			"near miss: LoadBalancer without an address": current(kindCase{doc: `
apiVersion: v1
kind: Service
metadata: {name: s}
spec: {type: LoadBalancer, clusterIP: 10.0.0.7}
status: {loadBalancer: {}}`, msg: "no ingress address"}),
			"LoadBalancer with an address": current(kindCase{doc: `
apiVersion: v1
kind: Service
metadata: {name: s}
spec: {type: LoadBalancer, clusterIP: 10.0.0.7}
status: {loadBalancer: {ingress: [{ip: 192.0.2.10}]}}`, ready: true}),
			"LoadBalancer with externalIPs (helm --wait does not wait)": current(kindCase{doc: `
apiVersion: v1
kind: Service
metadata: {name: s}
spec: {type: LoadBalancer, clusterIP: 10.0.0.7, externalIPs: [192.0.2.11]}`, ready: true}),
			"ClusterIP": current(kindCase{doc: `
apiVersion: v1
kind: Service
metadata: {name: s}
spec: {type: ClusterIP, clusterIP: 10.0.0.7}`, ready: true}),
			"headless": current(kindCase{doc: `
apiVersion: v1
kind: Service
metadata: {name: s}
spec: {clusterIP: None}`, ready: true}),
			"ExternalName": current(kindCase{doc: `
apiVersion: v1
kind: Service
metadata: {name: s}
spec: {type: ExternalName, externalName: db.example.test}`, ready: true}),
		},
		"PersistentVolumeClaim": {
			"near miss: Lost (terminal)": {doc: `
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: c}
status: {phase: Lost}`, failed: true, msg: "Lost"},
			"near miss: Pending": {doc: `
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: c}
status: {phase: Pending}`, msg: "InProgress"},
			"Bound": current(kindCase{doc: `
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: c}
status: {phase: Bound}`, ready: true}),
		},
		"PodDisruptionBudget": {
			"near miss: not computed yet": current(kindCase{doc: `
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: b, generation: 1}
spec: {minAvailable: 1}`, msg: "not computed yet"}),
			"near miss: the controller could not compute it": current(kindCase{doc: `
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: b, generation: 1}
spec: {minAvailable: 1}
status: {observedGeneration: 1, conditions: [{type: DisruptionAllowed, status: "False", reason: SyncFailed, message: "found no controllers for pod web"}]}`, msg: "SyncFailed"}),
			"computed, no disruption allowed now": current(kindCase{doc: `
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: b, generation: 1}
spec: {minAvailable: 1}
status: {observedGeneration: 1, currentHealthy: 1, desiredHealthy: 1, disruptionsAllowed: 0, expectedPods: 1,
  conditions: [{type: DisruptionAllowed, status: "False", reason: InsufficientPods}]}`, ready: true}),
		},
		"CustomResourceDefinition": {
			"near miss: Established listed before NamesAccepted=False": current(kindCase{doc: `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.io, generation: 2}
status: {conditions: [{type: Established, status: "True"}, {type: NamesAccepted, status: "False", reason: ListKindConflict}]}`,
				failed: true, msg: "ListKindConflict"}),
			"near miss: a rename not accepted yet (True conditions left from the old names)": current(kindCase{doc: `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.io, generation: 2}
spec: {group: example.io, names: {kind: Widget, plural: widgets, shortNames: [wd]}, versions: [{name: v1, served: true}]}
status: {acceptedNames: {kind: Widget, plural: widgets, shortNames: [wg]},
  conditions: [{type: NamesAccepted, status: "True"}, {type: Established, status: "True"}]}`, msg: "not accepted the current names"}),
			"near miss: no version served": current(kindCase{doc: `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.io, generation: 1}
spec: {group: example.io, names: {kind: Widget, plural: widgets}, versions: [{name: v1, served: false}]}
status: {acceptedNames: {kind: Widget, plural: widgets},
  conditions: [{type: NamesAccepted, status: "True"}, {type: Established, status: "True"}]}`, msg: "no version is served"}),
			"established": current(kindCase{doc: `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.io, generation: 1}
spec: {group: example.io, names: {kind: Widget, plural: widgets}, versions: [{name: v1, served: true}]}
status: {acceptedNames: {kind: Widget, plural: widgets},
  conditions: [{type: NamesAccepted, status: "True"}, {type: Established, status: "True"}]}`, ready: true}),
		},
		"ConfigMap, Secret, CronJob (ready once they exist)": {
			"ConfigMap": current(kindCase{doc: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}", ready: true}),
			"Secret":    current(kindCase{doc: "apiVersion: v1\nkind: Secret\nmetadata: {name: c}", ready: true}),
			"CronJob":   current(kindCase{doc: "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: c, generation: 1}\nspec: {schedule: \"@daily\"}", ready: true}),
		},
	}
	for kind, cases := range tests {
		for name, tc := range cases {
			t.Run(kind+"/"+name, func(t *testing.T) {
				obj := fromYAML(t, tc.doc)
				if tc.kstatusCurrentChecked {
					ks, err := kstatus.Compute(obj)
					if err != nil || ks.Status != kstatus.CurrentStatus {
						t.Fatalf("fixture: kstatus says %v (%v), the row claims Current", ks, err)
					}
				}
				r := Generic(obj)
				if r.Ready != tc.ready || r.Failed != tc.failed {
					t.Errorf("Generic = %+v, want ready=%v failed=%v", r, tc.ready, tc.failed)
				}
				if !strings.Contains(r.Message, tc.msg) {
					t.Errorf("message %q lacks %q", r.Message, tc.msg)
				}
			})
		}
	}
}
