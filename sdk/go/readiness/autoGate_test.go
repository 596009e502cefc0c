// Hand-written (sdk/overlay/go, copied here by `make sdk`): edit the overlay, not the copy.

package readiness

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/internals"
)

// The installer IDs are the URNs the engine gives: a dependsOn entry (read from the engine)
// must equal the ID computed when the installer registered.
func TestEngineURN(t *testing.T) {
	stackURN := "urn:pulumi:dev::proj::pulumi:pulumi:Stack::proj-dev"
	chartURN := "urn:pulumi:dev::proj::kubernetes:helm.sh/v4:Chart::nginx"
	for _, c := range []struct{ parent, typ, name, want string }{
		{stackURN, "kubernetes:helm.sh/v3:Release", "eso", "urn:pulumi:dev::proj::kubernetes:helm.sh/v3:Release::eso"},
		{"", "kubernetes:helm.sh/v3:Release", "eso", "urn:pulumi:dev::proj::kubernetes:helm.sh/v3:Release::eso"},
		{chartURN, "kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration", "nginx:admission",
			"urn:pulumi:dev::proj::kubernetes:helm.sh/v4:Chart$kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration::nginx:admission"},
	} {
		if got := engineURN("dev", "proj", c.parent, c.typ, c.name); got != c.want {
			t.Errorf("engineURN(%s, %s) = %s, want %s", c.parent, c.name, got, c.want)
		}
	}
}

// Props reach the plan as plain JSON; unknown values (preview) are left out, not sent as "".
func TestPlainValue(t *testing.T) {
	props := pulumi.Map{
		"metadata": pulumi.Map{"name": pulumi.String("a"), "uid": pulumi.UnsafeUnknownOutput(nil)},
		"spec":     pulumi.Map{"replicas": pulumi.Int(2), "on": pulumi.Bool(true), "list": pulumi.Array{pulumi.String("x")}},
		"known":    pulumi.String("k").ToStringOutput(),
	}
	got, ok := plainValue(context.Background(), props)
	want := map[string]any{
		"metadata": map[string]any{"name": "a"},
		"spec":     map[string]any{"replicas": float64(2), "on": true, "list": []any{"x"}},
		"known":    "k",
	}
	if !ok || !reflect.DeepEqual(got, want) {
		t.Errorf("plainValue = %#v, want %#v", got, want)
	}
}

type failingPlanMocks struct{}

func (failingPlanMocks) NewResource(a pulumi.MockResourceArgs) (string, resource.PropertyMap, error) {
	return a.Name, a.Inputs, nil
}

func (failingPlanMocks) Call(pulumi.MockCallArgs) (resource.PropertyMap, error) {
	return nil, errors.New("plan unavailable")
}

// F7: a plan call that fails fails the registration, naming the object and the cause; it never
// lets the object through ungated.
func TestTransformFailsTheRegistrationWhenThePlanFails(t *testing.T) {
	err := pulumi.RunErr(func(ctx *pulumi.Context) error {
		g := newAutoGate(ctx, AutoGateOptions{})
		res := g.transform(ctx.Context(), &pulumi.ResourceTransformArgs{Custom: true, Type: "kubernetes:core/v1:ConfigMap", Name: "settings",
			Props: pulumi.Map{"apiVersion": pulumi.String("v1"), "kind": pulumi.String("ConfigMap")}})
		if res == nil || len(res.Opts.DependsOn) == 0 {
			t.Fatalf("transform let the object through ungated: %+v", res)
		}
		_, uerr := internals.UnsafeAwaitOutput(ctx.Context(), res.Opts.DependsOn[len(res.Opts.DependsOn)-1].URN())
		if uerr == nil || !strings.Contains(uerr.Error(), "ConfigMap settings") || !strings.Contains(uerr.Error(), "plan unavailable") {
			t.Errorf("dependency error = %v, want one naming the object and the cause", uerr)
		}
		return nil
	}, pulumi.WithMocks("proj", "dev", failingPlanMocks{}))
	if err != nil {
		t.Fatal(err)
	}
}

type silentPlanMocks struct{ release chan struct{} }

func (silentPlanMocks) NewResource(a pulumi.MockResourceArgs) (string, resource.PropertyMap, error) {
	return a.Name, a.Inputs, nil
}

func (m silentPlanMocks) Call(pulumi.MockCallArgs) (resource.PropertyMap, error) {
	<-m.release
	return nil, errors.New("too late")
}

// D2 in Go: a plan call that never answers fails the registration after the plan timeout.
func TestTransformFailsTheRegistrationWhenThePlanNeverAnswers(t *testing.T) {
	m := silentPlanMocks{release: make(chan struct{})}
	err := pulumi.RunErr(func(ctx *pulumi.Context) error {
		defer close(m.release)
		g := newAutoGate(ctx, AutoGateOptions{})
		g.planTimeout = 20 * time.Millisecond
		res := g.transform(ctx.Context(), &pulumi.ResourceTransformArgs{Custom: true, Type: "kubernetes:core/v1:ConfigMap", Name: "settings",
			Props: pulumi.Map{"apiVersion": pulumi.String("v1"), "kind": pulumi.String("ConfigMap")}})
		if res == nil || len(res.Opts.DependsOn) == 0 {
			t.Fatalf("transform let the object through ungated: %+v", res)
		}
		_, uerr := internals.UnsafeAwaitOutput(ctx.Context(), res.Opts.DependsOn[len(res.Opts.DependsOn)-1].URN())
		if uerr == nil || !strings.Contains(uerr.Error(), "ConfigMap settings") || !strings.Contains(uerr.Error(), "did not answer") {
			t.Errorf("dependency error = %v, want one naming the object and the timeout", uerr)
		}
		return nil
	}, pulumi.WithMocks("proj", "dev", m))
	if err != nil {
		t.Fatal(err)
	}
}

// chartMocks plays a Chart v4 whose webhook configuration validates its own custom resource: the
// plan gates the custom resource by `ResourceReady exists` on the configuration.
// It records each registration the engine finished, in order, with its dependencies.
type chartMocks struct {
	mu   sync.Mutex
	done []chartRegistration
}

type chartRegistration struct {
	typ, name string
	deps      []string
}

func (m *chartMocks) NewResource(a pulumi.MockResourceArgs) (string, resource.PropertyMap, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.done = append(m.done, chartRegistration{a.TypeToken, a.Name, a.RegisterRPC.GetDependencies()})
	return a.Name, a.Inputs, nil
}

func (m *chartMocks) Call(a pulumi.MockCallArgs) (resource.PropertyMap, error) {
	res := a.Args["registration"].ObjectValue()
	if res["type"].StringValue() == chartHookType {
		return resource.PropertyMap{}, nil
	}
	const hook = "urn:pulumi:dev::proj::kubernetes:helm.sh/v4:Chart$" + chartHookType + "::c:hook"
	return resource.NewPropertyMapFromMap(map[string]any{"gates": []any{map[string]any{
		"key": "exists", "name": "auto-exists-c-hook", "type": "readiness:index:ResourceReady", "args": map[string]any{}, "after": []any{hook},
	}}}), nil
}

const chartHookType = "kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration"

// F9: a chart's child installer is known to the transform only by URN; the gate after it still
// depends on it, and registers only once the engine has registered the installer (on an update,
// `ResourceReady exists` must not see the configuration's old state and pass early).
func TestGateAfterAChartChildInstallerDependsOnIt(t *testing.T) {
	m := &chartMocks{}
	const hookURN = "urn:pulumi:dev::proj::kubernetes:helm.sh/v4:Chart$" + chartHookType + "::c:hook"
	err := pulumi.RunErr(func(ctx *pulumi.Context) error {
		var chart pulumi.ResourceState
		if err := ctx.RegisterComponentResource("kubernetes:helm.sh/v4:Chart", "c", &chart); err != nil {
			return err
		}
		g := newAutoGate(ctx, AutoGateOptions{Settle: time.Millisecond})
		child := func(typ, name string) *pulumi.ResourceTransformResult {
			return g.transform(ctx.Context(), &pulumi.ResourceTransformArgs{Custom: true, Type: typ, Name: name,
				Props: pulumi.Map{"kind": pulumi.String(name)}, Opts: pulumi.ResourceOptions{Parent: &chart}})
		}
		if res := child(chartHookType, "c:hook"); res != nil {
			t.Fatalf("the webhook configuration got gates: %+v", res)
		}
		res := child("kubernetes:example.test/v1:Widget", "c:default/w1")
		if res == nil || len(res.Opts.DependsOn) != 1 {
			t.Fatalf("the custom resource was not gated: %+v", res)
		}
		// The plugin registers the configuration only now, after the transform returned.
		var hook pulumi.CustomResourceState
		return ctx.RegisterResource(chartHookType, "c:hook", pulumi.Map{}, &hook, pulumi.Parent(&chart))
	}, pulumi.WithMocks("proj", "dev", m))
	if err != nil {
		t.Fatal(err)
	}
	hookAt, gateAt := -1, -1
	for i, r := range m.done {
		switch r.name {
		case "c:hook":
			hookAt = i
		case "auto-exists-c-hook":
			gateAt = i
			if !slices.Contains(r.deps, hookURN) {
				t.Errorf("the gate's dependencies %q lack the webhook configuration %s", r.deps, hookURN)
			}
		}
	}
	if hookAt < 0 || gateAt < 0 || gateAt < hookAt {
		t.Errorf("registrations %+v: want the webhook configuration registered, then its gate", m.done)
	}
}

// recordingMocks records the plan calls' arguments and answers none with a gate.
type recordingMocks struct {
	mu    sync.Mutex
	calls []resource.PropertyMap
}

func (m *recordingMocks) NewResource(a pulumi.MockResourceArgs) (string, resource.PropertyMap, error) {
	return a.Name, a.Inputs, nil
}

func (m *recordingMocks) Call(a pulumi.MockCallArgs) (resource.PropertyMap, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, a.Args)
	return resource.PropertyMap{}, nil
}

// The SDK only carries facts: each place in program order and each cluster's configuration goes
// to the provider once, with whichever call is next; each registration names its own place.
func TestFactsAreSentOnce(t *testing.T) {
	m := &recordingMocks{}
	err := pulumi.RunErr(func(ctx *pulumi.Context) error {
		g := newAutoGate(ctx, AutoGateOptions{})
		const typ = "kubernetes:core/v1:ConfigMap"
		props := pulumi.Map{"kind": pulumi.String("ConfigMap")}
		for _, name := range []string{"a", "b", "c"} { // as the program makes them
			g.recordOrder(&pulumi.ResourceTransformationArgs{Resource: &pulumi.CustomResourceState{}, Type: typ, Name: name, Props: props})
		}
		for _, name := range []string{"c", "a", "b"} { // as the SDK sends them
			if res := g.transform(ctx.Context(), &pulumi.ResourceTransformArgs{Custom: true, Type: typ, Name: name, Props: props}); res != nil {
				t.Errorf("%s: %+v", name, res)
			}
		}
		return nil
	}, pulumi.WithMocks("proj", "dev", m), func(ri *pulumi.RunInfo) { ri.Config = map[string]string{"kubernetes:namespace": "apps"} })
	if err != nil {
		t.Fatal(err)
	}
	places, clusters, sessions := map[float64]int{}, 0, map[string]bool{}
	orders := map[string]float64{}
	for _, c := range m.calls {
		sessions[c["session"].StringValue()] = true
		for _, e := range arrayOf(c["entries"]) {
			places[e.ObjectValue()["order"].NumberValue()]++
		}
		for _, cl := range arrayOf(c["clusters"]) {
			clusters++
			if ns := cl.ObjectValue()["namespace"]; !ns.IsString() || ns.StringValue() != "apps" {
				t.Errorf("the default cluster's facts %v lack the stack's kubernetes:namespace", cl)
			}
		}
		r := c["registration"].ObjectValue()
		orders[r["name"].StringValue()] = r["order"].NumberValue()
	}
	if len(m.calls) != 3 || len(sessions) != 1 || clusters != 1 {
		t.Fatalf("%d calls, %d sessions, %d cluster facts: want 3, 1, 1", len(m.calls), len(sessions), clusters)
	}
	for i := 0.0; i < 3; i++ {
		if places[i] != 1 {
			t.Errorf("place %v sent %d times", i, places[i])
		}
	}
	if orders["a"] != 0 || orders["b"] != 1 || orders["c"] != 2 {
		t.Errorf("registrations' places %v, want program order", orders)
	}
}

func arrayOf(v resource.PropertyValue) []resource.PropertyValue {
	if !v.IsArray() {
		return nil
	}
	return v.ArrayValue()
}

// failOnceMocks fails the first plan call and records the others.
type failOnceMocks struct {
	recordingMocks
	failed bool
}

func (m *failOnceMocks) Call(a pulumi.MockCallArgs) (resource.PropertyMap, error) {
	m.mu.Lock()
	if !m.failed {
		m.failed = true
		m.mu.Unlock()
		return nil, errors.New("provider restarting")
	}
	m.mu.Unlock()
	return m.recordingMocks.Call(a)
}

// The places and cluster facts a failed call carried go again with the next call: the provider
// never heard of them.
func TestAFailedCallsFactsAreSentAgain(t *testing.T) {
	m := &failOnceMocks{}
	err := pulumi.RunErr(func(ctx *pulumi.Context) error {
		g := newAutoGate(ctx, AutoGateOptions{})
		const typ = "kubernetes:core/v1:ConfigMap"
		props := pulumi.Map{"kind": pulumi.String("ConfigMap")}
		for _, name := range []string{"a", "b"} {
			g.recordOrder(&pulumi.ResourceTransformationArgs{Resource: &pulumi.CustomResourceState{}, Type: typ, Name: name, Props: props})
		}
		if res := g.transform(ctx.Context(), &pulumi.ResourceTransformArgs{Custom: true, Type: typ, Name: "a", Props: props}); res == nil {
			t.Error("the failed call let the registration through")
		}
		g.transform(ctx.Context(), &pulumi.ResourceTransformArgs{Custom: true, Type: typ, Name: "b", Props: props})
		return nil
	}, pulumi.WithMocks("proj", "dev", m))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.calls) != 1 || len(arrayOf(m.calls[0]["entries"])) != 2 || len(arrayOf(m.calls[0]["clusters"])) != 1 {
		t.Fatalf("the call after the failed one: %v", m.calls)
	}
}

// The SDK keeps the engine's error-hook support unexported: errorHooksSupported reads it by
// reflection, and would silently assume yes if the SDK renamed it. This fails first.
func TestErrorHooksSupportIsWhereItIsRead(t *testing.T) {
	st, ok := reflect.TypeOf(pulumi.Context{}).FieldByName("state")
	if !ok || st.Type.Kind() != reflect.Pointer {
		t.Fatalf("pulumi.Context has no state pointer: errorHooksSupported cannot read the engine's features")
	}
	f, ok := st.Type.Elem().FieldByName("supportsErrorHooks")
	if !ok || f.Type.Kind() != reflect.Bool {
		t.Fatalf("the Go SDK's context state has no supportsErrorHooks bool: update errorHooksSupported")
	}
}

// retried goes to the provider only with the program's error hook wired: the provider then
// counts on that hook's retry (AdmissionReady's `retried`); without it, never.
func TestOptionsRetriedOnlyWithTheHook(t *testing.T) {
	err := pulumi.RunErr(func(ctx *pulumi.Context) error {
		g := newAutoGate(ctx, AutoGateOptions{})
		if o := g.options(); o.Retried != nil {
			t.Errorf("no hook, yet retried = %v", *o.Retried)
		}
		g.retryHook = &pulumi.ErrorHook{Name: retryHookName}
		if o := g.options(); o.Retried == nil || !*o.Retried {
			t.Errorf("hook wired, yet retried = %v", o.Retried)
		}
		return nil
	}, pulumi.WithMocks("proj", "dev", &chartMocks{}))
	if err != nil {
		t.Fatal(err)
	}
}
