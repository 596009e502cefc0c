package provider

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/property"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/readiness-io/pulumi-readiness/internal/fakes"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
)

// With the `service` target, an admitted dry-run proves only the webhooks backed by that Service
// that the API server provably called for the probe, found in the webhook configurations. No
// probe here is ever intercepted by a Service-backed webhook: the API server would dial its
// ClusterIP (10.0.0.x), which only provider/netns_test.go's harness may do.

// serviceHookUser is an impersonated provider identity with the README's role for WebhookReady
// with `service` and a probe, without services/proxy, that may list and watch the webhook
// configuration resources configs; it returns a kubeconfig for it.
func serviceHookUser(t *testing.T, name, group, configs string) string {
	t.Helper()
	testenv.Apply(t, fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: %[1]s}
rules:
- {apiGroups: [admissionregistration.k8s.io], resources: [%[3]s], verbs: [list, watch]}
- {apiGroups: [""], resources: [services], verbs: [list, watch]}
- {apiGroups: [discovery.k8s.io], resources: [endpointslices], verbs: [list, watch]}
- {apiGroups: ["%[2]s"], resources: [widgets], verbs: [create]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: %[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: %[1]s}
subjects: [{kind: User, name: %[1]s}]`, name, group, configs))
	deleteClusterRoleAtEnd(t, name)
	return actingAs(t, name)
}

// A Service with ready endpoints whose webhooks do not intercept the probe: an admitted dry-run
// says nothing about them (the near miss that passed as soon as the endpoints were ready). A
// provider without services/proxy cannot call them directly: fail at once naming the webhook.
// Before a configuration points at the Service, the gate waits, saying so.
func TestWebhookReadyServiceTargetProvesOnlyItsWebhooks(t *testing.T) {
	ns := testenv.Namespace(t, "svctarget")
	group := widgetCRD(t)
	testenv.Apply(t, fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: hook, namespace: %[1]s}
spec:
  selector: {app: hook}
  ports: [{name: https, port: 443, targetPort: https}]`, ns))
	testenv.Apply(t, deployment(ns, "hook", "registry.local/hook:1", 1))
	service := props("namespace", ns, "name", "hook")

	// A provider that may not read the MutatingWebhookConfigurations cannot find the Service's
	// webhooks: fail at once, naming what it may not do.
	user := "svctarget-vwc-" + ns
	r := await(t, createAsync(t, newServer(t, serviceHookUser(t, user, group, "validatingwebhookconfigurations")), "WebhookReady",
		props("service", service, "probe", probeOf(group), "timeout", "20s")), 60*time.Second)
	if r.err == nil {
		t.Fatalf("passed without reading the MutatingWebhookConfigurations: %v", r.resp.Properties)
	}
	for _, want := range []string{fmt.Sprintf(`User %q cannot list resource "mutatingwebhookconfigurations"`, user),
		"grant verbs list, watch on it cluster-wide"} {
		if !strings.Contains(r.err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, r.err)
		}
	}
	if strings.Contains(r.err.Error(), "timed out") {
		t.Errorf("waited for the timeout instead of failing at once: %v", r.err)
	}

	s := newServer(t, serviceHookUser(t, "svctarget-"+ns, group, "validatingwebhookconfigurations, mutatingwebhookconfigurations"))

	// No configuration points at the Service: wait, saying so.
	r = await(t, createAsync(t, s, "WebhookReady", props("service", service, "probe", probeOf(group), "timeout", "3s")), 60*time.Second)
	if r.err == nil || !strings.Contains(r.err.Error(), fmt.Sprintf("no webhook configuration points at Service %s/hook:443 yet", ns)) ||
		!strings.Contains(r.err.Error(), "timed out") {
		t.Fatalf("want a wait for a configuration pointing at the Service, got err=%v outputs=%v", r.err, r.resp.Properties)
	}

	// A configuration points at the Service, but its webhooks never intercept the probe: one for
	// another resource, one whose objectSelector leaves the probe out.
	cfg := "svctarget-" + ns
	ca := base64.StdEncoding.EncodeToString(testenv.IssueCertificate(t, "hook."+ns+".svc", time.Hour).CAPEM)
	ch := createAsync(t, s, "WebhookReady", props("service", service, "probe", probeOf(group), "timeout", "30s"))
	mustNotReturn(t, ch, time.Second)
	testenv.Apply(t, fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: %[2]s}
webhooks:
- name: gadgets.%[3]s
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
  clientConfig: {service: {name: hook, namespace: %[1]s, port: 443, path: /gadgets}, caBundle: %[4]s}
  rules: [{apiGroups: ["%[3]s"], apiVersions: ["*"], operations: [CREATE], resources: [gadgets]}]
- name: selected.%[3]s
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
  objectSelector: {matchLabels: {tier: never}}
  clientConfig: {service: {name: hook, namespace: %[1]s, port: 443, path: /widgets}, caBundle: %[4]s}
  rules: [{apiGroups: ["%[3]s"], apiVersions: ["*"], operations: [CREATE], resources: [widgets]}]`, ns, cfg, group, ca))
	t.Cleanup(func() {
		_ = testenv.Dynamic(t).Resource(vwcResource).Delete(context.Background(), cfg, metav1.DeleteOptions{})
	})
	r = await(t, ch, 60*time.Second)
	if r.err == nil {
		t.Fatalf("passed on an admitted dry-run that reached no webhook of the Service: %v", r.resp.Properties)
	}
	hook := "gadgets." + group
	for _, want := range []string{fmt.Sprintf(`the probe is not intercepted by webhook %q: its rules`, hook), "do not match the probe's CREATE of widgets." + group,
		`cannot create resource "services/proxy"`, "grant verb `create` on resource \"services/proxy\" in namespace " + ns} {
		if !strings.Contains(r.err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, r.err)
		}
	}
	if strings.Contains(r.err.Error(), "timed out") {
		t.Errorf("waited for the timeout instead of failing at once: %v", r.err)
	}
}

// TestWebhookReadyServiceTargetNamedWebhooksMustExist: with `service` and `webhooks`, every named
// webhook must point at the Service; another webhook of the Service does not stand in for it.
func TestWebhookReadyServiceTargetNamedWebhooksMustExist(t *testing.T) {
	ns := testenv.Namespace(t, "whsvcn")
	testenv.Apply(t, fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: hook, namespace: %[1]s}
spec:
  ports: [{name: https, port: 443, targetPort: 8443}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: hook-1, namespace: %[1]s, labels: {kubernetes.io/service-name: hook}}
addressType: IPv4
ports: [{name: https, port: 8443, protocol: TCP}]
endpoints: [{addresses: [10.0.0.77], conditions: {ready: true}}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: named-%[1]s}
webhooks:
- name: present.%[1]s.test
  admissionReviewVersions: [v1]
  sideEffects: None
  objectSelector: {matchLabels: {never: match}}
  clientConfig: {caBundle: Y2E=, service: {namespace: %[1]s, name: hook}}
  rules: [{operations: [CREATE], apiGroups: [nope.test], apiVersions: [v1], resources: [nothings]}]`, ns))
	t.Cleanup(func() {
		_ = testenv.Dynamic(t).Resource(vwcResource).Delete(context.Background(), "named-"+ns, metav1.DeleteOptions{})
	})
	s := newServer(t)
	service := props("namespace", ns, "name", "hook")
	r := await(t, createAsync(t, s, "WebhookReady", props("service", service, "webhooks", strs("present."+ns+".test", "absent."+ns+".test"), "timeout", "2s")), 30*time.Second)
	if r.err == nil || !strings.Contains(r.err.Error(), "absent."+ns+".test not in any configuration pointing at Service") {
		t.Fatalf("a named webhook that does not exist must not pass; got %v", r.err)
	}
	// The named webhook exists and the Service has a ready endpoint, but without `probe` only a
	// probe derived from its rules could show it answers, and they cover no served kind: wait.
	r = await(t, createAsync(t, s, "WebhookReady", props("service", service, "webhooks", strs("present."+ns+".test"), "timeout", "2s")), 30*time.Second)
	if r.err == nil || !strings.Contains(r.err.Error(), "no kind the API server serves matches the webhooks' rules") {
		t.Fatalf("passed, or waited for something else, with no answer from the webhook: err=%v outputs=%v", r.err, r.resp.Properties)
	}
}

// externalNameWebhook is a webhook on 127.0.0.1 behind an ExternalName Service `hook` of ns
// whose external name is localhost: the API server dials localhost at the webhook's port, with
// the TLS server name hook.<ns>.svc.
func externalNameWebhook(t *testing.T, ns string) *testenv.Webhook {
	t.Helper()
	w, err := fakes.NewWebhookOn("127.0.0.1", 0, "hook."+ns+".svc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	testenv.Apply(t, fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata: {name: hook, namespace: %s}\nspec: {type: ExternalName, externalName: localhost}", ns))
	return &testenv.Webhook{Webhook: w}
}

// Item 13: a webhook behind an ExternalName Service works in the API server (it dials the
// external name), but has no endpoints: the gates waited for them forever.
func TestWebhookReadyExternalNameService(t *testing.T) {
	group := widgetCRD(t)
	for name, tc := range map[string]struct {
		policy string
		gate   func(ns, cfg string, port float64) (string, map[string]property.Value)
	}{
		"configuration with probe": {"Fail", func(ns, cfg string, port float64) (string, map[string]property.Value) {
			return "WebhookReady", props("validatingWebhookConfiguration", cfg, "probe", generatedProbeOf(group))
		}},
		"configuration, derived probe": {"Fail", func(ns, cfg string, port float64) (string, map[string]property.Value) {
			return "WebhookReady", props("validatingWebhookConfiguration", cfg)
		}},
		"Ignore policy (direct call to the external name)": {"Ignore", func(ns, cfg string, port float64) (string, map[string]property.Value) {
			return "WebhookReady", props("validatingWebhookConfiguration", cfg, "probe", generatedProbeOf(group))
		}},
		"service with probe": {"Fail", func(ns, cfg string, port float64) (string, map[string]property.Value) {
			svc := property.New(property.NewMap(map[string]property.Value{"namespace": property.New(ns), "name": property.New("hook"), "port": property.New(port)}))
			return "WebhookReady", props("service", svc, "probe", generatedProbeOf(group))
		}},
		"HelmReleaseReady": {"Fail", func(ns, cfg string, port float64) (string, map[string]property.Value) {
			return "HelmReleaseReady", props("name", "ext", "namespace", ns)
		}},
		// The API server admits without a down Ignore webhook: AdmissionReady calls it directly,
		// at the external name (the service proxy cannot reach an ExternalName Service).
		"AdmissionReady, Ignore policy": {"Ignore", func(ns, cfg string, port float64) (string, map[string]property.Value) {
			return "AdmissionReady", props("objects", manifests(t, widgetIn(group, ns, "db")))
		}},
	} {
		t.Run(name, func(t *testing.T) {
			ns := testenv.Namespace(t, "extname")
			wh := externalNameWebhook(t, ns)
			cfg := "extname-" + ns
			port := wh.URL()[strings.LastIndex(wh.URL(), ":")+1 : strings.LastIndex(wh.URL(), "/")]
			doc := fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: %[1]s}
webhooks:
- name: validate.%[1]s.example.test
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: %[6]s
  timeoutSeconds: 3
  clientConfig: {service: {namespace: %[3]s, name: hook, port: %[4]s, path: /validate}, caBundle: %[5]s}
  rules: [{apiGroups: ["%[2]s"], apiVersions: ["*"], operations: [CREATE], resources: [widgets]}]`, cfg, group, ns, port, wh.CABundle(), tc.policy)
			releaseOf(t, "ext", ns, doc)
			applyConfiguration(t, doc)
			portNum, _ := strconv.Atoi(port)
			kind, in := tc.gate(ns, cfg, float64(portNum))
			if tc.policy == "Fail" {
				// What the gate promises: the API server reaches the webhook at the external name.
				defer func() {
					w := testenv.Object(t, widget(group, "through-external-name"))
					if _, err := testenv.Resource(t, w).Create(context.Background(), w, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
						t.Errorf("the API server cannot call the webhook behind the ExternalName Service: %v", err)
					}
				}()
			}
			s := newServer(t)
			// Near miss: nothing serves at the external name.
			in["timeout"] = property.New("2s")
			r := await(t, createAsync(t, s, kind, in), 30*time.Second)
			if r.err == nil {
				t.Fatalf("passed while nothing serves behind the ExternalName Service: %v", r.resp.Properties)
			}
			in["timeout"] = property.New("60s")
			ch := createAsync(t, s, kind, in)
			mustNotReturn(t, ch, time.Second)
			calls := wh.Calls.Load()
			wh.Start(t)
			if r := await(t, ch, 30*time.Second); r.err != nil {
				t.Fatal(r.err)
			}
			if wh.Calls.Load() == calls {
				t.Error("passed without an answer from the webhook")
			}
		})
	}
}
