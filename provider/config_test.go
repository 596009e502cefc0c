package provider

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

// listeningKubeconfig points at a loopback port that accepts and drops connections, counting
// them: a test of what must not call the cluster checks that count, not how long it took.
func listeningKubeconfig(t *testing.T) (string, *atomic.Int32) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var n atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	return kubeconfigFor(l.Addr().(*net.TCPAddr).Port), &n
}

// unreachableKubeconfig points at a loopback port nothing listens on.
func unreachableKubeconfig(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return kubeconfigFor(port)
}

func kubeconfigFor(port int) string {
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

// execPlugin writes an exec credential plugin that prints the token in tokenFile, as cloud
// logins do, and returns its config.
func execPlugin(t *testing.T, dir string) (cfg *clientcmdapi.ExecConfig, setToken func(string)) {
	t.Helper()
	tokenFile, script := filepath.Join(dir, "token"), filepath.Join(dir, "plugin.sh")
	body := "#!/bin/sh\nprintf '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"%s\"}}' \"$(cat " + tokenFile + ")\"\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	setToken = func(tok string) {
		if err := os.WriteFile(tokenFile, []byte(tok), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return &clientcmdapi.ExecConfig{APIVersion: "client.authentication.k8s.io/v1", Command: script, InteractiveMode: clientcmdapi.NeverExecInteractiveMode}, setToken
}

// A token that expires while a gate waits (its watch is cut and the re-list gets 401) is
// refreshed by the exec plugin and the gate goes on; a token the plugin cannot renew fails.
func TestCredentialsThatRefresh(t *testing.T) {
	group := widgetCRD(t)
	ns := testenv.Namespace(t, "creds")
	kp := newKubeProxy(t)
	exec, setToken := execPlugin(t, t.TempDir())
	setToken("token-1")
	kp.rotate("token-1")
	s := newServer(t, kp.kubeconfig(t, exec))
	w := testenv.Apply(t, fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata: {name: w, namespace: %s}\nspec: {size: 1}", group, ns))[0]
	ch := createAsync(t, s, "ResourceReady", props("apiVersion", group+"/v1", "kind", "Widget", "name", "w", "namespace", ns,
		"condition", map[string]property.Value{"type": property.New("Ready")}, "timeout", "90s"))
	mustNotReturn(t, ch, time.Second) // listed and watching with token-1
	setToken("token-2")
	kp.rotate("token-2") // token-1 expires; every open watch is cut
	mustNotReturn(t, ch, 3*time.Second)
	kp.mu.Lock()
	refused := kp.unauthz
	kp.mu.Unlock()
	if refused == 0 {
		t.Fatal("the provider never presented the expired token: the test proves nothing")
	}
	setStatus(t, w, map[string]any{"conditions": []any{cond("Ready", "True", 1)}})
	if r := await(t, ch, 30*time.Second); r.err != nil {
		t.Fatalf("after a refresh of its credentials the gate must go on: %v", r.err)
	}
	// Near miss: credentials refused again after the refresh fail the gate (not at its timeout).
	ch = createAsync(t, s, "ResourceReady", props("apiVersion", group+"/v1", "kind", "Widget", "name", "other", "namespace", ns, "timeout", "5m"))
	mustNotReturn(t, ch, time.Second)
	kp.rotate("token-3") // the plugin still says token-2
	r := await(t, ch, 60*time.Second)
	if r.err == nil || !strings.Contains(r.err.Error(), "Unauthorized") {
		t.Fatalf("want an Unauthorized failure, got %v", r.err)
	}
}
