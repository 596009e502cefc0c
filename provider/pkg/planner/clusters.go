package planner

import (
	"fmt"
	"time"
)

// Cluster is what the SDK knows of a kubernetes provider: the stack's configuration for the
// default one (ID ""), an explicit provider's inputs as the engine holds them. Which readiness
// provider gates its objects, and whether they can be gated, is decided from it (provider
// package: gateCluster).
type Cluster struct {
	ID   string // "" for the default kubernetes provider, else its URN
	Name string // the provider's Pulumi name
	// Kubeconfig, Context and Namespace as pulumi-kubernetes reads them (its provider.go
	// Configure): the namespace overrides the context's.
	Kubeconfig, Context, Namespace string
	// SelectsCluster is its `cluster` setting (a kubeconfig cluster other than the context's).
	SelectsCluster string
	// RendersTo is its renderYamlToDirectory: it talks to no cluster.
	RendersTo string
	// Unknown: its configuration is not known yet (a preview of a kubeconfig from an Output).
	Unknown bool
	// Planner: the readiness provider answering the plan is configured for this cluster (the
	// program passed it to autoGate).
	Planner bool
}

// AddClusters records clusters' facts (the first of each ID counts).
func (s *Session) AddClusters(cs []Cluster) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range cs {
		if _, ok := s.clusters[c.ID]; !ok {
			s.clusters[c.ID] = c
		}
	}
	s.changed.Broadcast()
}

// Cluster is the facts of cluster id, once some call brought them (the SDK sends each once, with
// whichever call is first), at most the session's timeout.
func (s *Session) Cluster(id string) (Cluster, error) {
	deadline := time.Now().Add(s.opts.Timeout)
	wake := time.AfterFunc(s.opts.Timeout, func() { s.mu.Lock(); s.changed.Broadcast(); s.mu.Unlock() })
	defer wake.Stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if c, ok := s.clusters[id]; ok {
			return c, nil
		}
		if !time.Now().Before(deadline) {
			return Cluster{}, fmt.Errorf("no call brought the configuration of kubernetes provider %q within %s", id, s.opts.Timeout)
		}
		s.changed.Wait()
	}
}
