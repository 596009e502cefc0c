// Package fakes plays the controllers around a cluster for tests and the demo: an admission
// webhook server that starts late, and cert-manager issuing certificates. Everything listens on
// 127.0.0.1, except in tests that run inside a network namespace of their own (NewWebhookOn).
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
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Webhook is a real TLS admission webhook on 127.0.0.1, registered by URL. It listens only
// once start is called (as a webhook pod that becomes ready late).
type Webhook struct {
	ip     [4]byte
	port   int
	fd     int // the reserved, not yet listening socket; -1 while serving
	mu     sync.Mutex
	caPEM  []byte
	tlsCfg *tls.Config
	Mode   atomic.Value // "allow", "deny", "deny-named", "deny-echo", "patch", "inject:NAME", "error", "stranger", "other-uid"
	Calls  atomic.Int64 // requests served
	// answered counts the review answers by the mode each was given in (AnsweredIn).
	answered sync.Map // mode -> *atomic.Int64
	// ConvMode says how /convert answers ConversionReviews (see convert); ConvCalls counts them.
	ConvMode  atomic.Value
	ConvCalls atomic.Int64
	// RefuseDirect answers HTTP 503 to the readiness gates' own direct calls (user
	// readiness-probe) while still answering the API server: a webhook the gate cannot reach
	// itself, as behind a forbidden service proxy, so only the mutation can prove it.
	RefuseDirect atomic.Bool
	srv          *http.Server
	// hold is the next request's hold (see HoldNext), held the one a request waits on; Held
	// says a request is held.
	hold, held chan struct{}
	Held       atomic.Bool
}

// HoldNext holds the next request (the API server's call) until Release or until its caller
// gives up, as a call the API server sent while the webhook's pod became reachable hangs until
// its timeout; the requests after it are answered as usual.
func (w *Webhook) HoldNext() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.hold = make(chan struct{})
}

// Release ends the held request (or the hold not yet taken).
func (w *Webhook) Release() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range []chan struct{}{w.hold, w.held} {
		if c != nil {
			close(c)
		}
	}
	w.hold, w.held = nil, nil
}

// holdIfAsked holds this request if it is the first since HoldNext.
func (w *Webhook) holdIfAsked(r *http.Request) {
	w.mu.Lock()
	hold := w.hold
	w.hold, w.held = nil, hold
	w.mu.Unlock()
	if hold == nil {
		return
	}
	w.Held.Store(true)
	defer w.Held.Store(false)
	select {
	case <-hold:
	case <-r.Context().Done():
	}
}

func NewWebhook() (*Webhook, error) { return NewWebhookOn("127.0.0.1", 0) }

// NewWebhookOn is a webhook on ip:port (port 0: any) whose certificate also names dnsNames,
// such as a Service's "name.namespace.svc". Only tests inside their own network namespace may
// use an ip outside 127.0.0.0/8.
func NewWebhookOn(ip string, port int, dnsNames ...string) (*Webhook, error) {
	addr := net.ParseIP(ip).To4()
	if addr == nil {
		return nil, fmt.Errorf("webhook address %q is not IPv4", ip)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: ip},
		IPAddresses: []net.IP{addr}, DNSNames: dnsNames, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
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
	w := &Webhook{ip: [4]byte(addr), port: port, fd: -1, caPEM: certPEM, tlsCfg: &tls.Config{Certificates: []tls.Certificate{pair}}}
	if err := w.reserve(); err != nil {
		return nil, err
	}
	w.Mode.Store("allow")
	w.ConvMode.Store("convert")
	return w, nil
}

func (w *Webhook) URL() string { return fmt.Sprintf("https://%s:%d/validate", net.IP(w.ip[:]), w.port) }

// ConvertURL is where the server answers ConversionReviews, for a CRD's
// spec.conversion.webhook.clientConfig.url.
func (w *Webhook) ConvertURL() string {
	return fmt.Sprintf("https://%s:%d/convert", net.IP(w.ip[:]), w.port)
}

// CABundle is the base64 CA bundle a webhook configuration needs to trust this server.
func (w *Webhook) CABundle() string { return base64.StdEncoding.EncodeToString(w.caPEM) }

// reserve binds the port without listening on it: callers get "connection refused",
// as from a webhook pod whose server has not started, and no other process can take the port
// before Start (a closed-then-reused port is how tests get answers from strangers).
func (w *Webhook) reserve() error {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	_ = syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Port: w.port, Addr: w.ip}); err != nil {
		syscall.Close(fd)
		return fmt.Errorf("reserving %s:%d: %w", net.IP(w.ip[:]), w.port, err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		syscall.Close(fd)
		return err
	}
	w.port = sa.(*syscall.SockaddrInet4).Port
	w.fd = fd
	return nil
}

// Start begins serving on the reserved loopback port.
func (w *Webhook) Start() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fd < 0 {
		if err := w.reserve(); err != nil {
			return err
		}
	}
	if err := syscall.Listen(w.fd, 128); err != nil {
		return err
	}
	f := os.NewFile(uintptr(w.fd), "webhook")
	w.fd = -1
	l, err := net.FileListener(f)
	f.Close()
	if err != nil {
		return err
	}
	w.srv = &http.Server{Handler: http.HandlerFunc(w.serve), ReadHeaderTimeout: 5 * time.Second}
	srv, tl := w.srv, tls.NewListener(l, w.tlsCfg)
	go func() { _ = srv.Serve(tl) }()
	return nil
}

// Stop stops serving and keeps the port reserved for a later Start.
func (w *Webhook) Stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.srv != nil {
		_ = w.srv.Close()
		w.srv = nil
		_ = w.reserve()
	}
}

// Close stops serving and releases the port.
func (w *Webhook) Close() {
	w.Stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fd >= 0 {
		syscall.Close(w.fd)
		w.fd = -1
	}
}

// serve answers as the mode says: "allow" and "deny" as a webhook; "deny-named" denies quoting
// the object's name and the request's uid (a message that changes every time); "deny-echo" denies
// quoting the whole object (as a careless webhook might); "patch" admits with a JSONPatch adding the
// label readiness.test/mutated=yes (a mutating webhook); "inject:NAME" admits a Pod (or an object
// with a pod template) with a JSONPatch appending a container NAME, as a sidecar injector; "error" answers 500; "stranger" is some other server on the webhook's
// address (200, JSON that is no AdmissionReview); "other-uid" answers another request's uid.
func (w *Webhook) serve(rw http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/convert" {
		w.convert(rw, r)
		return
	}
	w.Calls.Add(1)
	w.holdIfAsked(r)
	var review map[string]any
	_ = json.NewDecoder(r.Body).Decode(&review)
	switch w.Mode.Load() {
	case "error":
		http.Error(rw, "internal error", http.StatusInternalServerError)
		return
	case "stranger":
		rw.Header().Set("Content-Type", "application/json")
		fmt.Fprint(rw, `{"status":"ok","version":"1.0"}`)
		return
	}
	req, _ := review["request"].(map[string]any)
	if user, _ := req["userInfo"].(map[string]any); w.RefuseDirect.Load() && user["username"] == "readiness-probe" {
		http.Error(rw, "direct calls refused", http.StatusServiceUnavailable)
		return
	}
	uid := req["uid"]
	if w.Mode.Load() == "other-uid" {
		uid = "00000000-0000-0000-0000-000000000000"
	}
	mode, _ := w.Mode.Load().(string)
	sidecar, inject := strings.CutPrefix(mode, "inject:")
	resp := map[string]any{"uid": uid, "allowed": mode == "allow" || mode == "other-uid" || mode == "patch" || inject}
	if inject {
		obj, _ := req["object"].(map[string]any)
		spec, _ := obj["spec"].(map[string]any)
		path := "/spec/containers/-"
		if tmpl, _ := spec["template"].(map[string]any); tmpl != nil {
			spec, _ = tmpl["spec"].(map[string]any)
			path = "/spec/template/spec/containers/-"
		}
		present := false // injected already (by another webhook): leave it
		cs, _ := spec["containers"].([]any)
		for _, c := range cs {
			present = present || c.(map[string]any)["name"] == sidecar
		}
		if !present {
			patch, _ := json.Marshal([]any{map[string]any{"op": "add", "path": path, "value": map[string]any{"name": sidecar, "image": "readiness.invalid/" + sidecar}}})
			resp["patchType"] = "JSONPatch"
			resp["patch"] = base64.StdEncoding.EncodeToString(patch)
		}
	}
	switch mode {
	case "patch":
		obj, _ := req["object"].(map[string]any)
		meta, _ := obj["metadata"].(map[string]any)
		op := map[string]any{"op": "add", "path": "/metadata/labels", "value": map[string]any{"readiness.test/mutated": "yes"}}
		if _, ok := meta["labels"].(map[string]any); ok {
			op = map[string]any{"op": "add", "path": "/metadata/labels/readiness.test~1mutated", "value": "yes"}
		}
		patch, _ := json.Marshal([]any{op})
		resp["patchType"] = "JSONPatch"
		resp["patch"] = base64.StdEncoding.EncodeToString(patch)
	case "deny-echo":
		obj, _ := json.Marshal(req["object"])
		resp["status"] = map[string]any{"code": 403, "message": "rejected " + string(obj)}
	case "deny":
		resp["status"] = map[string]any{"code": 403, "message": "spec.secretStoreRef is required"}
	case "deny-named":
		obj, _ := req["object"].(map[string]any)
		meta, _ := obj["metadata"].(map[string]any)
		resp["status"] = map[string]any{"code": 403, "message": fmt.Sprintf("%v is not allowed by policy (request %v)", meta["name"], uid)}
	}
	w.countAnswer(mode)
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(map[string]any{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": resp})
}

// AnsweredIn is how many reviews were answered in mode. A request counted in Calls may read its
// mode after the mode changed: Calls read at a change does not tell the answers of one mode from
// the other's, this does.
func (w *Webhook) AnsweredIn(mode string) int64 {
	if c, ok := w.answered.Load(mode); ok {
		return c.(*atomic.Int64).Load()
	}
	return 0
}

func (w *Webhook) countAnswer(mode string) {
	c, _ := w.answered.LoadOrStore(mode, new(atomic.Int64))
	c.(*atomic.Int64).Add(1)
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
		w.CABundle(), group, strings.Join(resources, `", "`))
}

// convert answers a ConversionReview (apiextensions.k8s.io/v1) as ConvMode says: "convert"
// converts between v1 (and v1beta1), whose spec has `size`, and v2, which renamed it `count`;
// "partial" does the same but refuses v1beta1 (a failed result, as a webhook that was not taught
// that version); "error" answers 500; "stranger" is some other server (200, JSON that is no
// ConversionReview); "other-uid" answers another request's uid.
func (w *Webhook) convert(rw http.ResponseWriter, r *http.Request) {
	w.ConvCalls.Add(1)
	var review struct {
		Request struct {
			UID               string           `json:"uid"`
			DesiredAPIVersion string           `json:"desiredAPIVersion"`
			Objects           []map[string]any `json:"objects"`
		} `json:"request"`
	}
	_ = json.NewDecoder(r.Body).Decode(&review)
	mode := w.ConvMode.Load()
	switch mode {
	case "error":
		http.Error(rw, "internal error", http.StatusInternalServerError)
		return
	case "stranger":
		rw.Header().Set("Content-Type", "application/json")
		fmt.Fprint(rw, `{"status":"ok","version":"1.0"}`)
		return
	}
	req := review.Request
	uid := req.UID
	if mode == "other-uid" {
		uid = "00000000-0000-0000-0000-000000000000"
	}
	version := func(apiVersion string) string { return apiVersion[strings.LastIndex(apiVersion, "/")+1:] }
	resp := map[string]any{"uid": uid, "result": map[string]any{"status": "Success"}}
	var out []any
	for _, obj := range req.Objects {
		from, to := version(fmt.Sprint(obj["apiVersion"])), version(req.DesiredAPIVersion)
		if mode == "partial" && (from == "v1beta1" || to == "v1beta1") {
			resp["result"] = map[string]any{"status": "Failure",
				"message": fmt.Sprintf("cannot convert from %s to %s: this webhook does not know v1beta1", from, to)}
			out = nil
			break
		}
		if spec, ok := obj["spec"].(map[string]any); ok {
			switch {
			case to == "v2" && from != "v2":
				if v, ok := spec["size"]; ok {
					spec["count"] = v
					delete(spec, "size")
				}
			case to != "v2" && from == "v2":
				if v, ok := spec["count"]; ok {
					spec["size"] = v
					delete(spec, "count")
				}
			}
		}
		obj["apiVersion"] = req.DesiredAPIVersion
		out = append(out, obj)
	}
	if out == nil {
		out = []any{}
	}
	resp["convertedObjects"] = out
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "response": resp})
}
