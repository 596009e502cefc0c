// Field report 001: External Secrets installed by Helm, then ExternalSecrets in several
// namespaces. `dependsOn` on the chart only means "the release was submitted"; the
// ExternalSecrets must depend on the webhook actually answering.
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
	// The missing link of field report 001: CRDs served, both webhooks answering dry-run
	// probes, the controller rolled out. Not just "the release was submitted".
	webhook, err := readiness.NewExternalSecretsReady(ctx, "external-secrets-ready", &readiness.ExternalSecretsReadyArgs{},
		pulumi.DependsOn([]pulumi.Resource{eso}))
	if err != nil {
		return err
	}
	for _, ns := range []string{"default", "hello-world", "nodejs-demo", "storage-validator"} {
		es, err := apiextensions.NewCustomResource(ctx, "ghcr-pull-secret-"+ns, &apiextensions.CustomResourceArgs{
			ApiVersion: pulumi.String("external-secrets.io/v1beta1"), Kind: pulumi.String("ExternalSecret"),
			Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String("ghcr-pull-secret"), Namespace: pulumi.String(ns)},
			OtherFields: map[string]any{"spec": map[string]any{
				"refreshInterval": "1h",
				"secretStoreRef":  map[string]any{"name": "vault", "kind": "ClusterSecretStore"},
				"target":          map[string]any{"name": "ghcr-pull-secret", "template": map[string]any{"type": "kubernetes.io/dockerconfigjson"}},
				"data":            []any{map[string]any{"secretKey": ".dockerconfigjson", "remoteRef": map[string]any{"key": "ghcr"}}},
			}},
		}, pulumi.DependsOn([]pulumi.Resource{webhook}))
		if err != nil {
			return err
		}
		// Pods that pull with it wait for the synced Secret, not just the ExternalSecret.
		if _, err := readiness.NewExternalSecretReady(ctx, "ghcr-pull-secret-synced-"+ns, &readiness.ExternalSecretReadyArgs{
			Name: pulumi.String("ghcr-pull-secret"), Namespace: pulumi.String(ns),
		}, pulumi.DependsOn([]pulumi.Resource{es})); err != nil {
			return err
		}
	}
	return nil
}
