// Field report 001: ExternalSecrets in several namespaces wait for the webhook that validates
// them, not for the Helm release that installs it. The program is this module's exported
// function (Pulumi runs it), so a test can run it as an Automation API inline program.
import * as pulumi from "@pulumi/pulumi";
import * as k8s from "@pulumi/kubernetes";
import * as readiness from "@readiness-io/pulumi-readiness";

export = () => {
    // Config `chartPath`, if set, installs the chart from that folder instead of the public repo
    // (a mirror; the test's local copy of the same chart).
    const chartPath = new pulumi.Config().get("chartPath");
    const eso = new k8s.helm.v3.Release("external-secrets", {
        ...(chartPath ? { chart: chartPath } : {
            chart: "external-secrets", version: "0.12.1",
            repositoryOpts: { repo: "https://charts.external-secrets.io" },
        }),
        namespace: "external-secrets", createNamespace: true,
        values: { installCRDs: true },
    });
    // The missing link of field report 001: CRDs served, both webhooks answering dry-run probes,
    // the controller rolled out. Not just "the release was submitted".
    const webhook = new readiness.ExternalSecretsReady("external-secrets-ready", {}, { dependsOn: [eso] });

    for (const ns of ["default", "hello-world", "nodejs-demo", "storage-validator"]) {
        const es = new k8s.apiextensions.CustomResource(`ghcr-pull-secret-${ns}`, {
            apiVersion: "external-secrets.io/v1beta1", kind: "ExternalSecret",
            metadata: { name: "ghcr-pull-secret", namespace: ns },
            spec: {
                refreshInterval: "1h",
                secretStoreRef: { name: "vault", kind: "ClusterSecretStore" },
                target: { name: "ghcr-pull-secret", template: { type: "kubernetes.io/dockerconfigjson" } },
                data: [{ secretKey: ".dockerconfigjson", remoteRef: { key: "ghcr" } }],
            },
        }, { dependsOn: [webhook] });
        new readiness.ExternalSecretReady(`ghcr-pull-secret-synced-${ns}`, { name: "ghcr-pull-secret", namespace: ns }, { dependsOn: [es] });
    }
    return {};
};
