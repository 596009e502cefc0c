package provider

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/helmrelease"
)

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
