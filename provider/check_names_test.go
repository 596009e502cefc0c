package provider

import (
	"fmt"
	"testing"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi/sdk/v3/go/property"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/helmrelease"
)

// RBAC objects are named as path segments (`system:metrics-server`): ResourceReady accepts such a
// name at preview and passes on the object, and a Helm release holding one is judged, not failed.
// Names no kind allows still fail at preview.
func TestNamesByTheRulesOfTheirKind(t *testing.T) {
	ns := testenv.Namespace(t, "rbacname")
	name := "system:readiness-" + ns
	testenv.Apply(t, fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "%s"}
rules: [{apiGroups: [""], resources: [pods], verbs: [get]}]`, name))
	deleteClusterRoleAtEnd(t, name)
	s := newServer(t)
	check := func(apiVersion, kind, name string) []p.CheckFailure {
		t.Helper()
		chk, err := s.Check(p.CheckRequest{Urn: urn("ResourceReady"), Inputs: property.NewMap(props("apiVersion", apiVersion, "kind", kind, "name", name))})
		if err != nil {
			t.Fatal(err)
		}
		return chk.Failures
	}
	for _, tc := range []struct {
		apiVersion, kind, name string
		ok                     bool
	}{
		{"rbac.authorization.k8s.io/v1", "ClusterRole", "system:metrics-server", true},
		{"rbac.authorization.k8s.io/v1", "RoleBinding", "Admin:Team", true},
		{"rbac.authorization.k8s.io/v1", "ClusterRole", "a/b", false},
		{"rbac.authorization.k8s.io/v1", "ClusterRole", "..", false},
		{"v1", "ConfigMap", "system:metrics-server", false},
		{"v1", "ConfigMap", "Upper", false},
		{"example.com/v1", "Widget", "a%b", false},
	} {
		if f := check(tc.apiVersion, tc.kind, tc.name); (len(f) == 0) != tc.ok {
			t.Errorf("%s %s %q: failures %v, want ok=%v", tc.apiVersion, tc.kind, tc.name, f, tc.ok)
		}
	}
	r := await(t, createAsync(t, s, "ResourceReady", props("apiVersion", "rbac.authorization.k8s.io/v1", "kind", "ClusterRole",
		"name", name, "timeout", "30s")), 30*time.Second)
	if r.err != nil {
		t.Fatalf("ClusterRole %s: %v", name, r.err)
	}
	manifest := manifestOf(configMapDoc(ns, "cm"), fmt.Sprintf("# Source: app/templates/rbac.yaml\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: \"%s\"}\nrules: []", name))
	testenv.Apply(t, configMapDoc(ns, "cm"))
	writeRecord(t, helmrelease.Record{Name: "app", Namespace: ns, Revision: 1, Status: helmrelease.StatusDeployed,
		Chart: "app", ChartVersion: "1", Manifest: manifest})
	r = await(t, createAsync(t, s, "HelmReleaseReady", props("name", "app", "namespace", ns, "timeout", "30s")), 30*time.Second)
	if r.err != nil {
		t.Fatalf("a release holding ClusterRole %s: %v", name, r.err)
	}
}
