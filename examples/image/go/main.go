// Field report 003 with ImageReady: CI pushes ghcr.io/acme/api:<commit> while `pulumi up` already
// runs, and pods that pulled the tag too early went to ErrImagePull. The gate waits until the tag
// resolves in the registry, for the platform the nodes run (arm64), with the cluster's own pull
// Secret, and the Deployment runs the image pinned by the digest the gate resolved: what was
// proven to exist is exactly what the pods pull, even if the tag moves later.
package main

import (
	"fmt"

	appsv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apps/v1"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/readiness-io/pulumi-readiness/sdk/go/readiness"
)

func main() { pulumi.Run(Program) }

// Program is the stack (its test runs it as an Automation API inline program).
func Program(ctx *pulumi.Context) error {
	// The commit CI is building, e.g. `pulumi config set imageTag $GITHUB_SHA`.
	tag, ok := ctx.GetConfig(ctx.Project() + ":imageTag")
	if !ok {
		return fmt.Errorf("set the image tag CI builds: pulumi config set imageTag <commit>")
	}
	// Where CI pushes it (config `imageRepository`, default ghcr.io/acme/api).
	repository, ok := ctx.GetConfig(ctx.Project() + ":imageRepository")
	if !ok {
		repository = "ghcr.io/acme/api"
	}
	image, err := readiness.NewImageReady(ctx, "api-image", &readiness.ImageReadyArgs{
		Image:    pulumi.String(repository + ":" + tag),
		Platform: pulumi.String("linux/arm64"),
		// The same dockerconfigjson Secret the pods pull with (kubectl create secret docker-registry).
		PullSecret: &readiness.ImagePullSecretArgs{Namespace: pulumi.String("apps"), Name: pulumi.String("ghcr-pull-secret")},
		Timeout:    pulumi.String("20m"), // as long as the image build may take
	})
	if err != nil {
		return err
	}
	labels := pulumi.StringMap{"app": pulumi.String("api")}
	if _, err := appsv1.NewDeployment(ctx, "api", &appsv1.DeploymentArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String("api"), Namespace: pulumi.String("apps")},
		Spec: &appsv1.DeploymentSpecArgs{
			Replicas: pulumi.Int(2),
			Selector: &metav1.LabelSelectorArgs{MatchLabels: labels},
			Template: &corev1.PodTemplateSpecArgs{
				Metadata: &metav1.ObjectMetaArgs{Labels: labels},
				Spec: &corev1.PodSpecArgs{
					ImagePullSecrets: corev1.LocalObjectReferenceArray{corev1.LocalObjectReferenceArgs{Name: pulumi.String("ghcr-pull-secret")}},
					Containers: corev1.ContainerArray{corev1.ContainerArgs{
						Name:  pulumi.String("api"),
						Image: image.Pinned, // ghcr.io/acme/api@sha256:...
					}},
				},
			},
		},
	}, pulumi.DependsOn([]pulumi.Resource{image})); err != nil {
		return err
	}
	ctx.Export("digest", image.Digest)
	ctx.Export("arm64Digest", image.PlatformDigest)
	ctx.Export("platforms", image.Platforms)
	return nil
}
