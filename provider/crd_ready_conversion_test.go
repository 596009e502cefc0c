package provider

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// conversionCRD installs c (a unique group when c.Group is empty) and returns its name. At the
// end of the test the CRD is switched to strategy None, then deleted, so that no controller of
// the shared control plane (garbage collector, namespace controller) keeps calling a webhook that
// is gone.
func conversionCRD(t *testing.T, c testenv.ConversionCRD) (name string, group string) {
	t.Helper()
	if c.Group == "" {
		c.Group = uniqueGroup(t)
	}
	if c.Kind == "" {
		c.Kind, c.Plural = "Widget", "widgets"
	}
	name = c.Plural + "." + c.Group
	testenv.Apply(t, c.Doc())
	t.Cleanup(func() {
		ri := testenv.Dynamic(t).Resource(crdGVR)
		_, _ = ri.Patch(context.Background(), name, types.MergePatchType, []byte(`{"spec":{"conversion":{"strategy":"None","webhook":null}}}`), metav1.PatchOptions{})
		_ = ri.Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name, c.Group
}

func conversionGate(t *testing.T, name, timeout string, extra ...any) <-chan gateResult {
	return createAsync(t, newServer(t), "CrdReady", props(append([]any{"names", strs(name), "timeout", timeout}, extra...)...))
}

// The pass state: a real conversion webhook on 127.0.0.1 (registered by URL, trusted through the
// CRD's caBundle) that starts serving late. No object exists, so the gate dry-run creates a
// minimal one in v2 (its required spec.count, minimum 1, built from the schema).
func TestCrdConversionWaitsForALateWebhook(t *testing.T) {
	for _, scope := range []string{"Namespaced", "Cluster"} {
		t.Run(scope, func(t *testing.T) {
			t.Parallel()
			w := testenv.NewWebhook(t) // port reserved, not listening: connection refused
			name, _ := conversionCRD(t, testenv.ConversionCRD{URL: w.ConvertURL(), CABundle: w.CABundle(), ClusterScoped: scope == "Cluster"})
			ch := conversionGate(t, name, "60s")
			mustNotReturn(t, ch, 1500*time.Millisecond)
			started := time.Now()
			w.Start(t)
			r := await(t, ch, 30*time.Second)
			if r.err != nil {
				t.Fatalf("gate failed: %v", r.err)
			}
			if !r.at.After(started) {
				t.Errorf("gate returned at %s, before the webhook started at %s", r.at, started)
			}
			if got := outStrings(t, r.resp.Properties, "conversionVerified"); !reflect.DeepEqual(got, []string{name}) {
				t.Errorf("conversionVerified = %v", got)
			}
			// Two rounds, each a dry-run create in v2: converted to v1 and back.
			if n := w.ConvCalls.Load(); n < 4 {
				t.Errorf("the webhook converted %d times, want at least 4 (two dry-runs, there and back)", n)
			}
		})
	}
}

// An object exists: the gate reads it through every served version. The webhook served once
// (the object was created through v2, and listed through it, so the watch cache holds it
// converted) and then stopped: a list may still be answered from that cache, the GET must not.
func TestCrdConversionExistingObjectWebhookStopped(t *testing.T) {
	w := testenv.NewWebhook(t)
	w.Start(t)
	name, group := conversionCRD(t, testenv.ConversionCRD{URL: w.ConvertURL(), CABundle: w.CABundle()})
	ns := testenv.Namespace(t, "conv")
	testenv.Apply(t, fmt.Sprintf("apiVersion: %s/v2\nkind: Widget\nmetadata: {name: w1, namespace: %s}\nspec: {count: 3}", group, ns))
	v1, err := testenv.Dynamic(t).Resource(schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}).Namespace(ns).
		Get(context.Background(), "w1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if size, _, _ := unstructured.NestedInt64(v1.Object, "spec", "size"); size != 3 {
		t.Fatalf("the test webhook did not convert: %v", v1.Object["spec"])
	}
	w.Stop()
	ch := conversionGate(t, name, "60s")
	mustNotReturn(t, ch, 1500*time.Millisecond)
	started := time.Now()
	w.Start(t)
	r := await(t, ch, 30*time.Second)
	if r.err != nil {
		t.Fatalf("gate failed: %v", r.err)
	}
	if !r.at.After(started) {
		t.Errorf("gate returned at %s, before the webhook started again at %s", r.at, started)
	}
	if got := outStrings(t, r.resp.Properties, "conversionVerified"); !reflect.DeepEqual(got, []string{name}) {
		t.Errorf("conversionVerified = %v", got)
	}
}

// Something answers on the webhook's URL, but not a conversion webhook that converts every served
// version: the gate must not pass, must say what it saw, and must pass once the webhook converts.
func TestCrdConversionNearMissesDoNotPass(t *testing.T) {
	cases := map[string]struct {
		mode    string
		v1beta1 bool
		want    string
	}{
		"200 that is not a ConversionReview": {mode: "stranger", want: "not a ConversionReview"},
		"another request's uid":              {mode: "other-uid", want: "uid mismatch"},
		"HTTP 500":                           {mode: "error", want: "HTTP error"},
		"refuses v1beta1":                    {mode: "partial", v1beta1: true, want: "this webhook does not know v1beta1"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w := testenv.NewWebhook(t)
			w.ConvMode.Store(tc.mode)
			w.Start(t)
			crd, _ := conversionCRD(t, testenv.ConversionCRD{URL: w.ConvertURL(), CABundle: w.CABundle(), V1beta1: tc.v1beta1})
			r := await(t, conversionGate(t, crd, "10s"), 40*time.Second)
			if r.err == nil {
				t.Fatalf("gate passed while the webhook answered as %q", tc.mode)
			}
			for _, want := range []string{"timed out", crd, "conversion webhook", tc.want, "check:"} {
				if !strings.Contains(r.err.Error(), want) {
					t.Errorf("error %q does not contain %q", r.err, want)
				}
			}
			w.ConvMode.Store("convert")
			if r := await(t, conversionGate(t, crd, "30s"), 40*time.Second); r.err != nil {
				t.Fatalf("gate failed once the webhook converted: %v", r.err)
			}
		})
	}
}

// The webhook serves, but the CRD's caBundle is not set yet (cert-manager's cainjector has not run):
// the API server does not trust it (x509). Setting the caBundle wakes the gate through the CRD watch.
func TestCrdConversionCABundleInjectedLate(t *testing.T) {
	w := testenv.NewWebhook(t)
	w.Start(t)
	name, _ := conversionCRD(t, testenv.ConversionCRD{URL: w.ConvertURL()})
	ch := conversionGate(t, name, "60s")
	mustNotReturn(t, ch, 1500*time.Millisecond)
	patched := time.Now()
	patch := fmt.Sprintf(`{"spec":{"conversion":{"webhook":{"clientConfig":{"caBundle":%q}}}}}`, w.CABundle())
	if _, err := testenv.Dynamic(t).Resource(crdGVR).Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	r := await(t, ch, 30*time.Second)
	if r.err != nil {
		t.Fatalf("gate failed: %v", r.err)
	}
	if !r.at.After(patched) {
		t.Errorf("gate returned at %s, before the caBundle was set at %s", r.at, patched)
	}
}

// A timeout says what the API server said last and what to check.
func TestCrdConversionTimeoutSaysWhatWasSeen(t *testing.T) {
	w := testenv.NewWebhook(t) // never started
	name, group := conversionCRD(t, testenv.ConversionCRD{URL: w.ConvertURL(), CABundle: w.CABundle()})
	r := await(t, conversionGate(t, name, "10s"), 40*time.Second)
	if r.err == nil {
		t.Fatal("gate passed with the conversion webhook not listening")
	}
	for _, want := range []string{"timed out", name, "connection refused", "conversion webhook for " + group + "/v",
		"check:", w.ConvertURL(), "caBundle", "cainjector"} {
		if !strings.Contains(r.err.Error(), want) {
			t.Errorf("error %q does not contain %q", r.err, want)
		}
	}
}

// Strategy None: nothing to prove, even with conversion: true; conversion: false skips a webhook
// that is down.
func TestCrdConversionNoneAndOff(t *testing.T) {
	t.Run("strategy None with conversion true", func(t *testing.T) {
		t.Parallel()
		name, _ := conversionCRD(t, testenv.ConversionCRD{Strategy: "None"})
		r := await(t, conversionGate(t, name, "30s", "conversion", true), 40*time.Second)
		if r.err != nil {
			t.Fatalf("gate failed: %v", r.err)
		}
		if got := outStrings(t, r.resp.Properties, "conversionVerified"); len(got) != 0 {
			t.Errorf("conversionVerified = %v, want none", got)
		}
	})
	t.Run("conversion false", func(t *testing.T) {
		t.Parallel()
		w := testenv.NewWebhook(t) // never started
		name, _ := conversionCRD(t, testenv.ConversionCRD{URL: w.ConvertURL(), CABundle: w.CABundle()})
		r := await(t, conversionGate(t, name, "30s", "conversion", false), 40*time.Second)
		if r.err != nil {
			t.Fatalf("gate failed: %v", r.err)
		}
		if got := outStrings(t, r.resp.Properties, "conversionVerified"); len(got) != 0 {
			t.Errorf("conversionVerified = %v, want none", got)
		}
	})
}

// The schema requires spec.tag matching ^t-[a-z]+$: no minimal object passes it, and an Invalid
// dry-run proves nothing about conversion. The gate fails at once saying what to give; with a
// conversion probe that passes the schema it proves conversion; a probe in the storage version
// (which converts nothing) is refused.
func TestCrdConversionProbeWhenTheSchemaRefusesAMinimalObject(t *testing.T) {
	w := testenv.NewWebhook(t)
	w.Start(t)
	name, group := conversionCRD(t, testenv.ConversionCRD{URL: w.ConvertURL(), CABundle: w.CABundle(), Tag: true})

	r := await(t, conversionGate(t, name, "30s"), 40*time.Second)
	if r.err == nil {
		t.Fatal("gate passed on an Invalid dry-run")
	}
	for _, want := range []string{name, "refused before any conversion ran", "spec.tag", "conversionProbes", "conversion: false"} {
		if !strings.Contains(r.err.Error(), want) {
			t.Errorf("error %q does not contain %q", r.err, want)
		}
	}
	if strings.Contains(r.err.Error(), "timed out") {
		t.Errorf("an Invalid dry-run should fail at once, not time out: %v", r.err)
	}

	probe := manifests(t, fmt.Sprintf("apiVersion: %s/v2\nkind: Widget\nspec: {count: 2, tag: t-probe}", group))
	r = await(t, conversionGate(t, name, "30s", "conversionProbes", probe), 40*time.Second)
	if r.err != nil {
		t.Fatalf("gate failed with a valid conversion probe: %v", r.err)
	}
	if got := outStrings(t, r.resp.Properties, "conversionVerified"); !reflect.DeepEqual(got, []string{name}) {
		t.Errorf("conversionVerified = %v", got)
	}

	stored := manifests(t, fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nspec: {size: 2, tag: t-probe}", group))
	r = await(t, conversionGate(t, name, "30s", "conversionProbes", stored), 40*time.Second)
	if r.err == nil || !strings.Contains(r.err.Error(), "storage version") {
		t.Fatalf("a probe in the storage version should be refused, got %v", r.err)
	}
}

// Refresh runs the proof again: a webhook that stopped makes the gate not ready.
func TestCrdConversionRefreshNoticesAStoppedWebhook(t *testing.T) {
	w := testenv.NewWebhook(t)
	w.Start(t)
	name, _ := conversionCRD(t, testenv.ConversionCRD{URL: w.ConvertURL(), CABundle: w.CABundle()})
	s := newServer(t)
	r := await(t, createAsync(t, s, "CrdReady", props("names", strs(name), "timeout", "30s")), 40*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	inputs := property.NewMap(map[string]property.Value{"names": strs(name)})
	read, err := s.Read(p.ReadRequest{ID: r.resp.ID, Urn: urn("CrdReady"), Properties: r.resp.Properties, Inputs: inputs})
	if err != nil || read.ID != r.resp.ID {
		t.Fatalf("refresh of a ready gate: id=%q err=%v", read.ID, err)
	}
	w.Stop()
	read, err = s.Read(p.ReadRequest{ID: r.resp.ID, Urn: urn("CrdReady"), Properties: r.resp.Properties, Inputs: inputs})
	if err != nil {
		t.Fatal(err)
	}
	if read.ID != "" {
		t.Fatal("refresh still reports the gate ready with its conversion webhook stopped")
	}
}

// A namespaced dry-run needs its namespace: a conversion probe in a namespace that does not exist
// yet waits (saying so) and passes once it is created.
func TestCrdConversionProbeNamespaceCreatedLate(t *testing.T) {
	w := testenv.NewWebhook(t)
	w.Start(t)
	name, group := conversionCRD(t, testenv.ConversionCRD{URL: w.ConvertURL(), CABundle: w.CABundle()})
	ns := fmt.Sprintf("conv-late-%d", time.Now().UnixNano()%1_000_000_000)
	probe := manifests(t, fmt.Sprintf("apiVersion: %s/v2\nkind: Widget\nmetadata: {namespace: %s}\nspec: {count: 2}", group, ns))
	ch := conversionGate(t, name, "60s", "conversionProbes", probe)
	mustNotReturn(t, ch, 1500*time.Millisecond)
	created := time.Now()
	testenv.Apply(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: "+ns+"}")
	r := await(t, ch, 30*time.Second)
	if r.err != nil {
		t.Fatalf("gate failed: %v", r.err)
	}
	if !r.at.After(created) {
		t.Errorf("gate returned at %s, before the namespace was created at %s", r.at, created)
	}
}
