// Field report 000: the Deployment mounts the TLS Secret only once cert-manager has issued it.
// The program is this module's exported function (Pulumi runs it; its result is the stack's
// outputs), so a test can run it as an Automation API inline program.
import * as pulumi from "@pulumi/pulumi";
import * as k8s from "@pulumi/kubernetes";
import * as readiness from "@readiness-io/pulumi-readiness";

export = () => {
    // Config `chartPath`, if set, installs the chart from that folder instead of the public repo
    // (a mirror; the test's local copy of the same chart).
    const chartPath = new pulumi.Config().get("chartPath");
    const certManager = new k8s.helm.v3.Release("cert-manager", {
        ...(chartPath ? { chart: chartPath } : {
            chart: "cert-manager", version: "v1.19.0",
            repositoryOpts: { repo: "https://charts.jetstack.io" },
        }),
        namespace: "cert-manager", createNamespace: true,
        values: { crds: { enabled: true } },
    });
    // One line for "cert-manager is usable": CRDs served, both webhooks answering a dry-run Issuer.
    const ready = new readiness.CertManagerReady("cert-manager-ready", {}, { dependsOn: [certManager] });
    const issuer = new k8s.apiextensions.CustomResource("selfsigned", {
        apiVersion: "cert-manager.io/v1", kind: "ClusterIssuer",
        metadata: { name: "selfsigned" }, spec: { selfSigned: {} },
    }, { dependsOn: [ready] });
    const cert = new k8s.apiextensions.CustomResource("ai-ops-agent-cert", {
        apiVersion: "cert-manager.io/v1", kind: "Certificate",
        metadata: { name: "ai-ops-agent", namespace: "default" },
        spec: { secretName: "ai-ops-agent-tls", dnsNames: ["ai-ops-agent.default.svc"],
                issuerRef: { name: "selfsigned", kind: "ClusterIssuer" } },
    }, { dependsOn: [issuer] });
    const tls = new readiness.CertificateReady("ai-ops-agent-tls", {
        name: "ai-ops-agent", namespace: "default", minValidity: "24h",
    }, { dependsOn: [cert] });

    const labels = { app: "ai-ops-agent" };
    new k8s.apps.v1.Deployment("ai-ops-agent", {
        metadata: { namespace: "default" },
        spec: {
            selector: { matchLabels: labels },
            template: {
                metadata: { labels },
                spec: {
                    containers: [{ name: "agent", image: "ghcr.io/example/ai-ops-agent:1.0",
                                   volumeMounts: [{ name: "tls", mountPath: "/tls" }] }],
                    // Taking the name from the gate makes the ordering explicit.
                    volumes: [{ name: "tls", secret: { secretName: tls.secretName } }],
                },
            },
        },
    });
    return { certificateExpires: tls.notAfter };
};
