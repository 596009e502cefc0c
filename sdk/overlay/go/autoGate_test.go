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

// F1: a child's settle window counts from its sibling's arrival, not from the sibling's first
// plan answer: while a sibling's first plan call is in flight (the chart's webhook configuration,
// whose installer the others must see), no child of the component settles.
func TestSettleWaitsForSiblingsInFlight(t *testing.T) {
	g := &autoGate{opts: AutoGateOptions{Settle: time.Millisecond}, families: map[string]*autoGateFamily{}}
	const chart = "urn:pulumi:dev::proj::kubernetes:helm.sh/v4:Chart::c"
	a := g.arrive(chart)
	a.land()        // the custom resource's first answer came back
	g.arrive(chart) // the webhook configuration arrived; its plan call is slow
	settled := make(chan struct{})
	go func() { g.settle(a); close(settled) }()
	select {
	case <-settled:
		t.Fatal("a child settled while a sibling's first plan call was in flight")
	case <-time.After(50 * time.Millisecond):
	}
	a.land() // the webhook configuration's answer (same family)
	<-settled
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
// plan remembers the configuration and gates the custom resource by `ResourceReady exists` on it.
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
	res := a.Args["resource"].ObjectValue()
	if res["type"].StringValue() == chartHookType {
		return resource.NewPropertyMapFromMap(map[string]any{"remember": true}), nil
	}
	var hook string
	for _, i := range a.Args["installers"].ArrayValue() {
		hook = i.ObjectValue()["id"].StringValue()
	}
	if hook == "" {
		return resource.PropertyMap{}, nil
	}
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

// A gate after an installer that depends (through dependsOn or parents, transitively) on the
// registration it guards is left out; one after an unrelated installer is kept, and a gate after
// a gate left out is left out too.
func TestCycleLeavesOutAGateThatWouldWaitForWhatItGuards(t *testing.T) {
	g := newAutoGate(nil, AutoGateOptions{})
	const self, server, hook, other, chart = "urn:self", "urn:server", "urn:hook", "urn:other", "urn:chart"
	g.edges = map[string][]string{
		hook:  {server, ""}, // the webhook configuration depends on its server's Deployment ...
		other: {chart, ""},
		chart: {""},
		// ... and the server is what the gate would guard (self below stands for it)
	}
	left := map[string]bool{}
	if why := g.cycle(AutoGatePlanGate{Key: "a", After: []string{hook}}, server, left); why == "" {
		t.Error("a gate after a configuration that depends on the guarded registration was kept")
	}
	left["a"] = true
	if why := g.cycle(AutoGatePlanGate{Key: "b", AfterGates: []string{"a"}}, server, left); why == "" {
		t.Error("a gate after a left-out gate was kept")
	}
	if why := g.cycle(AutoGatePlanGate{Key: "c", After: []string{other}}, self, left); why != "" {
		t.Errorf("a gate after an unrelated installer was left out: %s", why)
	}
	if why := g.cycle(AutoGatePlanGate{Key: "d", After: []string{self}}, self, left); why == "" {
		t.Error("a gate after the guarded registration itself was kept")
	}
}

// recordingMocks records the resources registered, with their inputs.
type recordingMocks struct {
	mu  sync.Mutex
	got map[string]resource.PropertyMap
}

func (m *recordingMocks) NewResource(a pulumi.MockResourceArgs) (string, resource.PropertyMap, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.got[a.TypeToken+"::"+a.Name] = a.Inputs
	return a.Name, a.Inputs, nil
}

func (*recordingMocks) Call(pulumi.MockCallArgs) (resource.PropertyMap, error) { return nil, nil }

// The objects of the default kubernetes provider are gated in the cluster and namespace the
// stack's kubernetes configuration names (issue 47): `kubernetes:namespace apps` alone gets a
// readiness provider configured so; the same configuration for both packages keeps the default
// readiness provider; a provider that renders YAML or selects a kubeconfig cluster is not guessed at.
func TestDefaultClusterFollowsTheStacksKubernetesConfiguration(t *testing.T) {
	for _, c := range []struct {
		name     string
		config   map[string]string
		provider bool   // autogate-default made
		inputs   string // its inputs, as Go prints them
		skip     string
	}{
		{name: "nothing set", config: map[string]string{}},
		{name: "the same for both", config: map[string]string{"kubernetes:kubeconfig": "KC", "readiness:kubeconfig": "KC",
			"kubernetes:namespace": "apps", "readiness:namespace": "apps"}},
		{name: "kubernetes:namespace alone", config: map[string]string{"kubernetes:namespace": "apps"}, provider: true, inputs: "namespace"},
		{name: "a kubeconfig for kubernetes only", config: map[string]string{"kubernetes:kubeconfig": "KC"}, provider: true, inputs: "kubeconfig"},
		{name: "another context", config: map[string]string{"kubernetes:context": "b", "readiness:context": "a"}, provider: true, inputs: "context"},
		{name: "renders YAML", config: map[string]string{"kubernetes:renderYamlToDirectory": "out"}, skip: "renders YAML"},
		{name: "a kubeconfig cluster", config: map[string]string{"kubernetes:cluster": "c2"}, skip: "selects kubeconfig cluster c2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := &recordingMocks{got: map[string]resource.PropertyMap{}}
			var skip string
			err := pulumi.RunErr(func(ctx *pulumi.Context) error {
				prov, s, err := defaultClusterProvider(ctx, func(k string) string { return c.config[k] })
				if (prov != nil) != c.provider {
					t.Errorf("provider made = %v, want %v", prov != nil, c.provider)
				}
				skip = s
				return err
			}, pulumi.WithMocks("proj", "dev", m))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(skip, c.skip) || (c.skip == "") != (skip == "") {
				t.Errorf("skip = %q, want %q", skip, c.skip)
			}
			in, ok := m.got["pulumi:providers:readiness::autogate-default"]
			if ok != c.provider {
				t.Fatalf("registered %v", m.got)
			}
			if ok && !in.HasValue(resource.PropertyKey(c.inputs)) {
				t.Errorf("autogate-default's inputs %v lack %s", in, c.inputs)
			}
		})
	}
}
