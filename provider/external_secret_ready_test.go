package provider

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/status"
)

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

const externalSecretCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: externalsecrets.external-secrets.io}
spec:
  group: external-secrets.io
  scope: Namespaced
  names: {kind: ExternalSecret, plural: externalsecrets, singular: externalsecret, listKind: ExternalSecretList, shortNames: [es]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}`

func TestExternalSecretReadyNeedsConditionAndTargetSecret(t *testing.T) {
	ns := testenv.Namespace(t, "eso")
	s := newServer(t)
	ch := createAsync(t, s, "ExternalSecretReady", props("name", "ghcr", "namespace", ns, "timeout", "90s"))
	mustNotReturn(t, ch, 500*time.Millisecond) // ESO's CRDs are not even installed
	if _, err := testenv.Dynamic(t).Resource(crdResource).Get(context.Background(), "externalsecrets.external-secrets.io", metav1.GetOptions{}); err != nil {
		testenv.Apply(t, externalSecretCRD)
	}
	waitServed(t, "external-secrets.io")
	es := testenv.Apply(t, fmt.Sprintf(`apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: ghcr, namespace: %s}
spec:
  secretStoreRef: {name: vault, kind: ClusterSecretStore}
  target: {name: ghcr-pull-secret}
  data: [{secretKey: token, remoteRef: {key: ghcr}}]`, ns))[0]
	setStatus(t, es, map[string]any{"conditions": []any{
		map[string]any{"type": "Ready", "status": "False", "reason": "SecretSyncedError", "message": "could not get secret data from provider"}}})
	mustNotReturn(t, ch, time.Second)
	setStatus(t, es, map[string]any{"refreshTime": time.Now().UTC().Format(time.RFC3339), "syncedResourceVersion": "1-abc",
		"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "SecretSynced", "message": "Secret was synced"}}})
	mustNotReturn(t, ch, time.Second) // Ready=True, but the target Secret is not there yet
	const marker = "MARKER-s3cr3t-VALUE"
	testenv.Apply(t, fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: ghcr-pull-secret, namespace: %s}\nstringData: {token: %s}", ns, marker))
	r := await(t, ch, 30*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := r.resp.Properties.Get("secretName").AsString(); got != "ghcr-pull-secret" {
		t.Errorf("secretName = %q", got)
	}
	if got := r.resp.Properties.Get("syncedResourceVersion").AsString(); got != "1-abc" {
		t.Errorf("syncedResourceVersion = %q", got)
	}
	if strings.Contains(fmt.Sprint(r.resp.Properties), marker) {
		t.Error("outputs contain the Secret's value")
	}
}
