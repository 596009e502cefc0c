package provider

import (
	"fmt"
	"strings"
	"testing"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi/sdk/v3/go/property"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

// TestStableForOnTheRealAPIServer: a custom resource whose Ready condition flaps right after it
// first turns True. With stableFor the gate must not pass on the first True, nor on a True that
// was interrupted; it passes once Ready held for the whole window.
func TestStableForOnTheRealAPIServer(t *testing.T) {
	group := widgetCRD(t)
	w := testenv.Apply(t, fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata: {name: flappy, namespace: default}\nspec: {size: 1}", group))[0]
	s := newServer(t)
	ready := props("apiVersion", group+"/v1", "kind", "Widget", "name", "flappy",
		"condition", map[string]property.Value{"type": property.New("Ready")}, "timeout", "60s", "stableFor", "2s")
	ch := createAsync(t, s, "ResourceReady", ready)
	setStatus(t, w, map[string]any{"conditions": []any{cond("Ready", "True", 1)}})
	mustNotReturn(t, ch, time.Second) // Ready, but only for a second of the two
	setStatus(t, w, map[string]any{"conditions": []any{cond("Ready", "False", 1)}})
	mustNotReturn(t, ch, 1500*time.Millisecond) // the first window was interrupted: it must not carry over
	backAt := time.Now()
	setStatus(t, w, map[string]any{"conditions": []any{cond("Ready", "True", 1)}})
	r := await(t, ch, 30*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if held := r.at.Sub(backAt); held < 2*time.Second {
		t.Errorf("passed %s after Ready came back, before it held for stableFor 2s", held)
	}

	// A gate on a state that keeps flapping times out saying so.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(400 * time.Millisecond):
			}
			st := map[bool]string{true: "True", false: "False"}[i%2 == 1]
			setStatus(t, w, map[string]any{"conditions": []any{cond("Ready", st, 1)}})
		}
	}()
	flap := props("apiVersion", group+"/v1", "kind", "Widget", "name", "flappy",
		"condition", map[string]property.Value{"type": property.New("Ready")}, "timeout", "3s", "stableFor", "2s")
	r = await(t, createAsync(t, s, "ResourceReady", flap), 30*time.Second)
	if r.err == nil {
		t.Fatal("passed on a condition that never held for stableFor")
	}
	if msg := r.err.Error(); !strings.Contains(msg, "never the stableFor 2s") {
		t.Errorf("the timeout does not say the condition did not hold for stableFor: %v", msg)
	}
}

// TestFailureGraceOnTheRealAPIServer: a controller reports Stalled=True (kstatus Failed) for a
// moment while it retries. Without failureGrace the gate fails at once (the default, kept); with
// it the gate rides the moment out and passes once the object is Ready, and a failure that
// persists through the grace fails the gate with the controller's message.
func TestFailureGraceOnTheRealAPIServer(t *testing.T) {
	group := widgetCRD(t)
	w := testenv.Apply(t, fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata: {name: retrying, namespace: default}\nspec: {size: 1}", group))[0]
	setStatus(t, w, map[string]any{"observedGeneration": int64(1), "conditions": []any{cond("Stalled", "True", 1)}})
	s := newServer(t)
	base := []any{"apiVersion", group + "/v1", "kind", "Widget", "name", "retrying", "timeout", "60s"}

	r := await(t, createAsync(t, s, "ResourceReady", props(base...)), 30*time.Second)
	if r.err == nil || !strings.Contains(r.err.Error(), "failed: Failed") {
		t.Fatalf("without failureGrace a Stalled object must fail the gate at once: %v", r.err)
	}

	ch := createAsync(t, s, "ResourceReady", props(append(base, "failureGrace", "20s")...))
	mustNotReturn(t, ch, time.Second) // failing, within the grace
	setStatus(t, w, map[string]any{"observedGeneration": int64(1), "conditions": []any{cond("Ready", "True", 1)}})
	if r := await(t, ch, 30*time.Second); r.err != nil {
		t.Fatalf("a failure that recovered within failureGrace failed the gate: %v", r.err)
	}

	setStatus(t, w, map[string]any{"observedGeneration": int64(1), "conditions": []any{cond("Stalled", "True", 1)}})
	start := time.Now()
	r = await(t, createAsync(t, s, "ResourceReady", props(append(base, "failureGrace", "1500ms")...)), 30*time.Second)
	if r.err == nil {
		t.Fatal("a failure that persisted through failureGrace passed")
	}
	if msg := r.err.Error(); !strings.Contains(msg, "failed: Failed") || !strings.Contains(msg, "failureGrace 1.5s") {
		t.Errorf("the failure does not quote the state and the grace: %v", msg)
	}
	if took := time.Since(start); took < 1500*time.Millisecond {
		t.Errorf("failed after %s, within the grace", took)
	}
}

// TestWindowInputsAreCheckedAtPreview: bad durations, and windows the timeout cannot contain.
func TestWindowInputsAreCheckedAtPreview(t *testing.T) {
	s := newServer(t)
	for _, tc := range []struct {
		inputs   map[string]property.Value
		property string
		want     string
	}{
		{props("group", "x.example.com", "stableFor", "ten seconds"), "stableFor", "is not a duration"},
		{props("group", "x.example.com", "failureGrace", "-1s"), "failureGrace", "must be positive"},
		{props("group", "x.example.com", "stableFor", "2m", "timeout", "1m"), "stableFor", "shorter than the gate's timeout"},
		{props("group", "x.example.com", "failureGrace", "10m"), "failureGrace", "shorter than the gate's timeout (10m0s)"},
	} {
		chk, err := s.Check(p.CheckRequest{Urn: urn("CrdReady"), Inputs: property.NewMap(tc.inputs)})
		if err != nil {
			t.Fatal(err)
		}
		failures := chk.Failures
		found := false
		for _, f := range failures {
			if f.Property == tc.property && strings.Contains(f.Reason, tc.want) {
				found = true
			}
		}
		if !found {
			t.Errorf("%v: failures %v lack %s: %q", tc.inputs, failures, tc.property, tc.want)
		}
	}
}
