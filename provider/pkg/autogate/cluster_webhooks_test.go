package autogate

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// clusterConfig is a webhook configuration as the cluster holds it (installed outside the stack).
func clusterConfig(t *testing.T, y string) WebhookConfig {
	o := obj(t, y)
	cfg := WebhookConfig{Kind: o["kind"].(string), Name: o["metadata"].(map[string]any)["name"].(string)}
	for _, h := range o["webhooks"].([]any) {
		cfg.Webhooks = append(cfg.Webhooks, h.(map[string]any))
	}
	return cfg
}

// Rule 2 for the cluster's own webhook configurations (issue 47): an object one of them may
// intercept gets an AdmissionReady when a dry run is not admitted at plan time, none when it is;
// the stack's own configurations are left to the stack's rules.
func TestDecideClusterWebhooks(t *testing.T) {
	eso := schema.GroupKind{Group: "external-secrets.io", Kind: "ExternalSecret"}
	served := map[schema.GroupKind]bool{eso: true}
	esoKey := "auto-admission-externalsecrets.external-secrets.io-team-a-externalsecret-validate"
	podsKey := "auto-admission-pods-web-injector"
	resource := func(typ, y string) Resource { return Resource{Type: typ, Name: "app", Object: obj(t, y)} }
	es := resource("kubernetes:external-secrets.io/v1:ExternalSecret", externalSecret)
	for _, tc := range []struct {
		name       string
		resource   Resource
		installers []Installer
		cluster    fakeCluster
		gates      []string // keys
		asked      []string // keys dry-run at plan time
		warning    string
	}{
		// Must gate.
		{name: "a cluster webhook that does not answer", resource: es,
			cluster: fakeCluster{served: served, webhooks: []WebhookConfig{clusterConfig(t, esoWebhook)}},
			gates:   []string{esoKey}, asked: []string{esoKey}},
		{name: "a cluster pod injector that does not answer holds a workload", resource: resource("kubernetes:apps/v1:Deployment", injectedDeployment("yes")),
			cluster: fakeCluster{webhooks: []WebhookConfig{clusterConfig(t, podInjector)}},
			gates:   []string{podsKey}, asked: []string{podsKey}}, // the Deployment itself: not a pod, not dry-run
		{name: "a cluster sidecar injector (mutating, failurePolicy Ignore) that does not answer", resource: resource("kubernetes:apps/v1:Deployment", injectedDeployment("yes")),
			cluster: fakeCluster{webhooks: []WebhookConfig{clusterConfig(t, strings.Replace(podInjector, "  objectSelector:", "  failurePolicy: Ignore\n  objectSelector:", 1))}},
			gates:   []string{podsKey}, asked: []string{podsKey}},
		// Near misses: must not gate.
		{name: "a validating policy webhook with failurePolicy Ignore: the object is as written while it is down", resource: es,
			cluster: fakeCluster{served: served, webhooks: []WebhookConfig{clusterConfig(t, strings.Replace(esoWebhook, "failurePolicy: Fail", "failurePolicy: Ignore", 1))}}},
		{name: "a cluster webhook that answers", resource: es,
			cluster: fakeCluster{served: served, webhooks: []WebhookConfig{clusterConfig(t, esoWebhook)}, admits: map[string]bool{esoKey: true}},
			asked:   []string{esoKey}},
		{name: "an object no cluster webhook intercepts", resource: resource("kubernetes:core/v1:ConfigMap", configMap),
			cluster: fakeCluster{webhooks: []WebhookConfig{clusterConfig(t, esoWebhook)}}},
		{name: "an objectSelector the object does not match", resource: resource("kubernetes:core/v1:ConfigMap", configMap),
			cluster: fakeCluster{webhooks: []WebhookConfig{clusterConfig(t, selectiveWebhook)}}},
		{name: "a pod injector whose objectSelector the pods do not match", resource: resource("kubernetes:apps/v1:Deployment", injectedDeployment("no")),
			cluster: fakeCluster{webhooks: []WebhookConfig{clusterConfig(t, podInjector)}}},
		{name: "the stack's own configuration (already in the cluster from an earlier up)", resource: es,
			installers: []Installer{installer(t, "hook", "kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration", "eso-hook", esoWebhook)},
			cluster:    fakeCluster{served: served, webhooks: []WebhookConfig{clusterConfig(t, esoWebhook)}},
			gates:      []string{"auto-exists-eso-hook", "auto-admission-externalsecrets.external-secrets.io-team-a-eso-hook"}},
		{name: "the stack's own autonamed configuration, as pulumi-kubernetes named it", resource: es,
			installers: []Installer{{ID: "hook", Type: "kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration", Name: "eso-hook",
				Object: obj(t, strings.Replace(esoWebhook, "metadata: {name: externalsecret-validate}", "metadata: {}", 1))}},
			cluster: fakeCluster{served: served, webhooks: []WebhookConfig{clusterConfig(t, strings.Replace(esoWebhook, "externalsecret-validate", "eso-hook-0a1b2c3d", 1))}},
			gates:   []string{"auto-exists-eso-hook", "auto-admission-externalsecrets.external-secrets.io-team-a-eso-hook"}},
		{name: "an object already proven by an AdmissionReady (kind not served)", resource: es,
			cluster: fakeCluster{webhooks: []WebhookConfig{clusterConfig(t, esoWebhook)}},
			gates:   []string{"auto-admission-externalsecrets.external-secrets.io-team-a"}},
		{name: "opted out", resource: resource("kubernetes:external-secrets.io/v1:ExternalSecret",
			strings.Replace(externalSecret, "labels: {team: a}", "labels: {team: a}, annotations: {readiness.io/auto-gate: \"false\"}", 1)),
			cluster: fakeCluster{served: served, webhooks: []WebhookConfig{clusterConfig(t, esoWebhook)}}},
		{name: "configurations that cannot be read: a warning, not a silent pass", resource: es,
			cluster: fakeCluster{served: served, hidden: true}, warning: "could not be read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var asked []string
			tc.cluster.asked = &asked
			p := Decide(Input{Resource: tc.resource, Installers: tc.installers}, tc.cluster, testIntercepts)
			var keys []string
			for _, g := range p.Gates {
				keys = append(keys, g.Key)
				if g.Key == esoKey && (len(g.After) > 0 || len(g.AfterGates) > 0 || g.Type != TypeAdmissionReady) {
					t.Errorf("the cluster's gate waits for nothing of the stack and proves admission: %+v", g)
				}
			}
			if !slices.Equal(keys, tc.gates) {
				t.Errorf("gates = %v, want %v", keys, tc.gates)
			}
			if !slices.Equal(asked, tc.asked) {
				t.Errorf("dry-run keys = %v, want %v", asked, tc.asked)
			}
			joined := strings.Join(p.Warnings, "\n")
			if (tc.warning == "") != (joined == "") || !strings.Contains(joined, tc.warning) {
				t.Errorf("warnings = %q, want %q", joined, tc.warning)
			}
		})
	}
}

// A configuration pulumi-kubernetes autonamed for the stack is `<Pulumi name>-<8 hex>`
// (AssignNameIfAutonamable); anything else is another's.
func TestAutonamed(t *testing.T) {
	for _, tc := range []struct {
		pulumiName, name string
		want             bool
	}{
		{"eso-hook", "eso-hook-0a1b2c3d", true},
		{"eso-hook", "eso-hook", false},          // named as written: not autonamed
		{"eso-hook", "eso-hook-validate", false}, // another's, sharing a prefix
		{"eso-hook", "eso-hook-0a1b2c3", false},  // 7 hex
		{"eso-hook", "eso-hook-0A1B2C3D", false}, // pulumi-kubernetes writes lower case
		{"eso", "eso-hook-0a1b2c3d", false},
	} {
		if got := autonamed(tc.pulumiName, tc.name); got != tc.want {
			t.Errorf("autonamed(%q, %q) = %v, want %v", tc.pulumiName, tc.name, got, tc.want)
		}
	}
}
