package provider

import (
	"context"
	"strings"
	"testing"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

// `expect` on WebhookReady and AdmissionReady: the mutation is the proof of a failurePolicy
// Ignore injector, which the API server skips without a word while it is down.

const sidecarExpect = "object.spec.containers.exists(c, c.name == 'sidecar')"

func podIn(ns string) map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"generateName": "probe-", "namespace": ns},
		"spec":     map[string]any{"containers": []any{map[string]any{"name": "app", "image": "readiness.invalid/app"}}}}
}

// dryRunPod dry-run creates a Pod in ns and returns its container names.
func dryRunPod(t *testing.T, ns string) []string {
	t.Helper()
	o := &unstructured.Unstructured{Object: podIn(ns)}
	out, err := testenv.Resource(t, o).Create(context.Background(), o, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		t.Fatalf("dry-run of a Pod: %v", err)
	}
	var names []string
	cs, _, _ := unstructured.NestedSlice(out.Object, "spec", "containers")
	for _, c := range cs {
		names = append(names, c.(map[string]any)["name"].(string))
	}
	return names
}

func TestWebhookReadyExpectProvesALateIgnoreInjector(t *testing.T) {
	ns := testenv.Namespace(t, "inject")
	testenv.ServiceAccountReady(t, ns)
	cfg := "injector-" + ns
	injector := testenv.NewWebhook(t)
	injector.RegisterPods(t, "MutatingWebhookConfiguration", cfg, "Ignore", ns)
	// The gate cannot call the injector itself (as behind a forbidden service proxy): only the
	// mutation can prove it.
	injector.RefuseDirect.Store(true)
	// The trap: while the injector is down the API server admits the Pod unmutated.
	if got := dryRunPod(t, ns); strings.Join(got, ",") != "app" {
		t.Fatalf("containers = %v; want the Pod admitted unmutated while its Ignore injector is down", got)
	}
	s := newServer(t)
	gate := func(timeout string) <-chan gateResult {
		return createAsync(t, s, "WebhookReady", props("mutatingWebhookConfiguration", cfg, "probe", toProperty(podIn(ns)),
			"expect", sidecarExpect, "timeout", timeout))
	}
	r := await(t, gate("3s"), 30*time.Second)
	if r.err == nil {
		t.Fatalf("passed while the Ignore injector is down: %v", r.resp.Properties)
	}
	for _, want := range []string{"did not satisfy expect", "spec.containers [app]"} {
		if !strings.Contains(r.err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, r.err)
		}
	}

	ch := gate("60s")
	mustNotReturn(t, ch, 1500*time.Millisecond) // down: admitted unmutated
	injector.Mode.Store("patch")                // answers, but patches something else
	injector.Start(t)
	mustNotReturn(t, ch, 1500*time.Millisecond)
	calls := injector.Calls.Load()
	injector.Mode.Store("inject:sidecar")
	r = await(t, ch, 30*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if injector.Calls.Load() == calls {
		t.Error("passed without the injector answering")
	}
	if out := r.resp.Properties; !out.Get("probed").AsBool() || out.Get("failurePolicy").AsString() != "Ignore" {
		t.Errorf("outputs = %v", out)
	}

	// Another component's mutating webhook intercepts the same Pods and adds another container:
	// expect stays false while the injector is down.
	injector.Stop()
	other := testenv.NewWebhook(t)
	other.Mode.Store("inject:other-proxy")
	other.RegisterPods(t, "MutatingWebhookConfiguration", "other-"+ns, "Ignore", ns)
	other.Start(t)
	ch = gate("60s")
	mustNotReturn(t, ch, 1500*time.Millisecond)
	// Now the other one adds the very container expect looks for: the mutation can no longer be
	// told apart, so the injector needs a direct answer, and it is down.
	other.Mode.Store("inject:sidecar")
	mustNotReturn(t, ch, 1500*time.Millisecond)
	injector.Start(t) // serving, but the gate still cannot call it directly
	mustNotReturn(t, ch, 1500*time.Millisecond)
	injector.RefuseDirect.Store(false)
	r = await(t, ch, 30*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
}

func TestWebhookReadyExpectCheck(t *testing.T) {
	s := newServer(t)
	pod := toProperty(podIn("default"))
	for _, tc := range []struct {
		name   string
		inputs map[string]property.Value
		reason string
	}{
		{"no probe", props("mutatingWebhookConfiguration", "x", "expect", sidecarExpect), "expect needs `probe`"},
		{"validating", props("validatingWebhookConfiguration", "x", "probe", pod, "expect", sidecarExpect), "do not mutate"},
		{"holds already", props("mutatingWebhookConfiguration", "x", "probe", pod, "expect", "object.spec.containers.exists(c, c.name == 'app')"), "already holds"},
		{"not bool", props("mutatingWebhookConfiguration", "x", "probe", pod, "expect", "object.metadata.name"), "must return bool"},
		{"syntax", props("mutatingWebhookConfiguration", "x", "probe", pod, "expect", "object.("), "invalid CEL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chk, err := s.Check(p.CheckRequest{Urn: urn("WebhookReady"), Inputs: property.NewMap(tc.inputs)})
			if err != nil {
				t.Fatal(err)
			}
			if len(chk.Failures) != 1 || chk.Failures[0].Property != "expect" || !strings.Contains(chk.Failures[0].Reason, tc.reason) {
				t.Errorf("failures = %v, want one on expect saying %q", chk.Failures, tc.reason)
			}
		})
	}
	chk, err := s.Check(p.CheckRequest{Urn: urn("WebhookReady"), Inputs: property.NewMap(props("mutatingWebhookConfiguration", "x", "probe", pod, "expect", sidecarExpect))})
	if err != nil || len(chk.Failures) != 0 {
		t.Errorf("check = %v, %v", chk.Failures, err)
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

func ptr[T any](v T) *T { return &v }
