package provider

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
)

// unreachableKubeconfig points at a loopback port nothing listens on.
func unreachableKubeconfig(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:%d", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: secret-token-value}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, port)
}

func TestUnreachableClusterFailsAfterTheReachWindow(t *testing.T) {
	s := newServerWithConfig(t, map[string]property.Value{
		"kubeconfig":          property.New(unreachableKubeconfig(t)),
		"clusterReachTimeout": property.New("2s"),
	})
	start := time.Now()
	r := await(t, createAsync(t, s, "CrdReady", map[string]property.Value{"names": strs("a.b.test")}), 60*time.Second)
	if r.err == nil {
		t.Fatal("gate passed against a cluster that does not exist")
	}
	if !strings.Contains(r.err.Error(), "cannot reach the Kubernetes API at https://127.0.0.1:") {
		t.Errorf("error does not say the API is unreachable: %v", r.err)
	}
	if strings.Contains(r.err.Error(), "secret-token-value") {
		t.Errorf("error leaks the kubeconfig's token: %v", r.err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("took %s: should fail after the 2s reach window, not the gate timeout", d)
	}
}

func TestBadKubeconfigIsAClearConfigureError(t *testing.T) {
	for name, kc := range map[string]string{
		"missing file": "/nonexistent/kubeconfig",
		"garbage":      "apiVersion: v1\nclusters: [this is: not valid\n",
		"no context":   "apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\ncurrent-context: nope\n",
	} {
		t.Run(name, func(t *testing.T) {
			s := newUnconfiguredServer(t)
			err := s.Configure(p.ConfigureRequest{Args: property.NewMap(map[string]property.Value{"kubeconfig": property.New(kc)})})
			if err == nil || !strings.Contains(err.Error(), "kubeconfig") {
				t.Fatalf("want a kubeconfig error, got %v", err)
			}
		})
	}
}
