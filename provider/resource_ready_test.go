package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

func props(kv ...any) map[string]property.Value {
	m := map[string]property.Value{}
	for i := 0; i < len(kv); i += 2 {
		switch v := kv[i+1].(type) {
		case string:
			m[kv[i].(string)] = property.New(v)
		case bool:
			m[kv[i].(string)] = property.New(v)
		case int:
			m[kv[i].(string)] = property.New(float64(v))
		case map[string]property.Value:
			m[kv[i].(string)] = property.New(property.NewMap(v))
		case property.Value:
			m[kv[i].(string)] = v
		}
	}
	return m
}

// widgetCRD installs a CRD with a status subresource and returns its group.
func widgetCRD(t *testing.T) string {
	group := uniqueGroup(t)
	testenv.Apply(t, testenv.CRD(group, "Widget", "widgets"))
	waitServed(t, group)
	return group
}

func waitServed(t testing.TB, group string) {
	s := newServer(t)
	r := await(t, createAsync(t, s, "CrdReady", map[string]property.Value{"group": property.New(group)}), 30*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
}

// setStatus plays a controller: it writes obj's status through the status subresource.
func setStatus(t *testing.T, obj *unstructured.Unstructured, status map[string]any) *unstructured.Unstructured {
	t.Helper()
	ri := testenv.Resource(t, obj)
	cur, err := ri.Get(context.Background(), obj.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Object["status"] = status
	out, err := ri.UpdateStatus(context.Background(), cur, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func cond(typ, status string, gen int64) map[string]any {
	return map[string]any{"type": typ, "status": status, "reason": "Test", "message": "set by the test",
		"observedGeneration": gen, "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
}

func TestResourceReadyConditionIgnoresStaleConditions(t *testing.T) {
	group := widgetCRD(t)
	w := testenv.Apply(t, fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata: {name: w, namespace: default}\nspec: {size: 1}", group))[0]
	// Bump the generation to 2 by changing spec.
	w.Object["spec"] = map[string]any{"size": int64(2)}
	w, err := testenv.Resource(t, w).Update(context.Background(), w, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t)
	ch := createAsync(t, s, "ResourceReady", props("apiVersion", group+"/v1", "kind", "Widget", "name", "w",
		"condition", map[string]property.Value{"type": property.New("Ready")}, "timeout", "60s"))
	mustNotReturn(t, ch, time.Second) // no status at all
	setStatus(t, w, map[string]any{"conditions": []any{cond("Ready", "True", 1)}})
	mustNotReturn(t, ch, time.Second) // Ready=True, but for generation 1 of 2
	setStatus(t, w, map[string]any{"conditions": []any{cond("Ready", "True", 2)}})
	r := await(t, ch, 20*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := r.resp.Properties.Get("uid").AsString(); got != string(w.GetUID()) {
		t.Errorf("uid = %q, want %q", got, w.GetUID())
	}
	if got := outStrings(t, r.resp.Properties, "matched"); len(got) != 1 || got[0] != "default/w" {
		t.Errorf("matched = %v", got)
	}
}

func TestResourceReadyDefaultDoesNotPassAStatuslessCustomResource(t *testing.T) {
	group := widgetCRD(t)
	w := testenv.Apply(t, fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata: {name: w, namespace: default}\nspec: {size: 1}", group))[0]
	s := newServer(t)
	ch := createAsync(t, s, "ResourceReady", props("apiVersion", group+"/v1", "kind", "Widget", "name", "w", "timeout", "60s"))
	mustNotReturn(t, ch, 1500*time.Millisecond) // kstatus alone would call this Current
	setStatus(t, w, map[string]any{"observedGeneration": int64(1)})
	if r := await(t, ch, 20*time.Second); r.err != nil {
		t.Fatal(r.err)
	}
}

func TestResourceReadyJSONPathCELAndFailedCEL(t *testing.T) {
	group := widgetCRD(t)
	w := testenv.Apply(t, fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata: {name: w, namespace: default}\nspec: {size: 1}", group))[0]
	s := newServer(t)
	jp := createAsync(t, s, "ResourceReady", props("apiVersion", group+"/v1", "kind", "Widget", "name", "w",
		"jsonPath", "{.status.phase}", "value", "Running", "timeout", "60s"))
	cel := createAsync(t, s, "ResourceReady", props("apiVersion", group+"/v1", "kind", "Widget", "name", "w",
		"cel", `object.status.replicas >= 2 && object.status.phase == "Running"`, "timeout", "60s"))
	mustNotReturn(t, jp, time.Second)
	setStatus(t, w, map[string]any{"phase": "Running", "replicas": int64(2)})
	for _, ch := range []<-chan gateResult{jp, cel} {
		if r := await(t, ch, 20*time.Second); r.err != nil {
			t.Fatal(r.err)
		}
	}
	// failedCel ends the wait at once with the reason, long before the timeout.
	failing := createAsync(t, s, "ResourceReady", props("apiVersion", group+"/v1", "kind", "Widget", "name", "w",
		"jsonPath", "{.status.phase}", "value", "Done", "failedCel", `object.status.phase == "Failed"`, "timeout", "10m"))
	setStatus(t, w, map[string]any{"phase": "Failed"})
	r := await(t, failing, 20*time.Second)
	if r.err == nil || !strings.Contains(r.err.Error(), "failedCel holds") {
		t.Fatalf("want a fast failure from failedCel, got %v", r.err)
	}
}

func TestResourceReadyExistsDeletedAndSelector(t *testing.T) {
	ns := testenv.Namespace(t, "rr")
	s := newServer(t)
	exists := createAsync(t, s, "ResourceReady", props("apiVersion", "v1", "kind", "ConfigMap", "namespace", ns, "name", "late", "exists", true))
	sel := createAsync(t, s, "ResourceReady", props("apiVersion", "v1", "kind", "ConfigMap", "namespace", ns,
		"selector", "app=web", "minCount", 2, "exists", true))
	mustNotReturn(t, exists, time.Second)
	cm := testenv.Apply(t, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: late, namespace: %s, labels: {app: web}}", ns))[0]
	if r := await(t, exists, 20*time.Second); r.err != nil {
		t.Fatal(r.err)
	}
	mustNotReturn(t, sel, 500*time.Millisecond) // 1 of at least 2
	testenv.Apply(t, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: second, namespace: %s, labels: {app: web}}", ns))
	r := await(t, sel, 20*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := outStrings(t, r.resp.Properties, "matched"); len(got) != 2 {
		t.Errorf("matched = %v", got)
	}
	deleted := createAsync(t, s, "ResourceReady", props("apiVersion", "v1", "kind", "ConfigMap", "namespace", ns, "name", "late", "deleted", true))
	mustNotReturn(t, deleted, 500*time.Millisecond)
	if err := testenv.Resource(t, cm).Delete(context.Background(), "late", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if r := await(t, deleted, 20*time.Second); r.err != nil {
		t.Fatal(r.err)
	}
}

func TestResourceReadyWaitsForAKindWhoseCRDArrivesLater(t *testing.T) {
	group := uniqueGroup(t)
	s := newServer(t)
	ch := createAsync(t, s, "ResourceReady", props("apiVersion", group+"/v1", "kind", "Widget", "namespace", "default", "name", "w", "exists", true, "timeout", "60s"))
	mustNotReturn(t, ch, time.Second)
	testenv.Apply(t, testenv.CRD(group, "Widget", "widgets"))
	testenv.Apply(t, fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata: {name: w, namespace: default}", group))
	if r := await(t, ch, 30*time.Second); r.err != nil {
		t.Fatal(r.err)
	}
	// A kind that never appears times out with the hint that its CRD may be missing.
	r := await(t, createAsync(t, s, "ResourceReady", props("apiVersion", "nothing.readiness.test/v1", "kind", "Ghost", "name", "g", "timeout", "2s")), 20*time.Second)
	if r.err == nil || !strings.Contains(r.err.Error(), "no matches for kind") || !strings.Contains(r.err.Error(), "CRD") {
		t.Fatalf("want a timeout naming the missing kind and its CRD, got %v", r.err)
	}
}

func TestResourceReadyPVCWaitForFirstConsumer(t *testing.T) {
	ns := testenv.Namespace(t, "pvc")
	sc := fmt.Sprintf("wffc-%d", time.Now().UnixNano()%1_000_000)
	testenv.Apply(t, fmt.Sprintf(`apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: %s}
provisioner: example.com/none
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: %s}
spec:
  storageClassName: %s
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}`, sc, ns, sc))
	s := newServer(t)
	// The PV controller marks it Pending with WaitForFirstConsumer; that is ready by design.
	r := await(t, createAsync(t, s, "ResourceReady", props("apiVersion", "v1", "kind", "PersistentVolumeClaim", "namespace", ns, "name", "data", "timeout", "60s")), 30*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	r = await(t, createAsync(t, s, "ResourceReady", props("apiVersion", "v1", "kind", "PersistentVolumeClaim", "namespace", ns, "name", "data", "strictPvc", true, "timeout", "2s")), 30*time.Second)
	if r.err == nil || !strings.Contains(r.err.Error(), "Pending") {
		t.Fatalf("strictPvc must wait for Bound; got %v", r.err)
	}
}

func TestResourceReadyRejectsBadInputAtCheck(t *testing.T) {
	s := newServer(t)
	base := func(kv ...any) map[string]property.Value {
		return props(append([]any{"apiVersion", "v1", "kind", "ConfigMap", "name", "x"}, kv...)...)
	}
	cases := map[string]struct {
		inputs        map[string]property.Value
		field, reason string
	}{
		"bad jsonPath":              {base("jsonPath", "{.status["), "jsonPath", "invalid JSONPath"},
		"bad CEL":                   {base("cel", "object.status.phase =="), "cel", "invalid CEL"},
		"non-bool CEL":              {base("cel", `"yes"`), "cel", "must return bool"},
		"two modes":                 {base("exists", true, "cel", "true"), "exists", "exactly one of"},
		"value without path":        {base("value", "x"), "value", "only apply with jsonPath"},
		"name and selector":         {base("selector", "app=x"), "selector", "not both"},
		"bad selector":              {props("apiVersion", "v1", "kind", "ConfigMap", "selector", "app in (x"), "selector", "invalid label selector"},
		"no target":                 {props("apiVersion", "v1", "kind", "ConfigMap"), "name", "name or a label selector"},
		"bad name":                  {props("apiVersion", "v1", "kind", "ConfigMap", "name", "Not_Valid"), "name", "not a valid object name"},
		"bad namespace":             {base("namespace", "UPPER"), "namespace", "not a valid namespace"},
		"bad apiVersion":            {props("apiVersion", "a/b/c", "kind", "ConfigMap", "name", "x"), "apiVersion", "not an apiVersion"},
		"bad condition":             {base("condition", map[string]property.Value{"type": property.New("Ready"), "status": property.New("Yes")}), "condition.status", "not True, False or Unknown"},
		"bad failedCel":             {base("exists", true, "failedCel", "object.("), "failedCel", "invalid CEL"},
		"cel returns a name":        {base("cel", "object.metadata.name"), "cel", "returns string; it must return bool"},
		"failedCel returns a label": {base("exists", true, "failedCel", `object.metadata.labels["app"]`), "failedCel", "returns string; it must return bool"},
		"bad regex":                 {base("jsonPath", "{.status.phase}", "regex", "(Running"), "regex", "invalid regex"},
		"value and regex":           {base("jsonPath", "{.status.phase}", "value", "x", "regex", "x"), "regex", "either value or regex"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			chk, err := s.Check(p.CheckRequest{Urn: urn("ResourceReady"), Inputs: property.NewMap(tc.inputs)})
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

// Every input of ResourceReady that is not the gate's own (GateArgs) reaches the rule compiled
// from it: a new input forgotten in rule() would be accepted and then ignored.
func TestResourceReadyRuleCarriesEveryInput(t *testing.T) {
	var args ResourceReadyArgs
	v := reflect.ValueOf(&args).Elem()
	want := map[string]any{}
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		if f.Anonymous { // GateArgs: the gate's timeout and triggers, not the rule's
			continue
		}
		tag := strings.Split(f.Tag.Get("pulumi"), ",")[0]
		field := v.Field(i)
		switch x := field.Addr().Interface().(type) {
		case *string:
			*x = tag
		case **string:
			s := tag
			*x = &s
		case **int:
			n := i + 1
			*x = &n
		case **bool:
			b := true
			*x = &b
		case **Condition:
			st := "False"
			*x = &Condition{Type: "Synced", Status: &st}
		default:
			t.Fatalf("input %s (%s): teach this test its type", tag, f.Type)
		}
		b, _ := json.Marshal(field.Interface())
		var val any
		_ = json.Unmarshal(b, &val)
		want[tag] = val
	}
	want["condition"] = map[string]any{"type": "Synced", "status": "False"} // its fields carry pulumi tags, not JSON ones
	b, err := json.Marshal(args.rule())
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	for tag, w := range want {
		if !reflect.DeepEqual(got[tag], w) {
			t.Errorf("input %s = %v reaches the rule as %v", tag, w, got[tag])
		}
	}
}
