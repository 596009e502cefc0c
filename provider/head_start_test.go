package provider

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/property"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/provider/internal/probe"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/autogate"
)

// An AdmissionReady autoGate decides for a custom resource after the Release it depends on
// begins its rounds at the decision, and its Create passes on that head start without a dry
// run of its own, against a real API server calling a real webhook. Near misses: a Create that
// comes later than probe.ProofReuse after the head start, a head start that did not pass (the
// webhook not serving yet), and a preview (no gate Create in the process yet) begin or adopt
// nothing: each Create then calls the webhook itself.
func TestAutoGateHeadStart(t *testing.T) {
	group := widgetCRD(t)
	wh := testenv.NewWebhook(t)
	wh.RegisterAs(t, "ValidatingWebhookConfiguration", "headstart-"+strings.Split(group, ".")[0], "Fail", group, "widgets")
	wh.Mode.Store("allow")
	wh.Start(t)
	s := newServer(t)
	plan := func(name string) (gate map[string]any, key string) {
		t.Helper()
		_, out := invokePlan(t, s, fmt.Sprintf(`
resource:
  type: kubernetes:%[1]s/v1:Widget
  name: %[2]s
  object: {apiVersion: %[1]s/v1, kind: Widget, metadata: {name: %[2]s, namespace: default}, spec: {size: 1}}
installers:
- id: rel
  type: kubernetes:helm.sh/v3:Release
  name: widgets
  object: {name: widgets, namespace: default, chart: widgets}
dependsOn: [rel]
options: {retried: true}
`, group, name))
		gates, _ := out["gates"].([]any)
		if len(gates) != 1 || gates[0].(map[string]any)["type"] != autogate.TypeAdmissionReady {
			t.Fatalf("gates %v, want one AdmissionReady", out["gates"])
		}
		g := gates[0].(map[string]any)
		return g["args"].(map[string]any), g["key"].(string)
	}
	start := func(args map[string]any) <-chan gateResult {
		t.Helper()
		in := map[string]property.Value{}
		for k, v := range args {
			in[k] = toProperty(v)
		}
		in["timeout"] = property.New("30s")
		return createAsync(t, s, "AdmissionReady", in)
	}
	create := func(args map[string]any) gateResult {
		t.Helper()
		return await(t, start(args), 40*time.Second)
	}
	// The API server calls the webhook once its configuration is in its cache.
	warm := testenv.Object(t, widgetIn(group, "default", "warm"))
	for wh.Calls.Load() == 0 {
		if _, err := testenv.Resource(t, warm).Create(context.Background(), warm, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	updating.Store(true)
	settled := func() int64 { // the head start's dry run, if any, answered
		time.Sleep(probe.ProofReuse / 2)
		return wh.Calls.Load()
	}

	t.Run("adopted: the Create calls nothing", func(t *testing.T) {
		before := wh.Calls.Load()
		args, _ := plan("adopted")
		began := settled()
		if began != before+1 {
			t.Fatalf("the head start made %d webhook calls, want 1", began-before)
		}
		r := create(args)
		if r.err != nil {
			t.Fatal(r.err)
		}
		if n := wh.Calls.Load() - began; n != 0 {
			t.Errorf("the Create called the webhook %d times after its head start passed, want 0", n)
		}
		if got := r.resp.Properties.Get("admitted").AsNumber(); got != 1 {
			t.Errorf("admitted = %v, want 1 (the head start's outputs)", got)
		}
	})
	t.Run("near miss: a Create later than the proof's reuse waits on its own", func(t *testing.T) {
		args, _ := plan("late")
		began := settled()
		time.Sleep(probe.ProofReuse)
		if r := create(args); r.err != nil {
			t.Fatal(r.err)
		}
		if n := wh.Calls.Load() - began; n != 1 {
			t.Errorf("a late Create called the webhook %d times, want 1 (its own round)", n)
		}
	})
	t.Run("near miss: a head start that did not pass is not adopted", func(t *testing.T) {
		wh.Mode.Store("error")
		args, _ := plan("failing")
		ch := start(args) // within the proof's reuse, while the head start fails
		time.Sleep(2 * probe.ProofReuse)
		allowed := time.Now()
		wh.Mode.Store("allow")
		r := await(t, ch, 40*time.Second)
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.at.Before(allowed) {
			t.Errorf("the Create passed %s before the webhook admitted anything", allowed.Sub(r.at))
		}
	})
	t.Run("near miss: a preview begins none", func(t *testing.T) {
		updating.Store(false)
		defer updating.Store(true)
		begun := func() int {
			headStarts.Lock()
			defer headStarts.Unlock()
			return len(headStarts.begun)
		}
		before, calls := begun(), wh.Calls.Load()
		plan("preview")
		if n := settled() - calls; n != 0 {
			t.Errorf("a preview's decision called the webhook %d times, want 0", n)
		}
		if n := begun() - before; n != 0 {
			t.Errorf("a preview's decision began %d head starts, want none", n)
		}
	})
}
