// Field report 001 with AdmissionReady: before the ExternalSecrets are created, the API server
// dry-runs exactly those objects. The gate waits while External Secrets' CRDs are not served and
// while its webhook cannot be called (`failed calling webhook`), fails at once quoting the webhook
// if it denies them, and the ExternalSecrets are then created from the very same values.
package main

import (
	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apiextensions"
	helmv3 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/helm/v3"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/config"

	"github.com/readiness-io/pulumi-readiness/sdk/go/readiness"
)

func externalSecret(ns string) map[string]any {
	return map[string]any{
		"apiVersion": "external-secrets.io/v1beta1", "kind": "ExternalSecret",
		"metadata": map[string]any{"name": "ghcr-pull-secret", "namespace": ns},
		"spec": map[string]any{
			"refreshInterval": "1h",
			"secretStoreRef":  map[string]any{"name": "vault", "kind": "ClusterSecretStore"},
			"target":          map[string]any{"name": "ghcr-pull-secret", "template": map[string]any{"type": "kubernetes.io/dockerconfigjson"}},
			"data":            []any{map[string]any{"secretKey": ".dockerconfigjson", "remoteRef": map[string]any{"key": "ghcr"}}},
		},
	}
}

func main() { pulumi.Run(Program) }

// Program is the stack (its test runs it as an Automation API inline program). Config
// `chartPath`, if set, installs the chart from that folder instead of the public repo (the test's
// local copy of the same chart; a mirror).
func Program(ctx *pulumi.Context) error {
	release := &helmv3.ReleaseArgs{
		Chart: pulumi.String("external-secrets"), Version: pulumi.String("0.12.1"),
		RepositoryOpts:  &helmv3.RepositoryOptsArgs{Repo: pulumi.String("https://charts.external-secrets.io")},
		Namespace:       pulumi.String("external-secrets"),
		CreateNamespace: pulumi.Bool(true),
		Values:          pulumi.Map{"installCRDs": pulumi.Bool(true)},
	}
	if path := config.Get(ctx, "chartPath"); path != "" {
		release.Chart, release.Version, release.RepositoryOpts = pulumi.String(path), nil, nil
	}
	eso, err := helmv3.NewRelease(ctx, "external-secrets", release)
	if err != nil {
		return err
	}
	namespaces := []string{"default", "hello-world", "nodejs-demo", "storage-validator"}
	var objects pulumi.MapArray
	for _, ns := range namespaces {
		objects = append(objects, pulumi.ToMap(externalSecret(ns)))
	}
	// The strongest proof that they can be created: the API server admits exactly them,
	// twice in a row. Nothing is persisted.
	admitted, err := readiness.NewAdmissionReady(ctx, "ghcr-pull-secrets-admitted", &readiness.AdmissionReadyArgs{
		Objects: objects,
		Timeout: pulumi.String("10m"),
	}, pulumi.DependsOn([]pulumi.Resource{eso}))
	if err != nil {
		return err
	}
	ctx.Export("webhooksThatWereDown", admitted.Deniers)
	for _, ns := range namespaces {
		es := externalSecret(ns)
		if _, err := apiextensions.NewCustomResource(ctx, "ghcr-pull-secret-"+ns, &apiextensions.CustomResourceArgs{
			ApiVersion:  pulumi.String("external-secrets.io/v1beta1"),
			Kind:        pulumi.String("ExternalSecret"),
			Metadata:    &metav1.ObjectMetaArgs{Name: pulumi.String("ghcr-pull-secret"), Namespace: pulumi.String(ns)},
			OtherFields: map[string]any{"spec": es["spec"]},
		}, pulumi.DependsOn([]pulumi.Resource{admitted})); err != nil {
			return err
		}
	}
	return nil
}
