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

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/readiness-io/pulumi-readiness/internal/controlplane"
	"github.com/readiness-io/pulumi-readiness/internal/realnode"
)

// CP is the package's shared control plane, set by Main (or MainRealNode).
var CP *controlplane.ControlPlane

// Node is the package's real node, set by MainRealNode (its control plane is CP).
var Node *realnode.Node

// Main starts the control plane, runs the tests and stops it. Use from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(testenv.Main(m, controlplane.Options{})) }
func Main(m *testing.M, opts controlplane.Options) int { return run(m, opts, false) }

// MainRealNode is Main with a real node (package realnode) beside the control plane.
func MainRealNode(m *testing.M, opts controlplane.Options) int { return run(m, opts, true) }

func run(m *testing.M, opts controlplane.Options, realNode bool) int {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	opts.Logf = func(f string, a ...any) { fmt.Fprintf(os.Stderr, "controlplane: "+f+"\n", a...) }
	var err error
	if realNode {
		if Node, err = realnode.Start(ctx, opts); err == nil {
			CP = Node.ControlPlane
		}
	} else {
		CP, err = controlplane.Start(ctx, opts)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting the local control plane: %v\n", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "controlplane: started in %s at %s\n", CP.StartTime.Round(time.Millisecond), CP.Host)
	if Node != nil {
		defer Node.Stop()
	} else {
		defer CP.Stop()
	}
	rc := m.Run()
	if rc != 0 && Node != nil {
		// A pod that never started may be one the kubelet never admitted.
		if p := Node.Pressure(context.Background()); p != "" {
			fmt.Fprintf(os.Stderr, "the real node was short of resources while the tests ran:\n%s\n", p)
		}
	}
	return rc
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
	out, err := CP.Apply(context.Background(), docs)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Object decodes one YAML document.
func Object(t testing.TB, doc string) *unstructured.Unstructured {
	t.Helper()
	u, err := controlplane.Decode(doc)
	if err != nil {
		t.Fatalf("decoding YAML: %v\n%s", err, doc)
	}
	return u
}

// Resource returns the dynamic client for u's kind (in u's namespace when namespaced).
func Resource(t testing.TB, u *unstructured.Unstructured) dynamic.ResourceInterface {
	t.Helper()
	ri, err := CP.ResourceFor(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	return ri
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

// ConversionCRD describes a CRD served at v1 (storage: spec.size) and v2 (spec.count, the same
// field renamed), both requiring spec and its one integer field (minimum 1), converted by a
// webhook at URL (strategy Webhook) or not at all (Strategy "None").
type ConversionCRD struct {
	Group, Kind, Plural string
	ClusterScoped       bool
	// Strategy is Webhook unless set; URL and CABundle (base64; empty: none) its clientConfig.
	Strategy, URL, CABundle string
	// V1beta1 also serves v1beta1 (same schema as v1).
	V1beta1 bool
	// Tag requires spec.tag, a string matching ^t-[a-z]+$ (no minimal object passes).
	Tag bool
}

// Doc renders the CRD as YAML.
func (c ConversionCRD) Doc() string {
	scope := "Namespaced"
	if c.ClusterScoped {
		scope = "Cluster"
	}
	strategy := c.Strategy
	if strategy == "" {
		strategy = "Webhook"
	}
	conversion := "  conversion: {strategy: None}\n"
	if strategy == "Webhook" {
		ca := ""
		if c.CABundle != "" {
			ca = ", caBundle: " + c.CABundle
		}
		conversion = fmt.Sprintf("  conversion:\n    strategy: Webhook\n    webhook:\n      conversionReviewVersions: [v1]\n      clientConfig: {url: %q%s}\n", c.URL, ca)
	}
	version := func(name, field string, storage bool) string {
		required, tag := "["+field+"]", ""
		if c.Tag {
			required = "[" + field + ", tag]"
			tag = "\n              tag: {type: string, pattern: '^t-[a-z]+$'}"
		}
		return fmt.Sprintf(`  - name: %s
    served: true
    storage: %t
    schema:
      openAPIV3Schema:
        type: object
        required: [spec]
        properties:
          spec:
            type: object
            required: %s
            properties:
              %s: {type: integer, minimum: 1}%s
`, name, storage, required, field, tag)
	}
	versions := version("v1", "size", true) + version("v2", "count", false)
	if c.V1beta1 {
		versions += version("v1beta1", "size", false)
	}
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %[3]s.%[1]s
spec:
  group: %[1]s
  scope: %[5]s
  names: {kind: %[2]s, plural: %[3]s, singular: %[4]s, listKind: %[2]sList}
%[6]s  versions:
%[7]s`, c.Group, c.Kind, c.Plural, strings.ToLower(c.Kind), scope, conversion, versions)
}

// CRDCachesReady waits until the API server lists the objects of every CRD of group from its
// watch cache (controlplane.WaitCRDCaches says why). tests/nodejs' harness does the same
// (cachesReady).
func CRDCachesReady(t testing.TB, group string) {
	t.Helper()
	if err := CP.WaitCRDCaches(context.Background(), group); err != nil {
		t.Fatal(err)
	}
}

// PodsGone waits until namespace ns has no pod (controlplane.WaitPodsGone says why).
func PodsGone(t testing.TB, ns string) {
	t.Helper()
	if err := CP.WaitPodsGone(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
}

// CRDsGone waits until no CRD of group is left (controlplane.WaitCRDsGone says why).
func CRDsGone(t testing.TB, group string) {
	t.Helper()
	if err := CP.WaitCRDsGone(context.Background(), group); err != nil {
		t.Fatal(err)
	}
}
