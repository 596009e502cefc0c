package provider

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
)

// TestHttpReadyKeepsCredentialsSecret: a url that carries a credential (a user part, a query, a
// fragment) is secret in the checked inputs (what the engine keeps as the gate's inputs) and in
// the outputs, refresh included; a url without one stays plain; headers are always secret, reach
// the server, and never reach the ID or a message (issue 51).
func TestHttpReadyKeepsCredentialsSecret(t *testing.T) {
	const password, token, bearer = "PASSW0RD-51", "T0KEN-51", "BEARER-51"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+bearer || r.Host != "app.example.test" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte("ok"))
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	headers := property.New(property.NewMap(map[string]property.Value{
		"Authorization": property.New("Bearer " + bearer), "Host": property.New("app.example.test"),
	}))
	s := newServer(t)
	for _, tc := range []struct {
		url    string
		secret bool
	}{
		{"http://admin:" + password + "@" + host + "/health", true},
		{srv.URL + "/health?token=" + token, true},
		{srv.URL + "/health?" + token, true},
		{srv.URL + "/health#" + token, true},
		// Near misses: stay plain, so a diff and `pulumi stack export` still show them.
		{srv.URL + "/health", false},
		{srv.URL + "/token/password", false},
	} {
		inputs := props("url", tc.url, "headers", headers, "consecutiveSuccesses", 1, "timeout", "20s")
		chk, err := s.Check(p.CheckRequest{Urn: urn("HttpReady"), Inputs: property.NewMap(inputs)})
		if err != nil || len(chk.Failures) > 0 {
			t.Fatalf("%s: check: %v %v", tc.url, err, chk.Failures)
		}
		if got := chk.Inputs.Get("url").Secret(); got != tc.secret {
			t.Errorf("%s: the checked url is secret=%v, want %v", tc.url, got, tc.secret)
		}
		if !chk.Inputs.Get("headers").Secret() && !chk.Inputs.Get("headers").HasSecrets() {
			t.Errorf("%s: the checked headers are not secret", tc.url)
		}
		r := await(t, createAsync(t, s, "HttpReady", inputs), 30*time.Second)
		if r.err != nil {
			t.Fatalf("%s: the gate failed although the server accepts its headers: %v", tc.url, r.err)
		}
		if got := r.resp.Properties.Get("url").Secret(); got != tc.secret {
			t.Errorf("%s: the url output is secret=%v, want %v", tc.url, got, tc.secret)
		}
		if h := r.resp.Properties.Get("headers"); !h.Secret() && !h.HasSecrets() {
			t.Errorf("%s: the headers output is not secret", tc.url)
		}
		for _, leak := range []string{password, token, bearer} {
			if strings.Contains(r.resp.ID, leak) {
				t.Errorf("the ID holds %q: %s", leak, r.resp.ID)
			}
		}
		read, err := s.Read(p.ReadRequest{ID: r.resp.ID, Urn: urn("HttpReady"), Properties: r.resp.Properties, Inputs: chk.Inputs})
		if err != nil {
			t.Fatalf("%s: refresh: %v", tc.url, err)
		}
		if read.Properties.Get("url").Secret() != tc.secret || read.Inputs.Get("url").Secret() != tc.secret {
			t.Errorf("%s: after refresh the url is secret=%v (outputs) and %v (inputs), want %v", tc.url,
				read.Properties.Get("url").Secret(), read.Inputs.Get("url").Secret(), tc.secret)
		}
	}

	// Without the header the server refuses: the headers are what made the gate pass, and the
	// timeout says what it saw without quoting them.
	r := await(t, createAsync(t, s, "HttpReady", props("url", srv.URL+"/health", "headers",
		property.New(property.NewMap(map[string]property.Value{"Authorization": property.New("Bearer wrong-" + bearer)})),
		"consecutiveSuccesses", 1, "timeout", "2s")), 30*time.Second)
	if r.err == nil || !strings.Contains(r.err.Error(), "401") {
		t.Fatalf("a refused bearer token passed or failed for another reason: %v", r.err)
	}
	if strings.Contains(r.err.Error(), bearer) {
		t.Errorf("the error quotes the header: %v", r.err)
	}
}

// TestCredentialInputChecks: headers are refused with a service (the API server would take the
// Authorization for itself) and when malformed, without quoting a value; an image reference
// pasted with a user part is refused without quoting it (issue 51).
func TestCredentialInputChecks(t *testing.T) {
	s := newUnconfiguredServer(t)
	hdr := func(k, v string) property.Value {
		return property.New(property.NewMap(map[string]property.Value{k: property.New(v).WithSecret(true)}))
	}
	for _, tc := range []struct {
		typ    string
		inputs map[string]property.Value
		field  string
	}{
		{"HttpReady", props("service", props("namespace", "ns", "name", "web"), "headers", hdr("Authorization", "Bearer SECRETVALUE51")), "headers"},
		{"HttpReady", props("url", "http://127.0.0.1:1/", "headers", hdr("Bad Name", "SECRETVALUE51")), "headers"},
		{"HttpReady", props("url", "http://127.0.0.1:1/", "headers", hdr("X-Token", "SECRETVALUE51\r\nX-Injected: 1")), "headers"},
		{"ImageReady", props("image", "admin:SECRETVALUE51@registry.example.com/app:v1"), "image"},
		{"ImageReady", props("image", "https://admin:SECRETVALUE51@registry.example.com/app:v1"), "image"},
	} {
		chk, err := s.Check(p.CheckRequest{Urn: urn(tc.typ), Inputs: property.NewMap(tc.inputs)})
		if err != nil {
			t.Fatal(err)
		}
		if len(chk.Failures) == 0 {
			t.Errorf("%s %v: passed Check", tc.typ, tc.inputs)
			continue
		}
		all := ""
		for _, f := range chk.Failures {
			all += f.Property + ": " + f.Reason + "\n"
			if f.Property == "image" || f.Property == "url" || f.Property == "headers" {
				// The engine prints `property <key> value <the input's value> has a problem`.
				t.Errorf("%s: a failure names property %s, whose value the engine would print: %s", tc.typ, f.Property, f.Reason)
			}
		}
		if !strings.Contains(all, tc.field) {
			t.Errorf("%s: the failures do not name %s: %s", tc.typ, tc.field, all)
		}
		if strings.Contains(all, "SECRETVALUE51") {
			t.Errorf("%s: a failure quotes the credential: %s", tc.typ, all)
		}
	}
}
