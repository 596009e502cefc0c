package tools

import "fmt"

// moduleTrims are the tools modules built with a dependency trimmed (by folder under tools/).
var moduleTrims = map[string]*ModuleTrim{"pulumi": pulumiTrim, "kube": kwokTrim}

// kwokTrim builds kwok v0.7.0 on Kubernetes' v0.34 libraries, those of the tools module it shares
// with the Kubernetes binaries (one build compiles their ~600 common packages once; on its own
// v0.33 kwok was a third copy). v0.34 dropped one constant kwok names, the annotation of a
// WatchList stream's list blueprint; its text is written in instead, so kwok does what it did on
// v0.33. (The path is off by default: client-go's WatchListClient gate.)
var kwokTrim = &ModuleTrim{
	Module: "sigs.k8s.io/kwok",
	Edits: []FileEdit{
		{Path: "pkg/utils/informer/informer.go",
			Old: "meta.GetAnnotations()[metav1.InitialEventsListBlueprintAnnotationKey]",
			New: "meta.GetAnnotations()[" + initialEventsListBlueprint + "]"},
		{Path: "pkg/utils/informer/informer.go",
			Old: `annotation is missing content", metav1.InitialEventsListBlueprintAnnotationKey)`,
			New: `annotation is missing content", ` + initialEventsListBlueprint + ")"},
	},
}

// initialEventsListBlueprint is metav1.InitialEventsListBlueprintAnnotationKey of
// k8s.io/apimachinery v0.33.0, as a Go string literal.
const initialEventsListBlueprint = `"kubernetes.io/initial-events-list-blueprint"`

// pulumiTrim builds the Pulumi CLI without its cloud integrations: the S3, Azure Blob and GCS
// state backends, the AWS, Azure, Google and Vault secrets managers and `pulumi logs` for AWS
// and Google resources. They link the cloud SDKs, 500 of the CLI's 1685 packages, a third of a
// cold machine's tools build, and no test or demo here can reach a cloud: every stack logs in
// to a file:// backend with the passphrase secrets manager. Such a URL now fails as one of a
// scheme the CLI does not know.
var pulumiTrim = &ModuleTrim{
	Module: "github.com/pulumi/pulumi/pkg/v3",
	Files: map[string]string{
		"operations/operations_aws.go":       leftOutLogs("AWSOperationsProvider", true, "AWS"),
		"operations/operations_cloud_aws.go": leftOutLogs("CloudOperationsProvider", false, "pulumi-cloud"),
		"operations/operations_gcp.go":       leftOutLogs("GCPOperationsProvider", true, "Google Cloud"),
	},
	Edits: []FileEdit{
		// The DIY backend: file:// only.
		{Path: "backend/diy/backend.go", Old: "\t\"gocloud.dev/blob/azureblob\"  // driver for azblob://\n"},
		{Path: "backend/diy/backend.go", Old: "\t\"gocloud.dev/blob/gcsblob\"    // driver for gs://\n"},
		{Path: "backend/diy/backend.go", Old: "\t_ \"gocloud.dev/blob/s3blob\"   // driver for s3://\n"},
		{Path: "backend/diy/backend.go", Old: "\t\"github.com/pulumi/pulumi/pkg/v3/authhelpers\"\n"},
		{Path: "backend/diy/backend.go", Old: `	if p.Scheme == gcsblob.Scheme {
		blobmux, err = authhelpers.GoogleCredentialsMux(ctx)
		if err != nil {
			return nil, err
		}
	}
`},
		{Path: "backend/diy/backend.go", Old: `	if p.Scheme == azureblob.Scheme {
		blobmux = &blob.URLMux{}
		blobmux.RegisterBucket(azureblob.Scheme, &azureblob.URLOpener{
			MakeClient:        azureblob.NewDefaultClient,
			ServiceURLOptions: *azureblob.NewDefaultServiceURLOptions(),
		})
	}
`},
		{Path: "backend/diy/bucket.go", Old: "\tawss3 \"github.com/aws/aws-sdk-go-v2/service/s3\"\n"},
		{Path: "backend/diy/bucket.go", Old: `		var input *awss3.CopyObjectInput
		if asFunc(&input) {
			fixupS3CopySource(input)
		}
`},
		{Path: "backend/diy/bucket.go", Old: "func fixupS3CopySource(input *awss3.CopyObjectInput) {",
			New: "func fixupS3CopySource(input *struct{ CopySource *string }) {"},
		// `pulumi config set` and `esc env set` without the "looks like a secret" warning: its
		// password-strength estimator (zxcvbn, two copies) builds its word lists as the CLI starts,
		// 90 of the 130 ms every invocation spends in package init; the Automation API runs the
		// CLI over a thousand times in `make test`, and says which values are secret itself.
		{Path: "cmd/pulumi/config/config.go", Old: "\t\"github.com/nbutton23/zxcvbn-go\"\n"},
		{Path: "cmd/pulumi/config/config.go", Old: zxcvbnEntropy, New: noSecretHeuristic},
		{Path: "cmd/esc/cli/env_set.go", Old: "\t\"github.com/ccojocar/zxcvbn-go\"\n"},
		{Path: "cmd/esc/cli/env_set.go", Old: zxcvbnEntropy, New: noSecretHeuristic},
		// The cloud secrets manager: gocloud's URL openers without the cloud KMS drivers.
		{Path: "secrets/cloud/manager.go", Old: `	_ "gocloud.dev/secrets/awskms"        // support for awskms://
	_ "gocloud.dev/secrets/azurekeyvault" // support for azurekeyvault://
	"gocloud.dev/secrets/gcpkms"          // support for gcpkms://
	_ "gocloud.dev/secrets/hashivault"    // support for hashivault://
	"google.golang.org/api/cloudkms/v1"
`},
		{Path: "secrets/cloud/manager.go", Old: "\t\"github.com/pulumi/pulumi/pkg/v3/authhelpers\"\n"},
		{Path: "secrets/cloud/manager.go", Old: `	switch u.Scheme {
	case gcpkms.Scheme:
		credentials, err := authhelpers.ResolveGoogleCredentials(ctx, cloudkms.CloudkmsScope)
		if err != nil {
			return nil, fmt.Errorf("missing google credentials: %w", err)
		}

		kmsClient, _, err := gcpkms.Dial(ctx, credentials.TokenSource)
		if err != nil {
			return nil, fmt.Errorf("failed to connect to gcpkms: %w", err)
		}
		opener := gcpkms.URLOpener{
			Client: kmsClient,
		}

		return opener.OpenKeeperURL(ctx, u)
	default:
		return gosecrets.OpenKeeper(ctx, url)
	}`, New: `	_ = u
	return gosecrets.OpenKeeper(ctx, url)`},
	},
}

// zxcvbnEntropy is how the CLI judges that a plain config value looks like a secret.
const zxcvbnEntropy = `	// Compute the strength use the resulting entropy to flag whether this looks like a secret.
	info := zxcvbn.PasswordStrength(v, nil)
	entropyPerChar := info.Entropy / float64(len(v))
	return info.Entropy >= entropyThreshold ||
		(info.Entropy >= (entropyThreshold/2) && entropyPerChar >= entropyPerCharThreshold)
`

// noSecretHeuristic: this build never warns that a value looks like a secret.
const noSecretHeuristic = "\t_ = v // the estimator is left out of this build (pulumi-readiness' tools)\n\treturn false\n"

// leftOutLogs is an operations file of the CLI whose provider for `pulumi logs` fails, naming
// the cloud it is for.
func leftOutLogs(fn string, withCtx bool, cloud string) string {
	ctxImport, ctxParam := "", ""
	if withCtx {
		ctxImport, ctxParam = "\t\"context\"\n", "ctx context.Context, "
	}
	return fmt.Sprintf(`package operations

import (
%s	"errors"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/config"
)

// %s is left out of this build (pulumi-readiness' tools: no cloud SDKs).
func %s(%sconfig map[config.Key]string, component *Resource) (Provider, error) {
	return nil, errors.New("pulumi logs for %s resources is not in this build")
}
`, ctxImport, fn, fn, ctxParam, cloud)
}
