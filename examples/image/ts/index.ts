// Field report 003 with ImageReady: CI pushes ghcr.io/acme/api:<commit> while `pulumi up` already
// runs, and pods that pulled the tag too early went to ErrImagePull. The gate waits until the tag
// resolves in the registry, for the platform the nodes run (arm64), with the cluster's own pull
// Secret, and the Deployment runs the image pinned by the digest the gate resolved: what was
// proven to exist is exactly what the pods pull, even if the tag moves later. The program is this
// module's exported function (Pulumi runs it), so a test can run it as an Automation API inline program.
import * as pulumi from "@pulumi/pulumi";
import * as k8s from "@pulumi/kubernetes";
import * as readiness from "@readiness-io/pulumi-readiness";

export = () => {
    // The commit CI is building, e.g. `pulumi config set imageTag $GITHUB_SHA`.
    const config = new pulumi.Config();
    const tag = config.require("imageTag");
    // Where CI pushes it (config `imageRepository`, default ghcr.io/acme/api).
    const repository = config.get("imageRepository") ?? "ghcr.io/acme/api";

    const image = new readiness.ImageReady("api-image", {
        image: `${repository}:${tag}`,
        platform: "linux/arm64",
        // The same dockerconfigjson Secret the pods pull with (kubectl create secret docker-registry).
        pullSecret: { namespace: "apps", name: "ghcr-pull-secret" },
        timeout: "20m", // as long as the image build may take
    });

    new k8s.apps.v1.Deployment("api", {
        metadata: { name: "api", namespace: "apps" },
        spec: {
            replicas: 2,
            selector: { matchLabels: { app: "api" } },
            template: {
                metadata: { labels: { app: "api" } },
                spec: {
                    imagePullSecrets: [{ name: "ghcr-pull-secret" }],
                    containers: [{ name: "api", image: image.pinned }], // ghcr.io/acme/api@sha256:...
                },
            },
        },
    }, { dependsOn: [image] });

    return { digest: image.digest, arm64Digest: image.platformDigest, platforms: image.platforms };
};
