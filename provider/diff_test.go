package provider

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

// TestNestedInputChangeReplacesThroughTheProvider drives the provider's gRPC Diff as the engine
// does for a client that set no replaceOnChanges (Pulumi YAML, a component's children): a change
// of triggers[0] must plan a replacement, and the replacing Create waits again.
func TestNestedInputChangeReplacesThroughTheProvider(t *testing.T) {
	ns := testenv.Namespace(t, "diff")
	testenv.Apply(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web, namespace: "+ns+"}")
	s := newServer(t)
	inputs := func(trigger string) map[string]property.Value {
		return props("apiVersion", "v1", "kind", "ConfigMap", "namespace", ns, "name", "web", "exists", true,
			"timeout", "30s", "triggers", property.New([]property.Value{property.New(trigger)}))
	}
	created := await(t, createAsync(t, s, "ResourceReady", inputs("v1")), 30*time.Second)
	if created.err != nil {
		t.Fatal(created.err)
	}
	moved := inputs("v1")
	moved["namespace"] = property.New("elsewhere")
	for key, in := range map[string]map[string]property.Value{"triggers": inputs("v2"), "namespace": moved} {
		d, err := s.Diff(p.DiffRequest{ID: created.resp.ID, Urn: urn("ResourceReady"), State: created.resp.Properties,
			Inputs: property.NewMap(in), OldInputs: property.NewMap(inputs("v1"))})
		if err != nil {
			t.Fatal(err)
		}
		if !d.HasChanges || len(d.DetailedDiff) != 1 || d.DetailedDiff[key].Kind != p.UpdateReplace {
			t.Errorf("%s changed: want one replacing change of %s, got %v", key, key, d.DetailedDiff)
		}
	}
	// The replacement waits again: with the ConfigMap gone, the new gate does not pass.
	if err := testenv.Resource(t, testenv.Object(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web, namespace: "+ns+"}")).
		Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	replaced := inputs("v2")
	replaced["timeout"] = property.New("2s")
	replaced["purpose"] = property.New("autoGate added it for kubernetes:apps/v1:Deployment web: it reads ConfigMap web")
	r := await(t, createAsync(t, s, "ResourceReady", replaced), 30*time.Second)
	if r.err == nil || !strings.Contains(r.err.Error(), "timed out") {
		t.Fatalf("the replacing gate must wait again (and time out here), got %v", r.err)
	}
	// Its timeout says why the gate is there: the user's resource that waits for it.
	if !strings.Contains(r.err.Error(), "this gate is there because: autoGate added it for kubernetes:apps/v1:Deployment web: it reads ConfigMap web") {
		t.Errorf("the timeout does not quote the gate's purpose: %v", r.err)
	}
}

// TestEveryGateDiffsInPlaceOnlyForHowLongToWait drives Diff of every gate in the schema through
// the provider (most gates get it from the embedded gate type): a new timeout updates in place, a
// new trigger replaces. Update, from the same type, then takes the new timeout and keeps the
// outputs of a gate that passed.
func TestEveryGateDiffsInPlaceOnlyForHowLongToWait(t *testing.T) {
	s := newServer(t)
	schema, err := s.GetSchema(p.GetSchemaRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var spec struct {
		Resources map[string]struct {
			objectSpec
			InputProperties map[string]propertySpec `json:"inputProperties"`
			RequiredInputs  []string                `json:"requiredInputs"`
			IsComponent     bool                    `json:"isComponent"`
		} `json:"resources"`
		Types map[string]objectSpec `json:"types"`
	}
	if err := json.Unmarshal([]byte(schema.Schema), &spec); err != nil {
		t.Fatal(err)
	}
	// state is a gate's state as the engine holds it: every required output set (to a zero value).
	var zero func(o objectSpec) map[string]property.Value
	value := func(ps propertySpec) property.Value {
		switch {
		case ps.Ref != "":
			return property.New(zero(spec.Types[strings.TrimPrefix(ps.Ref, "#/types/")]))
		case ps.Type == "string":
			return property.New("")
		case ps.Type == "integer" || ps.Type == "number":
			return property.New(0.0)
		case ps.Type == "boolean":
			return property.New(false)
		case ps.Type == "array":
			return property.New([]property.Value{})
		}
		return property.New(map[string]property.Value{})
	}
	zero = func(o objectSpec) map[string]property.Value {
		m := map[string]property.Value{}
		for _, key := range o.Required {
			m[key] = value(o.Properties[key])
		}
		return m
	}
	gates := 0
	for token, r := range spec.Resources {
		if r.IsComponent {
			continue
		}
		gates++
		kind := strings.TrimPrefix(token, "readiness:index:")
		required := zero(objectSpec{Properties: r.InputProperties, Required: r.RequiredInputs})
		inputs := func(timeout, trigger string) map[string]property.Value {
			in := props("timeout", timeout, "triggers", property.New([]property.Value{property.New(trigger)}))
			for k, v := range required {
				in[k] = v
			}
			return in
		}
		state := zero(r.objectSpec)
		for k, v := range inputs("1m", "a") {
			state[k] = v
		}
		t.Run(kind, func(t *testing.T) {
			for in, want := range map[[2]string]p.DiffKind{{"2m", "a"}: p.Update, {"1m", "b"}: p.UpdateReplace} {
				d, err := s.Diff(p.DiffRequest{ID: "id", Urn: urn(kind), State: property.NewMap(state),
					Inputs: property.NewMap(inputs(in[0], in[1])), OldInputs: property.NewMap(inputs("1m", "a"))})
				if err != nil {
					t.Fatal(err)
				}
				key := map[p.DiffKind]string{p.Update: "timeout", p.UpdateReplace: "triggers"}[want]
				if !d.HasChanges || len(d.DetailedDiff) != 1 || d.DetailedDiff[key].Kind != want {
					t.Errorf("%v: want %s %v, got %v", in, key, want, d.DetailedDiff)
				}
			}
			// A new purpose (words for people, autoGate's reason) updates in place: never waits again.
			olds, news := inputs("1m", "a"), inputs("1m", "a")
			olds["purpose"], news["purpose"] = property.New("the app reads it"), property.New("the app and the job read it")
			was := map[string]property.Value{"purpose": olds["purpose"]}
			for k, v := range state {
				was[k] = v
			}
			d, err := s.Diff(p.DiffRequest{ID: "id", Urn: urn(kind), State: property.NewMap(was),
				Inputs: property.NewMap(news), OldInputs: property.NewMap(olds)})
			if err != nil {
				t.Fatal(err)
			}
			if !d.HasChanges || len(d.DetailedDiff) != 1 || d.DetailedDiff["purpose"].Kind != p.Update {
				t.Errorf("purpose changed: want an update in place, got %v", d.DetailedDiff)
			}
		})
	}
	if gates < 13 {
		t.Errorf("only %d gates in the schema", gates)
	}

	ns := testenv.Namespace(t, "update")
	testenv.Apply(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web, namespace: "+ns+"}")
	gate := func(timeout string) map[string]property.Value {
		return props("apiVersion", "v1", "kind", "ConfigMap", "namespace", ns, "name", "web", "exists", true, "timeout", timeout)
	}
	created := await(t, createAsync(t, s, "ResourceReady", gate("30s")), 30*time.Second)
	if created.err != nil {
		t.Fatal(created.err)
	}
	u, err := s.Update(p.UpdateRequest{ID: created.resp.ID, Urn: urn("ResourceReady"), State: created.resp.Properties,
		Inputs: property.NewMap(gate("2m")), OldInputs: property.NewMap(gate("30s"))})
	if err != nil {
		t.Fatal(err)
	}
	if got := u.Properties.Get("timeout").AsString(); got != "2m" {
		t.Errorf("Update: timeout = %q, want 2m", got)
	}
	if got, want := u.Properties.Get("uid"), created.resp.Properties.Get("uid"); !got.Equals(want) || got.AsString() == "" {
		t.Errorf("Update: uid = %v, want the created gate's %v", got, want)
	}
}

// objectSpec and propertySpec are the parts of a schema object type the tests read.
type objectSpec struct {
	Properties map[string]propertySpec `json:"properties"`
	Required   []string                `json:"required"`
}

type propertySpec struct {
	Type string `json:"type"`
	Ref  string `json:"$ref"`
}
