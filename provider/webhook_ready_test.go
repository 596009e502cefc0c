package provider

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/property"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

// testWebhook is a real TLS admission webhook on 127.0.0.1, registered by URL. It listens only
// once start is called (as a webhook pod that becomes ready late).
type testWebhook struct {
	port   int
	caPEM  []byte
	tlsCfg *tls.Config
	mode   atomic.Value // "allow", "deny", "error"
	srv    *http.Server
}

func newTestWebhook(t *testing.T) *testWebhook {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	pair, err := tls.X509KeyPair(certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		t.Fatal(err)
	}
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	port := l.Addr().(*net.TCPAddr).Port
	l.Close() // reserved; nothing listens until start
	w := &testWebhook{port: port, caPEM: certPEM, tlsCfg: &tls.Config{Certificates: []tls.Certificate{pair}}}
	w.mode.Store("allow")
	t.Cleanup(w.stop)
	return w
}

func (w *testWebhook) url() string { return fmt.Sprintf("https://127.0.0.1:%d/validate", w.port) }

func (w *testWebhook) start(t *testing.T) {
	l, err := tls.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", w.port), w.tlsCfg)
	if err != nil {
		t.Fatal(err)
	}
	w.srv = &http.Server{Handler: http.HandlerFunc(w.serve), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = w.srv.Serve(l) }()
}

func (w *testWebhook) stop() {
	if w.srv != nil {
		_ = w.srv.Close()
	}
}

func (w *testWebhook) serve(rw http.ResponseWriter, r *http.Request) {
	var review map[string]any
	_ = json.NewDecoder(r.Body).Decode(&review)
	if w.mode.Load() == "error" {
		http.Error(rw, "internal error", http.StatusInternalServerError)
		return
	}
	uid := review["request"].(map[string]any)["uid"]
	resp := map[string]any{"uid": uid, "allowed": w.mode.Load() == "allow"}
	if w.mode.Load() == "deny" {
		resp["status"] = map[string]any{"code": 403, "message": "spec.secretStoreRef is required"}
	}
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(map[string]any{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": resp})
}

// register creates a ValidatingWebhookConfiguration for group's widgets pointing at w.
func (w *testWebhook) register(t *testing.T, name, group string) {
	testenv.Apply(t, fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: %s}
webhooks:
- name: validate.widget.%s
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
  timeoutSeconds: 3
  clientConfig: {url: "%s", caBundle: %s}
  rules: [{apiGroups: ["%s"], apiVersions: ["*"], operations: [CREATE, UPDATE], resources: [widgets]}]`,
		name, group, w.url(), base64.StdEncoding.EncodeToString(w.caPEM), group))
	t.Cleanup(func() {
		_ = testenv.Dynamic(t).Resource(vwcResource).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

func widget(group, name string) string {
	return fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata: {name: %s, namespace: default}\nspec: {size: 1}", group, name)
}

func probeOf(group string) property.Value {
	return property.New(property.NewMap(map[string]property.Value{
		"apiVersion": property.New(group + "/v1"), "kind": property.New("Widget"),
		"metadata": property.New(property.NewMap(map[string]property.Value{"name": property.New("probe"), "namespace": property.New("default")})),
	}))
}

func TestWebhookReadyProbeWaitsForALateWebhook(t *testing.T) {
	group := widgetCRD(t)
	wh := newTestWebhook(t)
	cfg := "widgets-" + strings.Split(group, ".")[0]
	wh.register(t, cfg, group)

	// Field report 001: creating the resource before the webhook serves fails.
	_, err := testenv.Resource(t, testenv.Object(t, widget(group, "early"))).Create(context.Background(), testenv.Object(t, widget(group, "early")), metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
		t.Fatalf("want the field report's `failed calling webhook`, got %v", err)
	}

	s := newServer(t)
	ch := createAsync(t, s, "WebhookReady", props("validatingWebhookConfiguration", cfg, "probe", probeOf(group), "timeout", "60s"))
	mustNotReturn(t, ch, 1500*time.Millisecond) // connection refused: nothing listens yet
	wh.start(t)
	r := await(t, ch, 30*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !r.resp.Properties.Get("probed").AsBool() || r.resp.Properties.Get("failurePolicy").AsString() != "Fail" {
		t.Errorf("outputs = %v", r.resp.Properties)
	}
	// What the gate promises: the resource can be created now. The probe persisted nothing.
	testenv.Apply(t, widget(group, "after"))
	if _, err := testenv.Resource(t, testenv.Object(t, widget(group, "probe"))).Get(context.Background(), "probe", metav1.GetOptions{}); err == nil {
		t.Error("the dry-run probe left an object behind")
	}

	// A webhook that denies the probe answered: serving.
	wh.mode.Store("deny")
	if r := await(t, createAsync(t, s, "WebhookReady", props("validatingWebhookConfiguration", cfg, "probe", probeOf(group), "timeout", "30s")), 30*time.Second); r.err != nil {
		t.Fatalf("a denying webhook must count as serving: %v", r.err)
	}
	// One that answers 500 does not.
	wh.mode.Store("error")
	r = await(t, createAsync(t, s, "WebhookReady", props("validatingWebhookConfiguration", cfg, "probe", probeOf(group), "timeout", "3s")), 30*time.Second)
	if r.err == nil || !strings.Contains(r.err.Error(), "dry-run probe") {
		t.Fatalf("a webhook answering 500 must not count as serving; got %v", r.err)
	}
}

func TestWebhookReadyServiceBackedWaitsForEndpointsAndCABundle(t *testing.T) {
	ns := testenv.Namespace(t, "wh")
	group := uniqueGroup(t)
	cfg := "svc-" + strings.Split(group, ".")[0]
	testenv.Apply(t, fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: webhook, namespace: %[1]s}
spec:
  selector: {app: webhook}
  ports: [{name: https, port: 443, targetPort: https}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: %[2]s
  annotations: {cert-manager.io/inject-ca-from: %[1]s/webhook-cert}
webhooks:
- name: validate.%[3]s
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
  clientConfig: {service: {name: webhook, namespace: %[1]s, port: 443, path: /validate}}
  rules: [{apiGroups: ["%[3]s"], apiVersions: ["*"], operations: [CREATE], resources: [things]}]`, ns, cfg, group))
	t.Cleanup(func() {
		_ = testenv.Dynamic(t).Resource(vwcResource).Delete(context.Background(), cfg, metav1.DeleteOptions{})
	})
	s := newServer(t)
	// No probe: the API server must never dial the Service's 10.x address in this test.
	ch := createAsync(t, s, "WebhookReady", props("validatingWebhookConfiguration", cfg, "timeout", "90s"))
	mustNotReturn(t, ch, time.Second) // caBundle empty, no pods
	testenv.Apply(t, deployment(ns, "webhook", "registry.local/webhook:1", 1))
	mustNotReturn(t, ch, 2*time.Second) // endpoints may be ready, but the caBundle is not injected
	// Play cert-manager's cainjector.
	cur, err := testenv.Dynamic(t).Resource(vwcResource).Get(context.Background(), cfg, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hooks := cur.Object["webhooks"].([]any)
	hooks[0].(map[string]any)["clientConfig"].(map[string]any)["caBundle"] = base64.StdEncoding.EncodeToString(issue(t, "webhook", time.Hour).caPEM)
	if _, err := testenv.Dynamic(t).Resource(vwcResource).Update(context.Background(), cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := await(t, ch, 60*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	out := r.resp.Properties
	if out.Get("readyEndpoints").AsNumber() != 1 || out.Get("caBundleSha256").AsString() == "" || out.Get("probed").AsBool() {
		t.Errorf("outputs = %v", out)
	}
	if got := out.Get("serviceName").AsString(); got != ns+"/webhook:443" {
		t.Errorf("serviceName = %q", got)
	}
}

func TestClassifyProbe(t *testing.T) {
	for msg, answered := range map[string]bool{
		`admission webhook "validate.externalsecret.external-secrets.io" denied the request: spec invalid`:                                       true,
		`Internal error occurred: failed calling webhook "v.x": failed to call webhook: Post "https://x.svc:443/v": service "x" not found`:       false,
		`failed calling webhook "v.x": Post "https://10.0.0.5:443/v": dial tcp 10.0.0.5:443: connect: connection refused`:                        false,
		`failed calling webhook "v.x": Post "https://x:443/v": no endpoints available for service "x"`:                                           false,
		`failed calling webhook "v.x": Post "https://x:443/v": tls: failed to verify certificate: x509: certificate signed by unknown authority`: false,
		`failed calling webhook "v.x": Post "https://x:443/v": context deadline exceeded`:                                                        false,
	} {
		if got, why := ClassifyProbe(fmt.Errorf("%s", msg)); got != answered {
			t.Errorf("ClassifyProbe(%q) = %v (%s)", msg, got, why)
		}
	}
	if ok, _ := ClassifyProbe(nil); !ok {
		t.Error("a successful dry-run is an answer")
	}
}
