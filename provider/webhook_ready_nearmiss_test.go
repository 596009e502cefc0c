package provider

import (
	"context"
	"encoding/base64"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/property"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/helmrelease"
)

// WebhookReady's near misses, each against the real API server beside the state that must pass.

// generatedProbeOf is a probe named by the API server (generateName), as the presets' are.
func generatedProbeOf(group string) property.Value {
	return property.New(property.NewMap(map[string]property.Value{
		"apiVersion": property.New(group + "/v1"), "kind": property.New("Widget"),
		"metadata": property.New(property.NewMap(map[string]property.Value{"generateName": property.New("readiness-probe-"), "namespace": property.New("default")})),
	}))
}

func TestWebhookReadyDenialByAnotherWebhookIsNotProof(t *testing.T) {
	group := widgetCRD(t)
	base := strings.Split(group, ".")[0]
	target := testenv.NewWebhook(t)
	target.RegisterAs(t, "ValidatingWebhookConfiguration", "target-"+base, "Fail", group, "widgets")
	// A policy engine's mutating webhook that denies everything, quoting the object's name. It
	// runs before any validating webhook, so the target is never called.
	policy := testenv.NewWebhook(t)
	policy.Mode.Store("deny-named")
	policy.Start(t)
	policyHook := policy.RegisterAs(t, "MutatingWebhookConfiguration", "policy-"+base, "Fail", group, "widgets")
	// What the gate meets: the API server answers a webhook's denial, but not the target's.
	w := testenv.Object(t, widget(group, "trap"))
	if _, err := testenv.Resource(t, w).Create(context.Background(), w, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err == nil ||
		!strings.Contains(err.Error(), `admission webhook "`+policyHook+`" denied the request`) {
		t.Fatalf("want the policy webhook's denial, got %v", err)
	}
	s := newServer(t)
	gate := func(timeout string) <-chan gateResult {
		return createAsync(t, s, "WebhookReady", props("validatingWebhookConfiguration", "target-"+base, "probe", generatedProbeOf(group), "timeout", timeout))
	}

	before := policy.Calls.Load()
	r := await(t, gate("2s"), 30*time.Second)
	if r.err == nil {
		t.Fatalf("passed on a denial by another webhook while the target is down: %v", r.resp.Properties)
	}
	want := fmt.Sprintf(`probe denied by policy webhook %q before reaching ValidatingWebhookConfiguration target-%s`, policyHook, base)
	if !strings.Contains(r.err.Error(), want) {
		t.Errorf("error lacks %q: %v", want, r.err)
	}
	// Every denial quotes its request (as messages quoting a generated name do): a message that
	// changes must not restart the backoff (it did: about 10 dry-runs a second for the whole
	// timeout). Backoff 100, 200, 250, 250 ms... makes about 9 probes in 2 s; 20 is the spin.
	if n := policy.Calls.Load() - before; n > 13 {
		t.Errorf("%d dry-runs in a 2 s wait: the probe spins", n)
	}

	ch := gate("60s")
	mustNotReturn(t, ch, time.Second)
	// The policy lets the probe through: the target's own denial is its answer. (With the
	// policy still denying, the target's direct answer proves it: see
	// TestWebhookReadyProvesATargetBehindADenyingPolicy.)
	target.Mode.Store("deny")
	target.Start(t)
	policy.Mode.Store("allow")
	r = await(t, ch, 30*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !r.resp.Properties.Get("probed").AsBool() {
		t.Errorf("outputs = %v", r.resp.Properties)
	}
}

func TestWebhookReadyIgnorePolicyNeedsADirectAnswer(t *testing.T) {
	group := widgetCRD(t)
	base := strings.Split(group, ".")[0]
	cfg := "ignore-" + base
	wh := testenv.NewWebhook(t)
	hook := wh.RegisterAs(t, "ValidatingWebhookConfiguration", cfg, "Ignore", group, "widgets")
	// The trap: with failurePolicy Ignore the API server admits without a webhook that is down.
	w := testenv.Object(t, widget(group, "trap"))
	if _, err := testenv.Resource(t, w).Create(context.Background(), w, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatalf("the API server was expected to admit without an Ignore webhook that is down: %v", err)
	}
	s := newServer(t)
	gate := func(timeout string) <-chan gateResult {
		return createAsync(t, s, "WebhookReady", props("validatingWebhookConfiguration", cfg, "probe", probeOf(group), "timeout", timeout))
	}
	r := await(t, gate("2s"), 30*time.Second)
	if r.err == nil {
		t.Fatalf("passed on an admitted dry-run while the Ignore webhook is down: %v", r.resp.Properties)
	}
	for _, want := range []string{"webhook " + hook + " has failurePolicy Ignore", "calling it directly", "connection refused"} {
		if !strings.Contains(r.err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, r.err)
		}
	}

	ch := gate("60s")
	mustNotReturn(t, ch, time.Second)
	// Something else answers on the webhook's address: 200 and JSON, but no AdmissionReview.
	wh.Mode.Store("stranger")
	wh.Start(t)
	mustNotReturn(t, ch, 1500*time.Millisecond)
	// An AdmissionReview, but not the answer to this request.
	wh.Mode.Store("other-uid")
	mustNotReturn(t, ch, time.Second)
	calls := wh.Calls.Load()
	wh.Mode.Store("allow")
	r = await(t, ch, 30*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	out := r.resp.Properties
	if !out.Get("probed").AsBool() || out.Get("failurePolicy").AsString() != "Ignore" {
		t.Errorf("outputs = %v", out)
	}
	if wh.Calls.Load() == calls {
		t.Error("the gate passed without calling the webhook")
	}
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

// HelmReleaseReady derives a probe from a webhook's rules. For Pods (what Istio's and Linkerd's
// injectors intercept) a Pod with no spec is Invalid, which validating webhooks never see: the
// derived Pod must be one that schema validation accepts, so both webhooks are really called.
func TestHelmReleaseReadyDerivedPodProbeReachesItsWebhooks(t *testing.T) {
	ns := testenv.Namespace(t, "inject")
	only := "  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: " + ns + "}}\n  rules:"
	inject, validate := testenv.NewWebhook(t), testenv.NewWebhook(t)
	mcfg, vcfg := "injector-"+ns, "pod-policy-"+ns
	// Pods of this namespace only: the other tests' pods must never meet these webhooks.
	mdoc := strings.Replace(inject.ConfigurationFor("MutatingWebhookConfiguration", mcfg, "", "pods"), "  rules:", only, 1)
	vdoc := strings.Replace(validate.ConfigurationFor("ValidatingWebhookConfiguration", vcfg, "", "pods"), "  rules:", only, 1)
	// Core pods: no group, so the webhooks' names get a domain of their own.
	mdoc = strings.Replace(mdoc, "name: mutating."+mcfg+".\n", "name: inject."+mcfg+".example.test\n", 1)
	vdoc = strings.Replace(vdoc, "name: validating."+vcfg+".\n", "name: validate."+vcfg+".example.test\n", 1)
	testenv.Apply(t, mdoc+"\n---\n"+vdoc)
	t.Cleanup(func() {
		_ = testenv.Dynamic(t).Resource(vwcResource).Delete(context.Background(), vcfg, metav1.DeleteOptions{})
		mwc := vwcResource
		mwc.Resource = "mutatingwebhookconfigurations"
		_ = testenv.Dynamic(t).Resource(mwc).Delete(context.Background(), mcfg, metav1.DeleteOptions{})
	})
	rec, err := helmrelease.Encode("mesh", ns, 1, "deployed", "mesh", "1.0.0", "1.0.0", "---\n"+mdoc+"\n---\n"+vdoc)
	if err != nil {
		t.Fatal(err)
	}
	sec := testenv.Object(t, fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata:
  name: sh.helm.release.v1.mesh.v1
  namespace: %s
  labels: {owner: helm, name: mesh, status: deployed, version: "1"}
type: helm.sh/release.v1`, ns))
	sec.Object["stringData"] = map[string]any{"release": rec}
	if _, err := testenv.Resource(t, sec).Create(context.Background(), sec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s := newServer(t)
	ch := createAsync(t, s, "HelmReleaseReady", props("name", "mesh", "namespace", ns, "timeout", "60s"))
	mustNotReturn(t, ch, 1500*time.Millisecond) // neither webhook serves
	inject.Start(t)
	mustNotReturn(t, ch, time.Second) // the injector answers, the validating webhook does not
	validate.Start(t)
	r := await(t, ch, 30*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if inject.Calls.Load() == 0 || validate.Calls.Load() == 0 {
		t.Errorf("calls: injector %d, validating %d: the derived probe did not reach both", inject.Calls.Load(), validate.Calls.Load())
	}
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

// A probe derived for a custom resource carries what its CRD's schema requires, so it passes
// schema validation and reaches the webhook (cert-manager's CertificateRequest needs
// spec.request and spec.issuerRef: met on a real node). Where the schema asks for what no
// minimal value meets (a pattern), schema validation answers Invalid before any webhook runs:
// waiting cannot change that, so the gate fails at once, saying so, instead of probing until
// the timeout.
func TestHelmReleaseReadyDerivedProbeOfACustomKind(t *testing.T) {
	cases := map[string]struct {
		spec string // the CRD's spec schema
		pass bool
	}{
		"required fields the schema's minimal values meet": {"{type: object, required: [size, csr], properties: {size: {type: integer, minimum: 1}, csr: {type: string, format: byte}}}", true},
		"a required pattern no minimal value meets":        {"{type: object, required: [size], properties: {size: {type: string, pattern: '^x+$'}}}", false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ns := testenv.Namespace(t, "schema")
			group := uniqueGroup(t)
			crd := strings.Replace(testenv.CRD(group, "Gizmo", "gizmos"), "        x-kubernetes-preserve-unknown-fields: true\n",
				"        required: [spec]\n        properties:\n          spec: "+tc.spec+"\n", 1)
			testenv.Apply(t, crd)
			waitServed(t, group)
			wh := testenv.NewWebhook(t)
			wh.Start(t)
			cfg := "gizmos-" + ns
			vdoc := wh.ConfigurationFor("ValidatingWebhookConfiguration", cfg, group, "gizmos")
			testenv.Apply(t, vdoc)
			t.Cleanup(func() {
				_ = testenv.Dynamic(t).Resource(vwcResource).Delete(context.Background(), cfg, metav1.DeleteOptions{})
			})
			rec, err := helmrelease.Encode("gizmo", ns, 1, "deployed", "gizmo", "1.0.0", "1.0.0", "---\n"+vdoc)
			if err != nil {
				t.Fatal(err)
			}
			sec := testenv.Object(t, fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata:
  name: sh.helm.release.v1.gizmo.v1
  namespace: %s
  labels: {owner: helm, name: gizmo, status: deployed, version: "1"}
type: helm.sh/release.v1`, ns))
			sec.Object["stringData"] = map[string]any{"release": rec}
			if _, err := testenv.Resource(t, sec).Create(context.Background(), sec, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			before := wh.Calls.Load()
			r := await(t, createAsync(t, newServer(t), "HelmReleaseReady", props("name", "gizmo", "namespace", ns, "timeout", "60s")), 30*time.Second)
			if tc.pass {
				if r.err != nil {
					t.Fatalf("the derived probe met the schema and the webhook serves: %v", r.err)
				}
				if wh.Calls.Load() < before+2 {
					t.Fatalf("passed without two calls to the webhook (%d)", wh.Calls.Load()-before)
				}
				return
			}
			if r.err == nil {
				t.Fatalf("passed on a probe that never reached the webhook: %v", r.resp.Properties)
			}
			for _, want := range []string{"schema validation rejects it before it reaches ValidatingWebhookConfiguration " + cfg,
				"the Gizmo derived from the webhook's rules is rejected by schema validation; give `probe`"} {
				if !strings.Contains(r.err.Error(), want) {
					t.Errorf("error lacks %q: %v", want, r.err)
				}
			}
			if strings.Contains(r.err.Error(), "timed out") || generatedNameRE.MatchString(r.err.Error()) {
				t.Errorf("want an immediate failure with a stable message: %v", r.err)
			}
		})
	}
}

var generatedNameRE = regexp.MustCompile(`readiness-probe-[a-z0-9]{5}\b`)
