package provider

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/property"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/readiness-io/pulumi-readiness/internal/controlplane"
	"github.com/readiness-io/pulumi-readiness/internal/fakes"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

// What only a real cluster address can show: the API server calling a webhook through its
// Service, and the API server's service proxy reaching an endpoint. The network rule forbids
// dialling 10.x on the machine, so these run in a child test process inside a network namespace
// of its own, holding nothing but a loopback device with the test's cluster addresses on it:
// whatever is dialled there cannot leave the namespace.

const netnsChildEnv = "READINESS_TEST_IN_NETNS"

// netnsUnavailable is the child's exit code when this machine cannot give it the namespace it
// needs (not the product failing): the parent then skips, saying why.
const netnsUnavailable = 3

// The Services' ClusterIPs (the API server dials them for a service-backed webhook) and the
// endpoint's pod IP (the service proxy dials it), all put on the namespace's loopback device.
const (
	netnsClusterIP  = "10.0.0.200"
	netnsPodIP      = "10.0.0.201"
	netnsClusterIP2 = "10.0.0.202"
)

// netnsChildMain is TestMain in the child: it checks that it is isolated, puts the test
// addresses on loopback and starts a control plane of its own inside the namespace.
func netnsChildMain(m *testing.M) int {
	ifaces, err := net.Interfaces()
	if err != nil || len(ifaces) != 1 || ifaces[0].Flags&net.FlagLoopback == 0 {
		fmt.Fprintf(os.Stderr, "refusing to run: not inside a network namespace holding only loopback (%v, %v)\n", ifaces, err)
		return netnsUnavailable
	}
	for _, args := range [][]string{{"link", "set", "lo", "up"},
		{"addr", "add", netnsClusterIP + "/32", "dev", "lo"}, {"addr", "add", netnsPodIP + "/32", "dev", "lo"},
		{"addr", "add", netnsClusterIP2 + "/32", "dev", "lo"}} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "ip %s: %v\n%s", strings.Join(args, " "), err, out)
			return netnsUnavailable
		}
	}
	for _, v := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
		os.Unsetenv(v)
	}
	os.Setenv("GOPROXY", "off") // nothing to fetch in here: the tools and modules are already cached
	return testenv.Main(m, controlplane.Options{})
}

// inNetworkNamespace runs the calling test again in a child process inside a new network
// namespace and reports its outcome; it returns true in the child, where the test does its work.
func inNetworkNamespace(t *testing.T) bool {
	if os.Getenv(netnsChildEnv) != "" {
		return true
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip to set up the network namespace")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1", "-test.timeout=10m")
	cmd.Env = append(os.Environ(), netnsChildEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	out, err := cmd.CombinedOutput()
	if errors.Is(err, syscall.EPERM) {
		t.Skipf("cannot create a network namespace here (needs CAP_SYS_ADMIN): %v", err)
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == netnsUnavailable {
		t.Skipf("cannot set up the network namespace here:\n%s", out)
	}
	if err != nil {
		t.Fatalf("the test inside its network namespace failed: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("the test did not pass inside its network namespace:\n%s", out)
	}
	t.Logf("inside its network namespace:\n%s", out)
	return false
}

func TestServiceBackedWebhookProbeAndServiceProxyInANetworkNamespace(t *testing.T) {
	if !inNetworkNamespace(t) {
		return
	}
	ns := testenv.Namespace(t, "netns")
	s := newServer(t)

	t.Run("WebhookReady probes a webhook the API server reaches through its Service", func(t *testing.T) {
		group := widgetCRD(t)
		cfg := "svc-" + strings.Split(group, ".")[0]
		// The webhook "pod" answers on the ClusterIP, which is where the API server's service
		// resolver sends it (there is no kube-proxy here), with a certificate for the Service's name.
		wh, err := fakes.NewWebhookOn(netnsClusterIP, 443, "hook."+ns+".svc")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(wh.Close)
		// A selector-less Service with Endpoints written by the harness (the endpoints
		// controller's part); kube-controller-manager mirrors them into EndpointSlices.
		applyServiceBackedWebhook(t, ns, netnsClusterIP, cfg, group, "[widgets]", wh.CABundle())

		// Field report 001 through a Service: the API server dials the ClusterIP and is refused.
		early := testenv.Object(t, widget(group, "early"))
		_, err = testenv.Resource(t, early).Create(context.Background(), early, metav1.CreateOptions{})
		if err == nil || !strings.Contains(err.Error(), "failed calling webhook") || !strings.Contains(err.Error(), netnsClusterIP) {
			t.Fatalf("want `failed calling webhook` on %s, got %v", netnsClusterIP, err)
		}

		ch := createAsync(t, s, "WebhookReady", props("validatingWebhookConfiguration", cfg, "probe", probeOf(group), "timeout", "90s"))
		mustNotReturn(t, ch, 1500*time.Millisecond) // endpoints ready, caBundle set, but nothing serves
		if err := wh.Start(); err != nil {
			t.Fatal(err)
		}
		r := await(t, ch, 60*time.Second)
		if r.err != nil {
			t.Fatal(r.err)
		}
		out := r.resp.Properties
		if !out.Get("probed").AsBool() || out.Get("readyEndpoints").AsNumber() != 1 || out.Get("serviceName").AsString() != ns+"/hook:443" {
			t.Errorf("outputs = %v", out)
		}
		testenv.Apply(t, widget(group, "after")) // what the gate promises
	})

	// Issue #21 item 4: without `probe`, a Service-backed webhook with its caBundle and ready
	// endpoints passed although nothing served; the gate now derives a probe from its rules (a
	// wildcard here, istiod's `resources: ["*"]`), for a configuration and a `service` target.
	t.Run("WebhookReady without a probe needs an answer from a Service-backed webhook", func(t *testing.T) {
		group := widgetCRD(t)
		ns2 := testenv.Namespace(t, "noprobe")
		cfg := "noprobe-" + strings.Split(group, ".")[0]
		wh, err := fakes.NewWebhookOn(netnsClusterIP2, 443, "hook."+ns2+".svc")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(wh.Close)
		applyServiceBackedWebhook(t, ns2, netnsClusterIP2, cfg, group, `["*"]`, wh.CABundle())
		t.Cleanup(func() {
			_ = testenv.Dynamic(t).Resource(vwcResource).Delete(context.Background(), cfg, metav1.DeleteOptions{})
		})
		svc := property.New(property.NewMap(map[string]property.Value{"namespace": property.New(ns2), "name": property.New("hook")}))
		gates := map[string]map[string]property.Value{
			"configuration": props("validatingWebhookConfiguration", cfg),
			"service":       props("service", svc),
		}
		// Near miss: caBundle set, endpoints ready, nothing serves.
		for name, in := range gates {
			in["timeout"] = property.New("3s")
			r := await(t, createAsync(t, s, "WebhookReady", in), 60*time.Second)
			if r.err == nil || !strings.Contains(r.err.Error(), "dry-run probe") {
				t.Fatalf("%s target: want a wait on the derived probe, got err=%v outputs=%v", name, r.err, r.resp.Properties)
			}
		}
		chs := map[string]<-chan gateResult{}
		for name, in := range gates {
			in["timeout"] = property.New("90s")
			chs[name] = createAsync(t, s, "WebhookReady", in)
		}
		for _, ch := range chs {
			mustNotReturn(t, ch, time.Second)
		}
		if err := wh.Start(); err != nil {
			t.Fatal(err)
		}
		for name, ch := range chs {
			r := await(t, ch, 60*time.Second)
			if r.err != nil {
				t.Fatalf("%s target: %v", name, r.err)
			}
			if out := r.resp.Properties; !out.Get("probed").AsBool() || out.Get("readyEndpoints").AsNumber() != 1 {
				t.Errorf("%s target: outputs = %v", name, out)
			}
		}
		if wh.Calls.Load() == 0 {
			t.Error("passed without an answer from the webhook")
		}
	})

	t.Run("WebhookReady proves a failurePolicy Ignore webhook through the service proxy", func(t *testing.T) {
		group := widgetCRD(t)
		cfg := "ignore-" + strings.Split(group, ".")[0]
		// The webhook pod serves on its pod IP; the API server's service proxy dials it there.
		wh, err := fakes.NewWebhookOn(netnsPodIP, 9443, "ignored."+ns+".svc")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(wh.Close)
		podBehindHeadlessService(t, ns, "ignored", "https", 443, 9443)
		testenv.Apply(t, fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: %[2]s}
webhooks:
- name: validate.%[3]s
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Ignore
  timeoutSeconds: 3
  clientConfig: {service: {name: ignored, namespace: %[1]s, port: 443, path: /validate}, caBundle: %[4]s}
  rules: [{apiGroups: ["%[3]s"], apiVersions: ["*"], operations: [CREATE, UPDATE], resources: [widgets]}]`,
			ns, cfg, group, wh.CABundle()))
		t.Cleanup(func() {
			_ = testenv.Dynamic(t).Resource(vwcResource).Delete(context.Background(), cfg, metav1.DeleteOptions{})
		})

		ch := createAsync(t, s, "WebhookReady", props("validatingWebhookConfiguration", cfg, "probe", probeOf(group), "timeout", "90s"))
		// Endpoints ready, caBundle set, and the API server admits the dry-run: it does not
		// call an Ignore webhook that is down. Not proof.
		mustNotReturn(t, ch, 2*time.Second)
		if err := wh.Start(); err != nil {
			t.Fatal(err)
		}
		r := await(t, ch, 60*time.Second)
		if r.err != nil {
			t.Fatal(r.err)
		}
		if out := r.resp.Properties; !out.Get("probed").AsBool() || out.Get("failurePolicy").AsString() != "Ignore" || wh.Calls.Load() == 0 {
			t.Errorf("outputs = %v, webhook calls = %d", out, wh.Calls.Load())
		}
	})

	t.Run("HttpReady goes through the API server's service proxy", func(t *testing.T) {
		var calls atomic.Int64
		srv := &http.Server{ReadHeaderTimeout: time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if calls.Add(1) <= 2 || r.URL.Path != "/healthz" {
				http.Error(w, "starting", http.StatusServiceUnavailable)
				return
			}
			fmt.Fprint(w, `{"status":"ok"}`)
		})}
		l, err := net.Listen("tcp", netnsPodIP+":8080")
		if err != nil {
			t.Fatal(err)
		}
		go func() { _ = srv.Serve(l) }()
		t.Cleanup(func() { srv.Close() })
		podBehindHeadlessService(t, ns, "web", "http", 80, 8080)
		svc := property.New(property.NewMap(map[string]property.Value{
			"namespace": property.New(ns), "name": property.New("web"), "port": property.New("http"), "path": property.New("/healthz")}))
		r := await(t, createAsync(t, s, "HttpReady", props("service", svc, "bodyRegex", `"status":"ok"`, "timeout", "20s")), 60*time.Second)
		if r.err != nil {
			t.Fatal(r.err)
		}
		if got := r.resp.Properties.Get("statusCode").AsNumber(); got != 200 || calls.Load() < 4 {
			t.Errorf("statusCode = %v after %d requests (2 answered 503, 2 good ones in a row are needed)", got, calls.Load())
		}
	})
}

// podBehindHeadlessService plays the kubelet and the endpoints controller for a server the test
// runs on netnsPodIP: a pod <name>-0 on a node nobody runs (its IP set through the status
// subresource: the service proxy only dials addresses that belong to a pod), a headless Service
// <name> and its Endpoints.
func podBehindHeadlessService(t *testing.T, ns, name, portName string, port, targetPort int) {
	t.Helper()
	pod := testenv.Apply(t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %[2]s-0, namespace: %[1]s}
spec:
  nodeName: netns-node
  containers: [{name: server, image: registry.local/%[2]s:1}]`, ns, name))[0]
	setStatus(t, pod, map[string]any{"phase": "Running", "podIP": netnsPodIP, "podIPs": []any{map[string]any{"ip": netnsPodIP}}})
	testenv.Apply(t, fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: %[2]s, namespace: %[1]s}
spec:
  clusterIP: None
  ports: [{name: %[3]s, port: %[4]d, targetPort: %[5]d}]
---
apiVersion: v1
kind: Endpoints
metadata: {name: %[2]s, namespace: %[1]s}
subsets:
- addresses: [{ip: %[6]s, targetRef: {kind: Pod, name: %[2]s-0, namespace: %[1]s}}]
  ports: [{name: %[3]s, port: %[5]d}]`, ns, name, portName, port, targetPort, netnsPodIP))
}

// applyServiceBackedWebhook creates Service "hook" in ns at clusterIP, its Endpoints (the pod at
// netnsPodIP, written by the harness in the endpoints controller's place), and ValidatingWebhookConfiguration
// cfg, one Fail webhook on group's resources (a YAML list) through that Service.
func applyServiceBackedWebhook(t *testing.T, ns, clusterIP, cfg, group, resources, caBundle string) {
	t.Helper()
	testenv.Apply(t, fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: hook, namespace: %[1]s}
spec:
  clusterIP: %[2]s
  ports: [{name: https, port: 443, targetPort: 9443}]
---
apiVersion: v1
kind: Endpoints
metadata: {name: hook, namespace: %[1]s}
subsets: [{addresses: [{ip: %[3]s}], ports: [{name: https, port: 9443}]}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: %[4]s}
webhooks:
- name: validate.%[5]s
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
  timeoutSeconds: 3
  clientConfig: {service: {name: hook, namespace: %[1]s, port: 443, path: /validate}, caBundle: %[6]s}
  rules: [{apiGroups: ["%[5]s"], apiVersions: ["*"], operations: [CREATE, UPDATE], resources: %[7]s}]`,
		ns, clusterIP, netnsPodIP, cfg, group, caBundle, resources))
}
