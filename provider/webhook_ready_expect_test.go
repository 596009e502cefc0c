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
	injector.Mode.Store("inject:sidecar")
	r = await(t, ch, 30*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if injector.AnsweredIn("inject:sidecar") == 0 {
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

func ptr[T any](v T) *T { return &v }
