package provider

import (
	"strings"
	"testing"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/planner"
)

// Objects of a kubernetes provider are gated in the cluster and namespace it names, as
// pulumi-kubernetes reads its configuration: the stack's `kubernetes:namespace apps` alone gets a
// readiness provider configured so; the same configuration for both packages keeps autoGate's
// own; one that renders YAML, selects a kubeconfig cluster, or is not known yet is not guessed at.
func TestGateCluster(t *testing.T) {
	s := func(v string) *string { return &v }
	for _, c := range []struct {
		name     string
		cluster  planner.Cluster
		own      Config
		provider string
		settings bool
		skip     string
	}{
		{name: "nothing set", cluster: planner.Cluster{}},
		{name: "the same for both", cluster: planner.Cluster{Kubeconfig: "KC", Namespace: "apps"}, own: Config{Kubeconfig: s("KC"), Namespace: s("apps")}},
		{name: "autoGate was given the provider", cluster: planner.Cluster{Namespace: "apps", Planner: true}},
		{name: "kubernetes:namespace alone", cluster: planner.Cluster{Namespace: "apps"}, provider: "autogate-default", settings: true},
		{name: "a kubeconfig for kubernetes only", cluster: planner.Cluster{Kubeconfig: "KC"}, provider: "autogate-default", settings: true},
		{name: "another context", cluster: planner.Cluster{Context: "b"}, own: Config{Context: s("a")}, provider: "autogate-default", settings: true},
		{name: "an explicit provider", cluster: planner.Cluster{ID: "urn:p", Name: "k2", Kubeconfig: "KC"}, provider: "autogate-k2", settings: true},
		{name: "renders YAML", cluster: planner.Cluster{RendersTo: "out"}, skip: "renders YAML"},
		{name: "a kubeconfig cluster", cluster: planner.Cluster{ID: "urn:p", Name: "k2", SelectsCluster: "c2"}, skip: "k2 selects kubeconfig cluster c2"},
		{name: "not known in a preview", cluster: planner.Cluster{ID: "urn:p", Name: "k2", Unknown: true}, skip: "not known in a preview"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := gateCluster(c.cluster, c.own)
			if got.provider != c.provider || (got.settings != nil) != c.settings || !strings.Contains(got.skip, c.skip) || (c.skip == "") != (got.skip == "") {
				t.Errorf("gateCluster = %+v, want provider %q settings %v skip %q", got, c.provider, c.settings, c.skip)
			}
		})
	}
}
