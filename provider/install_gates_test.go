package provider

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/readiness-io/pulumi-readiness/internal/controlplane"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/helmrelease"
)

func TestHttpReadyNeedsConsecutiveGoodAnswers(t *testing.T) {
	var calls atomic.Int64
	srv := &http.Server{ReadHeaderTimeout: time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) <= 3 {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, `{"status":"ok"}`)
	})}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()
	url := "http://" + l.Addr().String() + "/healthz"
	s := newServer(t)
	r := await(t, createAsync(t, s, "HttpReady", props("url", url, "bodyRegex", `"status":"ok"`, "consecutiveSuccesses", 2, "timeout", "60s")), 60*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := r.resp.Properties.Get("statusCode").AsNumber(); got != 200 {
		t.Errorf("statusCode = %v", got)
	}
	if calls.Load() < 5 {
		t.Errorf("passed after %d requests: 3 answered 503, and 2 good ones in a row are needed", calls.Load())
	}
	r = await(t, createAsync(t, s, "HttpReady", props("url", url, "expectedStatus", "204", "timeout", "2s")), 30*time.Second)
	if r.err == nil || !strings.Contains(r.err.Error(), "HTTP 200 (want 204)") {
		t.Fatalf("want a timeout naming the status, got %v", r.err)
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
