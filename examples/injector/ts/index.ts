// A sidecar injector whose failurePolicy is Ignore (Linkerd's proxy injector): while it is not
// serving, the API server admits Pods without asking it, and they run without a proxy, silently.
// WebhookReady with `expect` dry-runs a Pod in an injected namespace and waits until the result
// carries the injected container: the mutation is the only proof such a webhook gives. The
// workloads depend on the gate, so none of their Pods is created before the injector serves. The
// program is this module's exported function (Pulumi runs it; its result is the stack's outputs),
// so a test can run it as an Automation API inline program.
import * as k8s from "@pulumi/kubernetes";
import * as path from "path";
import * as pulumi from "@pulumi/pulumi";
import * as readiness from "@readiness-io/pulumi-readiness";

export = () => {
    const config = new pulumi.Config();
    // Config `chartPath`, if set, is a folder holding the charts linkerd-crds/ and
    // linkerd-control-plane/ (`helm pull --untar` of both: a mirror; the test's charts shaped as
    // Linkerd's), installed instead of the public repo's.
    const chartPath = config.get("chartPath");
    const chart = (name: string) => chartPath ? { chart: path.join(chartPath, name) }
        : { chart: name, repositoryOpts: { repo: "https://helm.linkerd.io/edge" } };

    const crds = new k8s.helm.v3.Release("linkerd-crds", {
        ...chart("linkerd-crds"),
        namespace: "linkerd", createNamespace: true,
    });
    const linkerd = new k8s.helm.v3.Release("linkerd-control-plane", {
        ...chart("linkerd-control-plane"),
        namespace: "linkerd",
        values: {
            // Your own trust anchor and issuer (see Linkerd's "generating certificates" guide).
            identityTrustAnchorsPEM: config.require("trustAnchorPEM"),
            identity: { issuer: { tls: { crtPEM: config.require("issuerCrtPEM"), keyPEM: config.requireSecret("issuerKeyPEM") } } },
        },
    }, { dependsOn: [crds] });

    const apps = new k8s.core.v1.Namespace("apps", {
        metadata: { name: "apps", annotations: { "linkerd.io/inject": "enabled" } },
    });

    // The probe is a Pod in the injected namespace; `expect` looks for what only the injector adds.
    const injector = new readiness.WebhookReady("linkerd-injector", {
        mutatingWebhookConfiguration: "linkerd-proxy-injector-webhook-config",
        probe: {
            apiVersion: "v1", kind: "Pod",
            metadata: { generateName: "injection-probe-", namespace: "apps" },
            spec: { containers: [{ name: "probe", image: "registry.local/probe:1" }] },
        },
        expect: "object.spec.containers.exists(c, c.name == 'linkerd-proxy')",
        timeout: "10m",
    }, { dependsOn: [linkerd, apps] });

    new k8s.apps.v1.Deployment("web", {
        metadata: { name: "web", namespace: "apps" },
        spec: {
            selector: { matchLabels: { app: "web" } },
            template: {
                metadata: { labels: { app: "web" } },
                spec: { containers: [{ name: "web", image: "registry.local/web:1" }] },
            },
        },
    }, { dependsOn: [injector] });

    return { injectorFailurePolicy: injector.failurePolicy };
};
