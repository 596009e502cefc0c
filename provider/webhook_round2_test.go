package provider

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/property"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/readiness-io/pulumi-readiness/internal/fakes"
	"github.com/readiness-io/pulumi-readiness/internal/testenv"
	"github.com/readiness-io/pulumi-readiness/provider/pkg/helmrelease"
)

// Issue #21 items 4, 5 and 13, each against the real API server: the state that must not pass
// beside the one that must.

// releaseOf stores a deployed revision 1 of release name in ns whose manifest is docs.
func releaseOf(t *testing.T, name, ns string, docs ...string) {
	t.Helper()
	writeRecord(t, helmrelease.Record{Name: name, Namespace: ns, Revision: 1, Status: "deployed", Chart: name,
		ChartVersion: "1.0.0", AppVersion: "1.0.0", Manifest: manifestOf(docs...)})
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

// Item 4: a webhook whose rules use wildcards (istiod's validator: resources ["*"] of its
// groups; Kyverno's: apiGroups ["*"], resources ["*/*"]) or name only a subresource got no
// derived probe, so HelmReleaseReady passed on its configuration alone while nothing served.
func TestHelmReleaseReadyWildcardRulesNeedAnAnswer(t *testing.T) {
	group := widgetCRD(t)
	for name, rule := range map[string]string{
		// istiod's validator: every resource of its groups.
		"resources *": `{apiGroups: ["%[2]s"], apiVersions: ["*"], operations: [CREATE, UPDATE], resources: ["*"]}`,
		// Kyverno's resource webhook: everything (here: namespaced, in this test's namespace only).
		"apiGroups * resources */*": `{apiGroups: ["*"], apiVersions: ["*"], operations: [CREATE, UPDATE, DELETE, CONNECT], resources: ["*/*"], scope: Namespaced}`,
		// Only a subresource, and no CREATE: a dry-run never reaches it, a direct call does.
		"a subresource only": `{apiGroups: [""], apiVersions: [v1], operations: [UPDATE], resources: ["pods/ephemeralcontainers"]}`,
		// A kind-wide subresource wildcard: x/* covers x itself.
		"widgets/*": `{apiGroups: ["%[2]s"], apiVersions: [v1], operations: [CREATE], resources: ["widgets/*"]}`,
	} {
		t.Run(name, func(t *testing.T) {
			ns := testenv.Namespace(t, "wild")
			testenv.ServiceAccountReady(t, ns) // a derived Pod probe needs it
			wh := testenv.NewWebhook(t)
			cfg := "wild-" + ns
			doc := fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: %[1]s}
webhooks:
- name: validate.%[1]s.example.test
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Fail
  timeoutSeconds: 3
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: %[3]s}}
  clientConfig: {url: "%[4]s", caBundle: %[5]s}
  rules: [`+rule+`]`, cfg, group, ns, wh.URL(), wh.CABundle())
			releaseOf(t, "wild", ns, doc) // before the webhook: it may intercept the record
			applyConfiguration(t, doc)
			s := newServer(t)
			// Near miss: registered, nothing serves.
			r := await(t, createAsync(t, s, "HelmReleaseReady", props("name", "wild", "namespace", ns, "timeout", "2s")), 30*time.Second)
			if r.err == nil {
				t.Fatalf("passed while the webhook does not serve: %v", r.resp.Properties)
			}
			if !strings.Contains(r.err.Error(), "dry-run probe") {
				t.Errorf("the error does not say why: %v", r.err)
			}
			ch := createAsync(t, s, "HelmReleaseReady", props("name", "wild", "namespace", ns, "timeout", "60s"))
			mustNotReturn(t, ch, time.Second)
			wh.Start(t)
			if r := await(t, ch, 30*time.Second); r.err != nil {
				t.Fatal(r.err)
			}
			if wh.Calls.Load() == 0 {
				t.Error("passed without an answer from the webhook")
			}
		})
	}
}

// Item 5: a policy that denies the probe before the target (a policy engine's mutating webhook,
// a ValidatingAdmissionPolicy) may do so forever: the target's webhooks must then each answer a
// direct AdmissionReview, and the gate passes once they do.
func TestWebhookReadyProvesATargetBehindADenyingPolicy(t *testing.T) {
	for _, blocker := range []string{"policy webhook", "ValidatingAdmissionPolicy"} {
		t.Run(blocker, func(t *testing.T) {
			group := widgetCRD(t)
			base := strings.Split(group, ".")[0]
			target := testenv.NewWebhook(t)
			target.RegisterAs(t, "ValidatingWebhookConfiguration", "target-"+base, "Fail", group, "widgets")
			want := "probe denied by policy webhook"
			if blocker == "policy webhook" {
				policy := testenv.NewWebhook(t)
				policy.Mode.Store("deny-named")
				policy.Start(t)
				hook := policy.RegisterAs(t, "MutatingWebhookConfiguration", "policy-"+base, "Fail", group, "widgets")
				deniedWithin(t, group, `admission webhook "`+hook+`" denied the request`)
			} else {
				want = "probe denied by an admission policy"
				denyByPolicy(t, "deny-"+base, group)
			}
			s := newServer(t)
			gate := func(timeout string) <-chan gateResult {
				return createAsync(t, s, "WebhookReady", props("validatingWebhookConfiguration", "target-"+base, "probe", generatedProbeOf(group), "timeout", timeout))
			}
			// Near miss: the policy denies, the target does not serve.
			r := await(t, gate("2s"), 30*time.Second)
			if r.err == nil {
				t.Fatalf("passed while the target does not serve: %v", r.resp.Properties)
			}
			for _, w := range []string{want, "calling webhook validating.target-" + base + "." + group + " directly instead", "connection refused"} {
				if !strings.Contains(r.err.Error(), w) {
					t.Errorf("error lacks %q: %v", w, r.err)
				}
			}
			ch := gate("60s")
			mustNotReturn(t, ch, time.Second)
			// Near miss: something answers on the target's address, but no AdmissionReview.
			target.Mode.Store("stranger")
			target.Start(t)
			mustNotReturn(t, ch, 1500*time.Millisecond)
			// The target answers (a denial is an answer), the policy still denies the probe.
			target.Mode.Store("deny")
			r = await(t, ch, 30*time.Second)
			if r.err != nil {
				t.Fatal(r.err)
			}
			if !r.resp.Properties.Get("probed").AsBool() {
				t.Errorf("outputs = %v", r.resp.Properties)
			}
		})
	}
}

// denyByPolicy makes a ValidatingAdmissionPolicy deny every Widget of group, and waits until
// the API server enforces it.
func denyByPolicy(t *testing.T, name, group string) {
	t.Helper()
	testenv.Apply(t, fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: %[1]s}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules: [{apiGroups: ["%[2]s"], apiVersions: ["*"], operations: [CREATE], resources: [widgets]}]
  validations: [{expression: "false", message: "no widgets here"}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: %[1]s}
spec: {policyName: %[1]s, validationActions: [Deny]}`, name, group))
	t.Cleanup(func() {
		for _, doc := range []string{"ValidatingAdmissionPolicyBinding", "ValidatingAdmissionPolicy"} {
			o := testenv.Object(t, "apiVersion: admissionregistration.k8s.io/v1\nkind: "+doc+"\nmetadata: {name: "+name+"}")
			_ = testenv.Resource(t, o).Delete(context.Background(), name, metav1.DeleteOptions{})
		}
	})
	deniedWithin(t, group, "ValidatingAdmissionPolicy")
}

// deniedWithin waits (up to 30 s) until a dry-run create of a Widget of group is refused with
// a message containing want: the policy is enforced, and the API server's first requests for
// a new kind (which can take seconds) are behind us.
func deniedWithin(t *testing.T, group, want string) {
	t.Helper()
	w := testenv.Object(t, widget(group, "policy-check"))
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := testenv.Resource(t, w).Create(context.Background(), w, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil && strings.Contains(err.Error(), want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the policy is not enforced: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
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

// A URL webhook sends no cluster event when it starts listening: a connect to its address wakes
// the gate instead, once, and costs the API server nothing.
func TestURLDialerWakesOnceWhenSomethingListens(t *testing.T) {
	wh := testenv.NewWebhook(t)
	r := &run{wake: make(chan struct{}, 1)}
	defer r.close()
	if r.listening(wh.URL()) {
		t.Fatal("listening before anything listens")
	}
	select {
	case <-r.wake:
		t.Fatal("woke while nothing listens")
	case <-time.After(200 * time.Millisecond):
	}
	wh.Start(t)
	select {
	case <-r.wake:
	case <-time.After(30 * time.Second):
		t.Fatal("no wake-up after the webhook started listening")
	}
	if !r.listening(wh.URL()) {
		t.Error("not listening after the wake-up")
	}
	for u, want := range map[string]string{"https://127.0.0.1:9443/validate": "127.0.0.1:9443", "https://hook.example.test/x": "hook.example.test:443",
		"https://[::1]:8443/": "[::1]:8443", "http://h": "h:80", "not a url": "", "ftp://h/": ""} {
		if got := dialAddress(u); got != want {
			t.Errorf("dialAddress(%q) = %q, want %q", u, got, want)
		}
	}
}
