package provider

import (
	"context"
	"encoding/base64"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

// toProperty converts a decoded manifest value to a Pulumi property value, as the engine sends it.
func toProperty(v any) property.Value {
	switch x := v.(type) {
	case map[string]any:
		m := map[string]property.Value{}
		for k, e := range x {
			m[k] = toProperty(e)
		}
		return property.New(property.NewMap(m))
	case []any:
		a := make([]property.Value, len(x))
		for i, e := range x {
			a[i] = toProperty(e)
		}
		return property.New(a)
	case string:
		return property.New(x)
	case bool:
		return property.New(x)
	case int64:
		return property.New(float64(x))
	case float64:
		return property.New(x)
	case nil:
		return property.New(property.Null)
	}
	panic(fmt.Sprintf("toProperty: %T", v))
}

// manifests is the `objects` input for YAML documents.
func manifests(t *testing.T, docs ...string) property.Value {
	t.Helper()
	var out []property.Value
	for _, d := range docs {
		out = append(out, toProperty(testenv.Object(t, d).Object))
	}
	return property.New(out)
}

func widgetIn(group, ns, name string) string {
	return fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata: {name: %s, namespace: %s}\nspec: {size: 1, secretStoreRef: {name: vault}}", group, name, ns)
}

func assertNotPersisted(t *testing.T, doc string) {
	t.Helper()
	o := testenv.Object(t, doc)
	if _, err := testenv.Resource(t, o).Get(context.Background(), o.GetName(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("%s %s: want NotFound (a dry-run persists nothing), got %v", o.GetKind(), o.GetName(), err)
	}
}

// Field report 001 with AdmissionReady: the ExternalSecrets are dry-run before they are created.
// While the webhook does not serve (connection refused) the gate waits; once it serves, both
// objects are admitted twice in a row and nothing was persisted.
func TestAdmissionReadyWaitsForALateWebhook(t *testing.T) {
	group := widgetCRD(t)
	wh := testenv.NewWebhook(t)
	cfg := "adm-" + strings.Split(group, ".")[0]
	wh.Register(t, cfg, group)
	hook := "validating." + cfg + "." + group
	docs := []string{widgetIn(group, "default", "db"), widgetIn(group, "default", "api")}

	s := newServer(t)
	ch := createAsync(t, s, "AdmissionReady", props("objects", manifests(t, docs...), "timeout", "60s"))
	mustNotReturn(t, ch, 1500*time.Millisecond) // failed calling webhook: connection refused
	wh.Mode.Store("error")
	wh.Start(t)
	mustNotReturn(t, ch, time.Second) // failed calling webhook: it answers 500
	wh.Mode.Store("allow")
	r := await(t, ch, 30*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	out := r.resp.Properties
	if got := out.Get("admitted").AsNumber(); got != 2 {
		t.Errorf("admitted = %v", got)
	}
	if got := outStrings(t, out, "mutated"); len(got) != 0 {
		t.Errorf("mutated = %v, want none (no mutating webhook)", got)
	}
	if got := outStrings(t, out, "deniers"); !reflect.DeepEqual(got, []string{hook}) {
		t.Errorf("deniers = %v, want the webhook that could not be called while the gate waited", got)
	}
	if wh.Calls.Load() < 4 {
		t.Errorf("the webhook answered %d calls; two rounds of two objects need 4", wh.Calls.Load())
	}
	for _, d := range docs {
		assertNotPersisted(t, d)
	}

	// The webhook stops answering properly (500): refresh drops the gate; near miss of the above.
	inputs := props("objects", manifests(t, docs...), "timeout", "60s")
	wh.Mode.Store("error")
	read, err := s.Read(p.ReadRequest{ID: r.resp.ID, Urn: urn("AdmissionReady"), Properties: r.resp.Properties, Inputs: property.NewMap(inputs)})
	if err != nil {
		t.Fatal(err)
	}
	if read.ID != "" {
		t.Errorf("refresh kept a gate whose webhook answers 500: %v", read.Properties)
	}
	wh.Mode.Store("allow")
	read, err = s.Read(p.ReadRequest{ID: r.resp.ID, Urn: urn("AdmissionReady"), Properties: r.resp.Properties, Inputs: property.NewMap(inputs)})
	if err != nil {
		t.Fatal(err)
	}
	if read.ID != r.resp.ID {
		t.Errorf("refresh dropped a gate whose objects are admitted")
	}
}

// A denial is a verdict: the gate fails at once, quoting it and naming the webhook.
func TestAdmissionReadyDenialFailsAtOnce(t *testing.T) {
	group := widgetCRD(t)
	wh := testenv.NewWebhook(t)
	cfg := "admdeny-" + strings.Split(group, ".")[0]
	wh.Register(t, cfg, group)
	wh.Mode.Store("deny")
	wh.Start(t)
	s := newServer(t)
	r := await(t, createAsync(t, s, "AdmissionReady", props("objects", manifests(t, widgetIn(group, "default", "db")), "timeout", "60s")), 15*time.Second)
	if r.err == nil {
		t.Fatal("a denied object passed")
	}
	for _, want := range []string{`admission webhook "validating.` + cfg + "." + group + `"`, "spec.secretStoreRef is required", "objects[0] (Widget default/db)"} {
		if !strings.Contains(r.err.Error(), want) {
			t.Errorf("error %q does not say %q", r.err, want)
		}
	}
	if strings.Contains(r.err.Error(), "timed out") {
		t.Errorf("a denial must fail at once, not time out: %v", r.err)
	}
}

// An invalid object is a verdict too; a kind whose CRD comes later and a namespace created
// later are waited for.
func TestAdmissionReadyInvalidFailsLateKindAndNamespaceWait(t *testing.T) {
	s := newServer(t)
	bad := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: Not_A_Name, namespace: default}\ndata: {a: b}"
	r := await(t, createAsync(t, s, "AdmissionReady", props("objects", manifests(t, bad), "timeout", "60s")), 15*time.Second)
	if r.err == nil || !strings.Contains(r.err.Error(), "invalid") || !strings.Contains(r.err.Error(), "objects[0] (ConfigMap default/Not_A_Name)") ||
		strings.Contains(r.err.Error(), "timed out") {
		t.Fatalf("want an at-once failure naming the invalid object, got %v", r.err)
	}

	group := uniqueGroup(t)
	ns := fmt.Sprintf("adm-late-%d", time.Now().UnixNano()%1_000_000_000)
	docs := []string{widgetIn(group, ns, "w"), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm, namespace: " + ns + "}\ndata: {a: b}"}
	ch := createAsync(t, s, "AdmissionReady", props("objects", manifests(t, docs...), "consecutive", 1, "timeout", "60s"))
	mustNotReturn(t, ch, time.Second) // no matches for kind Widget; namespace not found
	testenv.Apply(t, testenv.CRD(group, "Widget", "widgets"))
	mustNotReturn(t, ch, 1500*time.Millisecond) // the namespace does not exist yet
	testenv.Apply(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: "+ns+"}")
	t.Cleanup(func() {
		_ = testenv.Dynamic(t).Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	r = await(t, ch, 30*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := r.resp.Properties.Get("admitted").AsNumber(); got != 2 {
		t.Errorf("admitted = %v", got)
	}
	for _, d := range docs {
		assertNotPersisted(t, d)
	}
}

// `expect` false waits (and times out saying so); a mutating webhook that adds the label makes it
// true, and the object is reported in `mutated`.
func TestAdmissionReadyExpectAndMutation(t *testing.T) {
	group := widgetCRD(t)
	expect := "has(object.metadata.labels) && object.metadata.labels['readiness.test/mutated'] == 'yes'"
	s := newServer(t)
	obj := manifests(t, widgetIn(group, "default", "m"))
	// The first request for a new CRD's objects may take the API server a couple of seconds.
	r := await(t, createAsync(t, s, "AdmissionReady", props("objects", obj, "expect", expect, "timeout", "6s")), 15*time.Second)
	if r.err == nil || !strings.Contains(r.err.Error(), "timed out") || !strings.Contains(r.err.Error(), "did not satisfy expect") {
		t.Fatalf("want a timeout saying the result did not satisfy expect, got %v", r.err)
	}

	wh := testenv.NewWebhook(t)
	wh.RegisterAs(t, "MutatingWebhookConfiguration", "admmut-"+strings.Split(group, ".")[0], "Fail", group, "widgets")
	wh.Mode.Store("patch")
	wh.Start(t)
	r = await(t, createAsync(t, s, "AdmissionReady", props("objects", obj, "expect", expect, "timeout", "30s")), 30*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := outStrings(t, r.resp.Properties, "mutated"); !reflect.DeepEqual(got, []string{"Widget/default/m"}) {
		t.Errorf("mutated = %v", got)
	}
	assertNotPersisted(t, widgetIn(group, "default", "m"))
}

// A Secret's data never appears in errors, status lines or outputs, even when a webhook's denial
// quotes the whole object.
func TestAdmissionReadySecretDataNeverLeaks(t *testing.T) {
	ns := testenv.Namespace(t, "admsec")
	const marker = "s3cr3t-marker-value"
	wh := testenv.NewWebhook(t)
	cfg := "admsec-" + ns
	doc := strings.Replace(wh.ConfigurationFor("ValidatingWebhookConfiguration", cfg, "", "secrets"),
		"  rules:", "  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: "+ns+"}}\n  rules:", 1)
	doc = strings.Replace(doc, "- name: validating."+cfg+".\n", "- name: validating."+cfg+".secrets.test\n", 1)
	testenv.Apply(t, doc)
	t.Cleanup(func() {
		_ = testenv.Dynamic(t).Resource(vwcResource).Delete(context.Background(), cfg, metav1.DeleteOptions{})
	})
	lines := statusLines(t)
	secret := fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: db, namespace: %s}\nstringData: {password: %s}\ndata: {token: %s}",
		ns, marker, base64.StdEncoding.EncodeToString([]byte(marker+"-2")))
	leaks := func(s string) bool {
		return strings.Contains(s, marker) || strings.Contains(s, base64.StdEncoding.EncodeToString([]byte(marker)))
	}
	wh.Mode.Store("deny-echo")
	wh.Start(t)
	s := newServer(t)
	r := await(t, createAsync(t, s, "AdmissionReady", props("objects", manifests(t, secret), "timeout", "30s")), 15*time.Second)
	if r.err == nil || !strings.Contains(r.err.Error(), "was refused by \"validating."+cfg+".secrets.test\"") {
		t.Fatalf("want the denial naming the webhook, got %v", r.err)
	}
	if leaks(r.err.Error()) {
		t.Errorf("the error quotes the Secret's data: %v", r.err)
	}
	// A denial's text may quote the Secret in any escaping (a PEM key as \n-joined JSON): it is
	// never shown for a Secret, only who refused it and why.
	if !strings.Contains(r.err.Error(), "the message is not shown") || strings.Contains(r.err.Error(), "<redacted>") {
		t.Errorf("the denial's text should be left out for a Secret: %v", r.err)
	}
	if strings.Contains(r.err.Error(), "(, ") {
		t.Errorf("a denial without a reason reads as an empty one: %v", r.err)
	}
	wh.Mode.Store("allow")
	r = await(t, createAsync(t, s, "AdmissionReady", props("objects", manifests(t, secret), "expect", "object.data.password != ''", "timeout", "30s")), 15*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	for _, k := range []string{"admitted", "mutated", "deniers"} {
		if v := fmt.Sprint(r.resp.Properties.Get(k)); leaks(v) {
			t.Errorf("output %s leaks the Secret's data: %s", k, v)
		}
	}
	if got := outStrings(t, r.resp.Properties, "mutated"); len(got) != 0 {
		t.Errorf("mutated = %v: stringData turned into data is not a mutation", got)
	}
	for _, l := range lines() {
		if leaks(l) {
			t.Errorf("a log line leaks the Secret's data: %s", l)
		}
	}
	assertNotPersisted(t, secret)
}

func TestAdmissionReadyCheck(t *testing.T) {
	s := newServer(t)
	cm := func(name string) property.Value {
		return toProperty(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name}})
	}
	for _, tc := range []struct {
		name   string
		inputs map[string]property.Value
		field  string
		reason string
	}{
		{"no objects", props("objects", property.New([]property.Value{})), "objects", "at least one"},
		{"no name", props("objects", property.New([]property.Value{cm("a"), toProperty(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{}})})), "objects[1]", "objects[1]: metadata.name"},
		{"no apiVersion", props("objects", property.New([]property.Value{toProperty(map[string]any{"kind": "ConfigMap", "metadata": map[string]any{"name": "a"}})})), "objects[0]", "apiVersion"},
		{"no kind", props("objects", property.New([]property.Value{toProperty(map[string]any{"apiVersion": "v1", "metadata": map[string]any{"name": "a"}})})), "objects[0]", "kind"},
		{"consecutive 0", props("objects", property.New([]property.Value{cm("a")}), "consecutive", 0), "consecutive", "at least 1"},
		{"expect not bool", props("objects", property.New([]property.Value{cm("a")}), "expect", "object.metadata.name"), "expect", "must return bool"},
		{"expect syntax", props("objects", property.New([]property.Value{cm("a")}), "expect", "object.("), "expect", "invalid CEL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chk, err := s.Check(p.CheckRequest{Urn: urn("AdmissionReady"), Inputs: property.NewMap(tc.inputs)})
			if err != nil {
				t.Fatal(err)
			}
			if len(chk.Failures) != 1 || chk.Failures[0].Property != tc.field || !strings.Contains(chk.Failures[0].Reason, tc.reason) {
				t.Errorf("failures = %v, want one on %s saying %q", chk.Failures, tc.field, tc.reason)
			}
		})
	}
	// generateName is a name; a computed object is judged when known.
	chk, err := s.Check(p.CheckRequest{Urn: urn("AdmissionReady"), Inputs: property.NewMap(props("objects", property.New([]property.Value{
		toProperty(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"generateName": "a-"}}),
		property.New(property.Computed),
	})))})
	if err != nil || len(chk.Failures) != 0 {
		t.Errorf("check = %v, %v", chk.Failures, err)
	}
}

// TestWebhookReadySecretProbeLeaksNothing: a WebhookReady probe may be a Secret; a webhook whose
// denial quotes the object must not put its data into progress lines, errors or outputs.
func TestWebhookReadySecretProbeLeaksNothing(t *testing.T) {
	ns := testenv.Namespace(t, "whsec")
	const marker = "pr0be-s3cr3t-marker"
	wh := testenv.NewWebhook(t)
	cfg := "whsec-" + ns
	hook := "validating." + cfg + ".secrets.test"
	doc := strings.Replace(wh.ConfigurationFor("ValidatingWebhookConfiguration", cfg, "", "secrets"),
		"  rules:", "  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: "+ns+"}}\n  rules:", 1)
	doc = strings.Replace(doc, "- name: validating."+cfg+".\n", "- name: "+hook+"\n", 1)
	testenv.Apply(t, doc)
	t.Cleanup(func() {
		_ = testenv.Dynamic(t).Resource(vwcResource).Delete(context.Background(), cfg, metav1.DeleteOptions{})
	})
	lines := statusLines(t)
	probe := toProperty(map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": "probe", "namespace": ns}, "stringData": map[string]any{"password": marker}})
	leaks := func(s string) bool {
		return strings.Contains(s, marker) || strings.Contains(s, base64.StdEncoding.EncodeToString([]byte(marker)))
	}
	wh.Mode.Store("deny-echo")
	wh.Start(t)
	r := await(t, createAsync(t, newServer(t), "WebhookReady", props("validatingWebhookConfiguration", cfg, "probe", probe, "timeout", "30s")), 40*time.Second)
	if r.err != nil {
		t.Fatalf("the target's own denial proves it serves: %v", r.err)
	}
	for k, v := range r.resp.Properties.All {
		if k == "probe" { // the input, echoed: stored as a Pulumi secret
			if !v.Secret() {
				t.Errorf("the probe input is echoed into the state without being a secret")
			}
			continue
		}
		if leaks(fmt.Sprint(v)) {
			t.Errorf("output %s leaks the probe's data", k)
		}
	}
	for _, l := range lines() {
		if leaks(l) {
			t.Errorf("a log line leaks the Secret probe's data: %s", l)
		}
	}
}

// AdmissionReady: a down failurePolicy Ignore webhook that intercepts an object is waited for
// (the API server admits without it); one whose rules do not match the object is not.
func TestAdmissionReadyWaitsForADownIgnoreWebhook(t *testing.T) {
	group := widgetCRD(t)
	base := strings.Split(group, ".")[0]
	wh := testenv.NewWebhook(t)
	hook := wh.RegisterAs(t, "ValidatingWebhookConfiguration", "admign-"+base, "Ignore", group, "widgets")
	// Down for good, but for other objects: not required.
	unrelated := testenv.NewWebhook(t)
	unrelated.RegisterAs(t, "ValidatingWebhookConfiguration", "admign-other-"+base, "Ignore", group, "gadgets")
	doc := widgetIn(group, "default", "w")
	// The trap: the dry-run is admitted while the Ignore webhook is down.
	o := testenv.Object(t, doc)
	if _, err := testenv.Resource(t, o).Create(context.Background(), o, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatalf("the API server was expected to admit without an Ignore webhook that is down: %v", err)
	}
	s := newServer(t)
	r := await(t, createAsync(t, s, "AdmissionReady", props("objects", manifests(t, doc), "timeout", "3s")), 30*time.Second)
	if r.err == nil {
		t.Fatalf("passed while an Ignore webhook that intercepts the object is down: %v", r.resp.Properties)
	}
	for _, want := range []string{"webhook " + hook + " (failurePolicy Ignore) intercepts it", "calling it directly", "connection refused"} {
		if !strings.Contains(r.err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, r.err)
		}
	}
	if strings.Contains(r.err.Error(), "admign-other-") {
		t.Errorf("the error names a webhook that does not intercept the object: %v", r.err)
	}

	ch := createAsync(t, s, "AdmissionReady", props("objects", manifests(t, doc), "timeout", "60s"))
	mustNotReturn(t, ch, 1500*time.Millisecond)
	wh.Mode.Store("other-uid") // something answers, but not this request
	wh.Start(t)
	mustNotReturn(t, ch, time.Second)
	wh.Mode.Store("allow")
	r = await(t, ch, 30*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := outStrings(t, r.resp.Properties, "deniers"); strings.Join(got, ",") != hook {
		t.Errorf("deniers = %v, want the Ignore webhook that could not be called while the gate waited", got)
	}
	if unrelated.Calls.Load() != 0 {
		t.Errorf("the unrelated webhook was called")
	}
}

// AdmissionReady with expect: the mutation proves an Ignore injector (which the gate cannot call
// directly here) when it is the only mutating webhook intercepting the object; with a second
// one that makes the same change, the injector needs a direct answer.
func TestAdmissionReadyExpectProvesAnIgnoreInjector(t *testing.T) {
	ns := testenv.Namespace(t, "adminj")
	testenv.ServiceAccountReady(t, ns)
	injector := testenv.NewWebhook(t)
	injector.RegisterPods(t, "MutatingWebhookConfiguration", "adminj-"+ns, "Ignore", ns)
	injector.RefuseDirect.Store(true)
	pod := podIn(ns)
	pod["metadata"] = map[string]any{"name": "web", "namespace": ns}
	objects := property.New([]property.Value{toProperty(pod)})
	s := newServer(t)
	gate := func() <-chan gateResult {
		return createAsync(t, s, "AdmissionReady", props("objects", objects, "expect", sidecarExpect, "timeout", "60s"))
	}
	ch := gate()
	mustNotReturn(t, ch, 1500*time.Millisecond) // down: admitted unmutated
	injector.Mode.Store("patch")                // answers, patches something else
	injector.Start(t)
	mustNotReturn(t, ch, 1500*time.Millisecond)
	injector.Mode.Store("inject:sidecar")
	r := await(t, ch, 30*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := outStrings(t, r.resp.Properties, "mutated"); strings.Join(got, ",") != "Pod/"+ns+"/web" {
		t.Errorf("mutated = %v", got)
	}

	injector.Stop()
	other := testenv.NewWebhook(t)
	other.Mode.Store("inject:sidecar")
	other.RegisterPods(t, "MutatingWebhookConfiguration", "adminj-other-"+ns, "Ignore", ns)
	other.Start(t)
	ch = gate()
	mustNotReturn(t, ch, 1500*time.Millisecond) // expect holds, but the mutation may be the other's
	injector.RefuseDirect.Store(false)
	injector.Start(t)
	r = await(t, ch, 30*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
}

// `retried` (autoGate sets it in front of an object's own create, which its error hook retries
// after a failed webhook call) against a real API server and a serving webhook, counted in the
// webhook's calls: one round where only a failurePolicy Fail webhook intercepts; the near misses
// keep their rounds: no `retried`, an Ignore webhook (its flap would let the create through
// unseen), an explicit `consecutive`.
func TestAdmissionReadyRetriedRounds(t *testing.T) {
	cases := []struct {
		name    string
		policy  string
		args    []any
		calls   func(n int64) bool
		wantSay string
	}{
		{"retried, a Fail webhook: one round", "Fail", []any{"retried", true}, func(n int64) bool { return n == 1 }, "1 call"},
		{"near miss: not retried, a Fail webhook: two rounds", "Fail", nil, func(n int64) bool { return n == 2 }, "2 calls"},
		{"near miss: retried, an Ignore webhook: two rounds", "Ignore", []any{"retried", true},
			func(n int64) bool { return n >= 4 }, "at least 4 calls (two rounds, each a dry run and a direct call)"},
		{"near miss: retried, but consecutive 3 set: three rounds", "Fail", []any{"retried", true, "consecutive", 3}, func(n int64) bool { return n == 3 }, "3 calls"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			group := widgetCRD(t)
			wh := testenv.NewWebhook(t)
			wh.RegisterAs(t, "ValidatingWebhookConfiguration", fmt.Sprintf("admretry-%d-%s", i, strings.Split(group, ".")[0]), c.policy, group, "widgets")
			wh.Mode.Store("allow")
			wh.Start(t)
			doc := widgetIn(group, "default", "w")
			// The API server calls it once the configuration is in its cache: wait for one admitted dry run that called it.
			o := testenv.Object(t, doc)
			for wh.Calls.Load() == 0 {
				if _, err := testenv.Resource(t, o).Create(context.Background(), o, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
					t.Fatal(err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			wh.Calls.Store(0)
			r := await(t, createAsync(t, newServer(t), "AdmissionReady", props(append([]any{"objects", manifests(t, doc), "timeout", "30s"}, c.args...)...)), 40*time.Second)
			if r.err != nil {
				t.Fatal(r.err)
			}
			if n := wh.Calls.Load(); !c.calls(n) {
				t.Errorf("the webhook answered %d calls, want %s", n, c.wantSay)
			}
			assertNotPersisted(t, doc)
		})
	}
}
