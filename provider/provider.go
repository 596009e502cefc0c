// Package provider is the readiness Pulumi provider: one file per gate resource, each thin glue
// between Pulumi inputs/outputs, the pure evaluators of pkg/status and the wait loop of pkg/wait.
package provider

import (
	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi/sdk/v3/go/common/tokens"
)

// Name is the Pulumi package name.
const Name = "readiness"

// Version is stamped at build time with -ldflags "-X .../provider.Version=...": the release tag
// without its "v" (make dist, make build), else the development default below, which is also the
// version of the committed schema.json and SDKs (Makefile DEV_VERSION).
var Version = "0.1.0-dev"

// PluginDownloadURL is where the Pulumi engine fetches this plugin when a program needs it: the
// GitHub releases of readiness-io/pulumi-readiness, assets named
// pulumi-resource-readiness-v<version>-<os>-<arch>.tar.gz (make dist). Mirrors rewrite it with
// Pulumi's PULUMI_PLUGIN_DOWNLOAD_URL_OVERRIDES (see README, Install).
const PluginDownloadURL = "github://api.github.com/readiness-io"

// New builds the provider.
func New() (p.Provider, error) {
	prov, err := infer.NewProviderBuilder().
		WithDisplayName("Readiness").
		WithDescription("Gates that block a Pulumi deployment until Kubernetes is really ready: CRDs established, webhooks serving, certificates issued, rollouts done.").
		WithKeywords("kubernetes", "readiness", "wait", "category/cloud").
		WithHomepage("https://github.com/readiness-io/pulumi-readiness").
		WithRepository("https://github.com/readiness-io/pulumi-readiness").
		WithPublisher("readiness-io").
		WithLicense("Apache-2.0").
		WithNamespace("readiness-io").
		WithPluginDownloadURL(PluginDownloadURL).
		WithLanguageMap(map[string]any{
			"go": map[string]any{
				"importBasePath":                 "github.com/readiness-io/pulumi-readiness/sdk/go/readiness",
				"generateResourceContainerTypes": true,
				"respectSchemaVersion":           true,
			},
			"nodejs": map[string]any{
				"packageName":          "@readiness-io/pulumi-readiness",
				"respectSchemaVersion": true,
				"packageDescription":   "Gates that block a Pulumi deployment until Kubernetes is really ready.",
				"dependencies": map[string]any{
					"@pulumi/pulumi": "^3.142.0",
				},
			},
			"python": map[string]any{
				"packageName":          "pulumi_readiness",
				"respectSchemaVersion": true,
				"pythonRequires":       ">=3.9",
				"requires": map[string]any{
					"pulumi": ">=3.142.0,<4.0.0", // as the Node.js package

				},
				"pyproject": map[string]any{"enabled": true},
			},
		}).
		WithConfig(infer.Config(&Config{})).
		WithResources(
			infer.Resource(&CrdReady{}),
			infer.Resource(&ResourceReady{}),
			infer.Resource(&RolloutReady{}),
			infer.Resource(&ServiceReady{}),
			infer.Resource(&ExternalSecretReady{}),
			infer.Resource(&NodesReady{}),
			infer.Resource(&SecretReady{}),
			infer.Resource(&CertificateReady{}),
			infer.Resource(&WebhookReady{}),
			infer.Resource(&HttpReady{}),
			infer.Resource(&HelmReleaseReady{}),
			infer.Resource(&AdmissionReady{}),
			infer.Resource(&ImageReady{}),
			infer.Resource(&ChartReady{}),
		).
		WithFunctions(
			infer.Function(&AutoGateDecide{}),
			infer.Function(&AutoGateRetry{}),
		).
		WithComponents(
			infer.ComponentF(NewCertManagerReady),
			infer.ComponentF(NewExternalSecretsReady),
		).
		WithModuleMap(map[tokens.ModuleName]tokens.ModuleName{"provider": "index"}).
		Build()
	if err != nil {
		return p.Provider{}, err
	}
	return keepCredentialsSecret(prov), nil
}
