package provider

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/property"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

func widget(group, name string) string {
	return fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata: {name: %s, namespace: default}\nspec: {size: 1}", group, name)
}

func probeOf(group string) property.Value {
	return property.New(property.NewMap(map[string]property.Value{
		"apiVersion": property.New(group + "/v1"), "kind": property.New("Widget"),
		"metadata": property.New(property.NewMap(map[string]property.Value{"name": property.New("probe"), "namespace": property.New("default")})),
	}))
}

func TestWebhookReadyProbeWaitsForALateWebhook(t *testing.T) {
	group := widgetCRD(t)
	wh := testenv.NewWebhook(t)
	cfg := "widgets-" + strings.Split(group, ".")[0]
	wh.Register(t, cfg, group)

	// Field report 001: creating the resource before the webhook serves fails.
	_, err := testenv.Resource(t, testenv.Object(t, widget(group, "early"))).Create(context.Background(), testenv.Object(t, widget(group, "early")), metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
		t.Fatalf("want the field report's `failed calling webhook`, got %v", err)
	}

	s := newServer(t)
	ch := createAsync(t, s, "WebhookReady", props("validatingWebhookConfiguration", cfg, "probe", probeOf(group), "timeout", "60s"))
	mustNotReturn(t, ch, 1500*time.Millisecond) // connection refused: nothing listens yet
	wh.Start(t)
	r := await(t, ch, 30*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !r.resp.Properties.Get("probed").AsBool() || r.resp.Properties.Get("failurePolicy").AsString() != "Fail" {
		t.Errorf("outputs = %v", r.resp.Properties)
	}
	// What the gate promises: the resource can be created now. The probe persisted nothing.
	testenv.Apply(t, widget(group, "after"))
	if _, err := testenv.Resource(t, testenv.Object(t, widget(group, "probe"))).Get(context.Background(), "probe", metav1.GetOptions{}); err == nil {
		t.Error("the dry-run probe left an object behind")
	}

	// A webhook that denies the probe answered: serving.
	wh.Mode.Store("deny")
	if r := await(t, createAsync(t, s, "WebhookReady", props("validatingWebhookConfiguration", cfg, "probe", probeOf(group), "timeout", "30s")), 30*time.Second); r.err != nil {
		t.Fatalf("a denying webhook must count as serving: %v", r.err)
	}
	// One that answers 500 does not.
	wh.Mode.Store("error")
	r = await(t, createAsync(t, s, "WebhookReady", props("validatingWebhookConfiguration", cfg, "probe", probeOf(group), "timeout", "3s")), 30*time.Second)
	if r.err == nil || !strings.Contains(r.err.Error(), "dry-run probe") {
		t.Fatalf("a webhook answering 500 must not count as serving; got %v", r.err)
	}
}

func TestWebhookReadyServiceBackedWaitsForEndpointsAndCABundle(t *testing.T) {
	ns := testenv.Namespace(t, "wh")
	group := uniqueGroup(t)
	cfg := "svc-" + strings.Split(group, ".")[0]
	testenv.Apply(t, fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: webhook, namespace: %[1]s}
spec:
  selector: {app: webhook}
  ports: [{name: https, port: 443, targetPort: https}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: %[2]s
  annotations: {cert-manager.io/inject-ca-from: %[1]s/webhook-cert}
webhooks:
- name: validate.%[3]s
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
  clientConfig: {service: {name: webhook, namespace: %[1]s, port: 443, path: /validate}}
  rules: [{apiGroups: ["%[3]s"], apiVersions: ["*"], operations: [CREATE], resources: [things]}]`, ns, cfg, group))
	t.Cleanup(func() {
		_ = testenv.Dynamic(t).Resource(vwcResource).Delete(context.Background(), cfg, metav1.DeleteOptions{})
	})
	s := newServer(t)
	// No probe, and the rules cover no served kind, so none is derived: the API server never
	// dials the Service's 10.x address in this test (the passing case is in netns_test.go).
	ch := createAsync(t, s, "WebhookReady", props("validatingWebhookConfiguration", cfg, "timeout", "10s"))
	mustNotReturn(t, ch, time.Second) // caBundle empty, no pods
	testenv.Apply(t, deployment(ns, "webhook", "registry.local/webhook:1", 1))
	mustNotReturn(t, ch, 2*time.Second) // endpoints may be ready, but the caBundle is not injected
	// Play cert-manager's cainjector.
	cur, err := testenv.Dynamic(t).Resource(vwcResource).Get(context.Background(), cfg, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hooks := cur.Object["webhooks"].([]any)
	hooks[0].(map[string]any)["clientConfig"].(map[string]any)["caBundle"] = base64.StdEncoding.EncodeToString(testenv.IssueCertificate(t, "webhook", time.Hour).CAPEM)
	if _, err := testenv.Dynamic(t).Resource(vwcResource).Update(context.Background(), cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// caBundle injected, endpoints ready: still no answer from the webhook, so no pass; with no
	// served kind to derive a probe from, the gate asks for one.
	if r := await(t, ch, 60*time.Second); r.err == nil {
		t.Fatalf("passed on caBundle and endpoints alone: %v", r.resp.Properties)
	}
	r := await(t, createAsync(t, s, "WebhookReady", props("validatingWebhookConfiguration", cfg, "timeout", "5s")), 30*time.Second)
	if r.err == nil || !strings.Contains(r.err.Error(), "no kind the API server serves matches the webhooks' rules") {
		t.Fatalf("want a wait asking for a probe, got err=%v outputs=%v", r.err, r.resp.Properties)
	}
}

// generatedProbeOf is a probe named by the API server (generateName), as the presets' are.
func generatedProbeOf(group string) property.Value {
	return property.New(property.NewMap(map[string]property.Value{
		"apiVersion": property.New(group + "/v1"), "kind": property.New("Widget"),
		"metadata": property.New(property.NewMap(map[string]property.Value{"generateName": property.New("readiness-probe-"), "namespace": property.New("default")})),
	}))
}

func TestWebhookReadyEveryNamedWebhookMustExist(t *testing.T) {
	group := widgetCRD(t)
	base := strings.Split(group, ".")[0]
	cfg := "named-" + base
	wh := testenv.NewWebhook(t)
	wh.Start(t)
	first := wh.RegisterAs(t, "ValidatingWebhookConfiguration", cfg, "Fail", group, "widgets")
	second := "second." + group
	s := newServer(t)
	gate := func(timeout string) <-chan gateResult {
		return createAsync(t, s, "WebhookReady", props("validatingWebhookConfiguration", cfg, "webhooks", strs(first, second),
			"probe", probeOf(group), "timeout", timeout))
	}
	r := await(t, gate("2s"), 30*time.Second)
	if r.err == nil {
		t.Fatalf("passed although webhook %s is not in the configuration: %v", second, r.resp.Properties)
	}
	if want := "webhooks " + second + " not in ValidatingWebhookConfiguration " + cfg; !strings.Contains(r.err.Error(), want) {
		t.Errorf("error lacks %q: %v", want, r.err)
	}
	ch := gate("60s")
	mustNotReturn(t, ch, time.Second)
	// The chart's next revision adds the second webhook.
	ri := testenv.Dynamic(t).Resource(vwcResource)
	cur, err := ri.Get(context.Background(), cfg, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hooks := cur.Object["webhooks"].([]any)
	add := hooks[0].(map[string]any)
	add = map[string]any{"name": second, "admissionReviewVersions": add["admissionReviewVersions"], "sideEffects": "None",
		"failurePolicy": "Fail", "timeoutSeconds": int64(3), "clientConfig": add["clientConfig"], "rules": add["rules"]}
	cur.Object["webhooks"] = append(hooks, add)
	if _, err := ri.Update(context.Background(), cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r = await(t, ch, 30*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := outStrings(t, r.resp.Properties, "webhookNames"); strings.Join(got, ",") != first+","+second {
		t.Errorf("webhookNames = %v", got)
	}
}

// ingress-nginx's admission Service names its port unlike the container port it targets:
// {name: https-webhook, port: 443, targetPort: webhook}. The objects below are the chart's
// (../shared/fixtures/charts/ingress-nginx.yaml), in a namespace of the test's own; kwok plays
// the controller pod and the real controller manager writes the EndpointSlices. The webhook's
// rule names a version no longer served (networking.k8s.io/v1beta1, matchPolicy Exact), so once
// the endpoints count the gate derives no probe and calls nothing (the pod's 10.x address is
// never dialled): it waits asking for `probe`, which shows the endpoint stage passed.
func TestWebhookReadyServicePortNamedUnlikeItsTargetPort(t *testing.T) {
	ns := testenv.Namespace(t, "nginx")
	cfg := "ingress-nginx-admission-" + ns
	ca := base64.StdEncoding.EncodeToString(testenv.IssueCertificate(t, "ingress-nginx-controller-admission."+ns+".svc", time.Hour).CAPEM)
	testenv.Apply(t, fmt.Sprintf(`apiVersion: v1
kind: Service
metadata:
  name: ingress-nginx-controller-admission
  namespace: %[1]s
  labels: {app.kubernetes.io/name: ingress-nginx, app.kubernetes.io/instance: ingress-nginx, app.kubernetes.io/component: controller}
spec:
  type: ClusterIP
  ports:
    - name: https-webhook
      port: 443
      targetPort: webhook
      appProtocol: https
  selector: {app.kubernetes.io/name: ingress-nginx, app.kubernetes.io/instance: ingress-nginx, app.kubernetes.io/component: controller}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: %[2]s
  labels: {app.kubernetes.io/component: admission-webhook}
webhooks:
  - name: validate.nginx.ingress.kubernetes.io
    matchPolicy: Exact
    # Only this test's namespace, and a version not served: nothing may make the API server dial
    # the Service's 10.x address.
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: %[1]s}}
    rules:
      - apiGroups: [networking.k8s.io]
        apiVersions: [v1beta1]
        operations: [CREATE, UPDATE]
        resources: [ingresses]
    failurePolicy: Fail
    sideEffects: None
    admissionReviewVersions: [v1]
    clientConfig:
      service: {name: ingress-nginx-controller-admission, namespace: %[1]s, port: 443, path: /networking/v1/ingresses}
      caBundle: %[3]s`, ns, cfg, ca))
	t.Cleanup(func() {
		_ = testenv.Dynamic(t).Resource(vwcResource).Delete(context.Background(), cfg, metav1.DeleteOptions{})
	})
	s := newServer(t)
	mustFailWith(t, createAsync(t, s, "WebhookReady", props("validatingWebhookConfiguration", cfg, "timeout", "2s")),
		"0/1 ready endpoints") // no controller pod yet
	testenv.Apply(t, fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: ingress-nginx-controller, namespace: %s}
spec:
  replicas: 1
  selector:
    matchLabels: {app.kubernetes.io/name: ingress-nginx, app.kubernetes.io/instance: ingress-nginx, app.kubernetes.io/component: controller}
  template:
    metadata:
      labels: {app.kubernetes.io/name: ingress-nginx, app.kubernetes.io/instance: ingress-nginx, app.kubernetes.io/component: controller}
    spec:
      nodeSelector: {type: kwok}
      tolerations: [{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}]
      containers:
        - name: controller
          image: registry.k8s.io/ingress-nginx/controller:v1.15.1
          ports:
            - {name: http, containerPort: 80, protocol: TCP}
            - {name: https, containerPort: 443, protocol: TCP}
            - {name: webhook, containerPort: 8443, protocol: TCP}`, ns))
	// Past the endpoints (the https-webhook slice port counted), the gate needs an answer.
	waitReadyEndpoints(t, ns, "ingress-nginx-controller-admission", 1)
	mustFailWith(t, createAsync(t, s, "WebhookReady", props("validatingWebhookConfiguration", cfg, "timeout", "3s")),
		"no kind the API server serves matches the webhooks' rules")
}

// waitReadyEndpoints waits (up to 60 s) until Service ns/name has want ready endpoints, as
// ServiceReady counts them.
func waitReadyEndpoints(t *testing.T, ns, name string, want int) {
	t.Helper()
	r := await(t, createAsync(t, newServer(t), "ServiceReady", props("name", name, "namespace", ns, "minReadyEndpoints", want, "timeout", "60s")), 90*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
}

// A dual-stack pod appears in an IPv4 and an IPv6 EndpointSlice: it is one ready endpoint.
func TestWebhookReadyCountsADualStackPodOnce(t *testing.T) {
	ns := testenv.Namespace(t, "dual")
	slice := func(name, family string, pods map[string]string) string {
		var eps []string
		for pod, addr := range pods {
			eps = append(eps, fmt.Sprintf(`{addresses: ["%s"], conditions: {ready: true}, targetRef: {kind: Pod, namespace: %s, name: %s}}`, addr, ns, pod))
		}
		return fmt.Sprintf(`apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: %s, namespace: %s, labels: {kubernetes.io/service-name: hook}}
addressType: %s
ports: [{name: https, port: 9443, protocol: TCP}]
endpoints: [%s]`, name, ns, family, strings.Join(eps, ", "))
	}
	testenv.Apply(t, fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: hook, namespace: %s}
spec:
  ipFamilyPolicy: PreferDualStack
  ports: [{name: https, port: 443, targetPort: 9443}]`, ns)+"\n---\n"+
		slice("hook-v4", "IPv4", map[string]string{"hook-0": "10.244.0.10"})+"\n---\n"+
		slice("hook-v6", "IPv6", map[string]string{"hook-0": "fd00::10"}))
	s := newServer(t)
	svc := property.New(property.NewMap(map[string]property.Value{"namespace": property.New(ns), "name": property.New("hook"), "port": property.New(443.0)}))
	mustFailWith(t, createAsync(t, s, "WebhookReady", props("service", svc, "minReadyEndpoints", 2, "timeout", "2s")),
		"1/2 ready endpoints") // one pod, two addresses
	sl := testenv.Object(t, slice("hook-v4", "IPv4", map[string]string{"hook-0": "10.244.0.10", "hook-1": "10.244.0.11"}))
	cur, err := testenv.Resource(t, sl).Get(context.Background(), "hook-v4", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sl.SetResourceVersion(cur.GetResourceVersion())
	if _, err := testenv.Resource(t, sl).Update(context.Background(), sl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Two pods count, so the gate goes on to the webhooks pointing at the Service: there are
	// none (ready endpoints are not an answer), so it waits, saying so.
	mustFailWith(t, createAsync(t, s, "WebhookReady", props("service", svc, "minReadyEndpoints", 2, "timeout", "3s")),
		fmt.Sprintf("no webhook configuration points at Service %s/hook:443 yet", ns))
}

// A probe the provider may not create (RBAC) fails at once, saying what to grant.
func TestWebhookReadyForbiddenProbeFailsAtOnce(t *testing.T) {
	group := widgetCRD(t)
	base := strings.Split(group, ".")[0]
	cfg := "rbac-" + base
	wh := testenv.NewWebhook(t)
	wh.Start(t)
	wh.RegisterAs(t, "ValidatingWebhookConfiguration", cfg, "Fail", group, "widgets")
	user := "probe-" + base
	// The README's role for WebhookReady, without `create` on the probe's kind.
	testenv.Apply(t, fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: %[1]s}
rules: [{apiGroups: [admissionregistration.k8s.io], resources: [validatingwebhookconfigurations], verbs: [list, watch]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: %[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: %[1]s}
subjects: [{kind: User, name: %[1]s}]`, user))
	deleteClusterRoleAtEnd(t, user)
	kc := actingAs(t, user)
	r := await(t, createAsync(t, newServer(t, kc), "WebhookReady",
		props("validatingWebhookConfiguration", cfg, "probe", probeOf(group), "timeout", "60s")), 30*time.Second)
	if r.err == nil {
		t.Fatalf("passed without permission to create the probe: %v", r.resp.Properties)
	}
	for _, want := range []string{`User "` + user + `" cannot create resource "widgets"`, "grant verb `create` on resource \"widgets." + group + `" in namespace default`} {
		if !strings.Contains(r.err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, r.err)
		}
	}
	if strings.Contains(r.err.Error(), "timed out") {
		t.Errorf("waited for the timeout instead of failing at once: %v", r.err)
	}
}
