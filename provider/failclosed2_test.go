package provider

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/helmrelease"
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

// RBAC objects are named as path segments (`system:metrics-server`): ResourceReady accepts such a
// name at preview and passes on the object, and a Helm release holding one is judged, not failed.
// Names no kind allows still fail at preview.
func TestNamesByTheRulesOfTheirKind(t *testing.T) {
	ns := testenv.Namespace(t, "rbacname")
	name := "system:readiness-" + ns
	testenv.Apply(t, fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "%s"}
rules: [{apiGroups: [""], resources: [pods], verbs: [get]}]`, name))
	deleteClusterRoleAtEnd(t, name)
	s := newServer(t)
	check := func(apiVersion, kind, name string) []p.CheckFailure {
		t.Helper()
		chk, err := s.Check(p.CheckRequest{Urn: urn("ResourceReady"), Inputs: property.NewMap(props("apiVersion", apiVersion, "kind", kind, "name", name))})
		if err != nil {
			t.Fatal(err)
		}
		return chk.Failures
	}
	for _, tc := range []struct {
		apiVersion, kind, name string
		ok                     bool
	}{
		{"rbac.authorization.k8s.io/v1", "ClusterRole", "system:metrics-server", true},
		{"rbac.authorization.k8s.io/v1", "RoleBinding", "Admin:Team", true},
		{"rbac.authorization.k8s.io/v1", "ClusterRole", "a/b", false},
		{"rbac.authorization.k8s.io/v1", "ClusterRole", "..", false},
		{"v1", "ConfigMap", "system:metrics-server", false},
		{"v1", "ConfigMap", "Upper", false},
		{"example.com/v1", "Widget", "a%b", false},
	} {
		if f := check(tc.apiVersion, tc.kind, tc.name); (len(f) == 0) != tc.ok {
			t.Errorf("%s %s %q: failures %v, want ok=%v", tc.apiVersion, tc.kind, tc.name, f, tc.ok)
		}
	}
	r := await(t, createAsync(t, s, "ResourceReady", props("apiVersion", "rbac.authorization.k8s.io/v1", "kind", "ClusterRole",
		"name", name, "timeout", "30s")), 30*time.Second)
	if r.err != nil {
		t.Fatalf("ClusterRole %s: %v", name, r.err)
	}
	manifest := manifestOf(configMapDoc(ns, "cm"), fmt.Sprintf("# Source: app/templates/rbac.yaml\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: \"%s\"}\nrules: []", name))
	testenv.Apply(t, configMapDoc(ns, "cm"))
	writeRecord(t, helmrelease.Record{Name: "app", Namespace: ns, Revision: 1, Status: helmrelease.StatusDeployed,
		Chart: "app", ChartVersion: "1", Manifest: manifest})
	r = await(t, createAsync(t, s, "HelmReleaseReady", props("name", "app", "namespace", ns, "timeout", "30s")), 30*time.Second)
	if r.err != nil {
		t.Fatalf("a release holding ClusterRole %s: %v", name, r.err)
	}
}

// writeConfigMapRecord stores a release revision as Helm's configmap driver does
// (HELM_DRIVER=configmap): a ConfigMap of the same name and labels, the same base64 text.
func writeConfigMapRecord(t *testing.T, rec helmrelease.Record, labels string) {
	t.Helper()
	enc, err := rec.Encode()
	if err != nil {
		t.Fatal(err)
	}
	cm := testenv.Object(t, fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: %s
  namespace: %s
  labels: %s`, helmrelease.RecordName(rec.Name, rec.Revision), rec.Namespace, labels))
	cm.Object["data"] = map[string]any{"release": enc}
	ri := testenv.Resource(t, cm)
	cur, err := ri.Get(context.Background(), cm.GetName(), metav1.GetOptions{})
	if err == nil {
		cm.SetResourceVersion(cur.GetResourceVersion())
		_, err = ri.Update(context.Background(), cm, metav1.UpdateOptions{})
	} else {
		_, err = ri.Create(context.Background(), cm, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
}

// HelmReleaseReady finds a release's records wherever Helm's in-cluster drivers keep them: a
// release installed with HELM_DRIVER=configmap is judged as one in Secrets, near misses included.
func TestHelmReleaseReadyConfigMapDriver(t *testing.T) {
	ns := testenv.Namespace(t, "helmcm")
	testenv.Apply(t, configMapDoc(ns, "cm"))
	s := newServer(t)
	rec := func(name string, rev int, status string, docs ...string) helmrelease.Record {
		return helmrelease.Record{Name: name, Namespace: ns, Revision: rev, Status: status, Description: "by the test",
			Chart: "app", ChartVersion: fmt.Sprintf("1.%d.0", rev), AppVersion: "1", Manifest: manifestOf(docs...)}
	}
	labels := func(name string, rev int, status string) string {
		return fmt.Sprintf(`{owner: helm, name: %s, status: %s, version: "%d"}`, name, status, rev)
	}
	gate := func(name, timeout string) <-chan gateResult {
		return createAsync(t, s, "HelmReleaseReady", props("name", name, "namespace", ns, "timeout", timeout))
	}
	writeConfigMapRecord(t, rec("ok", 1, helmrelease.StatusDeployed, configMapDoc(ns, "cm")), labels("ok", 1, "deployed"))
	r := await(t, gate("ok", "30s"), 30*time.Second)
	if r.err != nil {
		t.Fatalf("a deployed release in ConfigMaps: %v", r.err)
	}
	if got := r.resp.Properties.Get("chart").AsString(); got != "app-1.1.0" {
		t.Errorf("chart = %q", got)
	}
	// Near misses: a pending newest revision, a failed one, an object that does not exist yet.
	writeConfigMapRecord(t, rec("pend", 1, helmrelease.StatusDeployed, configMapDoc(ns, "cm")), labels("pend", 1, "superseded"))
	writeConfigMapRecord(t, rec("pend", 2, helmrelease.StatusPendingUpgrade, configMapDoc(ns, "cm")), labels("pend", 2, "pending-upgrade"))
	if r := await(t, gate("pend", "2s"), 30*time.Second); r.err == nil || !strings.Contains(r.err.Error(), "revision 2 is pending-upgrade") {
		t.Fatalf("want a timeout on the pending revision 2, got %v", r.err)
	}
	writeConfigMapRecord(t, rec("bad", 1, helmrelease.StatusFailed, configMapDoc(ns, "cm")), labels("bad", 1, "failed"))
	if r := await(t, gate("bad", "5m"), 30*time.Second); r.err == nil || !strings.Contains(r.err.Error(), `Helm status "failed"`) {
		t.Fatalf("want the failed revision to fail at once, got %v", r.err)
	}
	writeConfigMapRecord(t, rec("wait", 1, helmrelease.StatusDeployed, configMapDoc(ns, "cm"), configMapDoc(ns, "later")), labels("wait", 1, "deployed"))
	ch := gate("wait", "60s")
	mustNotReturn(t, ch, time.Second)
	testenv.Apply(t, configMapDoc(ns, "later"))
	if r := await(t, ch, 30*time.Second); r.err != nil {
		t.Fatal(r.err)
	}
	// A ConfigMap named like a record but not labelled by Helm is not a record.
	writeConfigMapRecord(t, rec("fake", 1, helmrelease.StatusDeployed, configMapDoc(ns, "cm")), "{app: fake}")
	if r := await(t, gate("fake", "2s"), 30*time.Second); r.err == nil || !strings.Contains(r.err.Error(), "no release record") {
		t.Fatalf("want no record found, got %v", r.err)
	}
}

// CrdReady asks discovery for every checked CRD's own resource: another kind of the same
// group/version being served says nothing of it.
func TestCrdReadyDiscoveryPerKind(t *testing.T) {
	group := uniqueGroup(t)
	testenv.Apply(t, testenv.CRD(group, "Widget", "widgets"))
	testenv.Apply(t, testenv.CRD(group, "Gadget", "gadgets"))
	waitServed(t, group) // both Established and served by the real API server
	kp := newKubeProxy(t)
	kp.hideResource(group+"/v1", "gadgets") // as if discovery had not caught up with gadgets yet
	s := newServer(t, kp.kubeconfig(t, nil))
	ch := createAsync(t, s, "CrdReady", props("names", strs("widgets."+group, "gadgets."+group), "timeout", "60s"))
	mustNotReturn(t, ch, 1500*time.Millisecond)
	kp.unhide()
	if r := await(t, ch, 30*time.Second); r.err != nil {
		t.Fatal(r.err)
	}
	// The group form too.
	kp.hideResource(group+"/v1", "widgets")
	ch = createAsync(t, s, "CrdReady", props("group", group, "timeout", "60s"))
	mustNotReturn(t, ch, 1500*time.Millisecond)
	kp.unhide()
	if r := await(t, ch, 30*time.Second); r.err != nil {
		t.Fatal(r.err)
	}
}

// execPlugin writes an exec credential plugin that prints the token in tokenFile, as cloud
// logins do, and returns its config.
func execPlugin(t *testing.T, dir string) (cfg *clientcmdapi.ExecConfig, setToken func(string)) {
	t.Helper()
	tokenFile, script := filepath.Join(dir, "token"), filepath.Join(dir, "plugin.sh")
	body := "#!/bin/sh\nprintf '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"%s\"}}' \"$(cat " + tokenFile + ")\"\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	setToken = func(tok string) {
		if err := os.WriteFile(tokenFile, []byte(tok), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return &clientcmdapi.ExecConfig{APIVersion: "client.authentication.k8s.io/v1", Command: script, InteractiveMode: clientcmdapi.NeverExecInteractiveMode}, setToken
}

// A token that expires while a gate waits (its watch is cut and the re-list gets 401) is
// refreshed by the exec plugin and the gate goes on; a token the plugin cannot renew fails.
func TestCredentialsThatRefresh(t *testing.T) {
	group := widgetCRD(t)
	ns := testenv.Namespace(t, "creds")
	kp := newKubeProxy(t)
	exec, setToken := execPlugin(t, t.TempDir())
	setToken("token-1")
	kp.rotate("token-1")
	s := newServer(t, kp.kubeconfig(t, exec))
	w := testenv.Apply(t, fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata: {name: w, namespace: %s}\nspec: {size: 1}", group, ns))[0]
	ch := createAsync(t, s, "ResourceReady", props("apiVersion", group+"/v1", "kind", "Widget", "name", "w", "namespace", ns,
		"condition", map[string]property.Value{"type": property.New("Ready")}, "timeout", "90s"))
	mustNotReturn(t, ch, time.Second) // listed and watching with token-1
	setToken("token-2")
	kp.rotate("token-2") // token-1 expires; every open watch is cut
	mustNotReturn(t, ch, 3*time.Second)
	kp.mu.Lock()
	refused := kp.unauthz
	kp.mu.Unlock()
	if refused == 0 {
		t.Fatal("the provider never presented the expired token: the test proves nothing")
	}
	setStatus(t, w, map[string]any{"conditions": []any{cond("Ready", "True", 1)}})
	if r := await(t, ch, 30*time.Second); r.err != nil {
		t.Fatalf("after a refresh of its credentials the gate must go on: %v", r.err)
	}
	// Near miss: credentials refused again after the refresh fail the gate (not at its timeout).
	ch = createAsync(t, s, "ResourceReady", props("apiVersion", group+"/v1", "kind", "Widget", "name", "other", "namespace", ns, "timeout", "5m"))
	mustNotReturn(t, ch, time.Second)
	kp.rotate("token-3") // the plugin still says token-2
	r := await(t, ch, 60*time.Second)
	if r.err == nil || !strings.Contains(r.err.Error(), "Unauthorized") {
		t.Fatalf("want an Unauthorized failure, got %v", r.err)
	}
}
