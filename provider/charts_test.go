package provider

import (
	"compress/gzip"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/readiness-io/pulumi-readiness/internal/charts"
	"github.com/readiness-io/pulumi-readiness/internal/controlplane"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

// Real charts' objects on the local control plane: testdata/charts holds cert-manager, External
// Secrets, ingress-nginx and the APISIX ingress controller rendered by the real Helm CLI (see its
// README). kwok plays their pods; the test plays what no process here does (the caBundle
// injection that cert-manager's cainjector, ESO's cert-controller and ingress-nginx's patch Job
// perform) and checks the gates on exactly the objects users install.
//
// What is changed before applying, and why:
//   - Jobs are left out: their images never run (kwok would only pretend they completed), and
//     the one that matters (ingress-nginx's caBundle patch) is played by the test.
//   - Every webhook of every configuration gets an objectSelector that no object matches. The
//     API server resolves a service-backed webhook to the Service's ClusterIP (10.0.0.x here)
//     and would dial it for any matching request, whether or not the Service has endpoints:
//     with the guard it never calls them. WebhookReady is checked here only at the caBundle and
//     endpoint stages, where it never calls a webhook: once those hold, it derives a probe and
//     (the guard keeping the dry-run from reaching them) calls each webhook through the service
//     proxy, which dials a pod IP. So its gates end (short timeouts, awaited) before any pod
//     exists; calls through a Service are tested inside the network namespace harness
//     (netns_test.go).
//
// CRDs and namespaces are left in place afterwards (other tests may share them); everything
// else the test created is deleted, webhook configurations first.

type chartFixture struct {
	file, namespace string
}

var chartFixtures = []chartFixture{
	{"cert-manager", "cert-manager"},
	{"external-secrets", "external-secrets"},
	{"ingress-nginx", "ingress-nginx"},
	{"apisix-ingress-controller", "apisix-ingress-system"},
}

// chartGuardLabel is the label of the objectSelector that keeps the API server from ever
// calling the charts' webhooks (no object carries it).
const chartGuardLabel = "readiness.test/chart-webhook-never-called"

func loadChart(t *testing.T, c chartFixture) []*unstructured.Unstructured {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "charts", c.file+".yaml.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(string(raw), "\n---") {
		u, err := controlplane.Decode(doc)
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		if u.GetKind() == "" { // comments only
			continue
		}
		out = append(out, u)
	}
	return out
}

// chartApplier creates objects as `helm install` would (namespaced ones into the release
// namespace) and remembers what it created, for cleanup.
type chartApplier struct {
	t       *testing.T
	dyn     dynamic.Interface
	mapper  *restmapper.DeferredDiscoveryRESTMapper
	created []func()
}

func (a *chartApplier) apply(ns string, u *unstructured.Unstructured) {
	a.t.Helper()
	gvk := u.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		a.mapper.Reset()
		if m, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			a.t.Fatalf("%s %s: %v", gvk.Kind, u.GetName(), err)
		}
	}
	var ri dynamic.ResourceInterface = a.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if u.GetNamespace() == "" {
			u.SetNamespace(ns)
		}
		ri = a.dyn.Resource(m.Resource).Namespace(u.GetNamespace())
	}
	_, err = ri.Create(context.Background(), u, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		return // shared with another test (cert-manager's CRDs): not ours to delete
	case err != nil:
		a.t.Fatalf("creating %s %s: %v", gvk.Kind, u.GetName(), err)
	}
	if gvk.Kind == "CustomResourceDefinition" || gvk.Kind == "Namespace" {
		return
	}
	name := u.GetName()
	a.created = append(a.created, func() {
		bg := metav1.DeletePropagationBackground
		_ = ri.Delete(context.Background(), name, metav1.DeleteOptions{PropagationPolicy: &bg})
	})
}

func (a *chartApplier) cleanup() {
	for i := len(a.created) - 1; i >= 0; i-- { // webhook configurations were created last
		a.created[i]()
	}
}

// guardWebhooks sets an objectSelector no object matches on every webhook (see the top).
func guardWebhooks(t *testing.T, cfg *unstructured.Unstructured) {
	hooks, _, _ := unstructured.NestedSlice(cfg.Object, "webhooks")
	for _, h := range hooks {
		h.(map[string]any)["objectSelector"] = map[string]any{"matchLabels": map[string]any{chartGuardLabel: "true"}}
	}
	if err := unstructured.SetNestedSlice(cfg.Object, hooks, "webhooks"); err != nil {
		t.Fatal(err)
	}
}

func isWebhookConfiguration(u *unstructured.Unstructured) bool {
	return u.GetKind() == "ValidatingWebhookConfiguration" || u.GetKind() == "MutatingWebhookConfiguration"
}

// injectCABundle plays the caBundle injection (cainjector, cert-controller, the patch Job).
func injectCABundle(t *testing.T, cfg *unstructured.Unstructured, caPEM []byte) {
	t.Helper()
	ri := testenv.Resource(t, cfg)
	cur, err := ri.Get(context.Background(), cfg.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hooks, _, _ := unstructured.NestedSlice(cur.Object, "webhooks")
	for _, h := range hooks {
		cc, _ := h.(map[string]any)["clientConfig"].(map[string]any)
		cc["caBundle"] = base64.StdEncoding.EncodeToString(caPEM)
	}
	_ = unstructured.SetNestedSlice(cur.Object, hooks, "webhooks")
	if _, err := ri.Update(context.Background(), cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func hasEmptyCABundle(cfg *unstructured.Unstructured) bool {
	hooks, _, _ := unstructured.NestedSlice(cfg.Object, "webhooks")
	for _, h := range hooks {
		cc, _ := h.(map[string]any)["clientConfig"].(map[string]any)
		if ca, _ := cc["caBundle"].(string); ca == "" {
			return true
		}
	}
	return false
}

// chartGate is one gate started on a chart's objects.
type chartGate struct {
	name string
	ch   <-chan gateResult
	// beforeCA, beforePods: the gate must still be waiting at that step of the test.
	beforeCA, beforePods bool
	res                  *gateResult
}

func (g *chartGate) poll() *gateResult {
	if g.res == nil {
		select {
		case r := <-g.ch:
			g.res = &r
		default:
		}
	}
	return g.res
}

func TestChartsOnTheLocalControlPlane(t *testing.T) {
	dyn := testenv.Dynamic(t)
	a := &chartApplier{t: t, dyn: dyn,
		mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(testenv.CP.Client.Discovery()))}
	t.Cleanup(a.cleanup)
	s := newServer(t)

	type loaded struct {
		chartFixture
		crds, deployments, webhooks, rest []*unstructured.Unstructured
	}
	var charts []loaded
	for _, c := range chartFixtures {
		l := loaded{chartFixture: c}
		for _, u := range loadChart(t, c) {
			switch {
			case u.GetKind() == "Job":
				// left out: see the top
			case u.GetKind() == "CustomResourceDefinition":
				l.crds = append(l.crds, u)
			case u.GetKind() == "Deployment":
				l.deployments = append(l.deployments, u)
			case isWebhookConfiguration(u):
				guardWebhooks(t, u)
				l.webhooks = append(l.webhooks, u)
			default:
				l.rest = append(l.rest, u)
			}
		}
		charts = append(charts, l)
	}

	// Everything but the workloads: CRDs, RBAC, Services, webhook configurations (caBundle as
	// the chart renders it: empty but for APISIX, which renders its own).
	for _, c := range charts {
		a.apply("", testenv.Object(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: "+c.namespace+"}"))
		for _, u := range c.crds {
			a.apply(c.namespace, u)
		}
	}
	for _, c := range charts {
		for _, u := range c.rest {
			a.apply(c.namespace, u)
		}
		for _, u := range c.webhooks {
			a.apply(c.namespace, u)
		}
	}

	var gates []*chartGate
	for _, c := range charts {
		if len(c.crds) > 0 {
			var names []string
			for _, u := range c.crds {
				names = append(names, u.GetName())
			}
			gates = append(gates, &chartGate{name: fmt.Sprintf("%s: CrdReady on its %d CRDs", c.file, len(names)),
				ch: createAsync(t, s, "CrdReady", props("names", strs(names...), "timeout", "45s"))})
		}
		for _, d := range c.deployments {
			gates = append(gates, &chartGate{name: c.file + ": RolloutReady Deployment " + d.GetName(), beforeCA: true, beforePods: true,
				ch: createAsync(t, s, "RolloutReady", props("kind", "Deployment", "name", d.GetName(), "namespace", c.namespace, "timeout", "45s"))})
		}
	}
	// webhookGatesMustWait runs a WebhookReady gate on every chart webhook configuration with a
	// short timeout and awaits them all: each must time out, on want (its caBundle or its
	// Service's endpoints), never pass. They all end before the test goes on, so none is left
	// to probe once pods exist.
	webhookGatesMustWait := func(step string, want func(w *unstructured.Unstructured) string) {
		t.Helper()
		type started struct {
			name, want string
			ch         <-chan gateResult
		}
		var all []started
		for _, c := range charts {
			for _, w := range c.webhooks {
				key := "validatingWebhookConfiguration"
				if w.GetKind() == "MutatingWebhookConfiguration" {
					key = "mutatingWebhookConfiguration"
				}
				all = append(all, started{name: c.file + ": WebhookReady " + w.GetKind() + " " + w.GetName(), want: want(w),
					ch: createAsync(t, s, "WebhookReady", props(key, w.GetName(), "timeout", "2s"))})
			}
		}
		for _, g := range all {
			r := await(t, g.ch, 30*time.Second)
			if r.err == nil {
				t.Errorf("%s passed %s: %v", g.name, step, r.resp.Properties)
			} else if !strings.Contains(r.err.Error(), g.want) {
				t.Errorf("%s %s: error lacks %q: %v", g.name, step, g.want, r.err)
			}
		}
	}
	mustWait := func(step string, blocked func(*chartGate) bool) {
		t.Helper()
		time.Sleep(1500 * time.Millisecond) // one short window for all gates at once
		for _, g := range gates {
			if blocked(g) {
				if r := g.poll(); r != nil {
					t.Errorf("%s returned %s: err=%v outputs=%v", g.name, step, r.err, r.resp.Properties)
				}
			}
		}
	}
	// Near miss 1: no caBundle injected, no pods. Near miss 2: caBundle injected, no pods.
	mustWait("before the caBundle was injected", func(g *chartGate) bool { return g.beforeCA })
	webhookGatesMustWait("before the caBundle was injected", func(w *unstructured.Unstructured) string {
		if hasEmptyCABundle(w) {
			return "caBundle"
		}
		return "ready endpoints" // APISIX renders its own caBundle
	})
	ca := testenv.IssueCertificate(t, "webhook.test", time.Hour).CAPEM
	for _, c := range charts {
		for _, w := range c.webhooks {
			if hasEmptyCABundle(w) {
				injectCABundle(t, w, ca)
			}
		}
	}
	mustWait("before any pod existed", func(g *chartGate) bool { return g.beforePods })
	// ingress-nginx's admission Service is {name: https-webhook, port: 443, targetPort:
	// webhook}: its EndpointSlices name the port https-webhook (issue #14 item 10); the port is
	// found, and no endpoint is ready yet.
	webhookGatesMustWait("before any pod existed", func(*unstructured.Unstructured) string { return "0/1 ready endpoints" })

	for _, c := range charts {
		for _, d := range c.deployments {
			a.apply(c.namespace, d)
		}
	}
	for _, g := range gates {
		t.Run(g.name, func(t *testing.T) {
			r := g.res
			if r == nil {
				rr := await(t, g.ch, 60*time.Second)
				r = &rr
			}
			if r.err != nil {
				t.Fatal(r.err)
			}
		})
	}
}

// TestChartWebhooksProvenByURL: every webhook configuration of the real charts, as rendered,
// proven by WebhookReady the way users' gates prove it: each webhook sent (as internal/charts
// does, keeping its rules, selectors, failurePolicy and path) to a test server on 127.0.0.1 by
// URL, which plays the chart's webhook pod and starts serving late. The near miss first: before
// it serves, no gate passes; once it serves, every gate passes on its answers.
func TestChartWebhooksProvenByURL(t *testing.T) {
	dyn := testenv.Dynamic(t)
	a := &chartApplier{t: t, dyn: dyn,
		mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(testenv.CP.Client.Discovery()))}
	t.Cleanup(a.cleanup)
	wh := testenv.NewWebhook(t) // reserved, not serving yet
	s := newServer(t)
	type cfg struct{ chart, key, name string }
	var cfgs []cfg
	var webhooks []*unstructured.Unstructured
	for _, c := range chartFixtures {
		a.apply("", testenv.Object(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: "+c.namespace+"}"))
		if c.file == "external-secrets" { // rendered without its CRDs: installCRDs puts these in
			crds, err := charts.ExternalSecretsCRDs(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range crds {
				a.apply(c.namespace, u)
			}
		}
		for _, u := range loadChart(t, c) {
			switch {
			case u.GetKind() == "CustomResourceDefinition":
				a.apply(c.namespace, u) // what the webhooks intercept must be served
			case isWebhookConfiguration(u):
				charts.SendWebhooksTo(u, wh.Webhook)
				u.SetName(u.GetName() + "-by-url")
				key := "validatingWebhookConfiguration"
				if u.GetKind() == "MutatingWebhookConfiguration" {
					key = "mutatingWebhookConfiguration"
				}
				cfgs = append(cfgs, cfg{c.file, key, u.GetName()})
				webhooks = append(webhooks, u)
			}
		}
	}
	for _, u := range webhooks { // last: cleanup deletes them first
		a.apply("", u)
	}
	gates := func(timeout string) map[string]<-chan gateResult {
		out := map[string]<-chan gateResult{}
		for _, c := range cfgs {
			out[c.chart+": WebhookReady "+c.name] = createAsync(t, s, "WebhookReady", props(c.key, c.name, "timeout", timeout))
		}
		return out
	}
	for name, ch := range gates("2s") {
		if r := await(t, ch, 60*time.Second); r.err == nil {
			t.Errorf("%s passed before its webhook served: %v", name, r.resp.Properties)
		}
	}
	if t.Failed() {
		return
	}
	started := gates("60s")
	wh.Start(t) // the webhook pod is ready, late
	for name, ch := range started {
		if r := await(t, ch, 90*time.Second); r.err != nil {
			t.Errorf("%s, its webhook serving: %v", name, r.err)
		}
	}
	if wh.Calls.Load() == 0 {
		t.Error("the gates passed without the webhooks ever answering")
	}
}
