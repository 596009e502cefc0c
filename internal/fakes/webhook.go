// Package fakes plays the controllers around a cluster for tests and the demo: an admission
// webhook server that starts late, and cert-manager issuing certificates. Everything listens on
// 127.0.0.1 only.
package fakes

import (
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
	"time"
)

// Webhook is a real TLS admission webhook on 127.0.0.1, registered by URL. It listens only
// once start is called (as a webhook pod that becomes ready late).
type Webhook struct {
	port   int
	caPEM  []byte
	tlsCfg *tls.Config
	Mode   atomic.Value // "allow", "deny", "error"
	srv    *http.Server
}

func NewWebhook() (*Webhook, error) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	pair, err := tls.X509KeyPair(certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close() // reserved; nothing listens until start
	w := &Webhook{port: port, caPEM: certPEM, tlsCfg: &tls.Config{Certificates: []tls.Certificate{pair}}}
	w.Mode.Store("allow")
	return w, nil
}

func (w *Webhook) URL() string { return fmt.Sprintf("https://127.0.0.1:%d/validate", w.port) }

// Start begins serving on the reserved loopback port.
func (w *Webhook) Start() error {
	l, err := tls.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", w.port), w.tlsCfg)
	if err != nil {
		return err
	}
	w.srv = &http.Server{Handler: http.HandlerFunc(w.serve), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = w.srv.Serve(l) }()
	return nil
}

// Stop stops serving.
func (w *Webhook) Stop() {
	if w.srv != nil {
		_ = w.srv.Close()
	}
}

func (w *Webhook) serve(rw http.ResponseWriter, r *http.Request) {
	var review map[string]any
	_ = json.NewDecoder(r.Body).Decode(&review)
	if w.Mode.Load() == "error" {
		http.Error(rw, "internal error", http.StatusInternalServerError)
		return
	}
	uid := review["request"].(map[string]any)["uid"]
	resp := map[string]any{"uid": uid, "allowed": w.Mode.Load() == "allow"}
	if w.Mode.Load() == "deny" {
		resp["status"] = map[string]any{"code": 403, "message": "spec.secretStoreRef is required"}
	}
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(map[string]any{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": resp})
}

// Configuration returns a ValidatingWebhookConfiguration (YAML) named name that sends
// CREATE and UPDATE of group's widgets to this server, failurePolicy Fail.
func (w *Webhook) Configuration(name, group string) string {
	return w.ConfigurationFor("ValidatingWebhookConfiguration", name, group, "widgets")
}

// ConfigurationFor returns a webhook configuration of kind (Validating or Mutating) named name
// that sends CREATE and UPDATE of group's resources to this server, failurePolicy Fail.
func (w *Webhook) ConfigurationFor(kind, name, group string, resources ...string) string {
	return fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: %s
metadata: {name: %s}
webhooks:
- name: %s.%s.%s
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
  timeoutSeconds: 3
  clientConfig: {url: "%s", caBundle: %s}
  rules: [{apiGroups: ["%s"], apiVersions: ["*"], operations: [CREATE, UPDATE], resources: ["%s"]}]`,
		kind, name, strings.ToLower(strings.TrimSuffix(kind, "WebhookConfiguration")), name, group, w.URL(),
		base64.StdEncoding.EncodeToString(w.caPEM), group, strings.Join(resources, `", "`))
}
