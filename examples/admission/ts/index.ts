// Field report 001 with AdmissionReady: before the ExternalSecrets are created, the API server
// dry-runs exactly those objects. The gate waits while External Secrets' CRDs are not served and
// while its webhook cannot be called (`failed calling webhook`), fails at once quoting the webhook
// if it denies them, and the ExternalSecrets are then created from the very same values. The program
// is this module's exported function (Pulumi runs it), so a test can run it as an Automation API inline program.
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

    const externalSecrets = ["default", "hello-world", "nodejs-demo", "storage-validator"].map(ns => ({
        apiVersion: "external-secrets.io/v1beta1", kind: "ExternalSecret",
        metadata: { name: "ghcr-pull-secret", namespace: ns },
        spec: {
            refreshInterval: "1h",
            secretStoreRef: { name: "vault", kind: "ClusterSecretStore" },
            target: { name: "ghcr-pull-secret", template: { type: "kubernetes.io/dockerconfigjson" } },
            data: [{ secretKey: ".dockerconfigjson", remoteRef: { key: "ghcr" } }],
        },
    }));

    // The strongest proof that they can be created: the API server admits exactly them, twice in a
    // row. Nothing is persisted.
    const admitted = new readiness.AdmissionReady("ghcr-pull-secrets-admitted", {
        objects: externalSecrets, timeout: "10m",
    }, { dependsOn: [eso] });

    for (const es of externalSecrets) {
        new k8s.apiextensions.CustomResource(`ghcr-pull-secret-${es.metadata.namespace}`, es, { dependsOn: [admitted] });
    }

    // A mutating webhook proves itself by what it changes: an injector whose failurePolicy is Ignore
    // admits without it, so only the sidecar in the dry-run result is proof.
    const injected = new readiness.AdmissionReady("web-injected", {
        objects: [{ apiVersion: "v1", kind: "Pod", metadata: { name: "web", namespace: "apps", labels: { app: "web" } },
                    spec: { containers: [{ name: "web", image: "registry.local/web:1" }] } }],
        expect: "object.spec.containers.exists(c, c.name == 'istio-proxy')",
    }).mutated;

    return { injected, webhooksThatWereDown: admitted.deniers };
};
