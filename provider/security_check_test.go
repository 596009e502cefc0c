package provider

import (
	"fmt"
	"strings"
	"testing"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi/sdk/v3/go/property"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/admission"
)

// engineText is what the Pulumi engine prints for a Check failure (pkg/v3
// resource/deploy/step_generator.go, issueCheckFailures): on a top-level input it prints that
// input's value, secret or not. Every string inside the value is spelled out, as %v does.
func engineText(inputs property.Map, f p.CheckFailure) string {
	if f.Property == "" {
		return "has a problem: " + f.Reason
	}
	v, _ := inputs.GetOk(f.Property)
	return fmt.Sprintf("property %s value %s has a problem: %s", f.Property, allStrings(v), f.Reason)
}

func allStrings(v property.Value) string {
	var b strings.Builder
	var walk func(v property.Value)
	walk = func(v property.Value) {
		switch {
		case v.IsString():
			b.WriteString(v.AsString() + " ")
		case v.IsArray():
			for _, e := range v.AsArray().All {
				walk(e)
			}
		case v.IsMap():
			for k, e := range v.AsMap().All {
				b.WriteString(k + " ")
				walk(e)
			}
		}
	}
	walk(v)
	return b.String()
}

// checkMessages runs Check and returns every failure as the engine would print it.
func checkMessages(t *testing.T, s interface {
	Check(p.CheckRequest) (p.CheckResponse, error)
}, typ string, inputs map[string]property.Value) []string {
	t.Helper()
	m := property.NewMap(inputs)
	chk, err := s.Check(p.CheckRequest{Urn: urn(typ), Inputs: m})
	var out []string
	if err != nil {
		out = append(out, "error: "+err.Error())
	}
	for _, f := range chk.Failures {
		out = append(out, engineText(m, f))
	}
	return out
}

// TestCheckNeverPrintsSecretValues: a Check failure on an input that may hold secret data never
// lets the engine print the value (issue 22, item 1), while the failure still names the field.
func TestCheckNeverPrintsSecretValues(t *testing.T) {
	const marker = "hunter2-marker"
	secretProbe := toProperty(map[string]any{"kind": "Secret", "metadata": map[string]any{"name": "p"},
		"stringData": map[string]any{"password": marker}})
	cases := []struct {
		name, typ string
		inputs    map[string]property.Value
		field     string // the failure must name it
	}{
		{"WebhookReady probe without apiVersion", "WebhookReady",
			props("validatingWebhookConfiguration", "v", "probe", secretProbe), "probe"},
		{"WebhookReady probe without apiVersion, as a secret", "WebhookReady",
			props("validatingWebhookConfiguration", "v", "probe", secretProbe.WithSecret(true)), "probe"},
		{"WebhookReady probe as a List", "WebhookReady",
			props("validatingWebhookConfiguration", "v", "probe", toProperty(map[string]any{"apiVersion": "v1", "kind": "List",
				"items": []any{map[string]any{"kind": "Secret", "stringData": map[string]any{"password": marker}}}})), "List"},
		{"HelmReleaseReady probe without kind", "HelmReleaseReady",
			props("name", "r", "probe", toProperty(map[string]any{"apiVersion": "v1", "data": map[string]any{"k": marker}})), "probe"},
		{"AdmissionReady objects of the wrong type, as a secret", "AdmissionReady",
			props("objects", property.New(marker).WithSecret(true)), "objects"},
		{"HttpReady url with credentials, not http", "HttpReady",
			props("url", "ftp://alice:"+marker+"@example.test/?token="+marker), "url"},
		{"HttpReady url as a secret, not a URL", "HttpReady",
			props("url", property.New("::"+marker).WithSecret(true)), "url"},
		{"ResourceReady value as a secret, with regex too", "ResourceReady",
			props("apiVersion", "v1", "kind", "ConfigMap", "name", "c", "jsonPath", "{.data.x}",
				"value", property.New(marker).WithSecret(true), "regex", "("), "regex"},
		{"ResourceReady cel quoting a secret", "ResourceReady",
			props("apiVersion", "v1", "kind", "ConfigMap", "name", "c", "cel", property.New("object.data.x == '"+marker+"' &&").WithSecret(true)), "cel"},
	}
	s := newUnconfiguredServer(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			msgs := checkMessages(t, s, tc.typ, tc.inputs)
			if len(msgs) == 0 {
				t.Fatal("Check accepted the input")
			}
			joined := strings.Join(msgs, "\n")
			if strings.Contains(joined, marker) {
				t.Errorf("a secret value reaches the engine's message:\n%s", joined)
			}
			if !strings.Contains(joined, tc.field) {
				t.Errorf("the message does not name %s:\n%s", tc.field, joined)
			}
		})
	}
}

// TestCheckManifestsAtPreview: WebhookReady's probe is checked at preview as AdmissionReady's
// objects are: what the API server would refuse on every try fails at once, naming why. The
// near misses (valid probes) pass.
func TestCheckManifestsAtPreview(t *testing.T) {
	obj := func(kv ...any) property.Value {
		m := map[string]any{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return toProperty(m)
	}
	meta := func(kv ...any) map[string]any {
		m := map[string]any{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	bad := []struct {
		name  string
		probe property.Value
		want  string
	}{
		{"namespace with a path", obj("apiVersion", "v1", "kind", "ConfigMap", "metadata", meta("namespace", "../x")), "metadata.namespace"},
		{"metadata not a map", obj("apiVersion", "v1", "kind", "ConfigMap", "metadata", "p5"), "metadata must be an object"},
		{"name with a slash", obj("apiVersion", "v1", "kind", "ConfigMap", "metadata", meta("name", "a/../b")), "metadata.name"},
		{"kind List", obj("apiVersion", "v1", "kind", "List", "items", []any{}), "list of objects"},
		{"kind missing", obj("apiVersion", "v1"), "kind is missing"},
		{"too large", obj("apiVersion", "v1", "kind", "ConfigMap", "data", meta("k", strings.Repeat("x", admission.MaxManifestBytes+1))), "Request entity too large"},
	}
	s := newUnconfiguredServer(t)
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			msgs := checkMessages(t, s, "WebhookReady", props("validatingWebhookConfiguration", "v", "probe", tc.probe))
			if len(msgs) != 1 || !strings.Contains(msgs[0], tc.want) {
				t.Errorf("Check = %q, want one failure saying %q", msgs, tc.want)
			}
			if strings.Contains(strings.Join(msgs, ""), "%!") {
				t.Errorf("a formatting error in %q", msgs)
			}
		})
	}
	good := []property.Value{
		obj("apiVersion", "v1", "kind", "ConfigMap"), // no metadata: a probe gets generateName
		obj("apiVersion", "v1", "kind", "ConfigMap", "metadata", meta("name", "probe", "namespace", "default")),
		obj("apiVersion", "rbac.authorization.k8s.io/v1", "kind", "ClusterRole", "metadata", meta("name", "system:probe")),
		obj("apiVersion", "v1", "kind", "Pod", "metadata", meta("generateName", "probe-")),
	}
	for i, pr := range good {
		if msgs := checkMessages(t, s, "WebhookReady", props("validatingWebhookConfiguration", "v", "probe", pr)); len(msgs) > 0 {
			t.Errorf("good probe %d refused: %q", i, msgs)
		}
	}
	// AdmissionReady: a kind-less object said plainly (was `%!q(<nil>)`), and a List refused.
	for _, tc := range []struct {
		o    property.Value
		want string
	}{
		{obj("apiVersion", "v1", "metadata", meta("name", "x")), "kind is missing"},
		{obj("apiVersion", "v1", "kind", "List", "metadata", meta("name", "x"), "items", []any{}), "list of objects"},
	} {
		msgs := checkMessages(t, s, "AdmissionReady", props("objects", property.New([]property.Value{tc.o})))
		if len(msgs) != 1 || !strings.Contains(msgs[0], tc.want) || strings.Contains(msgs[0], "%!") {
			t.Errorf("AdmissionReady Check = %q, want %q", msgs, tc.want)
		}
	}
}

// TestCheckNumbersAndTypes: whole numbers, ranges and types said in the schema's words.
func TestCheckNumbersAndTypes(t *testing.T) {
	s := newUnconfiguredServer(t)
	cases := []struct {
		name, typ string
		inputs    map[string]property.Value
		want      string
	}{
		{"NodesReady minCount 1.5", "NodesReady", props("minCount", property.New(1.5)), "whole number"},
		{"ResourceReady minCount 0", "ResourceReady", props("apiVersion", "v1", "kind", "Pod", "selector", "app=x", "minCount", 0), "at least 1"},
		{"HttpReady port 70000", "HttpReady", props("service", props("namespace", "n", "name", "s", "port", "70000")), "service.port"},
		{"AdmissionReady objects a string", "AdmissionReady", props("objects", "x"), "a list of objects"},
		{"WebhookReady service port 443.5", "WebhookReady", props("service", props("namespace", "n", "name", "s", "port", property.New(443.5))), "service.port must be a whole number"},
		{"HelmReleaseReady without name", "HelmReleaseReady", props("namespace", "n"), "name is required"},
		{"timeout 1ns", "NodesReady", props("timeout", "1ns"), "too short"},
		{"timeout overflowing", "NodesReady", props("timeout", "9999999999h"), "too long"},
		{"stableFor overflowing", "NodesReady", props("stableFor", "9999999999h"), "too long"},
		{"WebhookReady service port 70000", "WebhookReady", props("service", props("namespace", "n", "name", "s", "port", 70000)), "service.port"},
		{"ServiceReady port 0", "ServiceReady", props("name", "s", "port", "0"), "port"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			msgs := checkMessages(t, s, tc.typ, tc.inputs)
			joined := strings.Join(msgs, "\n")
			if !strings.Contains(joined, tc.want) {
				t.Errorf("Check = %q, want %q", msgs, tc.want)
			}
			if strings.Contains(joined, "interface {}") || strings.Contains(joined, "provider.") {
				t.Errorf("Go type names in %q", joined)
			}
		})
	}
}

// TestHttpReadyServiceProxyChecks: service.path may not leave the Service's proxy path, in any
// spelling; scheme and port are checked too. Near misses that are fine pass.
func TestHttpReadyServiceProxyChecks(t *testing.T) {
	s := newUnconfiguredServer(t)
	svc := func(kv ...any) map[string]property.Value {
		return props("service", props(append([]any{"namespace", "n", "name", "web"}, kv...)...))
	}
	bad := []struct {
		inputs map[string]property.Value
		want   string
	}{
		{svc("path", "../../../secrets/db"), "service.path"},
		{svc("path", "/../../../secrets/db"), "service.path"},
		{svc("path", "/healthz/../../../../secrets/db"), "service.path"},
		{svc("path", "/%2e%2e/%2e%2e/secrets/db"), "service.path"},
		{svc("path", "/%252e%252e/secrets"), "service.path"},
		{svc("path", `/..\..\secrets`), "service.path"},
		{svc("path", "/a/./b"), "service.path"},
		{svc("path", "/x?y=../../z"), "service.path"},
		{svc("scheme", "gopher"), "service.scheme"},
		{svc("port", "0"), "service.port"},
		{svc("port", "65536"), "service.port"},
		{svc("port", "not a port!"), "service.port"},
	}
	for _, tc := range bad {
		msgs := checkMessages(t, s, "HttpReady", tc.inputs)
		if len(msgs) != 1 || !strings.Contains(msgs[0], tc.want) {
			t.Errorf("Check(%v) = %q, want one failure on %s", tc.inputs["service"], msgs, tc.want)
		}
	}
	for _, ok := range []map[string]property.Value{
		svc("path", "/healthz"), svc("path", "/a/b.c/..d/e..", "port", "https", "scheme", "https"), svc("port", "8080"), svc(),
	} {
		if msgs := checkMessages(t, s, "HttpReady", ok); len(msgs) > 0 {
			t.Errorf("Check(%v) refused a good service: %q", ok["service"], msgs)
		}
	}
}

// TestResourceReadySecretValueChecksRefused: the cache keeps no Secret values, so a value or
// regex on a Secret's data can never hold: refused at preview, saying why. Metadata checks and
// presence checks on Secrets, and value checks on other kinds, stay allowed.
func TestResourceReadySecretValueChecksRefused(t *testing.T) {
	s := newUnconfiguredServer(t)
	secret := func(kv ...any) map[string]property.Value {
		return props(append([]any{"apiVersion", "v1", "kind", "Secret", "name", "db"}, kv...)...)
	}
	for _, in := range []map[string]property.Value{
		secret("jsonPath", "{.data.password}", "value", "aHVudGVyMg=="),
		secret("jsonPath", ".data.password", "regex", "^aH"),
		secret("jsonPath", "{..password}", "value", "x"),
		secret("jsonPath", "{.data.*}", "value", "x"),
		secret("jsonPath", "{.stringData.password}", "value", "x"),
	} {
		msgs := checkMessages(t, s, "ResourceReady", in)
		if len(msgs) != 1 || !strings.Contains(msgs[0], "never kept") {
			t.Errorf("Check(%v) = %q, want a refusal saying values are never kept", in["jsonPath"], msgs)
		}
	}
	for _, in := range []map[string]property.Value{
		secret("jsonPath", "{.data.password}"),
		secret("jsonPath", "{.metadata.labels.app}", "value", "db"),
		secret("jsonPath", "{.type}", "value", "kubernetes.io/tls"),
		props("apiVersion", "v1", "kind", "ConfigMap", "name", "c", "jsonPath", "{.data.password}", "value", "x"),
	} {
		if msgs := checkMessages(t, s, "ResourceReady", in); len(msgs) > 0 {
			t.Errorf("Check(%v) = %q, want no failure", in["jsonPath"], msgs)
		}
	}
}
