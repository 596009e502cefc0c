package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/property"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

func TestTimeoutQuotesRecentWarningEvents(t *testing.T) {
	group := widgetCRD(t)
	testenv.Apply(t, fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata: {name: stuck, namespace: default}", group))
	// Play the controller reporting why it cannot make progress.
	testenv.Apply(t, fmt.Sprintf(`apiVersion: v1
kind: Event
metadata: {name: stuck.warning, namespace: default}
involvedObject: {apiVersion: %s/v1, kind: Widget, name: stuck, namespace: default}
type: Warning
reason: IssuerNotFound
message: 'Issuer "vault-issuer" not found'
source: {component: widget-controller}
firstTimestamp: "%[2]s"
lastTimestamp: "%[2]s"`, group, time.Now().UTC().Format(time.RFC3339)))
	s := newServer(t)
	r := await(t, createAsync(t, s, "ResourceReady", props("apiVersion", group+"/v1", "kind", "Widget", "namespace", "default", "name", "stuck",
		"condition", map[string]property.Value{"type": property.New("Ready")}, "timeout", "2s")), 30*time.Second)
	if r.err == nil {
		t.Fatal("gate passed")
	}
	for _, want := range []string{"timed out after", "Widget default/stuck", "no Ready condition yet", "recent Warning events: Widget IssuerNotFound: Issuer \"vault-issuer\" not found"} {
		if !strings.Contains(r.err.Error(), want) {
			t.Errorf("timeout error lacks %q:\n%v", want, r.err)
		}
	}
}

// The gates wait with a 10m timeout; cancel must end them at once, not at their timeout. The
// bound is await's (5s), far from 10m: a wall-clock figure tighter than that is load's, not
// the product's (how fast they return is measured by the benchmarks).
func TestCancelStopsEveryWaitingGate(t *testing.T) {
	s := newServer(t)
	var chans []<-chan gateResult
	for i := 0; i < 5; i++ {
		chans = append(chans, createAsync(t, s, "ResourceReady", props("apiVersion", "v1", "kind", "ConfigMap",
			"namespace", "default", "name", fmt.Sprintf("never-%d", i), "exists", true, "timeout", "10m")))
	}
	time.Sleep(500 * time.Millisecond) // let every gate start waiting
	if err := s.Cancel(); err != nil {
		t.Fatal(err)
	}
	for _, ch := range chans {
		r := await(t, ch, 5*time.Second)
		if r.err == nil || !strings.Contains(r.err.Error(), "cancel") {
			t.Errorf("want a cancellation error, got %v", r.err)
		}
	}
}

// compactEtcd compacts etcd's history up to its current revision through etcd's JSON gateway.
func compactEtcd(t *testing.T) {
	post := func(path, body string) map[string]any {
		resp, err := http.Post(testenv.CP.EtcdURL()+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		b, _ := io.ReadAll(resp.Body)
		if err := jsonUnmarshal(b, &out); err != nil || resp.StatusCode != 200 {
			t.Fatalf("etcd %s: %d %s", path, resp.StatusCode, b)
		}
		return out
	}
	rng := post("/v3/kv/range", `{"key":"Lw=="}`) // "/"
	rev := rng["header"].(map[string]any)["revision"]
	post("/v3/kv/compaction", fmt.Sprintf(`{"revision":%q,"physical":true}`, fmt.Sprint(rev)))
}

func TestGatesSurviveAPIServerRestartAndEtcdCompaction(t *testing.T) {
	group := widgetCRD(t)
	w := testenv.Apply(t, fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata: {name: w, namespace: default}\nspec: {size: 1}", group))[0]
	s := newServer(t)
	ch := createAsync(t, s, "ResourceReady", props("apiVersion", group+"/v1", "kind", "Widget", "namespace", "default", "name", "w",
		"condition", map[string]property.Value{"type": property.New("Ready")}, "timeout", "3m"))
	mustNotReturn(t, ch, time.Second)
	// Churn the object (not ready), then compact etcd so the gate's resourceVersion is gone.
	for i := 0; i < 5; i++ {
		setStatus(t, w, map[string]any{"conditions": []any{cond("Ready", "False", 1)}})
	}
	compactEtcd(t)
	testenv.CP.StopProcess("kube-apiserver")
	mustNotReturn(t, ch, 2*time.Second) // the API server is down: no stale pass, no failure
	if err := testenv.CP.StartAPIServer(context.Background()); err != nil {
		t.Fatal(err)
	}
	mustNotReturn(t, ch, time.Second) // back up, still not ready
	setStatus(t, w, map[string]any{"conditions": []any{cond("Ready", "True", 1)}})
	if r := await(t, ch, 90*time.Second); r.err != nil {
		t.Fatalf("gate did not recover after the restart: %v", r.err)
	}
	// Nothing is stuck afterwards: a new gate on the same watch returns at once.
	if r := await(t, createAsync(t, s, "ResourceReady", props("apiVersion", group+"/v1", "kind", "Widget", "namespace", "default", "name", "w",
		"condition", map[string]property.Value{"type": property.New("Ready")}, "timeout", "60s")), 60*time.Second); r.err != nil {
		t.Fatal(r.err)
	}
}

func TestRBACFailsFastNamingVerbResourceAndUser(t *testing.T) {
	ns := testenv.Namespace(t, "rbac")
	// Each user is bound to exactly these rules in ns. The "min-" users hold the README's minimal
	// Role for one gate, word for word: no gate may need more (gates only list and watch; none gets).
	rules := map[string]string{
		"no-watch":     `[{apiGroups: [""], resources: [configmaps], verbs: [get, list]}]`,
		"no-list":      `[{apiGroups: [""], resources: [configmaps], verbs: [get, watch]}]`,
		"min-resource": `[{apiGroups: [""], resources: [configmaps], verbs: [list, watch]}]`,
		"min-secret":   `[{apiGroups: [""], resources: [secrets], resourceNames: [db], verbs: [list, watch]}]`,
		"min-service":  `[{apiGroups: [""], resources: [services], verbs: [list, watch]}, {apiGroups: [discovery.k8s.io], resources: [endpointslices], verbs: [list, watch]}]`,
		"min-certificate": `[{apiGroups: [cert-manager.io], resources: [certificates, certificaterequests], verbs: [list, watch]},
  {apiGroups: [""], resources: [secrets], resourceNames: [web-tls], verbs: [list, watch]}]`,
	}
	var docs []string
	for user, r := range rules {
		if err := testenv.CP.AddToken("token-"+user, user); err != nil {
			t.Fatal(err)
		}
		docs = append(docs, fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: %[1]s, namespace: %[2]s}
rules: %[3]s
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: %[1]s, namespace: %[2]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: %[1]s}
subjects: [{kind: User, name: %[1]s}]`, user, ns, r))
	}
	testenv.CP.StopProcess("kube-apiserver") // the API server reads its token file at start
	if err := testenv.CP.StartAPIServer(context.Background()); err != nil {
		t.Fatal(err)
	}
	installCertManagerCRDs(t)
	testenv.Apply(t, strings.Join(docs, "\n---\n"))

	// The gate's targets, all ready before the gates start: only permissions decide.
	testenv.Apply(t, fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata: {name: app, namespace: %[1]s}
---
apiVersion: v1
kind: Secret
metadata: {name: db, namespace: %[1]s}
stringData: {password: "x"}
---
apiVersion: v1
kind: Secret
metadata: {name: other, namespace: %[1]s}
stringData: {password: "y"}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: %[1]s}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: %[1]s, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: 80}]
endpoints: [{addresses: [10.0.0.1], conditions: {ready: true}}]`, ns))
	testenv.Apply(t, certificate(ns, "web", "web-tls"))
	c := testenv.IssueCertificate(t, "web.example.test", 48*time.Hour)
	writeTLSSecret(t, ns, "web-tls", c)
	setCertStatus(t, ns, "web", readyStatus(c, 1))

	gate := func(user, typ string, inputs map[string]property.Value) gateResult {
		kc, err := testenv.CP.KubeconfigFor("token-" + user)
		if err != nil {
			t.Fatal(err)
		}
		return await(t, createAsync(t, newServer(t, string(kc)), typ, inputs), 30*time.Second)
	}
	configMap := props("apiVersion", "v1", "kind", "ConfigMap", "namespace", ns, "name", "app", "exists", true, "timeout", "5m")
	for user, verb := range map[string]string{"no-watch": "watch", "no-list": "list"} {
		r := gate(user, "ResourceReady", configMap)
		if r.err == nil {
			t.Fatalf("%s: gate passed without %s permission", user, verb)
		}
		for _, want := range []string{"forbidden", `User "` + user + `"`, "cannot " + verb, `resource "configmaps"`, `namespace "` + ns + `"`} {
			if !strings.Contains(r.err.Error(), want) {
				t.Errorf("%s: error lacks %q: %v", user, want, r.err)
			}
		}
	}
	for _, tc := range []struct {
		user, typ string
		inputs    map[string]property.Value
	}{
		{"min-resource", "ResourceReady", configMap},
		{"min-secret", "SecretReady", props("name", "db", "namespace", ns, "requiredKeys", strs("password"), "timeout", "5m")},
		{"min-service", "ServiceReady", props("name", "web", "namespace", ns, "port", "http", "timeout", "5m")},
		{"min-certificate", "CertificateReady", props("name", "web", "namespace", ns, "timeout", "5m")},
	} {
		if r := gate(tc.user, tc.typ, tc.inputs); r.err != nil {
			t.Errorf("%s: the README's minimal Role is not enough: %v", tc.typ, r.err)
		}
	}
	// resourceNames really limits the Secret gate to its own Secret: another name is forbidden at once.
	r := gate("min-secret", "SecretReady", props("name", "other", "namespace", ns, "timeout", "5m"))
	if r.err == nil || !strings.Contains(r.err.Error(), "forbidden") {
		t.Errorf("SecretReady on a Secret outside resourceNames: want a forbidden error, got %v", r.err)
	}
}

// TestClusterThatComesUpWithinTheReachWindow is the rebuild case: the API server is not
// reachable when the gate starts and becomes reachable a few seconds later.
func TestClusterThatComesUpWithinTheReachWindow(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens yet
	kc := bytes.Replace(testenv.CP.Kubeconfig, []byte(strings.TrimPrefix(testenv.CP.Host, "https://")), []byte(addr), 1)
	kc = bytes.Replace(kc, []byte("certificate-authority-data"), []byte("insecure-skip-tls-verify: true\n    x-unused-ca"), 1)
	s := newServerWithConfig(t, map[string]property.Value{"kubeconfig": property.New(string(kc)), "clusterReachTimeout": property.New("60s")})
	ch := createAsync(t, s, "NodesReady", props("timeout", "60s"))
	// A gate that never passes: its timeout covers the time the cluster was out of reach, and its
	// error says the whole wait (it said only the part after the cluster answered).
	ns := testenv.Namespace(t, "reachwin")
	never := createAsync(t, s, "ResourceReady", props("apiVersion", "v1", "kind", "ConfigMap", "namespace", ns, "name", "never", "exists", true, "timeout", "4s"))
	mustNotReturn(t, ch, 2*time.Second)
	stop := proxyTo(t, addr, strings.TrimPrefix(testenv.CP.Host, "https://"))
	defer stop()
	if r := await(t, ch, 60*time.Second); r.err != nil {
		t.Fatalf("a cluster that came up within the window must be fine: %v", r.err)
	}
	r := await(t, never, 60*time.Second)
	m := regexp.MustCompile(`timed out after (\S+) waiting for ConfigMap`).FindStringSubmatch(fmt.Sprint(r.err))
	if m == nil {
		t.Fatalf("want a timeout, got %v", r.err)
	}
	if d, err := time.ParseDuration(m[1]); err != nil || d < 4*time.Second {
		t.Errorf("the timeout error says it waited %s; the gate's timeout is 4s, and it waited all of it: %v", m[1], r.err)
	}
}

// proxyTo forwards TCP connections from listen to target (both loopback).
func proxyTo(t *testing.T, listen, target string) func() {
	l, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				up, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer up.Close()
				go func() { _, _ = io.Copy(up, c) }()
				_, _ = io.Copy(c, up)
			}()
		}
	}()
	return func() { l.Close() }
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
