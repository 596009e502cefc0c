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
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/status"
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

var apiServiceResource = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// awaitCondition polls the API server (test side only) until obj's condition has the status.
func awaitCondition(t *testing.T, get func() (*unstructured.Unstructured, error), typ, want string) *unstructured.Unstructured {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		o, err := get()
		if err == nil {
			if c, ok := status.FindCondition(o, typ); ok && c.Status == want {
				return o
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never became %s: %v %v", typ, want, err, o)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestResourceReadyDefaultAPIServiceAndAvailableFalse: in the default (kstatus) mode an
// APIService the API server reports Available=False, and a custom resource whose only condition
// is Available=False, must not pass; each passes once Available=True. Messages about these
// cluster-scoped kinds carry no namespace.
func TestResourceReadyDefaultAPIServiceAndAvailableFalse(t *testing.T) {
	group := uniqueGroup(t)
	name := "v1alpha1." + group
	// A Service-backed APIService whose Service does not exist: kube-apiserver's availability
	// controller reports Available=False (ServiceNotFound) without dialling anything.
	testenv.Apply(t, fmt.Sprintf(`apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: %s}
spec:
  group: %s
  version: v1alpha1
  groupPriorityMinimum: 100
  versionPriority: 100
  insecureSkipTLSVerify: true
  service: {name: missing-metrics-server, namespace: default, port: 443}`, name, group))
	api := testenv.Dynamic(t).Resource(apiServiceResource)
	t.Cleanup(func() { _ = api.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	get := func() (*unstructured.Unstructured, error) {
		return api.Get(context.Background(), name, metav1.GetOptions{})
	}
	recorded := awaitCondition(t, get, "Available", "False")
	t.Logf("recorded: %v", recorded.Object["status"])

	s := newServer(t)
	ch := createAsync(t, s, "ResourceReady", props("apiVersion", "apiregistration.k8s.io/v1", "kind", "APIService", "name", name, "timeout", "60s"))
	mustNotReturn(t, ch, 1500*time.Millisecond) // Available=False: passed at once before the fix

	// The timeout names the object without a namespace and quotes the API server's reason.
	r := await(t, createAsync(t, s, "ResourceReady", props("apiVersion", "apiregistration.k8s.io/v1", "kind", "APIService", "name", name, "timeout", "2s")), 30*time.Second)
	if r.err == nil {
		t.Fatal("gate passed on Available=False")
	}
	for _, want := range []string{"waiting for APIService " + name + " (kstatus)", "Available=False (ServiceNotFound", "kubectl describe apiservice.apiregistration.k8s.io " + name} {
		if !strings.Contains(r.err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, r.err)
		}
	}
	if strings.Contains(r.err.Error(), "default/") || strings.Contains(r.err.Error(), "-n default") {
		t.Errorf("a cluster-scoped kind is shown with a namespace: %v", r.err)
	}

	// A local APIService (no service) is Available=True at once.
	patch := `{"spec":{"service":null,"insecureSkipTLSVerify":false}}`
	if _, err := api.Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if r := await(t, ch, 30*time.Second); r.err != nil {
		t.Fatalf("Available=True must pass: %v", r.err)
	}

	// A custom resource whose only condition is Available=False.
	crGroup := widgetCRD(t)
	w := testenv.Apply(t, fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata: {name: w, namespace: default}\nspec: {size: 1}", crGroup))[0]
	setStatus(t, w, map[string]any{"conditions": []any{cond("Available", "False", 1)}})
	cr := createAsync(t, s, "ResourceReady", props("apiVersion", crGroup+"/v1", "kind", "Widget", "namespace", "default", "name", "w", "timeout", "60s"))
	mustNotReturn(t, cr, 1500*time.Millisecond) // passed at once before the fix
	setStatus(t, w, map[string]any{"conditions": []any{cond("Available", "True", 1), cond("Degraded", "True", 1)}})
	mustNotReturn(t, cr, time.Second) // Degraded=True
	setStatus(t, w, map[string]any{"conditions": []any{cond("Available", "True", 1), cond("Degraded", "False", 1)}})
	if r := await(t, cr, 30*time.Second); r.err != nil {
		t.Fatal(r.err)
	}
}

// TestResourceReadyClusterScopedMessages: a Node is shown as "Node kwok-node-0", and its
// describe hint has no -n flag.
func TestResourceReadyClusterScopedMessages(t *testing.T) {
	s := newServer(t)
	r := await(t, createAsync(t, s, "ResourceReady", props("apiVersion", "v1", "kind", "Node", "name", "kwok-node-0",
		"condition", map[string]property.Value{"type": property.New("NeverSet")}, "timeout", "2s")), 30*time.Second)
	if r.err == nil {
		t.Fatal("gate passed")
	}
	for _, want := range []string{"waiting for Node kwok-node-0 (condition)", "check: kubectl describe node kwok-node-0"} {
		if !strings.Contains(r.err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, r.err)
		}
	}
	if strings.Contains(r.err.Error(), "default/kwok-node-0") || strings.Contains(r.err.Error(), "-n default") {
		t.Errorf("a cluster-scoped kind is shown with a namespace: %v", r.err)
	}
}

// TestResourceReadyDeletedResolvesTheKindAtAnyServedVersion: `deleted` on an apiVersion the
// server does not serve must not pass while the object exists under another version; an
// unknown kind is an error naming what is served.
func TestResourceReadyDeletedResolvesTheKindAtAnyServedVersion(t *testing.T) {
	ns := testenv.Namespace(t, "del")
	d := testenv.Apply(t, deployment(ns, "web", "registry.local/web:1", 1))[0]
	s := newServer(t)
	ch := createAsync(t, s, "ResourceReady", props("apiVersion", "apps/v1beta1", "kind", "Deployment", "namespace", ns, "name", "web", "deleted", true, "timeout", "60s"))
	mustNotReturn(t, ch, 1500*time.Millisecond) // passed at once ("kind not served: nothing exists") before the fix
	if err := testenv.Resource(t, d).Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if r := await(t, ch, 30*time.Second); r.err != nil {
		t.Fatalf("the Deployment is gone: %v", r.err)
	}

	// A misspelt kind fails at once, naming the kinds the group serves.
	r := await(t, createAsync(t, s, "ResourceReady", props("apiVersion", "apps/v1", "kind", "Deploymnet", "namespace", ns, "name", "web", "deleted", true, "timeout", "5m")), 30*time.Second)
	if r.err == nil || !strings.Contains(r.err.Error(), `"Deploymnet"`) || !strings.Contains(r.err.Error(), "Deployment, ReplicaSet") {
		t.Fatalf("want an error naming the served kinds, got %v", r.err)
	}
	// Outside `deleted`, an apiVersion the server does not serve for a built-in kind fails at once too.
	r = await(t, createAsync(t, s, "ResourceReady", props("apiVersion", "apps/v1beta1", "kind", "Deployment", "namespace", ns, "name", "web", "exists", true, "timeout", "5m")), 30*time.Second)
	if r.err == nil || !strings.Contains(r.err.Error(), "it serves Deployment as apps/v1") {
		t.Fatalf("want an error naming apps/v1, got %v", r.err)
	}
}

// TestResourceReadyCELResultOfTheWrongType: a CEL expression that returns a non-bool fails at
// once (a dynamic field) or at preview (a field every object has).
func TestResourceReadyCELResultOfTheWrongType(t *testing.T) {
	ns := testenv.Namespace(t, "cel")
	testenv.Apply(t, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: %s}\ndata: {phase: Running}", ns))
	s := newServer(t)
	start := time.Now()
	r := await(t, createAsync(t, s, "ResourceReady", props("apiVersion", "v1", "kind", "ConfigMap", "namespace", ns, "name", "c",
		"cel", "object.data.phase", "timeout", "5m")), 30*time.Second)
	if r.err == nil || !strings.Contains(r.err.Error(), `returned "Running" (string), not a bool`) {
		t.Fatalf("want a terminal type error, got %v", r.err)
	}
	t.Logf("failed after %s", time.Since(start).Round(time.Millisecond))
	r = await(t, createAsync(t, s, "ResourceReady", props("apiVersion", "v1", "kind", "ConfigMap", "namespace", ns, "name", "c",
		"exists", true, "failedCel", "object.data.phase", "timeout", "5m")), 30*time.Second)
	if r.err == nil || !strings.Contains(r.err.Error(), "failedCel") || !strings.Contains(r.err.Error(), "not a bool") {
		t.Fatalf("want a terminal failedCel type error, got %v", r.err)
	}
}

// TestResourceReadyKindRulesOnTheAPIServer: kstatus calls each of these Current; the default
// mode must not pass them (item 1). Each sits beside a state of the same kind that passes.
func TestResourceReadyKindRulesOnTheAPIServer(t *testing.T) {
	ns := testenv.Namespace(t, "kinds")
	testenv.ServiceAccountReady(t, ns) // its Pods are created at once: without it the API server refuses them

	t.Run("Pod: evicted fails, Succeeded fails, Running and Ready passes", func(t *testing.T) {
		evicted := testenv.Apply(t, pod(ns, "evicted", nowhere))[0]
		writeStatus(t, evicted, map[string]any{"phase": "Failed", "reason": "Evicted", "message": "The node was low on resource: memory."})
		mustFailWith(t, defaultGate(t, ns, "v1", "Pod", "evicted", "60s"), "Evicted", "will not run again")
		done := testenv.Apply(t, pod(ns, "done", nowhere))[0]
		writeStatus(t, done, map[string]any{"phase": "Succeeded", "conditions": []any{map[string]any{"type": "Ready", "status": "False", "reason": "PodCompleted"}}})
		mustFailWith(t, defaultGate(t, ns, "v1", "Pod", "done", "60s"), "phase Succeeded")
		testenv.Apply(t, pod(ns, "running", "nodeSelector: {type: kwok}"))
		mustPass(t, defaultGate(t, ns, "v1", "Pod", "running", "60s"))
	})

	t.Run("Job: started is not complete; Complete passes", func(t *testing.T) {
		testenv.Apply(t, fmt.Sprintf(`apiVersion: batch/v1
kind: Job
metadata: {name: stuck, namespace: %s}
spec:
  template:
    spec:
      restartPolicy: Never
      %s
      containers: [{name: build, image: registry.local/builder:1}]`, ns, nowhere))
		pollUntil(t, "the Job controller starts the Job", func() bool {
			j, err := testenv.CP.Client.BatchV1().Jobs(ns).Get(context.Background(), "stuck", metav1.GetOptions{})
			return err == nil && j.Status.StartTime != nil
		})
		mustFailWith(t, defaultGate(t, ns, "batch/v1", "Job", "stuck", "3s"), "not complete")
		testenv.Apply(t, fmt.Sprintf(`apiVersion: batch/v1
kind: Job
metadata: {name: quick, namespace: %s}
spec:
  template:
    spec:
      restartPolicy: Never
      nodeSelector: {type: kwok}
      containers: [{name: build, image: registry.local/builder:1}]`, ns))
		mustPass(t, defaultGate(t, ns, "batch/v1", "Job", "quick", "60s"))
	})

	t.Run("StatefulSet OnDelete: no pod ready does not pass", func(t *testing.T) {
		testenv.Apply(t, statefulSet(ns, "nopods", 1, "OnDelete", nowhere))
		// The near miss is the controller having seen the StatefulSet with no pod ready; before it
		// observes generation 1 the gate rightly says something else (CI's load once took >3 s).
		pollUntil(t, "the StatefulSet controller observes nopods", func() bool {
			s, err := testenv.CP.Client.AppsV1().StatefulSets(ns).Get(context.Background(), "nopods", metav1.GetOptions{})
			return err == nil && s.Status.ObservedGeneration >= 1
		})
		mustFailWith(t, defaultGate(t, ns, "apps/v1", "StatefulSet", "nopods", "3s"), "0 of 1 pods ready")
		testenv.Apply(t, statefulSet(ns, "pods", 1, "OnDelete", "nodeSelector: {type: kwok}"))
		mustPass(t, defaultGate(t, ns, "apps/v1", "StatefulSet", "pods", "60s"))
	})

	t.Run("ReplicationController (no kstatus rule): no pod ready does not pass", func(t *testing.T) {
		rc := func(name, placement string) string {
			return fmt.Sprintf(`apiVersion: v1
kind: ReplicationController
metadata: {name: %[1]s, namespace: %[2]s}
spec:
  replicas: 1
  selector: {app: %[1]s}
  template:
    metadata: {labels: {app: %[1]s}}
    spec:
      %[3]s
      containers: [{name: app, image: registry.local/app:1}]`, name, ns, placement)
		}
		testenv.Apply(t, rc("rc-nowhere", nowhere))
		pollUntil(t, "the ReplicationController manager observes rc-nowhere", func() bool {
			r, err := testenv.CP.Client.CoreV1().ReplicationControllers(ns).Get(context.Background(), "rc-nowhere", metav1.GetOptions{})
			return err == nil && r.Status.ObservedGeneration >= 1
		})
		mustFailWith(t, defaultGate(t, ns, "v1", "ReplicationController", "rc-nowhere", "3s"), "0 of 1 replicas ready")
		testenv.Apply(t, rc("rc-kwok", "nodeSelector: {type: kwok}"))
		mustPass(t, defaultGate(t, ns, "v1", "ReplicationController", "rc-kwok", "60s"))
	})

	t.Run("Service LoadBalancer: no address does not pass; an address passes", func(t *testing.T) {
		svc := testenv.Apply(t, fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: lb, namespace: %s}
spec:
  type: LoadBalancer
  selector: {app: lb}
  ports: [{port: 443}]`, ns))[0]
		mustFailWith(t, defaultGate(t, ns, "v1", "Service", "lb", "3s"), "no ingress address")
		ch := defaultGate(t, ns, "v1", "Service", "lb", "60s")
		writeStatus(t, svc, map[string]any{"loadBalancer": map[string]any{"ingress": []any{map[string]any{"ip": "192.0.2.10"}}}})
		mustPass(t, ch)
	})

	t.Run("PersistentVolumeClaim: Lost fails (its volume is gone)", func(t *testing.T) {
		// A claim bound to a volume that does not exist: the PV controller itself marks it Lost.
		testenv.Apply(t, fmt.Sprintf(`apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: lost, namespace: %s, annotations: {pv.kubernetes.io/bind-completed: "yes"}}
spec:
  accessModes: [ReadWriteOnce]
  volumeName: pv-that-does-not-exist
  resources: {requests: {storage: 1Gi}}`, ns))
		pollUntil(t, "the PV controller marks the claim Lost", func() bool {
			c, err := testenv.CP.Client.CoreV1().PersistentVolumeClaims(ns).Get(context.Background(), "lost", metav1.GetOptions{})
			return err == nil && c.Status.Phase == corev1.ClaimLost
		})
		mustFailWith(t, defaultGate(t, ns, "v1", "PersistentVolumeClaim", "lost", "60s"), "Lost")
	})

	t.Run("the other kinds pass once their controllers say so", func(t *testing.T) {
		testenv.Apply(t, deployment(ns, "web", "registry.local/web:1", 2))
		testenv.Apply(t, fmt.Sprintf(`apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: rs, namespace: %[1]s}
spec:
  replicas: 1
  selector: {matchLabels: {app: rs}}
  template:
    metadata: {labels: {app: rs}}
    spec:
      nodeSelector: {type: kwok}
      containers: [{name: app, image: registry.local/app:1}]
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: ds, namespace: %[1]s}
spec:
  selector: {matchLabels: {app: ds}}
  template:
    metadata: {labels: {app: ds}}
    spec:
      nodeSelector: {type: kwok}
      containers: [{name: app, image: registry.local/app:1}]
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly, namespace: %[1]s}
spec:
  schedule: "@daily"
  jobTemplate: {spec: {template: {spec: {restartPolicy: Never, containers: [{name: app, image: registry.local/app:1}]}}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cm, namespace: %[1]s}
---
apiVersion: v1
kind: Secret
metadata: {name: sec, namespace: %[1]s}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: %[1]s}
spec: {selector: {app: web}, ports: [{port: 443}]}`, ns))
		for _, o := range [][3]string{{"apps/v1", "Deployment", "web"}, {"apps/v1", "ReplicaSet", "rs"}, {"apps/v1", "DaemonSet", "ds"},
			{"batch/v1", "CronJob", "nightly"}, {"v1", "ConfigMap", "cm"}, {"v1", "Secret", "sec"}, {"v1", "Service", "web"}} {
			mustPass(t, defaultGate(t, ns, o[0], o[1], o[2], "60s"))
		}
		group := widgetCRD(t)
		mustPass(t, createAsync(t, newServer(t), "ResourceReady", props("apiVersion", "apiextensions.k8s.io/v1", "kind", "CustomResourceDefinition",
			"name", "widgets."+group, "timeout", "60s")))
	})

	t.Run("PodDisruptionBudget: computed by the disruption controller passes", func(t *testing.T) {
		testenv.Apply(t, fmt.Sprintf(`apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: budget, namespace: %s}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: running}}`, ns))
		mustPass(t, defaultGate(t, ns, "policy/v1", "PodDisruptionBudget", "budget", "60s"))
	})
}

// TestResourceReadyConditionWithoutObservedGeneration (Docs): a condition that carries no
// observedGeneration is not taken as current while status.observedGeneration is behind.
func TestResourceReadyConditionWithoutObservedGeneration(t *testing.T) {
	group := widgetCRD(t)
	w := testenv.Apply(t, fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata: {name: w, namespace: default}\nspec: {size: 1}", group))[0]
	ready := map[string]any{"type": "Ready", "status": "True", "reason": "Test", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
	w = setStatus(t, w, map[string]any{"observedGeneration": int64(1), "conditions": []any{ready}})
	w.Object["spec"] = map[string]any{"size": int64(2)} // generation 2
	w, err := testenv.Resource(t, w).Update(context.Background(), w, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t)
	in := props("apiVersion", group+"/v1", "kind", "Widget", "namespace", "default", "name", "w",
		"condition", map[string]property.Value{"type": property.New("Ready")}, "timeout", "3s")
	mustFailWith(t, createAsync(t, s, "ResourceReady", in), "status.observedGeneration 1 < generation 2")
	setStatus(t, w, map[string]any{"observedGeneration": int64(2), "conditions": []any{ready}})
	in["timeout"] = property.New("60s")
	mustPass(t, createAsync(t, s, "ResourceReady", in))
}
