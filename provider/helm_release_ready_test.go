package provider

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
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

// Refresh (Read) on a provider with cold caches runs the whole proof, webhook probes included,
// before judging: a ready release stays in the state.
func TestHelmReleaseReadyRefreshOnColdCaches(t *testing.T) {
	ns := testenv.Namespace(t, "helmread")
	group := widgetCRD(t)
	wh := testenv.NewWebhook(t)
	wh.Start(t)
	cfg := "read-webhook-" + strings.Split(group, ".")[0]
	manifest := manifestOf(configMapDoc(ns, "cm"), deployment(ns, "app", "registry.local/app:1", 1), wh.Configuration(cfg, group))
	testenv.Apply(t, strings.TrimPrefix(manifest, "---\n"))
	t.Cleanup(func() {
		_ = testenv.Dynamic(t).Resource(vwcResource).Delete(context.Background(), cfg, metav1.DeleteOptions{})
	})
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
