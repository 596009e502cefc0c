package provider

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi/sdk/v3/go/property"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/admission"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/kube"
)

// createUnchecked runs Create on inputs as given, skipping Check: what a gate does with inputs
// that a Check may once have let through (or a state written by an older version).
func createUnchecked(s interface {
	Create(p.CreateRequest) (p.CreateResponse, error)
}, typ string, inputs map[string]property.Value) (p.CreateResponse, error) {
	return s.Create(p.CreateRequest{Urn: urn(typ), Properties: property.NewMap(inputs)})
}

// TestHttpReadyServicePathCannotLeaveTheProxy: a service.path that climbs out of the service
// proxy (`../../../secrets/<name>`) used to turn the gate into a GET of the Secret with the
// provider's credentials, and to pass though the Service does not exist (issue 22, item 2).
// Check refuses it (TestHttpReadyServiceProxyChecks); Create refuses it too, whatever Check did.
func TestHttpReadyServicePathCannotLeaveTheProxy(t *testing.T) {
	ns := testenv.Namespace(t, "sec-path")
	testenv.Apply(t, fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: db, namespace: %s}\nstringData: {password: hunter2}", ns))
	s := newServer(t)
	for _, path := range []string{"../../../secrets/db", "/../../../secrets/db", "/%2e%2e/%2e%2e/%2e%2e/secrets/db"} {
		_, err := createUnchecked(s, "HttpReady", props("service", props("namespace", ns, "name", "nosuch", "path", path),
			"bodyRegex", "password", "consecutiveSuccesses", 1, "timeout", "3s"))
		if err == nil {
			t.Fatalf("path %q: the gate passed on a Service that does not exist (it read another API path)", path)
		}
		if strings.Contains(err.Error(), "aHVudGVyMg") || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("path %q: the Secret's value is in the error: %v", path, err)
		}
	}
}

// TestHttpReadyRedactsURLCredentials: a URL's userinfo and query values never reach the ID
// (stored in the state file), an error or a progress line; a failing backend's body is quoted
// redacted; a URL given as a secret stays secret in the outputs (issue 22, item 4).
func TestHttpReadyRedactsURLCredentials(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ok" {
			_, _ = w.Write([]byte("ok"))
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("login failed for alice: password=hunter2body token: tok3nbody"))
	}))
	defer srv.Close()
	withCreds := strings.Replace(srv.URL, "http://", "http://alice:s3cr3tpw@", 1)
	leaks := func(t *testing.T, what, s string) {
		t.Helper()
		for _, secret := range []string{"s3cr3tpw", "tok3nvalue", "hunter2body", "tok3nbody"} {
			if strings.Contains(s, secret) {
				t.Errorf("%s holds %q: %s", what, secret, s)
			}
		}
	}
	lines := statusLines(t) // progress lines, as the engine shows them
	s := newServer(t)
	r := await(t, createAsync(t, s, "HttpReady", props("url", withCreds+"/fail?token=tok3nvalue", "timeout", "2s")), 30*time.Second)
	if r.err == nil {
		t.Fatal("a 503 passed")
	}
	leaks(t, "the error", r.err.Error())
	if !strings.Contains(r.err.Error(), "503") {
		t.Errorf("the error should still say what the backend answered: %v", r.err)
	}

	// A refused connection: net/http quotes the whole URL in its error.
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := strings.Replace(closed.URL, "http://", "http://alice:s3cr3tpw@", 1) + "/?token=tok3nvalue"
	closed.Close()
	r = await(t, createAsync(t, s, "HttpReady", props("url", closedURL, "timeout", "2s")), 30*time.Second)
	if r.err == nil {
		t.Fatal("a closed port passed")
	}
	leaks(t, "the connection error", r.err.Error())

	for _, secret := range []bool{false, true} {
		url := property.New(withCreds + "/ok?token=tok3nvalue")
		if secret {
			url = url.WithSecret(true)
		}
		r = await(t, createAsync(t, s, "HttpReady", props("url", url, "timeout", "30s")), 30*time.Second)
		if r.err != nil {
			t.Fatal(r.err)
		}
		leaks(t, "the ID", r.resp.ID)
		if out := r.resp.Properties.Get("url"); secret && !out.Secret() {
			t.Errorf("a secret url input is not secret in the outputs")
		}
	}
	// A token in the path (a hook URL): the ID, kept in the state file, holds only the host.
	pathSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	defer pathSrv.Close()
	r = await(t, createAsync(t, s, "HttpReady", props("url", pathSrv.URL+"/hooks/T0KENINPATH42/health", "timeout", "30s")), 30*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if strings.Contains(r.resp.ID, "T0KENINPATH42") || !strings.Contains(r.resp.ID, strings.TrimPrefix(pathSrv.URL, "http://")) {
		t.Errorf("the ID should name the host and hide the path: %s", r.resp.ID)
	}
	all := lines()
	if len(all) == 0 {
		t.Fatal("no progress lines were captured")
	}
	for _, l := range all {
		leaks(t, "a progress line", l)
	}
}

// TestResourceReadyNeverShowsTheSecretPlaceholder: the cache keeps a marker in place of a
// Secret's values; no message may present it as the Secret's data (issue 22, item 5). The value
// check itself is refused at preview (TestResourceReadySecretValueChecksRefused); run anyway,
// it must not claim the Secret holds the marker.
func TestResourceReadyNeverShowsTheSecretPlaceholder(t *testing.T) {
	ns := testenv.Namespace(t, "sec-marker")
	testenv.Apply(t, fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: db, namespace: %s}\nstringData: {password: present}", ns))
	s := newServer(t)
	secret := func(kv ...any) map[string]property.Value {
		return props(append([]any{"apiVersion", "v1", "kind", "Secret", "namespace", ns, "name", "db", "timeout", "3s"}, kv...)...)
	}
	for _, in := range []map[string]property.Value{
		secret("jsonPath", "{.data.password}", "value", "cHJlc2VudA=x"),
		secret("cel", "object.data.password"), // returns a string: terminal, quoting the value
	} {
		_, err := createUnchecked(s, "ResourceReady", in)
		if err == nil {
			t.Fatalf("%v passed", in)
		}
		if strings.Contains(err.Error(), kube.SecretPresent) {
			t.Errorf("the placeholder is shown as the Secret's data: %v", err)
		}
	}
	// A presence check still passes.
	if _, err := createUnchecked(s, "ResourceReady", secret("jsonPath", "{.data.password}")); err != nil {
		t.Fatalf("presence check: %v", err)
	}
}

// TestCELCostOverrunIsTerminal: an expression whose cost depends on the object and exceeds the
// limit fails the gate at once, as terminal, instead of being retried (allocating each time)
// until the timeout (issue 22, item 3). Its expected cost at preview is unknown, so Check passes.
func TestCELCostOverrunIsTerminal(t *testing.T) {
	ns := testenv.Namespace(t, "sec-cost")
	testenv.Apply(t, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: %s}\ndata: {size: \"3000000\"}", ns))
	s := newServer(t)
	r := await(t, createAsync(t, s, "ResourceReady", props("apiVersion", "v1", "kind", "ConfigMap", "namespace", ns, "name", "c",
		"cel", "lists.range(int(object.data.size)).size() > 0", "timeout", "60s")), 90*time.Second)
	if r.err == nil || !strings.Contains(r.err.Error(), "too expensive") || strings.Contains(r.err.Error(), "timed out") {
		t.Fatalf("want a terminal cost error, got %v", r.err)
	}
	// A fixed cost over the limit is refused at preview.
	msgs := checkMessages(t, s, "ResourceReady", props("apiVersion", "v1", "kind", "ConfigMap", "namespace", ns, "name", "c",
		"cel", "lists.range(100000000).size() > 0"))
	if len(msgs) != 1 || !strings.Contains(msgs[0], "over the limit") {
		t.Errorf("Check = %q, want the cost refused", msgs)
	}
	for _, typ := range []string{"AdmissionReady", "WebhookReady"} {
		in := props("expect", "lists.range(100000000).size() > 0", "objects",
			property.New([]property.Value{toProperty(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "x"}})}))
		if typ == "WebhookReady" {
			in = props("mutatingWebhookConfiguration", "m", "expect", "lists.range(100000000).size() > 0",
				"probe", toProperty(map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}))
		}
		if msgs := checkMessages(t, s, typ, in); len(msgs) != 1 || !strings.Contains(msgs[0], "over the limit") {
			t.Errorf("%s Check = %q, want the cost refused", typ, msgs)
		}
	}
}

// TestAdmissionReadySecretRefusalNamesTheFields: a refusal of a Secret hides the API server's
// text (it may quote values) but names the fields it points at: field paths hold no values.
func TestAdmissionReadySecretRefusalNamesTheFields(t *testing.T) {
	ns := testenv.Namespace(t, "sec-fields")
	const marker = "s3cr3t-field-value"
	secret := fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: db, namespace: %s}\nstringData: {\"bad key!\": %s}", ns, marker)
	r := await(t, createAsync(t, newServer(t), "AdmissionReady", props("objects", manifests(t, secret), "timeout", "30s")), 30*time.Second)
	if r.err == nil {
		t.Fatal("an invalid Secret was admitted")
	}
	if !strings.Contains(r.err.Error(), "bad key!") || !strings.Contains(r.err.Error(), "Invalid, HTTP 422") {
		t.Errorf("the refusal should name the field and the reason: %v", r.err)
	}
	if strings.Contains(r.err.Error(), marker) {
		t.Errorf("the refusal quotes the Secret's value: %v", r.err)
	}
}

// TestServiceReadyNamesAMissingPort: a `port` the Service does not have is said so in the
// timeout's hint, not "are the backing pods running".
func TestServiceReadyNamesAMissingPort(t *testing.T) {
	ns := testenv.Namespace(t, "sec-port")
	testenv.Apply(t, fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: %s}\nspec:\n  selector: {app: web}\n  ports: [{name: https, port: 443, targetPort: 8443}]", ns))
	s := newServer(t)
	r := await(t, createAsync(t, s, "ServiceReady", props("name", "web", "namespace", ns, "port", "http", "timeout", "2s")), 30*time.Second)
	if r.err == nil || !strings.Contains(r.err.Error(), "no port http") || !strings.Contains(r.err.Error(), "https:443->8443") {
		t.Fatalf("want the timeout to say the Service has no port http, got %v", r.err)
	}
	r = await(t, createAsync(t, s, "ServiceReady", props("name", "web", "namespace", ns, "port", "8443", "timeout", "2s")), 30*time.Second)
	if r.err == nil || strings.Contains(r.err.Error(), "no port") {
		t.Fatalf("a target port the Service has is not a missing port: %v", r.err)
	}
}

// TestAdmissionReadyTooLargeIsTerminal: an object over the API server's request size limit is
// refused with 413 on every try: refused at preview, and terminal at once if it gets through.
func TestAdmissionReadyTooLargeIsTerminal(t *testing.T) {
	ns := testenv.Namespace(t, "sec-large")
	big := toProperty(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "big", "namespace": ns},
		"data": map[string]any{"k": strings.Repeat("x", admission.MaxManifestBytes+1024)}})
	in := props("objects", property.New([]property.Value{big}), "timeout", "20s")
	s := newServer(t)
	if msgs := checkMessages(t, s, "AdmissionReady", in); len(msgs) != 1 || !strings.Contains(msgs[0], "Request entity too large") {
		t.Errorf("Check = %q, want the size refused", msgs)
	}
	_, err := createUnchecked(s, "AdmissionReady", in)
	if err == nil || !strings.Contains(err.Error(), "too large") || strings.Contains(err.Error(), "timed out") {
		t.Fatalf("want a terminal size error, got %v", err)
	}
}
