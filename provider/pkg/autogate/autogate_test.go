package autogate

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// fakeCluster serves the built-in kinds and those listed; it holds the webhook configurations
// listed, whose dry runs admit the keys in admits.
type fakeCluster struct {
	served   map[schema.GroupKind]bool
	unknown  bool // discovery failed
	webhooks []WebhookConfig
	hidden   bool // the configurations cannot be read
	admits   map[string]bool
	asked    *[]string // the keys dry-run
}

func (f fakeCluster) Webhooks() ([]WebhookConfig, bool) { return f.webhooks, !f.hidden }

func (f fakeCluster) Admits(key string, _ map[string]any, _ []string) bool {
	if f.asked != nil {
		*f.asked = append(*f.asked, key)
	}
	return f.admits[key]
}

func (f fakeCluster) Serves(gk schema.GroupKind) (bool, bool) {
	if f.unknown {
		return false, false
	}
	return IsBuiltin(gk.Group) || f.served[gk], true
}

func (f fakeCluster) Resource(schema.GroupVersionKind) (string, bool, bool) { return "", false, false }
func (f fakeCluster) DefaultNamespace() string                              { return "default" }

// testIntercepts is a small stand-in for the provider's webhook matching (tested there): rules
// by group and resource, objectSelector and a namespaceSelector on the metadata.name label.
func testIntercepts(hook map[string]any, req Request) bool {
	b, _ := json.Marshal(hook)
	var h struct {
		Rules []struct {
			APIGroups, Resources, Operations []string
		}
		ObjectSelector, NamespaceSelector *metav1.LabelSelector
	}
	_ = json.Unmarshal(b, &h)
	ruled := false
	for _, r := range h.Rules {
		if (slices.Contains(r.APIGroups, "*") || slices.Contains(r.APIGroups, req.GVR.Group)) &&
			(slices.Contains(r.Resources, "*") || slices.Contains(r.Resources, req.GVR.Resource)) &&
			(slices.Contains(r.Operations, "*") || slices.Contains(r.Operations, "CREATE")) {
			ruled = true
		}
	}
	if !ruled {
		return false
	}
	if h.ObjectSelector != nil {
		sel, _ := metav1.LabelSelectorAsSelector(h.ObjectSelector)
		if !sel.Matches(labels.Set(req.Labels)) {
			return false
		}
	}
	if h.NamespaceSelector != nil {
		sel, _ := metav1.LabelSelectorAsSelector(h.NamespaceSelector)
		if !sel.Matches(labels.Set{"kubernetes.io/metadata.name": req.Namespace}) {
			return false
		}
	}
	return true
}

func obj(t *testing.T, y string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(y), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

const (
	esoCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: externalsecrets.external-secrets.io}
spec:
  group: external-secrets.io
  scope: Namespaced
  names: {kind: ExternalSecret, plural: externalsecrets}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, properties: {spec: {type: object, x-kubernetes-preserve-unknown-fields: true}}}}
`
	esoWebhook = `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: externalsecret-validate}
webhooks:
- name: validate.externalsecret.external-secrets.io
  rules: [{apiGroups: [external-secrets.io], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [externalsecrets]}]
  clientConfig: {caBundle: Y2EK, service: {name: external-secrets-webhook, namespace: external-secrets, path: /validate}}
  sideEffects: None
  admissionReviewVersions: [v1]
  failurePolicy: Fail
`
	selectiveWebhook = `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: only-labelled}
webhooks:
- name: labelled.example.com
  objectSelector: {matchLabels: {inject: "yes"}}
  rules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]
`
	externalSecret = `
apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: ghcr, namespace: team-a, labels: {team: a}}
spec: {refreshInterval: 1h, secretStoreRef: {name: vault, kind: ClusterSecretStore}, target: {name: ghcr-pull, template: {type: kubernetes.io/dockerconfigjson}}, data: [{secretKey: x, remoteRef: {key: y}}]}
`
	certificate = `
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: web-tls, namespace: web}
spec: {secretName: web-tls-secret, dnsNames: [web.example.com], issuerRef: {name: ca, kind: ClusterIssuer}}
`
	configMap = `
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: team-a}
`
	deploymentMounting = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: web}
spec:
  template:
    spec:
      volumes: [{name: tls, secret: {secretName: %s}}]
      containers: [{name: web, image: nginx}]
`
)

const podInjector = `
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: injector}
webhooks:
- name: inject.mesh.example.com
  objectSelector: {matchLabels: {inject: "yes"}}
  rules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
`

func injectedDeployment(inject string) string {
	return `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: web}
spec:
  template:
    metadata: {labels: {app: web, inject: "` + inject + `"}, annotations: {a: b}}
    spec: {containers: [{name: web, image: nginx}]}
`
}

// The dry-run Pod is the workload's template as a Pod in its namespace.
func TestDecidePodOfAWorkload(t *testing.T) {
	p := Decide(Input{
		Resource:   Resource{Type: "kubernetes:apps/v1:Deployment", Name: "web", Object: obj(t, injectedDeployment("yes"))},
		Installers: []Installer{installer(t, "inj", "kubernetes:admissionregistration.k8s.io/v1:MutatingWebhookConfiguration", "mesh:injector", podInjector)},
	}, fakeCluster{}, testIntercepts)
	if len(p.Gates) != 2 {
		t.Fatalf("gates = %+v", p.Gates)
	}
	pod := p.Gates[1].Args["objects"].([]any)[0].(map[string]any)
	md := pod["metadata"].(map[string]any)
	if pod["kind"] != "Pod" || md["namespace"] != "web" || md["name"] != "web-autogate-gt4z2" ||
		md["labels"].(map[string]any)["inject"] != "yes" || md["annotations"].(map[string]any)["a"] != "b" ||
		pod["spec"].(map[string]any)["containers"] == nil {
		t.Errorf("dry-run pod = %v", pod)
	}
	if g := p.Gates[1]; g.Key != "auto-admission-pods-web-mesh-injector" || !slices.Equal(g.AfterGates, []string{p.Gates[0].Key}) {
		t.Errorf("gate = %+v", g)
	}
}

func installer(t *testing.T, id, typ, name, y string) Installer {
	return Installer{ID: id, Type: typ, Name: name, Object: obj(t, y)}
}

func TestDecide(t *testing.T) {
	crdInst := func(t *testing.T) Installer {
		return installer(t, "crd", "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition", "eso-crd", esoCRD)
	}
	hookInst := func(t *testing.T) Installer {
		return installer(t, "hook", "kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration", "eso:external-secrets/externalsecret-validate", esoWebhook)
	}
	release := Installer{ID: "rel", Type: releaseType, Name: "external-secrets",
		Object: map[string]any{"name": "external-secrets", "namespace": "external-secrets", "chart": "external-secrets"}}
	type want struct {
		remember bool
		types    []string // gate types in order
		after    [][]string
		warn     string
	}
	cases := []struct {
		name       string
		typ        string
		y          string
		installers func(t *testing.T) []Installer
		dependsOn  []string
		opts       Options
		cluster    fakeCluster
		want       want
	}{
		// Must gate.
		{name: "custom resource of a stack CRD waits for the CRD",
			typ: "kubernetes:external-secrets.io/v1:ExternalSecret", y: externalSecret,
			installers: func(t *testing.T) []Installer { return []Installer{crdInst(t)} },
			want:       want{remember: true, types: []string{TypeCrdReady}, after: [][]string{{"crd"}}}},
		{name: "custom resource the cluster does not serve waits for an admitted dry-run",
			typ: "kubernetes:external-secrets.io/v1:ExternalSecret", y: externalSecret,
			want: want{remember: true, types: []string{TypeAdmissionReady}, after: [][]string{nil}}},
		{name: "discovery failed: unknown counts as not served",
			typ: "kubernetes:example.com/v1:Widget", y: "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n",
			cluster: fakeCluster{unknown: true},
			want:    want{types: []string{TypeAdmissionReady}, after: [][]string{nil}}},
		{name: "object a stack webhook intercepts waits for the configuration, then an admitted dry-run; one gate with the CRD",
			typ: "kubernetes:external-secrets.io/v1:ExternalSecret", y: externalSecret,
			installers: func(t *testing.T) []Installer { return []Installer{crdInst(t), hookInst(t)} },
			want: want{remember: true, types: []string{TypeResourceReady, TypeAdmissionReady},
				after: [][]string{{"hook"}, {"hook", "crd"}}}},
		{name: "chart child: same rules, with the child's type and name",
			typ: "kubernetes:apisix.apache.org/v1alpha1:GatewayProxy",
			y:   "apiVersion: apisix.apache.org/v1alpha1\nkind: GatewayProxy\nmetadata: {name: apisix-config, namespace: ingress}\n",
			installers: func(t *testing.T) []Installer {
				return []Installer{installer(t, "h", "kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration", "apisix:apisix-webhook", `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: apisix-webhook}
webhooks:
- name: vgatewayproxy.apisix.apache.org
  rules: [{apiGroups: [apisix.apache.org], apiVersions: [v1alpha1], operations: [CREATE, UPDATE], resources: [gatewayproxies]}]
`)}
			},
			cluster: fakeCluster{served: map[schema.GroupKind]bool{{Group: "apisix.apache.org", Kind: "GatewayProxy"}: true}},
			want:    want{types: []string{TypeResourceReady, TypeAdmissionReady}, after: [][]string{{"h"}, {"h"}}}},
		{name: "Deployment mounting a Certificate's Secret waits for the Certificate",
			typ: "kubernetes:apps/v1:Deployment", y: strings.Replace(deploymentMounting, "%s", "web-tls-secret", 1),
			installers: func(t *testing.T) []Installer {
				return []Installer{installer(t, "cert", "kubernetes:cert-manager.io/v1:Certificate", "web-tls", certificate)}
			},
			want: want{types: []string{TypeCertificateReady}, after: [][]string{{"cert"}}}},
		{name: "Deployment reading an ExternalSecret's target through envFrom waits for it",
			typ: "kubernetes:apps/v1:Deployment", y: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: app, namespace: team-a}
spec: {template: {spec: {containers: [{name: a, image: x, envFrom: [{secretRef: {name: ghcr-pull}}]}]}}}
`,
			installers: func(t *testing.T) []Installer {
				return []Installer{installer(t, "es", "kubernetes:external-secrets.io/v1:ExternalSecret", "ghcr", externalSecret)}
			},
			want: want{types: []string{TypeExternalSecretReady}, after: [][]string{{"es"}}}},
		{name: "custom resource after a Release: an admitted dry-run after the release installed, not the release's workloads",
			typ: "kubernetes:external-secrets.io/v1:ExternalSecret", y: externalSecret,
			installers: func(*testing.T) []Installer { return []Installer{release} }, dependsOn: []string{"rel"},
			cluster: fakeCluster{served: map[schema.GroupKind]bool{{Group: "external-secrets.io", Kind: "ExternalSecret"}: true}},
			want:    want{remember: true, types: []string{TypeAdmissionReady}, after: [][]string{{"rel"}}}},
		{name: "custom resource after a Release, its kind not served yet: the same answer (the release installs it)",
			typ: "kubernetes:external-secrets.io/v1:ExternalSecret", y: externalSecret,
			installers: func(*testing.T) []Installer { return []Installer{release} }, dependsOn: []string{"rel"},
			want: want{remember: true, types: []string{TypeAdmissionReady}, after: [][]string{{"rel"}}}},
		{name: "a built-in object that runs nothing after a Release (an Ingress its webhook validates): an admitted dry-run after it",
			typ: "kubernetes:networking.k8s.io/v1:Ingress", y: "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: web, namespace: apps}\nspec: {ingressClassName: nginx}\n",
			installers: func(*testing.T) []Installer { return []Installer{release} }, dependsOn: []string{"rel"},
			want: want{types: []string{TypeAdmissionReady}, after: [][]string{{"rel"}}}},
		{name: "near miss: a custom workload (a Rollout: a pod template) after a Release keeps the release's readiness",
			typ: "kubernetes:argoproj.io/v1alpha1:Rollout", y: "apiVersion: argoproj.io/v1alpha1\nkind: Rollout\nmetadata: {name: app, namespace: apps}\nspec: {template: {spec: {containers: [{name: a, image: x}]}}}\n",
			installers: func(*testing.T) []Installer { return []Installer{release} }, dependsOn: []string{"rel"},
			cluster: fakeCluster{served: map[schema.GroupKind]bool{{Group: "argoproj.io", Kind: "Rollout"}: true}},
			want:    want{types: []string{TypeHelmReleaseReady}, after: [][]string{{"rel"}}}},
		{name: "near miss: a webhook configuration after a Release (the API server will call its service) keeps the release's readiness",
			typ: "kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration", y: esoWebhook,
			installers: func(*testing.T) []Installer { return []Installer{release} }, dependsOn: []string{"rel"},
			want: want{remember: true, types: []string{TypeHelmReleaseReady}, after: [][]string{{"rel"}}}},
		{name: "near miss: a Release after a Release (what it installs is opaque) keeps the release's readiness",
			typ: releaseType, y: "name: app\nchart: app\nnamespace: apps\n",
			installers: func(*testing.T) []Installer { return []Installer{release} }, dependsOn: []string{"rel"},
			want: want{remember: true, types: []string{TypeHelmReleaseReady}, after: [][]string{{"rel"}}}},
		{name: "near miss: custom resource of a kind not served, a Release in the stack it does not depend on: waits for the kind",
			typ: "kubernetes:external-secrets.io/v1:ExternalSecret", y: externalSecret,
			installers: func(*testing.T) []Installer { return []Installer{release} },
			want:       want{remember: true, types: []string{TypeAdmissionReady}, after: [][]string{nil}}},
		{name: "near miss: a workload after a Release (its pods may call the release's services): the release only",
			typ: "kubernetes:apps/v1:Deployment", y: fmt.Sprintf(deploymentMounting, "other"),
			installers: func(*testing.T) []Installer { return []Installer{release} }, dependsOn: []string{"rel"},
			want: want{types: []string{TypeHelmReleaseReady}, after: [][]string{{"rel"}}}},
		{name: "near miss: a ConfigMap after a Release is not held for it (its pods may mount it)",
			typ: "kubernetes:core/v1:ConfigMap", y: configMap,
			installers: func(*testing.T) []Installer { return []Installer{release} }, dependsOn: []string{"rel"},
			want: want{warn: "would wait for itself"}},
		{name: "near miss: a Secret after a Release (existingSecret) is not held for it",
			typ: "kubernetes:core/v1:Secret", y: "apiVersion: v1\nkind: Secret\nmetadata: {name: db, namespace: external-secrets}\n",
			installers: func(*testing.T) []Installer { return []Installer{release} }, dependsOn: []string{"rel"},
			want: want{warn: "would wait for itself"}},
		{name: "an autonamed Release: its gate takes the release's name from its outputs",
			typ: "kubernetes:apps/v1:Deployment", y: fmt.Sprintf(deploymentMounting, "other"),
			installers: func(*testing.T) []Installer {
				return []Installer{{ID: "rel", Type: releaseType, Name: "eso", Object: map[string]any{"chart": "x"}}}
			}, dependsOn: []string{"rel"},
			want: want{types: []string{TypeHelmReleaseReady}, after: [][]string{{"rel"}}}},
		{name: "installers are remembered: a CRD", typ: "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition", y: esoCRD,
			want: want{remember: true}},
		{name: "installers are remembered: a Release", typ: releaseType, y: "name: x\nchart: y\n", want: want{remember: true}},

		{name: "Deployment whose pods a stack sidecar injector intercepts waits for an admitted Pod like its template",
			typ: "kubernetes:apps/v1:Deployment", y: injectedDeployment("yes"),
			installers: func(t *testing.T) []Installer {
				return []Installer{installer(t, "inj", "kubernetes:admissionregistration.k8s.io/v1:MutatingWebhookConfiguration", "mesh:injector", podInjector)}
			},
			want: want{types: []string{TypeResourceReady, TypeAdmissionReady}, after: [][]string{{"inj"}, {"inj"}}}},

		// Near misses: must not gate.
		{name: "Deployment whose pod labels the injector's objectSelector does not match",
			typ: "kubernetes:apps/v1:Deployment", y: injectedDeployment("no"),
			installers: func(t *testing.T) []Installer {
				return []Installer{installer(t, "inj", "kubernetes:admissionregistration.k8s.io/v1:MutatingWebhookConfiguration", "mesh:injector", podInjector)}
			}},
		{name: "ConfigMap beside a pod injector", typ: "kubernetes:core/v1:ConfigMap", y: configMap,
			installers: func(t *testing.T) []Installer {
				return []Installer{installer(t, "inj", "kubernetes:admissionregistration.k8s.io/v1:MutatingWebhookConfiguration", "mesh:injector", podInjector)}
			}},
		{name: "ConfigMap beside a webhook for ExternalSecrets", typ: "kubernetes:core/v1:ConfigMap", y: configMap,
			installers: func(t *testing.T) []Installer { return []Installer{crdInst(t), hookInst(t)} }},
		{name: "webhook whose objectSelector the object does not match", typ: "kubernetes:core/v1:ConfigMap", y: configMap,
			installers: func(t *testing.T) []Installer {
				return []Installer{installer(t, "h", "kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration", "sel", selectiveWebhook)}
			}},
		{name: "the same webhook, the object labelled: gated", typ: "kubernetes:core/v1:ConfigMap",
			y: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: s, namespace: a, labels: {inject: \"yes\"}}\n",
			installers: func(t *testing.T) []Installer {
				return []Installer{installer(t, "h", "kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration", "sel", selectiveWebhook)}
			},
			want: want{types: []string{TypeResourceReady, TypeAdmissionReady}, after: [][]string{{"h"}, {"h"}}}},
		{name: "Deployment mounting a Secret of another name", typ: "kubernetes:apps/v1:Deployment",
			y: strings.Replace(deploymentMounting, "%s", "web-tls-secret-old", 1),
			installers: func(t *testing.T) []Installer {
				return []Installer{installer(t, "cert", "kubernetes:cert-manager.io/v1:Certificate", "web-tls", certificate)}
			}},
		{name: "Deployment mounting the Secret's name in another namespace", typ: "kubernetes:apps/v1:Deployment",
			y: strings.Replace(strings.Replace(deploymentMounting, "%s", "web-tls-secret", 1), "namespace: web", "namespace: other", 1),
			installers: func(t *testing.T) []Installer {
				return []Installer{installer(t, "cert", "kubernetes:cert-manager.io/v1:Certificate", "web-tls", certificate)}
			}},
		{name: "object outside the namespaces option", typ: "kubernetes:external-secrets.io/v1:ExternalSecret", y: externalSecret,
			installers: func(t *testing.T) []Installer { return []Installer{crdInst(t), hookInst(t)} },
			opts:       Options{Namespaces: []string{"team-b"}}, want: want{remember: true}},
		{name: "opted out by annotation", typ: "kubernetes:external-secrets.io/v1:ExternalSecret",
			y:          strings.Replace(externalSecret, "metadata: {", "metadata: {annotations: {readiness.io/auto-gate: \"false\"}, ", 1),
			installers: func(t *testing.T) []Installer { return []Installer{crdInst(t), hookInst(t)} },
			want:       want{remember: true}},
		{name: "custom resource of a served kind with no installer", typ: "kubernetes:example.com/v1:Widget",
			y:       "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n",
			cluster: fakeCluster{served: map[schema.GroupKind]bool{{Group: "example.com", Kind: "Widget"}: true}}},
		{name: "CRD of another kind in the same group", typ: "kubernetes:external-secrets.io/v1:SecretStore",
			y:          "apiVersion: external-secrets.io/v1\nkind: SecretStore\nmetadata: {name: s}\n",
			installers: func(t *testing.T) []Installer { return []Installer{crdInst(t)} },
			cluster:    fakeCluster{served: map[schema.GroupKind]bool{{Group: "external-secrets.io", Kind: "SecretStore"}: true}}},
		{name: "a built-in kind the fake does not list is still built-in", typ: "kubernetes:apps/v1:Deployment",
			y: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n", cluster: fakeCluster{unknown: true}},
		{name: "depends on an installer that is not a Release", typ: "kubernetes:core/v1:ConfigMap", y: configMap,
			installers: func(t *testing.T) []Installer { return []Installer{crdInst(t)} }, dependsOn: []string{"crd"}},
		{name: "a component itself is never gated", typ: "kubernetes:helm.sh/v4:Chart", y: "chart: x\n",
			installers: func(*testing.T) []Installer { return []Installer{release} }, dependsOn: []string{"rel"}},
		{name: "not a kubernetes resource", typ: "random:index:RandomString", y: "length: 3\n",
			installers: func(*testing.T) []Installer { return []Installer{release} }, dependsOn: []string{"rel"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := Input{Resource: Resource{Type: c.typ, Name: "r", Object: obj(t, c.y)}, DependsOn: c.dependsOn, Options: c.opts}
			if c.installers != nil {
				in.Installers = c.installers(t)
			}
			p := Decide(in, c.cluster, testIntercepts)
			// The same decision from the installers as the SDKs remember them (trimmed).
			trimmed := in
			trimmed.Installers = nil
			for _, i := range in.Installers {
				i.Object = TrimInstaller(i.Type, i.Object)
				trimmed.Installers = append(trimmed.Installers, i)
			}
			if pt := Decide(trimmed, c.cluster, testIntercepts); !reflect.DeepEqual(pt, p) {
				t.Errorf("plan from trimmed installers differs:\n%+v\nfrom full ones:\n%+v", pt, p)
			}
			if p.Remember != (p.Installer != nil) {
				t.Errorf("remember = %v with installer %v", p.Remember, p.Installer)
			}
			if p.Remember != c.want.remember {
				t.Errorf("remember = %v, want %v", p.Remember, c.want.remember)
			}
			var types []string
			var after [][]string
			for _, g := range p.Gates {
				types = append(types, g.Type)
				after = append(after, g.After)
				if g.Key == "" || g.Name == "" || g.Reason == "" {
					t.Errorf("gate %+v lacks a key, name or reason", g)
				}
			}
			if !slices.Equal(types, c.want.types) {
				t.Fatalf("gates = %v, want %v\n%+v", types, c.want.types, p.Gates)
			}
			for i := range after {
				if !slices.Equal(after[i], c.want.after[i]) {
					t.Errorf("gate %d after = %v, want %v", i, after[i], c.want.after[i])
				}
			}
			if c.want.warn == "" && len(p.Warnings) > 0 || c.want.warn != "" && (len(p.Warnings) == 0 || !strings.Contains(p.Warnings[0], c.want.warn)) {
				t.Errorf("warnings = %q, want one with %q", p.Warnings, c.want.warn)
			}
		})
	}
}

// Many objects of one kind in one namespace behind one webhook share one gate key (one gate);
// another namespace is another batch.
func TestDecideBatchesByKey(t *testing.T) {
	installers := []Installer{
		installer(t, "crd", "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition", "crd", esoCRD),
		installer(t, "hook", "kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration", "hook", esoWebhook),
	}
	keyOf := func(name, ns string) string {
		o := obj(t, externalSecret)
		o["metadata"] = map[string]any{"name": name, "namespace": ns}
		p := Decide(Input{Resource: Resource{Type: "kubernetes:external-secrets.io/v1:ExternalSecret", Name: name, Object: o}, Installers: installers}, fakeCluster{}, testIntercepts)
		return p.Gates[len(p.Gates)-1].Key
	}
	if a, b := keyOf("one", "team-a"), keyOf("two", "team-a"); a != b {
		t.Errorf("same kind, namespace and webhook: keys %q and %q differ", a, b)
	}
	if a, b := keyOf("one", "team-a"), keyOf("one", "team-b"); a == b {
		t.Errorf("another namespace shares key %q", a)
	}
}

func TestDecidePassesTiming(t *testing.T) {
	p := Decide(Input{
		Resource:   Resource{Type: "kubernetes:external-secrets.io/v1:ExternalSecret", Object: obj(t, externalSecret)},
		Installers: []Installer{installer(t, "crd", "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition", "crd", esoCRD)},
		Options:    Options{Timeout: "3m", StableFor: "2s"},
	}, fakeCluster{}, testIntercepts)
	if got := p.Gates[0].Args; got["timeout"] != "3m" || got["stableFor"] != "2s" || got["failureGrace"] != nil {
		t.Errorf("args = %v", got)
	}
}

func TestSecretsOf(t *testing.T) {
	spec := obj(t, `
volumes:
- {name: a, secret: {secretName: vol}}
- {name: b, projected: {sources: [{secret: {name: proj}}, {configMap: {name: cm}}]}}
- {name: c, configMap: {name: cm2}}
initContainers: [{name: i, envFrom: [{secretRef: {name: init-env}}]}]
containers:
- name: m
  env: [{name: X, valueFrom: {secretKeyRef: {name: key-ref, key: k}}}, {name: Y, valueFrom: {configMapKeyRef: {name: cm3, key: k}}}]
`)
	got := SecretsOf(spec)
	if want := []string{"vol", "proj", "init-env", "key-ref"}; !slices.Equal(got, want) {
		t.Errorf("SecretsOf = %v, want %v", got, want)
	}
}

const twoTeamWebhook = `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: teams}
webhooks:
- name: a.teams.example.com
  objectSelector: {matchLabels: {team: a}}
  rules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]
- name: b.teams.example.com
  objectSelector: {matchLabels: {team: b}}
  rules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]
`

// F3: one configuration, two webhooks with different objectSelectors (and services): an object
// only hook B intercepts must not join the gate of an object only hook A intercepts.
func TestDecideBatchKeyNamesTheInterceptingWebhooks(t *testing.T) {
	installers := []Installer{installer(t, "hook", "kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration", "teams", twoTeamWebhook)}
	keyOf := func(name, team string) string {
		o := obj(t, configMap)
		o["metadata"] = map[string]any{"name": name, "namespace": "team-a", "labels": map[string]any{"team": team}}
		p := Decide(Input{Resource: Resource{Type: "kubernetes:core/v1:ConfigMap", Name: name, Object: o}, Installers: installers}, fakeCluster{}, testIntercepts)
		return p.Gates[len(p.Gates)-1].Key
	}
	if a, b := keyOf("one", "a"), keyOf("two", "b"); a == b {
		t.Errorf("objects of hooks a and b share key %q", a)
	}
	if a, b := keyOf("one", "a"), keyOf("two", "a"); a != b {
		t.Errorf("same webhook: keys %q and %q differ", a, b)
	}
}

// F4: two kinds with the same plural in different groups never share a gate.
func TestDecideBatchKeyNamesTheGroup(t *testing.T) {
	const hook = `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: gw}
webhooks:
- name: gw.example.com
  rules: [{apiGroups: ["*"], apiVersions: ["*"], operations: [CREATE], resources: ["*"]}]
`
	installers := []Installer{installer(t, "hook", "kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration", "gw", hook)}
	keyOf := func(apiVersion string) string {
		o := map[string]any{"apiVersion": apiVersion, "kind": "Gateway", "metadata": map[string]any{"name": "g", "namespace": "default"}}
		p := Decide(Input{Resource: Resource{Type: "kubernetes:" + apiVersion + ":Gateway", Name: "g", Object: o}, Installers: installers}, fakeCluster{}, testIntercepts)
		if g := p.Gates[len(p.Gates)-1]; !strings.HasSuffix(g.Key, "-gw") {
			t.Fatalf("not gated by the webhook: %+v", p.Gates)
		}
		return p.Gates[len(p.Gates)-1].Key
	}
	if a, b := keyOf("gateway.networking.k8s.io/v1"), keyOf("networking.istio.io/v1"); a == b {
		t.Errorf("Gateway API and Istio gateways share key %q", a)
	}
}

// D1: a chart's own failurePolicy Ignore webhook never gates the chart's own objects (its
// server needs them to start); a Fail webhook of the chart for the chart's own custom resource,
// or an Ignore one for a custom resource of the chart's own CRD, still does.
func TestDecideOwnIgnoreWebhook(t *testing.T) {
	hookOf := func(policy string) string {
		return `
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: injector}
webhooks:
- name: all.mesh.example.com
  failurePolicy: ` + policy + `
  rules: [{apiGroups: ["*"], apiVersions: ["*"], operations: [CREATE], resources: ["*"]}]
`
	}
	const chart = "kubernetes:helm.sh/v4:Chart"
	deployment := `
apiVersion: apps/v1
kind: Deployment
metadata: {name: mesh, namespace: mesh}
spec: {template: {spec: {containers: [{name: c, image: x}]}}}
`
	cases := []struct {
		name, policy, parentType, objName, hookName, typ, y string
		withCRD                                             bool
		gated                                               bool
	}{
		{"own Deployment, Ignore", "Ignore", chart, "mesh:mesh/mesh", "mesh:injector", "kubernetes:apps/v1:Deployment", deployment, false, false},
		{"own ServiceAccount, Ignore", "Ignore", chart, "mesh:mesh/sa", "mesh:injector", "kubernetes:core/v1:ServiceAccount", "{apiVersion: v1, kind: ServiceAccount, metadata: {name: sa, namespace: mesh}}", false, false},
		{"near miss: own Deployment, Fail", "Fail", chart, "mesh:mesh/mesh", "mesh:injector", "kubernetes:apps/v1:Deployment", deployment, false, true},
		{"near miss: own custom resource of its own CRD, Ignore", "Ignore", chart, "mesh:default/ghcr", "mesh:injector", "kubernetes:external-secrets.io/v1:ExternalSecret", externalSecret, true, true},
		{"near miss: own custom resource, Fail", "Fail", chart, "mesh:default/ghcr", "mesh:injector", "kubernetes:external-secrets.io/v1:ExternalSecret", externalSecret, true, true},
		{"near miss: another chart's Deployment, Ignore", "Ignore", chart, "app:web/web", "mesh:injector", "kubernetes:apps/v1:Deployment", deployment, false, true},
		{"near miss: top-level Deployment, Ignore", "Ignore", "", "mesh:mesh/mesh", "mesh:injector", "kubernetes:apps/v1:Deployment", deployment, false, true},
		// Chart v3 and ConfigFile v1 name their children "ns/name", with no component prefix: the
		// SDK's parent handle tells the component ("@<parent>" below).
		{"Chart v3's own Deployment, Ignore (by parent)", "Ignore", "kubernetes:helm.sh/v3:Chart", "mesh/mesh@urn:c1", "injector@urn:c1", "kubernetes:apps/v1:Deployment", deployment, false, false},
		{"near miss: another Chart v3's Deployment, Ignore (by parent)", "Ignore", "kubernetes:helm.sh/v3:Chart", "web/web@urn:c2", "injector@urn:c1", "kubernetes:apps/v1:Deployment", deployment, false, true},
		{"near miss: Chart v3's own custom resource of its own CRD (by parent)", "Ignore", "kubernetes:helm.sh/v3:Chart", "default/ghcr@urn:c1", "injector@urn:c1", "kubernetes:external-secrets.io/v1:ExternalSecret", externalSecret, true, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			objName, objParent, _ := strings.Cut(c.objName, "@")
			hookName, hookParent, _ := strings.Cut(c.hookName, "@")
			hook := installer(t, "hook", "kubernetes:admissionregistration.k8s.io/v1:MutatingWebhookConfiguration", hookName, hookOf(c.policy))
			hook.Parent = hookParent
			installers := []Installer{hook}
			if c.withCRD {
				crd := installer(t, "crd", "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition", "mesh:externalsecrets.external-secrets.io", esoCRD)
				crd.Parent = hookParent
				installers = append([]Installer{crd}, installers...)
			}
			for _, trimmed := range []bool{false, true} {
				ins := slices.Clone(installers)
				for i := range ins {
					if trimmed {
						ins[i].Object = TrimInstaller(ins[i].Type, ins[i].Object)
					}
				}
				p := Decide(Input{Resource: Resource{Type: c.typ, Name: objName, ParentType: c.parentType, Parent: objParent, Object: obj(t, c.y)}, Installers: ins}, fakeCluster{}, testIntercepts)
				admission := false
				for _, g := range p.Gates {
					admission = admission || g.Type == TypeAdmissionReady
				}
				if admission != c.gated {
					t.Errorf("trimmed %v: gated by admission = %v, want %v: %+v", trimmed, admission, c.gated, p.Gates)
				}
			}
		})
	}
}

// What an installer's trim drops: what no rule reads (a CRD's schema, a webhook's caBundle, an
// ExternalSecret's data); a non-installer comes back as it is.
func TestTrimInstaller(t *testing.T) {
	crd := TrimInstaller("kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition", obj(t, esoCRD))
	b, _ := json.Marshal(crd)
	if strings.Contains(string(b), "openAPIV3Schema") || !strings.Contains(string(b), `"served":true`) {
		t.Errorf("CRD trimmed = %s", b)
	}
	hook := TrimInstaller("kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration", obj(t, esoWebhook))
	b, _ = json.Marshal(hook)
	if strings.Contains(string(b), "caBundle") || !strings.Contains(string(b), `"failurePolicy":"Fail"`) || !strings.Contains(string(b), "external-secrets-webhook") {
		t.Errorf("webhook configuration trimmed = %s", b)
	}
	es := TrimInstaller("kubernetes:external-secrets.io/v1:ExternalSecret", obj(t, externalSecret))
	b, _ = json.Marshal(es)
	if strings.Contains(string(b), "remoteRef") || strings.Contains(string(b), "labels") || !strings.Contains(string(b), "ghcr-pull") {
		t.Errorf("ExternalSecret trimmed = %s", b)
	}
	cm := obj(t, configMap)
	if got := TrimInstaller("kubernetes:core/v1:ConfigMap", cm); !reflect.DeepEqual(got, cm) {
		t.Errorf("a ConfigMap is no installer: %v", got)
	}
}

// An SDK may send, among the installers, earlier registrations whose own answer it does not have
// yet (decisions asked concurrently): those that are no installer change nothing.
func TestDecideIgnoresRegistrationsThatAreNoInstaller(t *testing.T) {
	es := Resource{Type: "kubernetes:external-secrets.io/v1:ExternalSecret", Name: "es", Object: obj(t, externalSecret)}
	crd := installer(t, "crd", "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition", "eso-crd", esoCRD)
	hook := installer(t, "hook", "kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration", "eso-validate", esoWebhook)
	others := []Installer{
		installer(t, "cm", "kubernetes:core/v1:ConfigMap", "cm", configMap),
		installer(t, "dep", "kubernetes:apps/v1:Deployment", "web", strings.Replace(deploymentMounting, "%s", "ghcr-pull", 1)),
		{ID: "chart", Type: "kubernetes:helm.sh/v4:Chart", Name: "eso", Object: map[string]any{"chart": "x"}},
	}
	want := Decide(Input{Resource: es, Installers: []Installer{crd, hook}, DependsOn: []string{"crd"}}, fakeCluster{}, testIntercepts)
	got := Decide(Input{Resource: es, Installers: append([]Installer{others[0], crd, others[1]}, append([]Installer{hook}, others[2])...),
		DependsOn: []string{"crd", "cm", "chart"}}, fakeCluster{}, testIntercepts)
	if !reflect.DeepEqual(got, want) || len(want.Gates) != 2 {
		t.Errorf("with registrations that are no installer:\n%+v\nwithout:\n%+v", got, want)
	}
}

// Retried (the SDK gave every registration autoGate's error hook): the AdmissionReady in front
// of an object's own create says so, and only there. Near misses: no hook; a Pod like a
// workload's pods (a controller creates them, no hook retries it); a type the hook does not
// retry (a Chart v4 component).
func TestDecideRetriedAdmission(t *testing.T) {
	release := Installer{ID: "rel", Type: releaseType, Name: "external-secrets",
		Object: map[string]any{"name": "external-secrets", "namespace": "external-secrets", "chart": "external-secrets"}}
	injector := installer(t, "inj", "kubernetes:admissionregistration.k8s.io/v1:MutatingWebhookConfiguration", "mesh:injector", podInjector)
	cases := []struct {
		name       string
		typ, y     string
		installers []Installer
		dependsOn  []string
		retried    bool
		want       []bool // per AdmissionReady gate, in order: retried set
	}{
		{"ExternalSecret after its Release, hook wired", "kubernetes:external-secrets.io/v1:ExternalSecret", externalSecret,
			[]Installer{release}, []string{"rel"}, true, []bool{true}},
		{"ExternalSecret the cluster does not serve yet, hook wired", "kubernetes:external-secrets.io/v1:ExternalSecret", externalSecret,
			nil, nil, true, []bool{true}},
		{"near miss: no hook (NoRetry, or a CLI without error hooks)", "kubernetes:external-secrets.io/v1:ExternalSecret", externalSecret,
			[]Installer{release}, []string{"rel"}, false, []bool{false}},
		{"near miss: a Pod like a Deployment's pods, hook wired", "kubernetes:apps/v1:Deployment", injectedDeployment("yes"),
			[]Installer{injector}, nil, true, []bool{false}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := Decide(Input{Resource: Resource{Type: c.typ, Name: "obj", Object: obj(t, c.y)}, Installers: c.installers,
				DependsOn: c.dependsOn, Options: Options{Retried: c.retried}}, fakeCluster{}, testIntercepts)
			var got []bool
			for _, g := range p.Gates {
				if g.Type == TypeAdmissionReady {
					got = append(got, g.Args["retried"] == true)
				}
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("retried per AdmissionReady = %v, want %v: %+v", got, c.want, p.Gates)
			}
		})
	}
	// The hook retries what retry.Decide takes: a component is not.
	d := &decider{in: Input{Resource: Resource{Type: "kubernetes:helm.sh/v4:Chart"}, Options: Options{Retried: true}}}
	if d.admissionArgs(map[string]any{}, true)["retried"] != nil {
		t.Error("a Chart v4's admission args say retried")
	}
}
