package provider

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/property"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

// A gate that joins a watch another gate opened judges state at least as new as its own start,
// even when that watch's stream lags: here every watch event reaches the provider 5 s late, so
// the shared informer still holds the Ready=True that a write just before the gate replaced.
func TestFreshFirstVerdictOnALaggingSharedWatch(t *testing.T) {
	group := widgetCRD(t)
	ns := testenv.Namespace(t, "fresh")
	kp := newKubeProxy(t)
	s := newServer(t, kp.kubeconfig(t, nil))
	ready := map[string]any{"conditions": []any{cond("Ready", "True", 1)}}
	notReady := map[string]any{"conditions": []any{cond("Ready", "False", 1)}}
	widget := func(name string) string {
		return fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata: {name: %s, namespace: %s}\nspec: {size: 1}", group, name, ns)
	}
	gate := func(name, timeout string) <-chan gateResult {
		return createAsync(t, s, "ResourceReady", props("apiVersion", group+"/v1", "kind", "Widget", "name", name, "namespace", ns,
			"condition", map[string]property.Value{"type": property.New("Ready")}, "timeout", timeout))
	}
	holder := testenv.Apply(t, widget("holder"))[0] // never ready: its gate keeps the shared watch open
	w := setStatus(t, testenv.Apply(t, widget("w"))[0], ready)
	first := gate("holder", "5m")
	// The shared informer has listed w as Ready=True: a gate on w passes at once.
	if r := await(t, gate("w", "30s"), 30*time.Second); r.err != nil {
		t.Fatalf("a ready widget on a fresh watch: %v", r.err)
	}
	kp.setWatchDelay(5 * time.Second) // from now on, the open watch stream delivers every event 5 s late
	// The previous step turns w not ready, then the gate starts: the informer cannot know yet.
	w = setStatus(t, w, notReady)
	if r := await(t, gate("w", "2s"), 30*time.Second); r.err == nil || !strings.Contains(r.err.Error(), "timed out") {
		t.Fatalf("passed on the informer's stale Ready=True (written before the gate started): %v %v", r.err, r.resp.Properties)
	}
	// The near miss's pair: written ready again before the gate starts, it passes at once,
	// though the informer has not heard of either write.
	setStatus(t, w, ready)
	if r := await(t, gate("w", "10s"), 10*time.Second); r.err != nil {
		t.Fatalf("ready before the gate started, read consistently: %v", r.err)
	}
	// An object created (and made ready) just before the gate: absent from the lagging informer.
	late := setStatus(t, testenv.Apply(t, widget("late"))[0], ready)
	if r := await(t, gate("late", "10s"), 10*time.Second); r.err != nil {
		t.Fatalf("created and ready before the gate started: %v", r.err)
	}
	// Deleted just before the gate: the informer still holds it Ready=True.
	if err := testenv.Resource(t, late).Delete(context.Background(), "late", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if r := await(t, gate("late", "2s"), 30*time.Second); r.err == nil {
		t.Fatal("passed on a widget deleted before the gate started")
	}
	kp.setWatchDelay(0)
	setStatus(t, holder, ready)
	_ = first
}

// TestRBACDiscoveryAndStorageClassFailFast: a Forbidden or Unauthorized discovery, a Forbidden
// StorageClass lookup (PVC rule) and a Forbidden CRD watch (kind not served yet) fail at once
// naming verb, resource and user, instead of retrying until the timeout.
func TestRBACDiscoveryAndStorageClassFailFast(t *testing.T) {
	ns := testenv.Namespace(t, "rbacd")
	group := uniqueGroup(t)
	testenv.Apply(t, fmt.Sprintf(`apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: %[1]s-sc}
provisioner: example.com/none
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: %[1]s}
spec:
  storageClassName: %[1]s-sc
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: app, namespace: %[1]s}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: pvc-only, namespace: %[1]s}
rules:
- {apiGroups: [""], resources: [persistentvolumeclaims], verbs: [list, watch]}
- {apiGroups: [%[2]s], resources: [widgets], verbs: [list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: pvc-only, namespace: %[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: pvc-only}
subjects: [{kind: User, name: pvc-only}]`, ns, group))

	gate := func(t *testing.T, kubeconfig string, inputs map[string]property.Value) error {
		return await(t, createAsync(t, newServer(t, kubeconfig), "ResourceReady", inputs), 30*time.Second).err
	}
	configMap := props("apiVersion", "v1", "kind", "ConfigMap", "namespace", ns, "name", "app", "exists", true, "timeout", "5m")
	cases := []struct {
		name       string
		kubeconfig string
		inputs     map[string]property.Value
		want       []string
	}{
		{"discovery forbidden", actingAs(t, "system:anonymous", "system:unauthenticated"), configMap,
			[]string{"cannot discover", "forbidden", `User "system:anonymous"`, `cannot get path "/api`}},
		{"credentials rejected", strings.Replace(string(testenv.CP.Kubeconfig), "token: ", "token: rejected-", 1), configMap,
			[]string{"cannot discover", "Unauthorized", "credentials"}},
		{"storage class lookup forbidden", actingAs(t, "pvc-only"),
			props("apiVersion", "v1", "kind", "PersistentVolumeClaim", "namespace", ns, "name", "data", "timeout", "5m"),
			[]string{"storageclasses", "forbidden", `User "pvc-only"`, `resource "storageclasses"`}},
		{"CRD watch forbidden while the kind is not served", actingAs(t, "pvc-only"),
			props("apiVersion", group+"/v1", "kind", "Widget", "namespace", ns, "name", "w", "exists", true, "timeout", "5m"),
			[]string{"customresourcedefinitions", "forbidden", `User "pvc-only"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := gate(t, tc.kubeconfig, tc.inputs)
			if err == nil {
				t.Fatal("gate passed")
			}
			t.Log(err)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q: %v", w, err)
				}
			}
		})
	}
	// The same PVC gate with the admin identity passes: only permissions decided above.
	if err := gate(t, string(testenv.CP.Kubeconfig), props("apiVersion", "v1", "kind", "PersistentVolumeClaim", "namespace", ns, "name", "data", "timeout", "60s")); err != nil {
		t.Fatal(err)
	}
}
