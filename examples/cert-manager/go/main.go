// Field report 000: cert-manager installed by Helm, a Certificate, and a Deployment that mounts
// the TLS Secret only once cert-manager has issued it. No init container, no `until kubectl`.
package main

import (
	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apiextensions"
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
// `chartPath`, if set, installs the chart from that folder instead of the public repo (the test's
// local copy of the same chart; a mirror).
func Program(ctx *pulumi.Context) error {
	release := &helmv3.ReleaseArgs{
		Chart: pulumi.String("cert-manager"), Version: pulumi.String("v1.19.0"),
		RepositoryOpts:  &helmv3.RepositoryOptsArgs{Repo: pulumi.String("https://charts.jetstack.io")},
		Namespace:       pulumi.String("cert-manager"),
		CreateNamespace: pulumi.Bool(true),
		Values:          pulumi.Map{"crds": pulumi.Map{"enabled": pulumi.Bool(true)}},
	}
	if path := config.Get(ctx, "chartPath"); path != "" {
		release.Chart, release.Version, release.RepositoryOpts = pulumi.String(path), nil, nil
	}
	certManager, err := helmv3.NewRelease(ctx, "cert-manager", release)
	if err != nil {
		return err
	}
	// One line for "cert-manager is usable": CRDs served, both webhooks answering a dry-run
	// Issuer, CA bundles injected. Each step shows as its own row in `pulumi up`.
	ready, err := readiness.NewCertManagerReady(ctx, "cert-manager-ready", &readiness.CertManagerReadyArgs{},
		pulumi.DependsOn([]pulumi.Resource{certManager}))
	if err != nil {
		return err
	}
	issuer, err := apiextensions.NewCustomResource(ctx, "selfsigned", &apiextensions.CustomResourceArgs{
		ApiVersion: pulumi.String("cert-manager.io/v1"), Kind: pulumi.String("ClusterIssuer"),
		Metadata:    &metav1.ObjectMetaArgs{Name: pulumi.String("selfsigned")},
		OtherFields: map[string]any{"spec": map[string]any{"selfSigned": map[string]any{}}},
	}, pulumi.DependsOn([]pulumi.Resource{ready}))
	if err != nil {
		return err
	}
	cert, err := apiextensions.NewCustomResource(ctx, "ai-ops-agent-cert", &apiextensions.CustomResourceArgs{
		ApiVersion: pulumi.String("cert-manager.io/v1"), Kind: pulumi.String("Certificate"),
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String("ai-ops-agent"), Namespace: pulumi.String("default")},
		OtherFields: map[string]any{"spec": map[string]any{
			"secretName": "ai-ops-agent-tls",
			"dnsNames":   []string{"ai-ops-agent.default.svc"},
			"issuerRef":  map[string]any{"name": "selfsigned", "kind": "ClusterIssuer"},
		}},
	}, pulumi.DependsOn([]pulumi.Resource{issuer}))
	if err != nil {
		return err
	}
	// The gate: the Deployment takes the Secret's name from it, so it cannot start earlier.
	tls, err := readiness.NewCertificateReady(ctx, "ai-ops-agent-tls", &readiness.CertificateReadyArgs{
		Name: pulumi.String("ai-ops-agent"), Namespace: pulumi.String("default"), MinValidity: pulumi.String("24h"),
	}, pulumi.DependsOn([]pulumi.Resource{cert}))
	if err != nil {
		return err
	}
	labels := pulumi.StringMap{"app": pulumi.String("ai-ops-agent")}
	_, err = appsv1.NewDeployment(ctx, "ai-ops-agent", &appsv1.DeploymentArgs{
		Metadata: &metav1.ObjectMetaArgs{Namespace: pulumi.String("default")},
		Spec: &appsv1.DeploymentSpecArgs{
			Selector: &metav1.LabelSelectorArgs{MatchLabels: labels},
			Template: &corev1.PodTemplateSpecArgs{
				Metadata: &metav1.ObjectMetaArgs{Labels: labels},
				Spec: &corev1.PodSpecArgs{
					Containers: corev1.ContainerArray{corev1.ContainerArgs{
						Name: pulumi.String("agent"), Image: pulumi.String("ghcr.io/example/ai-ops-agent:1.0"),
						VolumeMounts: corev1.VolumeMountArray{corev1.VolumeMountArgs{Name: pulumi.String("tls"), MountPath: pulumi.String("/tls")}},
					}},
					Volumes: corev1.VolumeArray{corev1.VolumeArgs{Name: pulumi.String("tls"),
						Secret: &corev1.SecretVolumeSourceArgs{SecretName: tls.SecretName}}},
				},
			},
		},
	})
	ctx.Export("certificateExpires", tls.NotAfter)
	return err
}
