// A sidecar injector whose failurePolicy is Ignore (Linkerd's proxy injector): while it is not
// serving, the API server admits Pods without asking it, and they run without a proxy, silently.
// WebhookReady with `expect` dry-runs a Pod in an injected namespace and waits until the result
// carries the injected container: the mutation is the only proof such a webhook gives. The
// workloads depend on the gate, so none of their Pods is created before the injector serves.
package main

import (
	"path/filepath"

	appsv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apps/v1"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	helmv3 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/helm/v3"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/config"

	"github.com/readiness-io/pulumi-readiness/sdk/go/readiness"
)

func main() { pulumi.Run(Program) }

// Program is the stack (its test runs it as an Automation API inline program). Config
// `chartPath`, if set, is a folder holding the charts linkerd-crds/ and linkerd-control-plane/
// (`helm pull --untar` of both: a mirror; the test's charts shaped as Linkerd's) installed
// instead of the public repo's.
func Program(ctx *pulumi.Context) error {
	// Your own trust anchor and issuer (see Linkerd's "generating certificates" guide):
	// `pulumi config set trustAnchorPEM ...`, `pulumi config set --secret issuerKeyPEM ...`.
	cfg := func(key string) string { return config.Get(ctx, key) }
	chart := func(name string) (pulumi.StringInput, helmv3.RepositoryOptsPtrInput) {
		if dir := cfg("chartPath"); dir != "" {
			return pulumi.String(filepath.Join(dir, name)), nil
		}
		return pulumi.String(name), &helmv3.RepositoryOptsArgs{Repo: pulumi.String("https://helm.linkerd.io/edge")}
	}
	crdsChart, crdsRepo := chart("linkerd-crds")
	crds, err := helmv3.NewRelease(ctx, "linkerd-crds", &helmv3.ReleaseArgs{
		Chart: crdsChart, RepositoryOpts: crdsRepo,
		Namespace: pulumi.String("linkerd"), CreateNamespace: pulumi.Bool(true),
	})
	if err != nil {
		return err
	}
	cpChart, cpRepo := chart("linkerd-control-plane")
	linkerd, err := helmv3.NewRelease(ctx, "linkerd-control-plane", &helmv3.ReleaseArgs{
		Chart: cpChart, RepositoryOpts: cpRepo,
		Namespace: pulumi.String("linkerd"),
		Values: pulumi.Map{
			"identityTrustAnchorsPEM": pulumi.String(cfg("trustAnchorPEM")),
			"identity": pulumi.Map{"issuer": pulumi.Map{"tls": pulumi.Map{
				"crtPEM": pulumi.String(cfg("issuerCrtPEM")),
				"keyPEM": pulumi.ToSecret(pulumi.String(cfg("issuerKeyPEM"))),
			}}},
		},
	}, pulumi.DependsOn([]pulumi.Resource{crds}))
	if err != nil {
		return err
	}
	apps, err := corev1.NewNamespace(ctx, "apps", &corev1.NamespaceArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String("apps"),
			Annotations: pulumi.StringMap{"linkerd.io/inject": pulumi.String("enabled")}},
	})
	if err != nil {
		return err
	}
	// The probe is a Pod in the injected namespace; `expect` looks for what only the
	// injector adds.
	injector, err := readiness.NewWebhookReady(ctx, "linkerd-injector", &readiness.WebhookReadyArgs{
		MutatingWebhookConfiguration: pulumi.String("linkerd-proxy-injector-webhook-config"),
		Probe: pulumi.ToMap(map[string]any{
			"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{"generateName": "injection-probe-", "namespace": "apps"},
			"spec":     map[string]any{"containers": []any{map[string]any{"name": "probe", "image": "registry.local/probe:1"}}},
		}),
		Expect:  pulumi.String("object.spec.containers.exists(c, c.name == 'linkerd-proxy')"),
		Timeout: pulumi.String("10m"),
	}, pulumi.DependsOn([]pulumi.Resource{linkerd, apps}))
	if err != nil {
		return err
	}
	labels := pulumi.StringMap{"app": pulumi.String("web")}
	if _, err := appsv1.NewDeployment(ctx, "web", &appsv1.DeploymentArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String("web"), Namespace: pulumi.String("apps")},
		Spec: &appsv1.DeploymentSpecArgs{
			Selector: &metav1.LabelSelectorArgs{MatchLabels: labels},
			Template: &corev1.PodTemplateSpecArgs{
				Metadata: &metav1.ObjectMetaArgs{Labels: labels},
				Spec: &corev1.PodSpecArgs{Containers: corev1.ContainerArray{
					&corev1.ContainerArgs{Name: pulumi.String("web"), Image: pulumi.String("registry.local/web:1")},
				}},
			},
		},
	}, pulumi.DependsOn([]pulumi.Resource{injector})); err != nil {
		return err
	}
	ctx.Export("injectorFailurePolicy", injector.FailurePolicy)
	return nil
}
