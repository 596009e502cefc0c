// Field report 002: the APISIX install as a dependency graph instead of three serial waves.
// Hard gates only where the API server itself would refuse (CRDs, admission webhooks);
// everything else is applied in parallel and converges on its own.
package main

import (
	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apiextensions"
	helmv3 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/helm/v3"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/config"

	"github.com/readiness-io/pulumi-readiness/sdk/go/readiness"
)

func main() { pulumi.Run(Program) }

// Program is the stack (its test runs it as an Automation API inline program). Config
// `chartPath`, if set, is a local copy of the `apisix` chart (`helm pull --untar`: a mirror; the
// test's chart shaped as it) installed instead of the public repo's.
func Program(ctx *pulumi.Context) error {
	// Wave 0 of the report: the control plane can schedule.
	nodes, err := readiness.NewNodesReady(ctx, "nodes", &readiness.NodesReadyArgs{MinCount: pulumi.Int(1)})
	if err != nil {
		return err
	}
	var chart pulumi.StringInput = pulumi.String("apisix")
	var version pulumi.StringPtrInput = pulumi.String("2.14.0")
	var repo helmv3.RepositoryOptsPtrInput = &helmv3.RepositoryOptsArgs{Repo: pulumi.String("https://charts.apiseven.com")}
	if path := config.Get(ctx, "chartPath"); path != "" {
		chart, version, repo = pulumi.String(path), nil, nil
	}
	// The release is named (not auto-named) so that the chart's objects have the names the gates
	// below wait for: the gateway Deployment `apisix`, the ingress controller's webhook
	// configuration `apisix-ingress-controller-webhook`. The webhook's failurePolicy is Fail (the
	// chart's default is Ignore, which lets invalid routes in unvalidated while the controller is
	// down): that makes it a hard gate, and the report's `connection refused` real.
	apisix, err := helmv3.NewRelease(ctx, "apisix", &helmv3.ReleaseArgs{
		Name:  pulumi.String("apisix"),
		Chart: chart, Version: version, RepositoryOpts: repo,
		Namespace:       pulumi.String("apisix"),
		CreateNamespace: pulumi.Bool(true),
		Values: pulumi.Map{"ingress-controller": pulumi.Map{
			"enabled": pulumi.Bool(true),
			"webhook": pulumi.Map{"failurePolicy": pulumi.String("Fail")},
		}},
	}, pulumi.DependsOn([]pulumi.Resource{nodes}))
	if err != nil {
		return err
	}
	// Hard gate 1: the CRDs are served.
	crds, err := readiness.NewCrdReady(ctx, "apisix-crds", &readiness.CrdReadyArgs{
		Group: pulumi.String("apisix.apache.org"),
	}, pulumi.DependsOn([]pulumi.Resource{apisix}))
	if err != nil {
		return err
	}
	// Hard gate 2: the ingress controller's admission webhook answers.
	webhook, err := readiness.NewWebhookReady(ctx, "apisix-webhook", &readiness.WebhookReadyArgs{
		ValidatingWebhookConfiguration: pulumi.String("apisix-ingress-controller-webhook"),
		Probe: pulumi.Map{"apiVersion": pulumi.String("apisix.apache.org/v2"), "kind": pulumi.String("ApisixRoute"),
			"metadata": pulumi.Map{"name": pulumi.String("readiness-probe"), "namespace": pulumi.String("apisix")},
			"spec":     pulumi.Map{"http": pulumi.Array{}}},
		Triggers: pulumi.Array{apisix.Status.Revision()},
	}, pulumi.DependsOn([]pulumi.Resource{crds}))
	if err != nil {
		return err
	}
	// Wave 3, in parallel: routes and upstreams for every app, gated only on the webhook.
	for _, app := range []string{"hello-world", "nodejs-demo", "grafana"} {
		if _, err := apiextensions.NewCustomResource(ctx, "route-"+app, &apiextensions.CustomResourceArgs{
			ApiVersion: pulumi.String("apisix.apache.org/v2"), Kind: pulumi.String("ApisixRoute"),
			Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(app), Namespace: pulumi.String("apisix")},
			OtherFields: map[string]any{"spec": map[string]any{"http": []any{map[string]any{
				"name":     app,
				"match":    map[string]any{"hosts": []string{app + ".home.example"}, "paths": []string{"/*"}},
				"backends": []any{map[string]any{"serviceName": app, "servicePort": 80}},
			}}}},
		}, pulumi.DependsOn([]pulumi.Resource{webhook})); err != nil {
			return err
		}
	}
	// The GatewayProxy the report's Helm wave failed to create ("connection refused" to the
	// webhook for 7-10 s): AdmissionReady dry-runs exactly this object, twice in a row, until
	// the webhook admits it; the object is then created from the same values. A denial (a bad
	// spec) fails the gate at once, quoting the webhook, instead of after a timeout.
	proxySpec := map[string]any{"provider": map[string]any{"type": "ControlPlane", "controlPlane": map[string]any{
		"endpoints": []any{"http://apisix-admin.apisix.svc:9180"},
		"auth": map[string]any{"type": "AdminKey", "adminKey": map[string]any{
			"valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": "apisix-admin", "key": "key"}}}},
	}}}
	admitted, err := readiness.NewAdmissionReady(ctx, "gatewayproxy-admitted", &readiness.AdmissionReadyArgs{
		Objects: pulumi.MapArray{pulumi.ToMap(map[string]any{
			"apiVersion": "apisix.apache.org/v1alpha1", "kind": "GatewayProxy",
			"metadata": map[string]any{"name": "apisix-config", "namespace": "apisix"},
			"spec":     proxySpec,
		})},
		Triggers: pulumi.Array{apisix.Status.Revision()},
	}, pulumi.DependsOn([]pulumi.Resource{crds}))
	if err != nil {
		return err
	}
	if _, err := apiextensions.NewCustomResource(ctx, "gatewayproxy", &apiextensions.CustomResourceArgs{
		ApiVersion: pulumi.String("apisix.apache.org/v1alpha1"), Kind: pulumi.String("GatewayProxy"),
		Metadata:    &metav1.ObjectMetaArgs{Name: pulumi.String("apisix-config"), Namespace: pulumi.String("apisix")},
		OtherFields: map[string]any{"spec": proxySpec},
	}, pulumi.DependsOn([]pulumi.Resource{admitted})); err != nil {
		return err
	}
	// The gateway itself must serve before anyone is told the cluster is up.
	_, err = readiness.NewRolloutReady(ctx, "apisix-gateway", &readiness.RolloutReadyArgs{
		Kind: pulumi.String("Deployment"), Namespace: pulumi.String("apisix"), Name: pulumi.String("apisix"),
	}, pulumi.DependsOn([]pulumi.Resource{apisix}))
	return err
}
