package autogate

import (
	"testing"

	"sigs.k8s.io/yaml"
)

// TestReleaseNeed is rule 4's table: what a dependent of a Release needs of it. Near misses
// both ways: objects that look like custom resources but run pods, or make the API server call
// a service, keep the release's readiness; built-in objects that run nothing need only their
// admission.
func TestReleaseNeed(t *testing.T) {
	cases := []struct {
		name, typ, y string
		want         releaseNeedKind
	}{
		// Only their own admission (kind served, webhooks answering).
		{"ExternalSecret", "kubernetes:external-secrets.io/v1beta1:ExternalSecret", "kind: ExternalSecret\nspec: {target: {name: x}}", needAdmission},
		{"Certificate", "kubernetes:cert-manager.io/v1:Certificate", "kind: Certificate\nspec: {secretName: x}", needAdmission},
		{"ClusterIssuer", "kubernetes:cert-manager.io/v1:ClusterIssuer", "kind: ClusterIssuer\nspec: {selfSigned: {}}", needAdmission},
		{"Ingress", "kubernetes:networking.k8s.io/v1:Ingress", "kind: Ingress\nspec: {ingressClassName: nginx}", needAdmission},
		{"RoleBinding", "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding", "kind: RoleBinding\nroleRef: {kind: Role, name: r}", needAdmission},
		{"a CRD converting with None", "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition", "kind: CustomResourceDefinition\nspec: {conversion: {strategy: None}}", needAdmission},
		{"near miss: containers without an image (a schema's example)", "kubernetes:example.com/v1:Widget", "kind: Widget\nspec: {containers: [{name: a}]}", needAdmission},
		{"near miss: a ConfigMap-like custom object naming a containers key", "kubernetes:example.com/v1:Settings", "kind: Settings\nspec: {containers: 3}", needAdmission},
		// The release's workloads: what runs pods, or routes the API server's calls to a service.
		{"Deployment", "kubernetes:apps/v1:Deployment", "kind: Deployment\nspec: {template: {spec: {containers: [{name: a, image: x}]}}}", needWorkloads},
		{"CronJob", "kubernetes:batch/v1:CronJob", "kind: CronJob\nspec: {jobTemplate: {spec: {template: {spec: {containers: [{name: a, image: x}]}}}}}", needWorkloads},
		{"Pod", "kubernetes:core/v1:Pod", "kind: Pod\nspec: {containers: [{name: a, image: x}]}", needWorkloads},
		{"a Job with only init containers in its template still runs its containers", "kubernetes:batch/v1:Job", "kind: Job\nspec: {template: {spec: {initContainers: [{name: i, image: y}], containers: [{name: a, image: x}]}}}", needWorkloads},
		{"a Rollout (a custom workload)", "kubernetes:argoproj.io/v1alpha1:Rollout", "kind: Rollout\nspec: {template: {spec: {containers: [{name: a, image: x}]}}}", needWorkloads},
		{"a KEDA ScaledJob (deep pod spec)", "kubernetes:keda.sh/v1alpha1:ScaledJob", "kind: ScaledJob\nspec: {jobTargetRef: {template: {spec: {containers: [{name: a, image: x}]}}}}", needWorkloads},
		{"a ValidatingWebhookConfiguration", "kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration", "kind: ValidatingWebhookConfiguration", needWorkloads},
		{"a MutatingWebhookConfiguration", "kubernetes:admissionregistration.k8s.io/v1:MutatingWebhookConfiguration", "kind: MutatingWebhookConfiguration", needWorkloads},
		{"an APIService", "kubernetes:apiregistration.k8s.io/v1:APIService", "kind: APIService\nspec: {service: {name: m, namespace: n}}", needWorkloads},
		{"a CRD converting through a webhook", "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition", "kind: CustomResourceDefinition\nspec: {conversion: {strategy: Webhook}}", needWorkloads},
		{"a Release", releaseType, "chart: x", needWorkloads},
		{"a kind not known while the program runs", "kubernetes:apiextensions.k8s.io:CustomResource", "spec: {}", needWorkloads},
		// Not held: the release's pods may consume them.
		{"Secret", "kubernetes:core/v1:Secret", "kind: Secret", needNothing},
		{"ServiceAccount", "kubernetes:core/v1:ServiceAccount", "kind: ServiceAccount", needNothing},
		{"Service", "kubernetes:core/v1:Service", "kind: Service", needNothing},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var obj map[string]any
			if err := yaml.Unmarshal([]byte(c.y), &obj); err != nil {
				t.Fatal(err)
			}
			group, kind := "", ""
			if c.typ != releaseType {
				if gvk, ok := objectGVK(c.typ, obj); ok {
					group, kind = gvk.Group, gvk.Kind
				}
			}
			got, why := releaseNeed(c.typ, group, kind, obj)
			if got != c.want {
				t.Fatalf("releaseNeed = %d (%s), want %d", got, why, c.want)
			}
			if got == needWorkloads && why == "" {
				t.Fatal("a HelmReleaseReady needs a reason")
			}
		})
	}
}
