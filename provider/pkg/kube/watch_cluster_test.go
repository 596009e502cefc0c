//go:build cluster

package kube

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/readiness-io/pulumi-readiness/internal/controlplane"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, controlplane.Options{})) }

var configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// transport goroutines outlive a test by design (idle keep-alive connections); everything
// the watch cache starts must be gone.
var leakOpts = []goleak.Option{
	goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
	goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
	goleak.IgnoreTopFunction("golang.org/x/net/http2.(*ClientConn).readLoop"),
	goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	goleak.IgnoreAnyFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
}

func clients(t *testing.T) *Clients {
	cfg, ns, err := LoadConfig(Settings{Kubeconfig: string(testenv.CP.Kubeconfig)})
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewClients(cfg, ns, 0)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func waitSynced(t *testing.T, s *Subscription, wake <-chan struct{}) {
	deadline := time.After(30 * time.Second)
	for !s.Synced() {
		select {
		case <-wake:
		case <-deadline:
			t.Fatal("watch never synced")
		}
	}
}

// holdSynced subscribes to key for the whole test and returns once the
// watch has made its first list: the holder keeps the shared watch alive
// while the test's gates come and go.
func holdSynced(t *testing.T, w *WatchCache, key WatchKey) (*Subscription, chan struct{}) {
	wake := make(chan struct{}, 1)
	s := w.Subscribe(key, wake)
	t.Cleanup(s.Close)
	waitSynced(t, s, wake)
	return s, wake
}

func TestWatchesAreSharedAndReleased(t *testing.T) {
	defer goleak.VerifyNone(t, append(leakOpts, goleak.IgnoreCurrent())...)
	c := clients(t)
	a, b := testenv.Namespace(t, "wa"), testenv.Namespace(t, "wb")
	wake1, wake2, wake3 := make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{}, 1)
	s1 := c.Watches.Subscribe(WatchKey{Resource: configMaps, Namespace: a}, wake1)
	s2 := c.Watches.Subscribe(WatchKey{Resource: configMaps, Namespace: a}, wake2) // same type and namespace: shared
	s3 := c.Watches.Subscribe(WatchKey{Resource: configMaps, Namespace: b}, wake3)
	if got := c.Watches.Opened.Load(); got != 2 {
		t.Errorf("opened %d watches for 2 distinct (type, namespace) pairs", got)
	}
	waitSynced(t, s1, wake1)
	waitSynced(t, s2, wake2)
	waitSynced(t, s3, wake3)
	// An event wakes every subscriber of that watch, and the cache holds the object.
	_, err := testenv.CP.Client.CoreV1().ConfigMaps(a).Create(context.Background(),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range []chan struct{}{wake1, wake2} {
		select {
		case <-w:
		case <-time.After(10 * time.Second):
			t.Fatalf("subscriber %d was not woken", i+1)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for s1.Get("x") == nil && time.Now().Before(deadline) {
		<-wake1
	}
	if s2.Get("x") == nil {
		t.Error("the shared cache does not hold the new object")
	}
	s1.Close()
	if c.Watches.Active() != 2 {
		t.Errorf("a watch with a remaining subscriber was stopped: active %d", c.Watches.Active())
	}
	s2.Close()
	s3.Close()
	s3.Close() // idempotent
	if c.Watches.Active() != 0 {
		t.Errorf("%d watches still open after every gate returned", c.Watches.Active())
	}
}

func TestSecretsAreTrimmedBeforeCaching(t *testing.T) {
	ns := testenv.Namespace(t, "trim")
	const marker = "MARKER-never-cached"
	created, err := testenv.CP.Client.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "s", Annotations: map[string]string{
			"kubectl.kubernetes.io/last-applied-configuration": `{"stringData":{"password":"` + marker + `"}}`}},
		StringData: map[string]string{"password": marker, "tls.crt": "public", "empty": ""},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := clients(t)
	wake := make(chan struct{}, 1)
	s := c.Watches.Subscribe(WatchKey{Resource: schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, Namespace: ns, Name: "s"}, wake)
	defer s.Close()
	// The watch's first list is the watch cache's copy, which may not hold the Secret yet.
	awaitStore(t, s, wake, "s", created.ResourceVersion)
	b, _ := s.Get("s").MarshalJSON()
	if strings.Contains(string(b), marker) || strings.Contains(string(b), "TUFSS0VS") {
		t.Errorf("a Secret value reached the cache: %s", b)
	}
	data := s.Get("s").Object["data"].(map[string]any)
	// tls.crt keeps only CERTIFICATE blocks (TestTrimSecretKeepsOnlyCertificates): "public" is none.
	if data["password"] != SecretPresent || data["empty"] != "" || data["tls.crt"] != SecretPresent {
		t.Errorf("trimmed data = %v", data)
	}
}

func contains(s, sub string) bool {
	return len(sub) > 0 && len(s) >= len(sub) && (s == sub || indexOf(s, sub) >= 0)
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

// TestFirstListIsTheCurrentState: a watch opened right after a write must see that write. The
// reflector's first list asks for resourceVersion "0" (anything the API server's watch cache
// holds, possibly older than the write); a gate judging that list could pass on the old state,
// so gates read through Read, whose consistent GET is at least as new as the subscription.
func TestFirstListIsTheCurrentState(t *testing.T) {
	ns := testenv.Namespace(t, "fresh")
	cms := testenv.CP.Client.CoreV1().ConfigMaps(ns)
	cm, err := cms.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Data: map[string]string{"n": "0"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := clients(t)
	stale := 0
	for i := 1; i <= 100; i++ {
		cm.Data["n"] = fmt.Sprint(i)
		if cm, err = cms.Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		wake := make(chan struct{}, 1)
		s := c.Watches.Subscribe(WatchKey{Resource: configMaps, Namespace: ns, Name: "c"}, wake)
		waitSynced(t, s, wake)
		got, err := s.Read(context.Background(), "c")
		if err != nil {
			t.Fatal(err)
		}
		if got == nil || got.Object["data"].(map[string]any)["n"] != fmt.Sprint(i) {
			stale++
		}
		s.Close()
	}
	if stale > 0 {
		t.Errorf("%d of 100 fresh watches first saw a state older than the write made just before", stale)
	}
}
