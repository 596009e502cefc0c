package provider

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/pulumi/pulumi-go-provider/infer"

	"github.com/readiness-io/pulumi-readiness/provider/pkg/kube"
)

// Config is the provider configuration. It follows pulumi-kubernetes' conventions so a stack can
// pass the same kubeconfig to both providers.
type Config struct {
	Kubeconfig   *string `pulumi:"kubeconfig,optional" provider:"secret"`
	Context      *string `pulumi:"context,optional"`
	Namespace    *string `pulumi:"namespace,optional"`
	ReachTimeout *string `pulumi:"clusterReachTimeout,optional"`

	// state is shared by the copies infer.GetConfig hands out.
	state *configState
}

type configState struct {
	settings kube.Settings
	once     sync.Once
	clients  *kube.Clients
	err      error
}

func (c *Config) Annotate(a infer.Annotator) {
	a.Describe(&c.Kubeconfig, "The contents of a kubeconfig file or the path to one. "+
		"If unset, KUBECONFIG, then ~/.kube/config, then the in-cluster configuration is used.")
	a.Describe(&c.Context, "The kubeconfig context to use; the kubeconfig's current context if unset.")
	a.Describe(&c.Namespace, "The default namespace for gates that take a namespace; "+
		"the context's namespace, then `default`, if unset.")
	a.Describe(&c.ReachTimeout, "How long gates retry a Kubernetes API that does not answer before failing "+
		"with \"cannot reach the Kubernetes API\" (a Go duration, default `30s`). Covers a cluster that the same stack brings up.")
}

var _ = (infer.CustomConfigure)((*Config)(nil))

// Configure parses the configuration. It never calls the cluster: preview stays offline, and a
// cluster created by the same stack may not exist yet.
func (c *Config) Configure(ctx context.Context) error {
	s := kube.Settings{Kubeconfig: deref(c.Kubeconfig), Context: deref(c.Context), Namespace: deref(c.Namespace)}
	if rt := deref(c.ReachTimeout); rt != "" {
		d, err := time.ParseDuration(rt)
		if err != nil || d <= 0 {
			return fmt.Errorf("provider config clusterReachTimeout: %q is not a positive duration such as \"30s\"", rt)
		}
		s.ReachTimeout = d
	}
	if _, _, err := kube.LoadConfig(s); err != nil {
		return fmt.Errorf("provider config: %w", err)
	}
	c.state = &configState{settings: s}
	return nil
}

// Clients returns the provider process's shared clients, building them on first use.
func (c Config) Clients() (*kube.Clients, error) {
	st := c.state
	if st == nil {
		return nil, fmt.Errorf("the readiness provider is not configured")
	}
	st.once.Do(func() {
		cfg, ns, err := kube.LoadConfig(st.settings)
		if err != nil {
			st.err = err
			return
		}
		st.clients, st.err = kube.NewClients(cfg, ns, st.settings.ReachTimeout)
	})
	return st.clients, st.err
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// derefOr is *p, or def when p is nil or empty.
func derefOr(p *string, def string) string {
	if p == nil || *p == "" {
		return def
	}
	return *p
}
