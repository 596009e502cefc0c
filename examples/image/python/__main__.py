# Field report 003 with ImageReady: CI pushes ghcr.io/acme/api:<commit> while `pulumi up` already
# runs, and pods that pulled the tag too early went to ErrImagePull. The gate waits until the tag
# resolves in the registry, for the platform the nodes run (arm64), with the cluster's own pull
# Secret, and the Deployment runs the image pinned by the digest the gate resolved: what was
# proven to exist is exactly what the pods pull, even if the tag moves later. The program is this
# module's function `program` (Pulumi runs the file as `__main__`, which calls it), so a test can
# import it and run it as an Automation API inline program.
import pulumi
import pulumi_kubernetes as k8s
import pulumi_readiness as readiness


def program():
    # The commit CI is building, e.g. `pulumi config set imageTag $GITHUB_SHA`.
    config = pulumi.Config()
    tag = config.require("imageTag")
    # Where CI pushes it (config `imageRepository`, default ghcr.io/acme/api).
    repository = config.get("imageRepository") or "ghcr.io/acme/api"

    image = readiness.ImageReady(
        "api-image",
        image=f"{repository}:{tag}",
        platform="linux/arm64",
        # The same dockerconfigjson Secret the pods pull with (kubectl create secret docker-registry).
        pull_secret={"namespace": "apps", "name": "ghcr-pull-secret"},
        timeout="20m",  # as long as the image build may take
    )

    k8s.apps.v1.Deployment(
        "api",
        metadata={"name": "api", "namespace": "apps"},
        spec={
            "replicas": 2,
            "selector": {"match_labels": {"app": "api"}},
            "template": {
                "metadata": {"labels": {"app": "api"}},
                "spec": {
                    "image_pull_secrets": [{"name": "ghcr-pull-secret"}],
                    "containers": [{"name": "api", "image": image.pinned}],  # ghcr.io/acme/api@sha256:...
                },
            },
        },
        opts=pulumi.ResourceOptions(depends_on=[image]))

    pulumi.export("digest", image.digest)
    pulumi.export("arm64Digest", image.platform_digest)
    pulumi.export("platforms", image.platforms)


if __name__ == "__main__":
    program()
