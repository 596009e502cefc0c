package provider

import (
	"strings"
	"testing"
	"time"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

// A gate's consistent reads end with the gate: here every GET of the target hangs (an API
// server that stopped answering), and the gate's own timeout must still end the gate and the
// read it was waiting on; before, the read ran on the Create's context, which has no deadline
// of the gate's, and the gate hung past its timeout with it. The near miss beside it: the same
// target answered, the gate passes.
func TestAGateEndsItsConsistentReads(t *testing.T) {
	ns := testenv.Namespace(t, "ctxread")
	testenv.Apply(t, configMapDoc(ns, "held"))
	kp := newKubeProxy(t)
	s := newServer(t, kp.kubeconfig(t, nil))
	gate := func(timeout string) <-chan gateResult {
		return createAsync(t, s, "ResourceReady", props("apiVersion", "v1", "kind", "ConfigMap", "name", "held",
			"namespace", ns, "timeout", timeout))
	}
	if r := await(t, gate("30s"), 30*time.Second); r.err != nil {
		t.Fatalf("a ConfigMap that exists, read through the proxy: %v", r.err)
	}
	path := "/api/v1/namespaces/" + ns + "/configmaps/held"
	kp.hold(path)
	r := await(t, gate("2s"), 60*time.Second)
	if r.err == nil || !strings.Contains(r.err.Error(), "timed out") {
		t.Fatalf("a gate whose read hangs must time out: %v", r.err)
	}
	select {
	case p := <-kp.heldGone:
		if p != path {
			t.Errorf("held %s", p)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the hanging read outlived its gate")
	}
	kp.hold("")
}
