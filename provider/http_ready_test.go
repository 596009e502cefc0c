package provider

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

// grant binds user to a Role holding rules (YAML flow list) in ns.
func grant(t *testing.T, ns, user, rules string) {
	t.Helper()
	testenv.Apply(t, fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: %[1]s, namespace: %[2]s}
rules: %[3]s
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: %[1]s, namespace: %[2]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: %[1]s}
subjects: [{kind: User, name: %[1]s}]`, user, ns, rules))
}

func serviceInput(ns, name string) property.Value {
	return property.New(property.NewMap(map[string]property.Value{
		"namespace": property.New(ns), "name": property.New(name), "path": property.New("/healthz")}))
}

// The API server answers a proxied request itself when it cannot reach a backend: 404 for a
// missing Service, 503 without endpoints, 403 without RBAC. None of that is the backend's
// answer, even where expectedStatus accepts the code. (The backend's own answers through the
// proxy are tested inside the network namespace harness: netns_test.go.)
func TestHttpReadyServiceProxyCountsOnlyTheBackendsAnswer(t *testing.T) {
	ns := testenv.Namespace(t, "proxy")
	// A Service that selects no pod: the API server answers 503 itself and dials nothing.
	testenv.Apply(t, fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: idle, namespace: %s}
spec:
  selector: {app: nobody}
  ports: [{name: http, port: 80, targetPort: 8080}]`, ns))
	grant(t, ns, "proxy-denied", `[{apiGroups: [""], resources: [services], verbs: [get, list, watch]}]`)
	s := newServer(t)
	lenient := func(svc string) map[string]property.Value {
		return props("service", serviceInput(ns, svc), "expectedStatus", "200-499", "timeout", "2s")
	}
	missing := createAsync(t, s, "HttpReady", lenient("missing"))
	idle := createAsync(t, s, "HttpReady", lenient("idle"))
	denied := createAsync(t, newServer(t, actingAs(t, "proxy-denied")), "HttpReady",
		props("service", serviceInput(ns, "idle"), "expectedStatus", "200-499", "timeout", "5m"))

	for name, tc := range map[string]struct {
		ch   <-chan gateResult
		want []string
	}{
		"missing Service":           {missing, []string{"timed out", "not the backend's answer", "HTTP 404", `services "missing" not found`}},
		"Service with no endpoints": {idle, []string{"timed out", "not the backend's answer", "HTTP 503", "no endpoints available"}},
	} {
		t.Run(name, func(t *testing.T) {
			r := await(t, tc.ch, 30*time.Second)
			if r.err == nil {
				t.Fatalf("passed on the API server's own answer: outputs %v", r.resp.Properties)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.err.Error(), w) {
					t.Errorf("error lacks %q: %v", w, r.err)
				}
			}
		})
	}
	t.Run("Forbidden fails at once, naming the permission", func(t *testing.T) {
		r := await(t, denied, 20*time.Second) // the gate's own timeout is 5m: only failing at once returns here
		if r.err == nil {
			t.Fatalf("passed on the API server's 403: outputs %v", r.resp.Properties)
		}
		for _, w := range []string{`User "proxy-denied"`, `cannot get resource "services/proxy"`, `namespace "` + ns,
			`grant verb "get" on resource "services/proxy"`} {
			if !strings.Contains(r.err.Error(), w) {
				t.Errorf("error lacks %q: %v", w, r.err)
			}
		}
		if strings.Contains(r.err.Error(), "timed out") {
			t.Errorf("want a failure at once, got a timeout: %v", r.err)
		}
	})
}

// TestHttpReadyProxyErrorTerminal: only the service proxy's own RBAC refusal fails HttpReady at
// once; another Forbidden (the backend's) and a missing Service are waited out.
func TestHttpReadyProxyErrorTerminal(t *testing.T) {
	forbidden := &proxyError{code: 403, status: metav1.Status{Reason: metav1.StatusReasonForbidden,
		Message: `services "web" is forbidden: User "u" cannot get resource "services/proxy" in API group "" in the namespace "x"`}}
	otherForbidden := &proxyError{code: 403, status: metav1.Status{Reason: metav1.StatusReasonForbidden, Message: `widgets is forbidden`}}
	notFound := &proxyError{code: 404, status: metav1.Status{Reason: metav1.StatusReasonNotFound, Message: `services "web" not found`}}
	if !forbidden.terminal() || otherForbidden.terminal() || notFound.terminal() {
		t.Errorf("terminal: proxy RBAC %v, another Forbidden %v, NotFound %v; want true, false, false",
			forbidden.terminal(), otherForbidden.terminal(), notFound.terminal())
	}
}

// Refresh (Read) runs the gate's whole proof: with consecutiveSuccesses 3, the first good answer
// only says "confirming", which is no reason to drop a gate whose endpoint is healthy.
func TestHttpReadyRefreshRunsTheFullProof(t *testing.T) {
	var mode atomic.Value // "ok", "down", "flap"
	mode.Store("ok")
	var n atomic.Int64
	srv := &http.Server{ReadHeaderTimeout: time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		switch mode.Load() {
		case "down":
			http.Error(w, "down", http.StatusServiceUnavailable)
		case "flap":
			if n.Add(1)%2 == 0 {
				http.Error(w, "flapping", http.StatusServiceUnavailable)
				return
			}
			fmt.Fprint(w, "ok")
		default:
			fmt.Fprint(w, "ok")
		}
	})}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()
	s := newServer(t)
	inputs := props("url", "http://"+l.Addr().String()+"/healthz", "consecutiveSuccesses", 3, "timeout", "30s")
	r := await(t, createAsync(t, s, "HttpReady", inputs), 30*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	chk, err := s.Check(p.CheckRequest{Urn: urn("HttpReady"), Inputs: property.NewMap(inputs)})
	if err != nil {
		t.Fatal(err)
	}
	read := func() string {
		t.Helper()
		resp, err := s.Read(p.ReadRequest{ID: r.resp.ID, Urn: urn("HttpReady"), Properties: r.resp.Properties, Inputs: chk.Inputs})
		if err != nil {
			t.Fatal(err)
		}
		return resp.ID
	}
	if id := read(); id != r.resp.ID {
		t.Fatalf("refresh dropped a gate whose endpoint answers 200 every time (id %q)", id)
	}
	mode.Store("flap") // good, bad, good, ...: never 3 good answers in a row
	if id := read(); id != "" {
		t.Errorf("refresh kept a gate whose endpoint flaps")
	}
	mode.Store("down")
	if id := read(); id != "" {
		t.Errorf("refresh kept a gate whose endpoint answers 503")
	}
}

// TestHttpReadyDoesNotFollowRedirects: a health path that redirects to a login page answering 200
// is not healthy; the redirect is judged by its own status.
func TestHttpReadyDoesNotFollowRedirects(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/login" {
			_, _ = w.Write([]byte("please log in"))
			return
		}
		http.Redirect(w, r, "/login", http.StatusFound)
	}))
	defer srv.Close()
	s := newServer(t)
	r := await(t, createAsync(t, s, "HttpReady", props("url", srv.URL+"/healthz", "expectedStatus", "200", "timeout", "2s")), 30*time.Second)
	if r.err == nil || !strings.Contains(r.err.Error(), "302") {
		t.Fatalf("a redirect to a page answering 200 must not pass with expectedStatus 200; got %v", r.err)
	}
	if r := await(t, createAsync(t, s, "HttpReady", props("url", srv.URL+"/healthz", "expectedStatus", "200-399", "timeout", "10s")), 30*time.Second); r.err != nil {
		t.Fatalf("a 302 within expectedStatus is an answer: %v", r.err)
	}
}

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
