// Package testenv gives test packages one shared local control plane (started in TestMain)
// and small helpers to create objects from YAML, as a user's manifests would.
package testenv

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/readiness-io/pulumi-readiness/internal/controlplane"
)

// CP is the package's shared control plane, set by Main.
var CP *controlplane.ControlPlane

// Main starts the control plane, runs the tests and stops it. Use from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(testenv.Main(m, controlplane.Options{})) }
func Main(m *testing.M, opts controlplane.Options) int {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	opts.Logf = func(f string, a ...any) { fmt.Fprintf(os.Stderr, "controlplane: "+f+"\n", a...) }
	cp, err := controlplane.Start(ctx, opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting the local control plane: %v\n", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "controlplane: started in %s at %s\n", cp.StartTime.Round(time.Millisecond), cp.Host)
	CP = cp
	defer cp.Stop()
	return m.Run()
}

// Dynamic returns a dynamic client for the control plane.
func Dynamic(t testing.TB) dynamic.Interface {
	t.Helper()
	d, err := dynamic.NewForConfig(CP.Config)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Apply creates every YAML document in docs (separated by ---) and returns the created objects.
func Apply(t testing.TB, docs string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(docs, "\n---") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		u := Object(t, doc)
		created, err := resourceFor(t, u).Create(context.Background(), u, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
		}
		out = append(out, created)
	}
	return out
}

// Object decodes one YAML document.
func Object(t testing.TB, doc string) *unstructured.Unstructured {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatalf("decoding YAML: %v\n%s", err, doc)
	}
	m := map[string]any{}
	if err := utiljson.Unmarshal(j, &m); err != nil { // integers as int64, as from the API server
		t.Fatalf("decoding YAML: %v\n%s", err, doc)
	}
	return &unstructured.Unstructured{Object: m}
}

// Resource returns the dynamic client for u's kind (in u's namespace when namespaced).
func Resource(t testing.TB, u *unstructured.Unstructured) dynamic.ResourceInterface {
	t.Helper()
	return resourceFor(t, u)
}

func resourceFor(t testing.TB, u *unstructured.Unstructured) dynamic.ResourceInterface {
	t.Helper()
	d := Dynamic(t)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(CP.Client.Discovery()))
	gvk := u.GroupVersionKind()
	var m *meta.RESTMapping
	var err error
	for i := 0; i < 50; i++ { // a CRD created a moment ago may not be in discovery yet
		m, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err == nil {
			break
		}
		mapper.Reset()
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("mapping %s: %v", gvk, err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ns := u.GetNamespace()
		if ns == "" {
			ns = "default"
		}
		return d.Resource(m.Resource).Namespace(ns)
	}
	return d.Resource(m.Resource)
}

// Namespace creates a namespace with a unique name for one test and deletes it afterwards.
func Namespace(t testing.TB, prefix string) string {
	t.Helper()
	name := fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%1_000_000_000)
	Apply(t, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+name)
	return name
}

// CRD returns a minimal CRD document for kind/plural in group, served at v1.
func CRD(group, kind, plural string) string {
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %[3]s.%[1]s
spec:
  group: %[1]s
  scope: Namespaced
  names: {kind: %[2]s, plural: %[3]s, singular: %[4]s, listKind: %[2]sList}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`, group, kind, plural, strings.ToLower(kind))
}
