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

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

func uniqueGroup(t testing.TB) string {
	return fmt.Sprintf("g%d.readiness.test", time.Now().UnixNano()%1_000_000_000)
}

func TestCrdReadyWaitsForACRDCreatedLater(t *testing.T) {
	s := newServer(t)
	group := uniqueGroup(t)
	name := "widgets." + group
	ch := createAsync(t, s, "CrdReady", map[string]property.Value{"names": strs(name), "timeout": property.New("60s")})

	mustNotReturn(t, ch, 1500*time.Millisecond) // the CRD does not exist yet
	crd := testenv.Apply(t, testenv.CRD(group, "Widget", "widgets"))[0]
	r := await(t, ch, 30*time.Second)
	if r.err != nil {
		t.Fatalf("gate failed: %v", r.err)
	}
	if !r.at.After(crd.GetCreationTimestamp().Time.Add(-time.Second)) {
		t.Errorf("gate returned at %s, before the CRD was created at %s", r.at, crd.GetCreationTimestamp())
	}
	if got := outStrings(t, r.resp.Properties, "kinds"); !reflect.DeepEqual(got, []string{"Widget"}) {
		t.Errorf("kinds = %v", got)
	}
	if got := outStrings(t, r.resp.Properties, "servedVersions"); !reflect.DeepEqual(got, []string{group + "/v1"}) {
		t.Errorf("servedVersions = %v", got)
	}
	if got := outStrings(t, r.resp.Properties, "names"); !reflect.DeepEqual(got, []string{name}) {
		t.Errorf("names = %v", got)
	}
	// What the gate promises: a custom resource can be created right away.
	testenv.Apply(t, fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata: {name: w1, namespace: default}\nspec: {size: 1}", group))
}

func TestCrdReadyGroupWaitsForEveryCRDOfTheGroup(t *testing.T) {
	s := newServer(t)
	group := uniqueGroup(t)
	ch := createAsync(t, s, "CrdReady", map[string]property.Value{"group": property.New(group), "timeout": property.New("60s")})
	mustNotReturn(t, ch, time.Second) // no CRD of the group yet
	testenv.Apply(t, testenv.CRD(group, "Alpha", "alphas")+"\n---\n"+testenv.CRD(group, "Beta", "betas"))
	r := await(t, ch, 30*time.Second)
	if r.err != nil {
		t.Fatalf("gate failed: %v", r.err)
	}
	names := outStrings(t, r.resp.Properties, "names")
	kinds := outStrings(t, r.resp.Properties, "kinds")
	// Both were created in one call; the gate may see one or both, but all it names must be ready.
	if len(names) == 0 || len(kinds) != len(names) {
		t.Fatalf("names %v kinds %v", names, kinds)
	}
}

func TestCrdReadyTimesOutNamingTheCRDAndItsConditions(t *testing.T) {
	s := newServer(t)
	group := uniqueGroup(t)
	// Two CRDs claiming one kind: the second never gets its names accepted.
	testenv.Apply(t, testenv.CRD(group, "Gadget", "gadgets"))
	conflicting := strings.Replace(testenv.CRD(group, "Gadget", "gizmos"), "singular: gadget", "singular: gizmo", 1)
	testenv.Apply(t, conflicting)
	ch := createAsync(t, s, "CrdReady", map[string]property.Value{"names": strs("gizmos." + group), "timeout": property.New("3s")})
	r := await(t, ch, 30*time.Second)
	if r.err == nil {
		t.Fatal("gate passed on a CRD whose names were not accepted")
	}
	for _, want := range []string{"timed out after", "gizmos." + group, "NamesAccepted=False", "KindConflict"} {
		if !strings.Contains(r.err.Error(), want) {
			t.Errorf("error %q does not contain %q", r.err, want)
		}
	}
}

func TestCrdReadyPreviewDoesNotBlockOrCallTheCluster(t *testing.T) {
	// A kubeconfig pointing at a port that counts connections: preview must make none.
	kubeconfig, dials := listeningKubeconfig(t)
	s := newServer(t, kubeconfig)
	chk, err := s.Check(p.CheckRequest{Urn: urn("CrdReady"), Inputs: property.NewMap(map[string]property.Value{
		"names": strs("nothings.never.test")})})
	if err != nil || len(chk.Failures) > 0 {
		t.Fatalf("check: %v %v", err, chk.Failures)
	}
	resp, err := s.Create(p.CreateRequest{Urn: urn("CrdReady"), Properties: chk.Inputs, DryRun: true})
	if err != nil {
		t.Fatalf("preview: %v", err)
	}
	if n := dials.Load(); n != 0 {
		t.Errorf("preview connected to the cluster %d times", n)
	}
	if v, ok := resp.Properties.GetOk("kinds"); ok && !v.IsComputed() {
		t.Errorf("kinds should be unknown during preview, got %v", v)
	}
}

func TestCrdReadyRejectsBadInputAtCheck(t *testing.T) {
	s := newServer(t)
	cases := map[string]struct {
		inputs map[string]property.Value
		field  string
		reason string
	}{
		"nothing to wait for": {map[string]property.Value{}, "names", "give CRD names"},
		"invalid name":        {map[string]property.Value{"names": strs("Bad_Name.example.com")}, "names[0]", "not a valid CRD name"},
		"name without group":  {map[string]property.Value{"names": strs("widgets")}, "names[0]", "<plural>.<group>"},
		"empty name":          {map[string]property.Value{"names": strs("")}, "names[0]", "must not be empty"},
		"bad group":           {map[string]property.Value{"group": property.New("core")}, "group", "not a CRD API group"},
		"bad timeout": {map[string]property.Value{"names": strs("a.b.c"), "timeout": property.New("soon")},
			"timeout", "not a duration"},
		"negative timeout": {map[string]property.Value{"names": strs("a.b.c"), "timeout": property.New("-5s")},
			"timeout", "must be positive"},
		"conversion probe without a group": {map[string]property.Value{"names": strs("a.b.c"),
			"conversionProbes": property.New([]property.Value{toProperty(map[string]any{"apiVersion": "v1", "kind": "Widget"})})},
			"conversionProbes[0]", "apiVersion <group>/<version> and kind"},
		"conversion probe without a kind": {map[string]property.Value{"names": strs("a.b.c"),
			"conversionProbes": property.New([]property.Value{toProperty(map[string]any{"apiVersion": "b.c/v2"})})},
			"conversionProbes[0]", "apiVersion <group>/<version> and kind"},
		"conversion probes with conversion false": {map[string]property.Value{"names": strs("a.b.c"), "conversion": property.New(false),
			"conversionProbes": property.New([]property.Value{toProperty(map[string]any{"apiVersion": "b.c/v2", "kind": "A"})})},
			"conversionProbes", "never be used"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			chk, err := s.Check(p.CheckRequest{Urn: urn("CrdReady"), Inputs: property.NewMap(tc.inputs)})
			if err != nil {
				t.Fatalf("check returned an error instead of failures: %v", err)
			}
			for _, f := range chk.Failures {
				if f.Property == tc.field && strings.Contains(f.Reason, tc.reason) {
					return
				}
			}
			t.Errorf("want a failure on %s containing %q, got %+v", tc.field, tc.reason, chk.Failures)
		})
	}
}

func TestCrdReadyReadReportsDriftAsGone(t *testing.T) {
	s := newServer(t)
	group := uniqueGroup(t)
	crd := testenv.Apply(t, testenv.CRD(group, "Thing", "things"))[0]
	r := await(t, createAsync(t, s, "CrdReady", map[string]property.Value{"names": strs("things." + group)}), 30*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	read, err := s.Read(p.ReadRequest{ID: r.resp.ID, Urn: urn("CrdReady"), Properties: r.resp.Properties,
		Inputs: property.NewMap(map[string]property.Value{"names": strs("things." + group)})})
	if err != nil || read.ID != r.resp.ID {
		t.Fatalf("read of a ready gate: id=%q err=%v", read.ID, err)
	}
	if err := testenv.Resource(t, crd).Delete(context.Background(), crd.GetName(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Deletion is asynchronous; once the CRD is gone (or terminating) refresh must say so.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		read, err = s.Read(p.ReadRequest{ID: r.resp.ID, Urn: urn("CrdReady"), Properties: r.resp.Properties,
			Inputs: property.NewMap(map[string]property.Value{"names": strs("things." + group)})})
		if err != nil {
			t.Fatal(err)
		}
		if read.ID == "" {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatal("refresh still reports the gate after its CRD was deleted")
}

// CrdReady asks discovery for every checked CRD's own resource: another kind of the same
// group/version being served says nothing of it.
func TestCrdReadyDiscoveryPerKind(t *testing.T) {
	group := uniqueGroup(t)
	testenv.Apply(t, testenv.CRD(group, "Widget", "widgets"))
	testenv.Apply(t, testenv.CRD(group, "Gadget", "gadgets"))
	waitServed(t, group) // both Established and served by the real API server
	kp := newKubeProxy(t)
	kp.hideResource(group+"/v1", "gadgets") // as if discovery had not caught up with gadgets yet
	s := newServer(t, kp.kubeconfig(t, nil))
	ch := createAsync(t, s, "CrdReady", props("names", strs("widgets."+group, "gadgets."+group), "timeout", "60s"))
	mustNotReturn(t, ch, 1500*time.Millisecond)
	kp.unhide()
	if r := await(t, ch, 30*time.Second); r.err != nil {
		t.Fatal(r.err)
	}
	// The group form too.
	kp.hideResource(group+"/v1", "widgets")
	ch = createAsync(t, s, "CrdReady", props("group", group, "timeout", "60s"))
	mustNotReturn(t, ch, 1500*time.Millisecond)
	kp.unhide()
	if r := await(t, ch, 30*time.Second); r.err != nil {
		t.Fatal(r.err)
	}
}
