package provider

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/readiness-io/pulumi-readiness/internal/controlplane"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/provider/internal/probe"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/helmrelease"
)

// writeRecord stores a release revision as Helm's Secret driver does (helm.sh/release.v1,
// labelled owner/name/status/version), creating it or, as Helm does when a revision's status
// changes, updating it in place.
func writeRecord(t *testing.T, rec helmrelease.Record) {
	t.Helper()
	enc, err := rec.Encode()
	if err != nil {
		t.Fatal(err)
	}
	sec := testenv.Object(t, fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata:
  name: %s
  namespace: %s
  labels: {owner: helm, name: %s, status: %s, version: "%d"}
type: helm.sh/release.v1`, helmrelease.RecordName(rec.Name, rec.Revision), rec.Namespace, rec.Name, rec.Status, rec.Revision))
	sec.Object["stringData"] = map[string]any{"release": enc}
	ri := testenv.Resource(t, sec)
	cur, err := ri.Get(context.Background(), sec.GetName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = ri.Create(context.Background(), sec, metav1.CreateOptions{})
	case err == nil:
		sec.SetResourceVersion(cur.GetResourceVersion())
		_, err = ri.Update(context.Background(), sec, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
}

func configMapDoc(ns, name string) string {
	return fmt.Sprintf("# Source: app/templates/%[2]s.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: %[2]s, namespace: %[1]s}\ndata: {a: b}", ns, name)
}

func manifestOf(docs ...string) string { return "---\n" + strings.Join(docs, "\n---\n") }

// HelmReleaseReady judges the newest revision, as Helm itself does: a failed one fails at once
// with Helm's words, a pending one is waited for, and one written during the wait is read again.
func TestHelmReleaseReadyJudgesTheNewestRevision(t *testing.T) {
	ns := testenv.Namespace(t, "helmrev")
	testenv.Apply(t, configMapDoc(ns, "cm"))
	s := newServer(t)
	rec := func(name string, rev int, status, desc string, docs ...string) helmrelease.Record {
		return helmrelease.Record{Name: name, Namespace: ns, Revision: rev, Status: status, Description: desc,
			Chart: "app", ChartVersion: fmt.Sprintf("1.%d.0", rev), AppVersion: "1", Manifest: manifestOf(docs...)}
	}
	gate := func(name, timeout string) <-chan gateResult {
		return createAsync(t, s, "HelmReleaseReady", props("name", name, "namespace", ns, "timeout", timeout))
	}

	t.Run("a failed newest revision fails at once, quoting Helm", func(t *testing.T) {
		// Revision 1 is deployed and ready: judging it instead of revision 2 would pass.
		writeRecord(t, rec("failed", 1, helmrelease.StatusSuperseded, "Install complete", configMapDoc(ns, "cm")))
		writeRecord(t, rec("failed", 2, helmrelease.StatusFailed, `Upgrade "failed" failed: context deadline exceeded`, configMapDoc(ns, "cm")))
		r := await(t, gate("failed", "5m"), 20*time.Second)
		if r.err == nil {
			t.Fatalf("passed although the newest revision failed: %v", r.resp.Properties)
		}
		for _, w := range []string{"revision 2", `Helm status "failed"`, `Upgrade \"failed\" failed: context deadline exceeded`} {
			if !strings.Contains(r.err.Error(), w) {
				t.Errorf("error lacks %q: %v", w, r.err)
			}
		}
	})

	t.Run("a deployed newest revision beside it passes", func(t *testing.T) {
		writeRecord(t, rec("fixed", 1, helmrelease.StatusFailed, "Install failed", configMapDoc(ns, "cm")))
		writeRecord(t, rec("fixed", 2, helmrelease.StatusDeployed, "Upgrade complete", configMapDoc(ns, "cm")))
		r := await(t, gate("fixed", "30s"), 30*time.Second)
		if r.err != nil {
			t.Fatal(r.err)
		}
		if got := r.resp.Properties.Get("revision").AsNumber(); got != 2 {
			t.Errorf("revision = %v, want 2", got)
		}
	})

	t.Run("a pending upgrade is waited for, then its own manifest is checked", func(t *testing.T) {
		// Revision 1 is deployed, and its objects wait for a ConfigMap nobody creates.
		writeRecord(t, rec("app", 1, helmrelease.StatusDeployed, "Install complete", configMapDoc(ns, "cm"), configMapDoc(ns, "never")))
		ch := gate("app", "90s")
		mustNotReturn(t, ch, time.Second)
		// Helm starts an upgrade: revision 2 is pending while Helm applies it.
		writeRecord(t, rec("app", 2, helmrelease.StatusPendingUpgrade, "Preparing upgrade", configMapDoc(ns, "cm"), configMapDoc(ns, "late")))
		mustNotReturn(t, ch, time.Second)
		// Revision 2 is deployed: its manifest (not revision 1's) is what counts, and its "late"
		// ConfigMap does not exist yet.
		writeRecord(t, rec("app", 2, helmrelease.StatusDeployed, "Upgrade complete", configMapDoc(ns, "cm"), configMapDoc(ns, "late")))
		mustNotReturn(t, ch, time.Second)
		testenv.Apply(t, configMapDoc(ns, "late"))
		r := await(t, ch, 30*time.Second)
		if r.err != nil {
			t.Fatal(r.err)
		}
		if got := r.resp.Properties.Get("revision").AsNumber(); got != 2 {
			t.Errorf("revision = %v, want 2 (the newest)", got)
		}
		if got := r.resp.Properties.Get("chart").AsString(); got != "app-1.2.0" {
			t.Errorf("chart = %q, want the newest revision's app-1.2.0", got)
		}
	})

	t.Run("a ready revision superseded by a pending one does not pass", func(t *testing.T) {
		writeRecord(t, rec("pend", 1, helmrelease.StatusDeployed, "Install complete", configMapDoc(ns, "cm")))
		writeRecord(t, rec("pend", 2, helmrelease.StatusPendingUpgrade, "Preparing upgrade", configMapDoc(ns, "cm")))
		r := await(t, gate("pend", "2s"), 30*time.Second)
		if r.err == nil || !strings.Contains(r.err.Error(), "revision 2 is pending-upgrade") {
			t.Fatalf("want a timeout on the pending revision 2, got %v", r.err)
		}
	})
}

// A user who may not list the release's records gets the RBAC error at once, naming verb,
// resource, namespace and user; the README's minimal permissions are enough.
func TestHelmReleaseReadyRBAC(t *testing.T) {
	ns := testenv.Namespace(t, "helmrbac")
	testenv.Apply(t, configMapDoc(ns, "cm"))
	writeRecord(t, helmrelease.Record{Name: "app", Namespace: ns, Revision: 1, Status: helmrelease.StatusDeployed,
		Chart: "app", ChartVersion: "1", Manifest: manifestOf(configMapDoc(ns, "cm"))})
	configMaps := `{apiGroups: [""], resources: [configmaps], verbs: [list, watch]}`
	grant(t, ns, "helm-none", "["+configMaps+"]")
	grant(t, ns, "helm-list-only", `[{apiGroups: [""], resources: [secrets], verbs: [list]}, `+configMaps+`]`)
	grant(t, ns, "helm-min", `[{apiGroups: [""], resources: [secrets], verbs: [list, watch]}, `+configMaps+`]`)
	inputs := props("name", "app", "namespace", ns, "timeout", "5m")
	gate := func(user string) <-chan gateResult {
		return createAsync(t, newServer(t, actingAs(t, user)), "HelmReleaseReady", inputs)
	}
	none, listOnly, min := gate("helm-none"), gate("helm-list-only"), gate("helm-min")
	for user, tc := range map[string]struct {
		ch   <-chan gateResult
		verb string
	}{"helm-none": {none, "list"}, "helm-list-only": {listOnly, "watch"}} {
		r := await(t, tc.ch, 20*time.Second) // the gate's timeout is 5m: only failing at once returns here
		if r.err == nil {
			t.Fatalf("%s: passed without %s permission on secrets", user, tc.verb)
		}
		for _, w := range []string{"forbidden", `User "` + user + `"`, "cannot " + tc.verb, `resource "secrets"`, `namespace "` + ns + `"`} {
			if !strings.Contains(r.err.Error(), w) {
				t.Errorf("%s: error lacks %q: %v", user, w, r.err)
			}
		}
	}
	if r := await(t, min, 30*time.Second); r.err != nil {
		t.Errorf("list and watch on secrets (and what the objects need) must be enough: %v", r.err)
	}
}

// applyWithWebhook applies docs and the configuration (named prefix + a new widget group) of a
// serving test webhook for that group's widgets, deleted after the test, and returns the webhook,
// the whole manifest (for a release record) and the objects applied.
func applyWithWebhook(t *testing.T, prefix string, docs ...string) (*testenv.Webhook, string, []*unstructured.Unstructured) {
	group := widgetCRD(t)
	wh := testenv.NewWebhook(t)
	wh.Start(t)
	cfg := prefix + strings.Split(group, ".")[0]
	manifest := manifestOf(append(docs, wh.Configuration(cfg, group))...)
	objs := testenv.Apply(t, strings.TrimPrefix(manifest, "---\n"))
	t.Cleanup(func() {
		_ = testenv.Dynamic(t).Resource(vwcResource).Delete(context.Background(), cfg, metav1.DeleteOptions{})
	})
	return wh, manifest, objs
}

// Refresh (Read) on a provider with cold caches runs the whole proof, webhook probes included,
// before judging: a ready release stays in the state.
func TestHelmReleaseReadyRefreshOnColdCaches(t *testing.T) {
	ns := testenv.Namespace(t, "helmread")
	wh, manifest, _ := applyWithWebhook(t, "read-webhook-", configMapDoc(ns, "cm"), deployment(ns, "app", "registry.local/app:1", 1))
	writeRecord(t, helmrelease.Record{Name: "app", Namespace: ns, Revision: 1, Status: helmrelease.StatusDeployed,
		Chart: "app", ChartVersion: "1", Manifest: manifest})
	inputs := props("name", "app", "namespace", ns, "timeout", "60s")
	s := newServer(t)
	r := await(t, createAsync(t, s, "HelmReleaseReady", inputs), 60*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	chk, err := s.Check(p.CheckRequest{Urn: urn("HelmReleaseReady"), Inputs: property.NewMap(inputs)})
	if err != nil {
		t.Fatal(err)
	}
	read := func() string {
		t.Helper()
		cold := newServer(t) // a new provider process: every watch cache starts empty
		resp, err := cold.Read(p.ReadRequest{ID: r.resp.ID, Urn: urn("HelmReleaseReady"), Properties: r.resp.Properties, Inputs: chk.Inputs})
		if err != nil {
			t.Fatal(err)
		}
		return resp.ID
	}
	if id := read(); id != r.resp.ID {
		t.Fatalf("refresh on cold caches dropped a ready release (id %q)", id)
	}
	// Near miss: the webhook stops answering; refresh must drop the gate.
	wh.Close()
	if id := read(); id != "" {
		t.Errorf("refresh kept a release whose webhook does not answer")
	}
}

// TestHelmReleaseReadyNeverWeakerThanHelmWait (item 1): a release's LoadBalancer Service with
// no address, its claim Pending under a WaitForFirstConsumer class and its evicted Pod each
// keep helm --wait waiting; HelmReleaseReady must not pass them either.
func TestHelmReleaseReadyNeverWeakerThanHelmWait(t *testing.T) {
	ns := testenv.Namespace(t, "helmwait")
	testenv.ServiceAccountReady(t, ns) // its Pod is created at once: without it the API server refuses it
	sc := fmt.Sprintf("wffc-%d", time.Now().UnixNano()%1000000)
	testenv.Apply(t, fmt.Sprintf("apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: %s}\nprovisioner: example.test/none\nvolumeBindingMode: WaitForFirstConsumer", sc))
	t.Cleanup(func() {
		_ = testenv.CP.Client.StorageV1().StorageClasses().Delete(context.Background(), sc, metav1.DeleteOptions{})
	})
	lb := fmt.Sprintf("# Source: app/templates/svc.yaml\napiVersion: v1\nkind: Service\nmetadata: {name: lb, namespace: %s}\nspec: {type: LoadBalancer, selector: {app: lb}, ports: [{port: 443}]}", ns)
	pvc := fmt.Sprintf("# Source: app/templates/pvc.yaml\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data, namespace: %s}\nspec: {accessModes: [ReadWriteOnce], storageClassName: %s, resources: {requests: {storage: 1Gi}}}", ns, sc)
	evicted := "# Source: app/templates/pod.yaml\n" + pod(ns, "evicted", nowhere)
	svc := testenv.Apply(t, strings.SplitN(lb, "\n", 2)[1])[0]
	testenv.Apply(t, strings.SplitN(pvc, "\n", 2)[1])
	evictedPod := testenv.Apply(t, pod(ns, "evicted", nowhere))[0]

	s := newServer(t)
	rec := func(name string, docs ...string) {
		writeRecord(t, helmrelease.Record{Name: name, Namespace: ns, Revision: 1, Status: helmrelease.StatusDeployed, Description: "Install complete",
			Chart: "app", ChartVersion: "1.0.0", AppVersion: "1", Manifest: manifestOf(docs...)})
	}
	gate := func(name, timeout string) <-chan gateResult {
		return createAsync(t, s, "HelmReleaseReady", props("name", name, "namespace", ns, "timeout", timeout))
	}
	rec("waits", lb, pvc)
	mustFailWith(t, gate("waits", "3s"), "no ingress address", "Pending")

	writeStatus(t, evictedPod, map[string]any{"phase": "Failed", "reason": "Evicted", "message": "The node was low on resource: memory."})
	rec("evicted", evicted)
	mustFailWith(t, gate("evicted", "60s"), "Evicted")

	// The same Service with an address passes.
	writeStatus(t, svc, map[string]any{"loadBalancer": map[string]any{"ingress": []any{map[string]any{"ip": "192.0.2.10"}}}})
	rec("addressed", lb)
	mustPass(t, gate("addressed", "60s"))
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

// releaseOf stores a deployed revision 1 of release name in ns whose manifest is docs.
func releaseOf(t *testing.T, name, ns string, docs ...string) {
	t.Helper()
	writeRecord(t, helmrelease.Record{Name: name, Namespace: ns, Revision: 1, Status: "deployed", Chart: name,
		ChartVersion: "1.0.0", AppVersion: "1.0.0", Manifest: manifestOf(docs...)})
}

// Item 4: a webhook whose rules use wildcards (istiod's validator: resources ["*"] of its
// groups; Kyverno's: apiGroups ["*"], resources ["*/*"]) or name only a subresource got no
// derived probe, so HelmReleaseReady passed on its configuration alone while nothing served.
func TestHelmReleaseReadyWildcardRulesNeedAnAnswer(t *testing.T) {
	group := widgetCRD(t)
	for name, rule := range map[string]string{
		// istiod's validator: every resource of its groups.
		"resources *": `{apiGroups: ["%[2]s"], apiVersions: ["*"], operations: [CREATE, UPDATE], resources: ["*"]}`,
		// Kyverno's resource webhook: everything (here: namespaced, in this test's namespace only).
		"apiGroups * resources */*": `{apiGroups: ["*"], apiVersions: ["*"], operations: [CREATE, UPDATE, DELETE, CONNECT], resources: ["*/*"], scope: Namespaced}`,
		// Only a subresource, and no CREATE: a dry-run never reaches it, a direct call does.
		"a subresource only": `{apiGroups: [""], apiVersions: [v1], operations: [UPDATE], resources: ["pods/ephemeralcontainers"]}`,
		// A kind-wide subresource wildcard: x/* covers x itself.
		"widgets/*": `{apiGroups: ["%[2]s"], apiVersions: [v1], operations: [CREATE], resources: ["widgets/*"]}`,
	} {
		t.Run(name, func(t *testing.T) {
			ns := testenv.Namespace(t, "wild")
			testenv.ServiceAccountReady(t, ns) // a derived Pod probe needs it
			wh := testenv.NewWebhook(t)
			cfg := "wild-" + ns
			doc := fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: %[1]s}
webhooks:
- name: validate.%[1]s.example.test
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
  timeoutSeconds: 3
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: %[3]s}}
  clientConfig: {url: "%[4]s", caBundle: %[5]s}
  rules: [`+rule+`]`, cfg, group, ns, wh.URL(), wh.CABundle())
			releaseOf(t, "wild", ns, doc) // before the webhook: it may intercept the record
			applyConfiguration(t, doc)
			s := newServer(t)
			// Near miss: registered, nothing serves.
			r := await(t, createAsync(t, s, "HelmReleaseReady", props("name", "wild", "namespace", ns, "timeout", "2s")), 30*time.Second)
			if r.err == nil {
				t.Fatalf("passed while the webhook does not serve: %v", r.resp.Properties)
			}
			if !strings.Contains(r.err.Error(), "dry-run probe") {
				t.Errorf("the error does not say why: %v", r.err)
			}
			ch := createAsync(t, s, "HelmReleaseReady", props("name", "wild", "namespace", ns, "timeout", "60s"))
			mustNotReturn(t, ch, time.Second)
			wh.Start(t)
			if r := await(t, ch, 30*time.Second); r.err != nil {
				t.Fatal(r.err)
			}
			if wh.Calls.Load() == 0 {
				t.Error("passed without an answer from the webhook")
			}
		})
	}
}

// Found running beside pulumi-kubernetes (make demo: three releases in one stack, one provider
// process): a release whose webhook intercepts a kind its own CRDs bring was judged ready
// without any probe, while the webhook refused connections. The provider's discovery had been
// cached before those CRDs existed, so no probe could be derived from the webhook's rules, and
// "no probe" counted as proof. A webhook whose rules name a concrete kind must be probed: the
// gate waits until the kind is served and the webhook answers.
func TestHelmReleaseReadyProbesAWebhookWhoseKindCameAfterDiscovery(t *testing.T) {
	ns := testenv.Namespace(t, "helmlate")
	s := newServer(t)
	// Warm the provider's discovery before the release's CRD exists (another gate of the stack).
	writeRecord(t, helmrelease.Record{Name: "warm", Namespace: ns, Revision: 1, Status: helmrelease.StatusDeployed,
		Chart: "warm", ChartVersion: "1", Manifest: manifestOf(configMapDoc(ns, "warm"))})
	testenv.Apply(t, configMapDoc(ns, "warm"))
	if r := await(t, createAsync(t, s, "HelmReleaseReady", props("name", "warm", "namespace", ns, "timeout", "30s")), 60*time.Second); r.err != nil {
		t.Fatal(r.err)
	}

	group := uniqueGroup(t)
	testenv.Apply(t, testenv.CRD(group, "Widget", "widgets"))
	wh := testenv.NewWebhook(t) // reserved, not listening: connection refused
	cfg := "late-kind-" + strings.Split(group, ".")[0]
	testenv.Apply(t, wh.Configuration(cfg, group))
	t.Cleanup(func() {
		_ = testenv.Dynamic(t).Resource(vwcResource).Delete(context.Background(), cfg, metav1.DeleteOptions{})
	})
	writeRecord(t, helmrelease.Record{Name: "app", Namespace: ns, Revision: 1, Status: helmrelease.StatusDeployed,
		Chart: "app", ChartVersion: "1", Manifest: manifestOf(testenv.CRD(group, "Widget", "widgets"), wh.Configuration(cfg, group))})

	// Near miss: the webhook does not listen; the gate must not pass.
	r := await(t, createAsync(t, s, "HelmReleaseReady", props("name", "app", "namespace", ns, "timeout", "6s")), 60*time.Second)
	if r.err == nil {
		t.Fatal("HelmReleaseReady passed a release whose webhook refuses connections")
	}
	// Ready: the webhook serves; the gate passes.
	wh.Start(t)
	if r := await(t, createAsync(t, s, "HelmReleaseReady", props("name", "app", "namespace", ns, "timeout", "60s")), 90*time.Second); r.err != nil {
		t.Fatal(r.err)
	}
}

// A composite gate checks all its objects at every event of any of them. Its proven webhooks
// are not probed again at each check while what they were proven under holds (probe.Webhook.reuse:
// under the soak's load each probe cost tens of milliseconds, one after another); near miss: a
// proof older than probe.ProofReuse is not reused, so a webhook that stopped answering keeps the
// release waiting when its last object turns ready.
func TestHelmReleaseReadyReusesAFreshWebhookProof(t *testing.T) {
	ns := testenv.Namespace(t, "helmreuse")
	lb := fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata: {name: lb, namespace: %s}\nspec: {type: LoadBalancer, selector: {app: lb}, ports: [{port: 443}]}", ns)
	wh, manifest, objs := applyWithWebhook(t, "reuse-webhook-", configMapDoc(ns, "cm"), lb)
	var svc *unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "Service" {
			svc = o
		}
	}
	writeRecord(t, helmrelease.Record{Name: "app", Namespace: ns, Revision: 1, Status: helmrelease.StatusDeployed,
		Chart: "app", ChartVersion: "1", Manifest: manifest})
	ch := createAsync(t, newServer(t), "HelmReleaseReady", props("name", "app", "namespace", ns, "timeout", "60s"))
	pollUntil(t, "the webhook is proven (two answers)", func() bool { return wh.Calls.Load() >= probe.Needed })

	// Events of the release's ConfigMap, each a check of the whole release, while the Service
	// keeps it waiting: the proven webhook is probed again at most once per half probe.ProofReuse (a
	// proof is renewed in the background once half its time is gone), plus the probes that
	// confirm a new proof.
	cm := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	before, began := wh.Calls.Load(), time.Now()
	for i := range 100 {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"readiness.test/churn":"%d"}}}`, i)
		if _, err := testenv.Dynamic(t).Resource(cm).Namespace(ns).Patch(context.Background(), "cm", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	probes, took := wh.Calls.Load()-before, time.Since(began)
	if bound := int64(took/(probe.ProofReuse/2)+1)*probe.Needed + probe.Needed; probes > bound {
		t.Errorf("the proven webhook was probed %d times during %s of events (at most %d: once per %s)", probes, took.Round(time.Millisecond), bound, probe.ProofReuse/2)
	}
	t.Logf("%d probes during %s of events", probes, took.Round(time.Millisecond))

	// Near miss: the webhook stops answering (HTTP 500) and the last object turns ready after the
	// proof has aged past probe.ProofReuse: the release must wait for a new answer.
	wh.Mode.Store("error")
	time.Sleep(probe.ProofReuse + 200*time.Millisecond) // past the proof's reuse
	writeStatus(t, svc, map[string]any{"loadBalancer": map[string]any{"ingress": []any{map[string]any{"ip": "192.0.2.10"}}}})
	mustNotReturn(t, ch, 3*time.Second)
	wh.Mode.Store("allow")
	mustPass(t, ch)
}

// A composite gate probes in the background: a probe the API server holds (a call it sent as
// the webhook's pod became reachable, hanging until the webhook's timeout: 3 s in the soak) must
// not hold back the release. A second probe goes out beside it, and the gate passes while the
// first is still held; near miss: the held call is the only one until the hedge.
func TestHelmReleaseReadyDoesNotWaitOnAHeldProbe(t *testing.T) {
	ns := testenv.Namespace(t, "helmheld")
	wh, manifest, objs := applyWithWebhook(t, "held-webhook-", configMapDoc(ns, "cm"))
	for _, o := range objs {
		if o.GetKind() == "ValidatingWebhookConfiguration" { // the API server waits up to 30 s for it
			patch := `[{"op":"replace","path":"/webhooks/0/timeoutSeconds","value":30}]`
			if _, err := testenv.Resource(t, o).Patch(context.Background(), o.GetName(), types.JSONPatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	wh.HoldNext()
	t.Cleanup(wh.Release)
	writeRecord(t, helmrelease.Record{Name: "app", Namespace: ns, Revision: 1, Status: helmrelease.StatusDeployed,
		Chart: "app", ChartVersion: "1", Manifest: manifest})
	// Waiting on the held call, the gate could pass only after the API server gives up on it
	// (30 s): it must pass well before.
	if r := await(t, createAsync(t, newServer(t), "HelmReleaseReady", props("name", "app", "namespace", ns, "timeout", "60s")), 20*time.Second); r.err != nil {
		t.Fatal(r.err)
	}
	if !wh.Held.Load() {
		t.Errorf("the gate passed only once the held call ended (%d calls): a held probe held back the release", wh.Calls.Load())
	}
	if calls := wh.Calls.Load(); calls < 1+probe.Needed {
		t.Errorf("%d calls to the webhook: the held one and %d answered ones expected", calls, probe.Needed)
	}
}

func TestHelmReleaseReadyWaitsForWorkloadsAndWebhooks(t *testing.T) {
	ns := testenv.Namespace(t, "helm")
	group := widgetCRD(t)
	wh := testenv.NewWebhook(t)
	cfg := "app-webhook-" + strings.Split(group, ".")[0]
	manifest := strings.Join([]string{
		fmt.Sprintf("# Source: app/templates/configmap.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: app-config, namespace: %s}\ndata: {a: b}", ns),
		fmt.Sprintf("# Source: app/templates/secret.yaml\napiVersion: v1\nkind: Secret\nmetadata: {name: app-creds, namespace: %s}\nstringData: {password: MARKER-helm-s3cret}", ns),
		strings.Replace(deployment(ns, "app", "registry.local/app:1", 2), "    metadata: {labels: {app: app}}",
			"    metadata: {labels: {app: app}, annotations: {"+controlplane.PodReadyDelayAnnotation+": 6s}}", 1),
		wh.Configuration(cfg, group),
	}, "\n---\n")
	// Helm applies the objects, then records the release.
	testenv.Apply(t, manifest)
	t.Cleanup(func() {
		_ = testenv.Dynamic(t).Resource(vwcResource).Delete(context.Background(), cfg, metav1.DeleteOptions{})
	})
	rec, err := helmrelease.Encode("app", ns, 1, "deployed", "app", "1.2.3", "4.5.6", "---\n"+manifest)
	if err != nil {
		t.Fatal(err)
	}
	sec := testenv.Object(t, fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata:
  name: sh.helm.release.v1.app.v1
  namespace: %s
  labels: {owner: helm, name: app, status: deployed, version: "1"}
type: helm.sh/release.v1`, ns))
	sec.Object["stringData"] = map[string]any{"release": rec}
	s := newServer(t)
	ch := createAsync(t, s, "HelmReleaseReady", props("name", "app", "namespace", ns, "timeout", "90s"))
	mustNotReturn(t, ch, 500*time.Millisecond) // no release record yet
	if _, err := testenv.Resource(t, sec).Create(context.Background(), sec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mustNotReturn(t, ch, 3*time.Second) // pods become ready after 6 s, and the webhook does not serve
	time.Sleep(4 * time.Second)         // now the pods are ready; only the webhook is missing
	mustNotReturn(t, ch, time.Second)
	wh.Start(t)
	r := await(t, ch, 60*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	out := r.resp.Properties
	if out.Get("revision").AsNumber() != 1 || out.Get("chart").AsString() != "app-1.2.3" || out.Get("appVersion").AsString() != "4.5.6" ||
		out.Get("objects").AsNumber() != 4 {
		t.Errorf("outputs = %v", out)
	}
	if got := outStrings(t, out, "webhooks"); len(got) != 1 || got[0] != cfg {
		t.Errorf("webhooks = %v", got)
	}
	if strings.Contains(fmt.Sprint(out), "MARKER-helm-s3cret") {
		t.Error("outputs contain a value from the release's manifest")
	}
}

// HelmReleaseReady derives a probe from a webhook's rules. For Pods (what Istio's and Linkerd's
// injectors intercept) a Pod with no spec is Invalid, which validating webhooks never see: the
// derived Pod must be one that schema validation accepts, so both webhooks are really called.
func TestHelmReleaseReadyDerivedPodProbeReachesItsWebhooks(t *testing.T) {
	ns := testenv.Namespace(t, "inject")
	only := "  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: " + ns + "}}\n  rules:"
	inject, validate := testenv.NewWebhook(t), testenv.NewWebhook(t)
	mcfg, vcfg := "injector-"+ns, "pod-policy-"+ns
	// Pods of this namespace only: the other tests' pods must never meet these webhooks.
	mdoc := strings.Replace(inject.ConfigurationFor("MutatingWebhookConfiguration", mcfg, "", "pods"), "  rules:", only, 1)
	vdoc := strings.Replace(validate.ConfigurationFor("ValidatingWebhookConfiguration", vcfg, "", "pods"), "  rules:", only, 1)
	// Core pods: no group, so the webhooks' names get a domain of their own.
	mdoc = strings.Replace(mdoc, "name: mutating."+mcfg+".\n", "name: inject."+mcfg+".example.test\n", 1)
	vdoc = strings.Replace(vdoc, "name: validating."+vcfg+".\n", "name: validate."+vcfg+".example.test\n", 1)
	testenv.Apply(t, mdoc+"\n---\n"+vdoc)
	t.Cleanup(func() {
		_ = testenv.Dynamic(t).Resource(vwcResource).Delete(context.Background(), vcfg, metav1.DeleteOptions{})
		mwc := vwcResource
		mwc.Resource = "mutatingwebhookconfigurations"
		_ = testenv.Dynamic(t).Resource(mwc).Delete(context.Background(), mcfg, metav1.DeleteOptions{})
	})
	rec, err := helmrelease.Encode("mesh", ns, 1, "deployed", "mesh", "1.0.0", "1.0.0", "---\n"+mdoc+"\n---\n"+vdoc)
	if err != nil {
		t.Fatal(err)
	}
	sec := testenv.Object(t, fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata:
  name: sh.helm.release.v1.mesh.v1
  namespace: %s
  labels: {owner: helm, name: mesh, status: deployed, version: "1"}
type: helm.sh/release.v1`, ns))
	sec.Object["stringData"] = map[string]any{"release": rec}
	if _, err := testenv.Resource(t, sec).Create(context.Background(), sec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s := newServer(t)
	ch := createAsync(t, s, "HelmReleaseReady", props("name", "mesh", "namespace", ns, "timeout", "60s"))
	mustNotReturn(t, ch, 1500*time.Millisecond) // neither webhook serves
	inject.Start(t)
	mustNotReturn(t, ch, time.Second) // the injector answers, the validating webhook does not
	validate.Start(t)
	r := await(t, ch, 30*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if inject.Calls.Load() == 0 || validate.Calls.Load() == 0 {
		t.Errorf("calls: injector %d, validating %d: the derived probe did not reach both", inject.Calls.Load(), validate.Calls.Load())
	}
}

// A probe derived for a custom resource carries what its CRD's schema requires, so it passes
// schema validation and reaches the webhook (cert-manager's CertificateRequest needs
// spec.request and spec.issuerRef: met on a real node). Where the schema asks for what no
// minimal value meets (a pattern), schema validation answers Invalid before any webhook runs:
// waiting cannot change that, so the gate fails at once, saying so, instead of probing until
// the timeout.
func TestHelmReleaseReadyDerivedProbeOfACustomKind(t *testing.T) {
	cases := map[string]struct {
		spec string // the CRD's spec schema
		pass bool
	}{
		"required fields the schema's minimal values meet": {"{type: object, required: [size, csr], properties: {size: {type: integer, minimum: 1}, csr: {type: string, format: byte}}}", true},
		"a required pattern no minimal value meets":        {"{type: object, required: [size], properties: {size: {type: string, pattern: '^x+$'}}}", false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ns := testenv.Namespace(t, "schema")
			group := uniqueGroup(t)
			crd := strings.Replace(testenv.CRD(group, "Gizmo", "gizmos"), "        x-kubernetes-preserve-unknown-fields: true\n",
				"        required: [spec]\n        properties:\n          spec: "+tc.spec+"\n", 1)
			testenv.Apply(t, crd)
			waitServed(t, group)
			wh := testenv.NewWebhook(t)
			wh.Start(t)
			cfg := "gizmos-" + ns
			vdoc := wh.ConfigurationFor("ValidatingWebhookConfiguration", cfg, group, "gizmos")
			testenv.Apply(t, vdoc)
			t.Cleanup(func() {
				_ = testenv.Dynamic(t).Resource(vwcResource).Delete(context.Background(), cfg, metav1.DeleteOptions{})
			})
			rec, err := helmrelease.Encode("gizmo", ns, 1, "deployed", "gizmo", "1.0.0", "1.0.0", "---\n"+vdoc)
			if err != nil {
				t.Fatal(err)
			}
			sec := testenv.Object(t, fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata:
  name: sh.helm.release.v1.gizmo.v1
  namespace: %s
  labels: {owner: helm, name: gizmo, status: deployed, version: "1"}
type: helm.sh/release.v1`, ns))
			sec.Object["stringData"] = map[string]any{"release": rec}
			if _, err := testenv.Resource(t, sec).Create(context.Background(), sec, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			before := wh.Calls.Load()
			r := await(t, createAsync(t, newServer(t), "HelmReleaseReady", props("name", "gizmo", "namespace", ns, "timeout", "60s")), 30*time.Second)
			if tc.pass {
				if r.err != nil {
					t.Fatalf("the derived probe met the schema and the webhook serves: %v", r.err)
				}
				if wh.Calls.Load() < before+2 {
					t.Fatalf("passed without two calls to the webhook (%d)", wh.Calls.Load()-before)
				}
				return
			}
			if r.err == nil {
				t.Fatalf("passed on a probe that never reached the webhook: %v", r.resp.Properties)
			}
			for _, want := range []string{"schema validation rejects it before it reaches ValidatingWebhookConfiguration " + cfg,
				"the Gizmo derived from the webhook's rules is rejected by schema validation; give `probe`"} {
				if !strings.Contains(r.err.Error(), want) {
					t.Errorf("error lacks %q: %v", want, r.err)
				}
			}
			if strings.Contains(r.err.Error(), "timed out") || generatedNameRE.MatchString(r.err.Error()) {
				t.Errorf("want an immediate failure with a stable message: %v", r.err)
			}
		})
	}
}

var generatedNameRE = regexp.MustCompile(`readiness-probe-[a-z0-9]{5}\b`)
