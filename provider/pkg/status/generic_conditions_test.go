package status

import (
	"strings"
	"testing"
)

// TestGenericFailsClosed is the near-miss table of the default mode: each object looks almost
// ready and must not pass, beside the state that must. The APIService and Crossplane objects are
// shaped as the real controllers write them (the APIService ones as the local control plane's
// kube-apiserver reported them in TestResourceReadyDefaultAPIServiceAndAvailableFalse).
func TestGenericFailsClosed(t *testing.T) {
	tests := map[string]struct {
		doc           string
		ready, failed bool
		msg           string
	}{
		"APIService Available=False MissingEndpoints (metrics-server before its pod serves)": {doc: `
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1beta1.metrics.k8s.io, labels: {k8s-app: metrics-server}}
spec: {group: metrics.k8s.io, version: v1beta1, groupPriorityMinimum: 100, versionPriority: 100, insecureSkipTLSVerify: true,
  service: {name: metrics-server, namespace: kube-system, port: 443}}
status:
  conditions:
  - {type: Available, status: "False", reason: MissingEndpoints, lastTransitionTime: "2026-11-20T10:00:00Z",
     message: 'endpoints for service/metrics-server in "kube-system" have no addresses with port name "https"'}`,
			msg: "Available=False (MissingEndpoints"},
		"APIService Available=False ServiceNotFound": {doc: `
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1alpha1.gate.readiness.test}
spec: {group: gate.readiness.test, version: v1alpha1, groupPriorityMinimum: 100, versionPriority: 100, insecureSkipTLSVerify: true,
  service: {name: missing, namespace: default, port: 443}}
status:
  conditions:
  - {type: Available, status: "False", reason: ServiceNotFound, message: 'service/missing in "default" is not present',
     lastTransitionTime: "2026-11-20T10:00:00Z"}`,
			msg: "ServiceNotFound"},
		"APIService with no status yet": {doc: `
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1beta1.metrics.k8s.io}
spec: {group: metrics.k8s.io, version: v1beta1, service: {name: metrics-server, namespace: kube-system}}`,
			msg: "needs Available=True"},
		"APIService Available=True": {doc: `
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1beta1.metrics.k8s.io}
spec: {group: metrics.k8s.io, version: v1beta1, service: {name: metrics-server, namespace: kube-system}}
status:
  conditions:
  - {type: Available, status: "True", reason: Passed, message: all checks passed, lastTransitionTime: "2026-11-20T10:00:00Z"}`,
			ready: true, msg: "Available=True"},
		"custom resource whose only condition is Available=False": {doc: `
apiVersion: example.io/v1
kind: Widget
metadata: {name: w, generation: 1}
status: {conditions: [{type: Available, status: "False", reason: MinimumReplicasUnavailable}]}`,
			msg: "Available=False"},
		"custom resource Available=Unknown": {doc: `
apiVersion: example.io/v1
kind: Widget
metadata: {name: w, generation: 1}
status: {conditions: [{type: Available, status: Unknown}]}`,
			msg: "Available=Unknown"},
		"custom resource Available=True": {doc: `
apiVersion: example.io/v1
kind: Widget
metadata: {name: w, generation: 1}
status: {conditions: [{type: Available, status: "True"}]}`,
			ready: true},
		"Crossplane managed resource Ready=True but Synced=False": {doc: `
apiVersion: s3.aws.upbound.io/v1beta1
kind: Bucket
metadata: {name: b, generation: 2}
status:
  conditions:
  - {type: Ready, status: "True", reason: Available}
  - {type: Synced, status: "False", reason: ReconcileError, message: 'update failed: AccessDenied'}`,
			msg: "Synced=False (ReconcileError"},
		"Crossplane managed resource Ready and Synced": {doc: `
apiVersion: s3.aws.upbound.io/v1beta1
kind: Bucket
metadata: {name: b, generation: 2}
status:
  conditions:
  - {type: Ready, status: "True", reason: Available}
  - {type: Synced, status: "True", reason: ReconcileSuccess}`,
			ready: true},
		"Gateway Accepted=True Programmed=False": {doc: `
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: g, generation: 1}
status:
  conditions:
  - {type: Accepted, status: "True", reason: Accepted, observedGeneration: 1}
  - {type: Programmed, status: "False", reason: AddressNotAssigned, observedGeneration: 1}`,
			msg: "Programmed=False"},
		"Ready=True and Degraded=True": {doc: `
apiVersion: example.io/v1
kind: Widget
metadata: {name: w, generation: 1}
status: {conditions: [{type: Ready, status: "True"}, {type: Degraded, status: "True", reason: ReplicaLost}]}`,
			msg: "Degraded=True"},
		"Ready=True and Degraded=False": {doc: `
apiVersion: example.io/v1
kind: Widget
metadata: {name: w, generation: 1}
status: {conditions: [{type: Ready, status: "True"}, {type: Degraded, status: "False"}]}`,
			ready: true},
		"fresh Stalled=True fails (kstatus Failed)": {doc: `
apiVersion: example.io/v1
kind: Widget
metadata: {name: w, generation: 2}
status: {conditions: [{type: Stalled, status: "True", reason: InvalidSpec, message: bad, observedGeneration: 2}]}`,
			failed: true, msg: "bad"},
		"stale Stalled=True is not a failure (the new spec may fix it)": {doc: `
apiVersion: example.io/v1
kind: Widget
metadata: {name: w, generation: 2}
status: {conditions: [{type: Stalled, status: "True", reason: InvalidSpec, message: bad, observedGeneration: 1}]}`,
			msg: "stale"},
		"stale Ready=True, nothing fresh": {doc: `
apiVersion: example.io/v1
kind: Widget
metadata: {name: w, generation: 2}
status: {conditions: [{type: Ready, status: "True", observedGeneration: 1}]}`,
			msg: "stale"},
		"stale Degraded=True is ignored beside a fresh Available=True": {doc: `
apiVersion: example.io/v1
kind: Widget
metadata: {name: w, generation: 2}
status: {conditions: [{type: Available, status: "True", observedGeneration: 2}, {type: Degraded, status: "True", observedGeneration: 1}]}`,
			ready: true},
		"only a condition of an unknown type": {doc: `
apiVersion: example.io/v1
kind: Widget
metadata: {name: w, generation: 1}
status: {conditions: [{type: Issuing, status: "True"}]}`,
			msg: "use `condition`"},
		"unknown-type condition with a current observedGeneration": {doc: `
apiVersion: example.io/v1
kind: Widget
metadata: {name: w, generation: 3}
status: {observedGeneration: 3, conditions: [{type: Issuing, status: "False"}]}`,
			ready: true},
		"Node NotReady (kstatus has no Node rule)": {doc: `
apiVersion: v1
kind: Node
metadata: {name: kwok-node-0}
status: {conditions: [{type: Ready, status: "False", reason: KubeletNotReady}]}`,
			msg: "Ready=False"},
		"Pod Succeeded with Ready=False (never Ready again: helm --wait would not pass it)": {doc: `
apiVersion: v1
kind: Pod
metadata: {name: p}
status: {phase: Succeeded, conditions: [{type: Ready, status: "False", reason: PodCompleted}]}`,
			failed: true, msg: "phase Succeeded"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			obj := fromYAML(t, tc.doc)
			before := SummarizeConditions(obj)
			r := Generic(obj)
			if r.Ready != tc.ready || r.Failed != tc.failed {
				t.Errorf("Generic = %+v, want ready=%v failed=%v", r, tc.ready, tc.failed)
			}
			if !strings.Contains(r.Message, tc.msg) {
				t.Errorf("message %q lacks %q", r.Message, tc.msg)
			}
			if after := SummarizeConditions(obj); after != before {
				t.Errorf("Generic modified its input: %s -> %s", before, after)
			}
		})
	}
}
