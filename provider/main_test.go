package provider

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/blang/semver"
	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/integration"
	presource "github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/common/tokens"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"

	"github.com/readiness-io/pulumi-readiness/internal/controlplane"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

func TestMain(m *testing.M) {
	if os.Getenv(netnsChildEnv) != "" {
		os.Exit(netnsChildMain(m)) // see netns_test.go
	}
	if fuzzing() {
		os.Exit(m.Run()) // FuzzCheck needs no cluster, and every fuzz worker process runs TestMain
	}
	os.Exit(testenv.Main(m, controlplane.Options{}))
}

// fuzzing reports whether this test binary runs a fuzz target (`go test -fuzz`, or one of its workers).
func fuzzing() bool {
	flag.Parse()
	fz, worker := flag.Lookup("test.fuzz"), flag.Lookup("test.fuzzworker")
	return (fz != nil && fz.Value.String() != "") || (worker != nil && worker.Value.String() == "true")
}

// newUnconfiguredServer runs the provider in-process behind its gRPC surface.
func newUnconfiguredServer(t testing.TB) integration.Server {
	t.Helper()
	prov, err := New()
	if err != nil {
		t.Fatal(err)
	}
	s, err := integration.NewServer(context.Background(), Name, semver.MustParse("0.1.0"), integration.WithProvider(prov))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// newServerWithConfig runs the provider configured with cfg.
func newServerWithConfig(t testing.TB, cfg map[string]property.Value) integration.Server {
	t.Helper()
	s := newUnconfiguredServer(t)
	if err := s.Configure(p.ConfigureRequest{Args: property.NewMap(cfg)}); err != nil {
		t.Fatalf("configure: %v", err)
	}
	return s
}

// newServer runs the provider configured for the local control plane (or for kubeconfig).
func newServer(t testing.TB, kubeconfig ...string) integration.Server {
	t.Helper()
	kc := string(testenv.CP.Kubeconfig)
	if len(kubeconfig) > 0 {
		kc = kubeconfig[0]
	}
	return newServerWithConfig(t, map[string]property.Value{"kubeconfig": property.New(kc)})
}

func urn(typ string) presource.URN {
	return presource.NewURN("test", "readiness", "", tokens.Type("readiness:index:"+typ), "gate")
}

// gateResult is what a Create in the background returned.
type gateResult struct {
	resp p.CreateResponse
	err  error
	at   time.Time
}

// createAsync checks inputs and runs Create in the background, as the engine would.
func createAsync(t testing.TB, s integration.Server, typ string, inputs map[string]property.Value) <-chan gateResult {
	t.Helper()
	chk, err := s.Check(p.CheckRequest{Urn: urn(typ), Inputs: property.NewMap(inputs)})
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	if len(chk.Failures) > 0 {
		t.Fatalf("check failures: %v", chk.Failures)
	}
	out := make(chan gateResult, 1)
	go func() {
		resp, err := s.Create(p.CreateRequest{Urn: urn(typ), Properties: chk.Inputs})
		out <- gateResult{resp, err, time.Now()}
	}()
	return out
}

// mustNotReturn asserts the gate is still blocked after d (it has something to wait for).
func mustNotReturn(t *testing.T, ch <-chan gateResult, d time.Duration) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("gate returned while its condition did not hold: err=%v outputs=%v", r.err, r.resp.Properties)
	case <-time.After(d):
	}
}

// await returns the gate's result, failing the test if it does not return in time.
func await(t testing.TB, ch <-chan gateResult, limit time.Duration) gateResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(limit):
		t.Fatalf("gate did not return within %s", limit)
		return gateResult{}
	}
}

func strs(v ...string) property.Value {
	arr := make([]property.Value, len(v))
	for i, s := range v {
		arr[i] = property.New(s)
	}
	return property.New(arr)
}

func outStrings(t *testing.T, m property.Map, key string) []string {
	t.Helper()
	v, ok := m.GetOk(key)
	if !ok || !v.IsArray() {
		t.Fatalf("output %s missing or not a list: %v", key, m)
	}
	var out []string
	for _, e := range v.AsArray().AsSlice() {
		out = append(out, e.AsString())
	}
	return out
}

// nowhere is a nodeSelector no node matches: the scheduler leaves such pods Pending and kwok
// never touches them, so a test can write their status itself.
const nowhere = "nodeSelector: {type: nowhere}"

// defaultGate runs ResourceReady in its default mode on one object.
func defaultGate(t *testing.T, ns, apiVersion, kind, name, timeout string) <-chan gateResult {
	return createAsync(t, newServer(t), "ResourceReady", props("apiVersion", apiVersion, "kind", kind, "namespace", ns, "name", name, "timeout", timeout))
}

// mustFailWith asserts a gate ended in an error naming every one of want.
func mustFailWith(t *testing.T, ch <-chan gateResult, want ...string) {
	t.Helper()
	r := await(t, ch, 60*time.Second)
	if r.err == nil {
		t.Fatalf("gate passed: %v", r.resp.Properties)
	}
	for _, w := range want {
		if !strings.Contains(r.err.Error(), w) {
			t.Errorf("error lacks %q: %v", w, r.err)
		}
	}
}

func mustPass(t *testing.T, ch <-chan gateResult) gateResult {
	t.Helper()
	r := await(t, ch, 90*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r
}

// writeStatus merges fields into obj's status through the status subresource, as its
// controller would.
func writeStatus(t *testing.T, obj *unstructured.Unstructured, fields map[string]any) {
	t.Helper()
	ri := testenv.Resource(t, obj)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := ri.Get(context.Background(), obj.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		st, _ := cur.Object["status"].(map[string]any)
		if st == nil {
			st = map[string]any{}
		}
		for k, v := range fields {
			st[k] = v
		}
		cur.Object["status"] = st
		_, err = ri.UpdateStatus(context.Background(), cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// pollUntil is test-side polling for a controller's state the test depends on.
func pollUntil(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached in 60s", what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func pod(ns, name, placement string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: %s, labels: {app: %s}}
spec:
  %s
  containers: [{name: app, image: registry.local/app:1}]`, name, ns, name, placement)
}

// applyConfiguration creates a webhook configuration document, deleted after the test.
func applyConfiguration(t *testing.T, doc string) {
	t.Helper()
	testenv.Apply(t, doc)
	obj := testenv.Object(t, doc)
	t.Cleanup(func() {
		_ = testenv.Resource(t, obj).Delete(context.Background(), obj.GetName(), metav1.DeleteOptions{})
	})
}

// actingAs returns a kubeconfig for the local control plane that acts as user (and
// groups) through impersonation: RBAC tests without restarting the API server for new tokens.
func actingAs(t *testing.T, user string, groups ...string) string {
	t.Helper()
	cfg, err := clientcmd.Load(testenv.CP.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range cfg.AuthInfos {
		a.Impersonate, a.ImpersonateGroups = user, groups
	}
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// deleteClusterRoleAtEnd deletes the ClusterRole and ClusterRoleBinding named name when the test ends.
func deleteClusterRoleAtEnd(t *testing.T, name string) {
	t.Cleanup(func() {
		ctx := context.Background()
		_ = testenv.CP.Client.RbacV1().ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{})
		_ = testenv.CP.Client.RbacV1().ClusterRoles().Delete(ctx, name, metav1.DeleteOptions{})
	})
}
