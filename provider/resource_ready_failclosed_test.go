package provider

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/property"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/status"
)

var apiServiceResource = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// awaitCondition polls the API server (test side only) until obj's condition has the status.
func awaitCondition(t *testing.T, get func() (*unstructured.Unstructured, error), typ, want string) *unstructured.Unstructured {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		o, err := get()
		if err == nil {
			if c, ok := status.FindCondition(o, typ); ok && c.Status == want {
				return o
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never became %s: %v %v", typ, want, err, o)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestResourceReadyDefaultAPIServiceAndAvailableFalse: in the default (kstatus) mode an
// APIService the API server reports Available=False, and a custom resource whose only condition
// is Available=False, must not pass; each passes once Available=True. Messages about these
// cluster-scoped kinds carry no namespace.
func TestResourceReadyDefaultAPIServiceAndAvailableFalse(t *testing.T) {
	group := uniqueGroup(t)
	name := "v1alpha1." + group
	// A Service-backed APIService whose Service does not exist: kube-apiserver's availability
	// controller reports Available=False (ServiceNotFound) without dialling anything.
	testenv.Apply(t, fmt.Sprintf(`apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: %s}
spec:
  group: %s
  version: v1alpha1
  groupPriorityMinimum: 100
  versionPriority: 100
  insecureSkipTLSVerify: true
  service: {name: missing-metrics-server, namespace: default, port: 443}`, name, group))
	api := testenv.Dynamic(t).Resource(apiServiceResource)
	t.Cleanup(func() { _ = api.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	get := func() (*unstructured.Unstructured, error) {
		return api.Get(context.Background(), name, metav1.GetOptions{})
	}
	recorded := awaitCondition(t, get, "Available", "False")
	t.Logf("recorded: %v", recorded.Object["status"])

	s := newServer(t)
	ch := createAsync(t, s, "ResourceReady", props("apiVersion", "apiregistration.k8s.io/v1", "kind", "APIService", "name", name, "timeout", "60s"))
	mustNotReturn(t, ch, 1500*time.Millisecond) // Available=False: passed at once before the fix

	// The timeout names the object without a namespace and quotes the API server's reason.
	r := await(t, createAsync(t, s, "ResourceReady", props("apiVersion", "apiregistration.k8s.io/v1", "kind", "APIService", "name", name, "timeout", "2s")), 30*time.Second)
	if r.err == nil {
		t.Fatal("gate passed on Available=False")
	}
	for _, want := range []string{"waiting for APIService " + name + " (kstatus)", "Available=False (ServiceNotFound", "kubectl describe apiservice.apiregistration.k8s.io " + name} {
		if !strings.Contains(r.err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, r.err)
		}
	}
	if strings.Contains(r.err.Error(), "default/") || strings.Contains(r.err.Error(), "-n default") {
		t.Errorf("a cluster-scoped kind is shown with a namespace: %v", r.err)
	}

	// A local APIService (no service) is Available=True at once.
	patch := `{"spec":{"service":null,"insecureSkipTLSVerify":false}}`
	if _, err := api.Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if r := await(t, ch, 30*time.Second); r.err != nil {
		t.Fatalf("Available=True must pass: %v", r.err)
	}

	// A custom resource whose only condition is Available=False.
	crGroup := widgetCRD(t)
	w := testenv.Apply(t, fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata: {name: w, namespace: default}\nspec: {size: 1}", crGroup))[0]
	setStatus(t, w, map[string]any{"conditions": []any{cond("Available", "False", 1)}})
	cr := createAsync(t, s, "ResourceReady", props("apiVersion", crGroup+"/v1", "kind", "Widget", "namespace", "default", "name", "w", "timeout", "60s"))
	mustNotReturn(t, cr, 1500*time.Millisecond) // passed at once before the fix
	setStatus(t, w, map[string]any{"conditions": []any{cond("Available", "True", 1), cond("Degraded", "True", 1)}})
	mustNotReturn(t, cr, time.Second) // Degraded=True
	setStatus(t, w, map[string]any{"conditions": []any{cond("Available", "True", 1), cond("Degraded", "False", 1)}})
	if r := await(t, cr, 30*time.Second); r.err != nil {
		t.Fatal(r.err)
	}
}

// TestResourceReadyClusterScopedMessages: a Node is shown as "Node kwok-node-0", and its
// describe hint has no -n flag.
func TestResourceReadyClusterScopedMessages(t *testing.T) {
	s := newServer(t)
	r := await(t, createAsync(t, s, "ResourceReady", props("apiVersion", "v1", "kind", "Node", "name", "kwok-node-0",
		"condition", map[string]property.Value{"type": property.New("NeverSet")}, "timeout", "2s")), 30*time.Second)
	if r.err == nil {
		t.Fatal("gate passed")
	}
	for _, want := range []string{"waiting for Node kwok-node-0 (condition)", "check: kubectl describe node kwok-node-0"} {
		if !strings.Contains(r.err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, r.err)
		}
	}
	if strings.Contains(r.err.Error(), "default/kwok-node-0") || strings.Contains(r.err.Error(), "-n default") {
		t.Errorf("a cluster-scoped kind is shown with a namespace: %v", r.err)
	}
}

// TestResourceReadyDeletedResolvesTheKindAtAnyServedVersion: `deleted` on an apiVersion the
// server does not serve must not pass while the object exists under another version; an
// unknown kind is an error naming what is served.
func TestResourceReadyDeletedResolvesTheKindAtAnyServedVersion(t *testing.T) {
	ns := testenv.Namespace(t, "del")
	d := testenv.Apply(t, deployment(ns, "web", "registry.local/web:1", 1))[0]
	s := newServer(t)
	ch := createAsync(t, s, "ResourceReady", props("apiVersion", "apps/v1beta1", "kind", "Deployment", "namespace", ns, "name", "web", "deleted", true, "timeout", "60s"))
	mustNotReturn(t, ch, 1500*time.Millisecond) // passed at once ("kind not served: nothing exists") before the fix
	if err := testenv.Resource(t, d).Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if r := await(t, ch, 30*time.Second); r.err != nil {
		t.Fatalf("the Deployment is gone: %v", r.err)
	}

	// A misspelt kind fails at once, naming the kinds the group serves.
	r := await(t, createAsync(t, s, "ResourceReady", props("apiVersion", "apps/v1", "kind", "Deploymnet", "namespace", ns, "name", "web", "deleted", true, "timeout", "5m")), 30*time.Second)
	if r.err == nil || !strings.Contains(r.err.Error(), `"Deploymnet"`) || !strings.Contains(r.err.Error(), "Deployment, ReplicaSet") {
		t.Fatalf("want an error naming the served kinds, got %v", r.err)
	}
	// Outside `deleted`, an apiVersion the server does not serve for a built-in kind fails at once too.
	r = await(t, createAsync(t, s, "ResourceReady", props("apiVersion", "apps/v1beta1", "kind", "Deployment", "namespace", ns, "name", "web", "exists", true, "timeout", "5m")), 30*time.Second)
	if r.err == nil || !strings.Contains(r.err.Error(), "it serves Deployment as apps/v1") {
		t.Fatalf("want an error naming apps/v1, got %v", r.err)
	}
}

// TestResourceReadyCELResultOfTheWrongType: a CEL expression that returns a non-bool fails at
// once (a dynamic field) or at preview (a field every object has).
func TestResourceReadyCELResultOfTheWrongType(t *testing.T) {
	ns := testenv.Namespace(t, "cel")
	testenv.Apply(t, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: %s}\ndata: {phase: Running}", ns))
	s := newServer(t)
	start := time.Now()
	r := await(t, createAsync(t, s, "ResourceReady", props("apiVersion", "v1", "kind", "ConfigMap", "namespace", ns, "name", "c",
		"cel", "object.data.phase", "timeout", "5m")), 30*time.Second)
	if r.err == nil || !strings.Contains(r.err.Error(), `returned "Running" (string), not a bool`) {
		t.Fatalf("want a terminal type error, got %v", r.err)
	}
	t.Logf("failed after %s", time.Since(start).Round(time.Millisecond))
	r = await(t, createAsync(t, s, "ResourceReady", props("apiVersion", "v1", "kind", "ConfigMap", "namespace", ns, "name", "c",
		"exists", true, "failedCel", "object.data.phase", "timeout", "5m")), 30*time.Second)
	if r.err == nil || !strings.Contains(r.err.Error(), "failedCel") || !strings.Contains(r.err.Error(), "not a bool") {
		t.Fatalf("want a terminal failedCel type error, got %v", r.err)
	}
}

// actingAs returns a kubeconfig for the local control plane that acts as user (and
// groups) through impersonation: RBAC tests without restarting the API server for new tokens.
func actingAs(t *testing.T, user string, groups ...string) string {
	t.Helper()
	cfg, err := clientcmd.Load(testenv.CP.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range cfg.AuthInfos {
		a.Impersonate, a.ImpersonateGroups = user, groups
	}
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// deleteClusterRoleAtEnd deletes the ClusterRole and ClusterRoleBinding named name when the test ends.
func deleteClusterRoleAtEnd(t *testing.T, name string) {
	t.Cleanup(func() {
		ctx := context.Background()
		_ = testenv.CP.Client.RbacV1().ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{})
		_ = testenv.CP.Client.RbacV1().ClusterRoles().Delete(ctx, name, metav1.DeleteOptions{})
	})
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

// ensureExternalSecretCRD installs the minimal ExternalSecret CRD once per control plane.
func ensureExternalSecretCRD(t *testing.T) {
	t.Helper()
	if _, err := testenv.Dynamic(t).Resource(crdResource).Get(context.Background(), "externalsecrets.external-secrets.io", metav1.GetOptions{}); apierrors.IsNotFound(err) {
		testenv.Apply(t, externalSecretCRD)
	}
	waitServed(t, "external-secrets.io")
}

// settled waits until the API server's watch cache (which serves a new informer's first list,
// resourceVersion "0") holds obj at least at its resourceVersion, so a gate started now sees
// the write the test just made. Without it a gate may judge the previous state: the provider's informers
// start from that cache (client-go's reflector lists at resourceVersion "0").
func settled(t *testing.T, obj *unstructured.Unstructured) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		list, err := testenv.Resource(t, obj).List(context.Background(), metav1.ListOptions{ResourceVersion: "0",
			FieldSelector: "metadata.name=" + obj.GetName()})
		if err == nil && len(list.Items) == 1 && list.Items[0].GetResourceVersion() == obj.GetResourceVersion() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the watch cache never caught up with %s: %v", obj.GetName(), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestExternalSecretReadyAfterASpecChange: ESO's Ready condition has no observedGeneration, so
// after a spec change the old Ready=True must not pass until status.syncedResourceVersion names
// the new generation; the same for a force-sync annotation.
func TestExternalSecretReadyAfterASpecChange(t *testing.T) {
	ns := testenv.Namespace(t, "esgen")
	ensureExternalSecretCRD(t)
	es := testenv.Apply(t, fmt.Sprintf(`apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: db, namespace: %[1]s}
spec:
  refreshInterval: 1h
  secretStoreRef: {name: vault, kind: ClusterSecretStore}
  target: {name: db-credentials}
  data: [{secretKey: password, remoteRef: {key: db}}]
---
apiVersion: v1
kind: Secret
metadata: {name: db-credentials, namespace: %[1]s}
stringData: {password: x}`, ns))[0]
	synced := func(es *unstructured.Unstructured) *unstructured.Unstructured { // plays ESO's markAsDone
		return setStatus(t, es, map[string]any{"refreshTime": time.Now().UTC().Format(time.RFC3339),
			"syncedResourceVersion": status.ExternalSecretResourceVersion(es),
			"conditions":            []any{map[string]any{"type": "Ready", "status": "True", "reason": "SecretSynced", "message": "secret synced"}}})
	}
	es = synced(es)
	s := newServer(t)
	gate := func() <-chan gateResult {
		return createAsync(t, s, "ExternalSecretReady", props("name", "db", "namespace", ns, "timeout", "60s"))
	}
	if r := await(t, gate(), 30*time.Second); r.err != nil {
		t.Fatalf("synced for the current generation: %v", r.err)
	}

	// A spec change: generation 2, the Ready=True of generation 1 stays.
	es.Object["spec"].(map[string]any)["data"] = []any{map[string]any{"secretKey": "password", "remoteRef": map[string]any{"key": "db-v2"}}}
	es, err := testenv.Resource(t, es).Update(context.Background(), es, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if es.GetGeneration() != 2 {
		t.Fatalf("generation = %d", es.GetGeneration())
	}
	settled(t, es)
	ch := gate()
	mustNotReturn(t, ch, 1500*time.Millisecond) // passed at once before the fix
	es = synced(es)
	r := await(t, ch, 30*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := r.resp.Properties.Get("syncedResourceVersion").AsString(); !strings.HasPrefix(got, "2-") {
		t.Errorf("syncedResourceVersion = %q", got)
	}

	// A force-sync annotation changes no generation; ESO re-syncs on it, and so must the proof.
	es.SetAnnotations(map[string]string{"force-sync": fmt.Sprint(time.Now().Unix())})
	if es, err = testenv.Resource(t, es).Update(context.Background(), es, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	settled(t, es)
	ch = gate()
	mustNotReturn(t, ch, time.Second)
	synced(es)
	if r := await(t, ch, 30*time.Second); r.err != nil {
		t.Fatal(r.err)
	}
}
