// Field report 002 from a TypeScript stack with the real pulumi-kubernetes (@pulumi/kubernetes,
// plugin v4.32.0): a k8s.helm.v3.Release of ingress-nginx (the rendered real chart wrapped as a
// local chart; its webhook is the test's server on 127.0.0.1, serving late), then an Ingress.
// Without a gate the Ingress fails with `failed calling webhook "validate.nginx.ingress.kubernetes.io"
// ... connection refused`; with HelmReleaseReady between them the stack succeeds. The same with a
// k8s.helm.v4.Chart (no Helm release record) and ChartReady given `chart.resources` as it is.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import * as readiness from "@readiness-io/pulumi-readiness";
import { Cluster, FakeWebhook, localChart, preparePulumi, PulumiEnv, request, stack, startCluster } from "./harness";

let cluster: Cluster;
let env: PulumiEnv;
let webhook: FakeWebhook | undefined;

before(async () => {
    cluster = await startCluster();
    env = await preparePulumi();
    webhook = await FakeWebhook.start();
});
after(async () => { webhook?.stop(); await cluster?.stop(); });

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// serveLate plays the controller's webhook server: it starts serving `ms` after the controller
// Deployment first has an available replica (pod Ready is not webhook serving).
async function serveLate(ms: number, cancelled: () => boolean): Promise<void> {
    while (!cancelled()) {
        const d = await request(cluster, "GET", "/apis/apps/v1/namespaces/ingress-nginx/deployments/ingress-nginx-controller");
        if (d.status === 200 && (d.body.status?.availableReplicas ?? 0) > 0) break;
        await sleep(200);
    }
    if (cancelled()) return;
    await sleep(ms);
    if (!cancelled()) await webhook!.send("start");
}

// webIngress is report 002's Ingress, which the chart's validating webhook intercepts.
function webIngress(namespace: string, dependsOn: pulumi.Resource[]): k8s.networking.v1.Ingress {
    return new k8s.networking.v1.Ingress("web", {
        // No ingress controller fills status.loadBalancer here, which the Ingress await waits for.
        metadata: { name: "web", namespace, annotations: { "pulumi.com/skipAwait": "true" } },
        spec: {
            ingressClassName: "nginx",
            rules: [{ host: "web.example.test", http: { paths: [{ path: "/", pathType: "Prefix",
                backend: { service: { name: "web", port: { number: 80 } } } }] } }],
        },
    }, { dependsOn });
}

test("field report 002: an Ingress after a Helm release of ingress-nginx needs HelmReleaseReady", { timeout: 600_000 }, async () => {
    const chart = localChart("ingress-nginx", webhook!);
    const program = (gated: boolean) => async () => {
        const release = new k8s.helm.v3.Release("ingress-nginx", {
            chart, name: "ingress-nginx", namespace: "ingress-nginx", createNamespace: true, timeout: 180,
        });
        let before: pulumi.Resource = release;
        if (gated) {
            before = new readiness.HelmReleaseReady("ingress-nginx-ready", {
                name: "ingress-nginx", namespace: "ingress-nginx", timeout: "2m",
                triggers: [release.status.revision],
            }, { dependsOn: [release] });
        }
        const ns = new k8s.core.v1.Namespace("apps", { metadata: { name: "apps" } });
        webIngress("apps", [before, ns]);
        return {};
    };

    const bare = await stack(env, cluster, { stackName: "nogate", projectName: "report002-ts", program: program(false) });
    await assert.rejects(bare.up(), (e: Error) =>
        e.message.includes('failed calling webhook "validate.nginx.ingress.kubernetes.io"') && e.message.includes("connection refused"));
    await bare.destroy();
    await bare.workspace.removeStack("nogate");

    const gated = await stack(env, cluster, { stackName: "gated", projectName: "report002-ts", program: program(true) });
    let done = false;
    const late = serveLate(5000, () => done);
    try {
        await gated.up();
    } finally {
        done = true;
        await late;
    }
    await gated.destroy();
    await gated.workspace.removeStack("gated");
    await webhook!.send("stop");
});

// A Chart v4 writes no release record: ChartReady takes its `resources` output as it is (the
// Node.js SDK passes references to the chart's objects, whose classes @pulumi/kubernetes
// registers). Without a gate the Ingress fails as in the test above (and in the Go stack test
// TestChartV4IngressNginxWebhook).
test("field report 002 with a Chart v4: ChartReady on chart.resources", { timeout: 600_000 }, async () => {
    const chart = localChart("ingress-nginx", webhook!);
    // A Chart v4 creates no namespace: the chart's, made here as by an earlier step of the stack.
    const ns = await request(cluster, "POST", "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: "ingress-nginx" } });
    assert.ok(ns.status === 201 || ns.status === 409, `namespace: ${ns.status}`);
    const program = async () => {
        const c = new k8s.helm.v4.Chart("ingress-nginx", { chart, namespace: "ingress-nginx" });
        const gate = new readiness.ChartReady("ingress-nginx-ready", { resources: c.resources, timeout: "2m" });
        webIngress("default", [gate]);
        return { objects: gate.objects, webhooks: gate.webhooks };
    };
    const gated = await stack(env, cluster, { stackName: "chartv4", projectName: "report002-ts", program });
    await gated.preview(); // the Chart's resources are unknown on a first preview: the gate must accept that
    const callsBefore = await webhook!.calls();
    // The webhook serves 3 s after the gate's create began: after everything the Chart awaited
    // itself, so the Ingress succeeds only if the gate held it for the webhook.
    let serving: Promise<void> | undefined;
    const res = await gated.up({
        onEvent: (e) => {
            const m = e.resourcePreEvent?.metadata;
            if (!serving && m?.type === "readiness:index:ChartReady" && m.op === "create") {
                serving = sleep(3000).then(() => webhook!.send("start"));
            }
        },
    });
    await serving;
    assert.ok((await webhook!.calls()) > callsBefore, "the Ingress was created without the webhook ever answering");
    assert.ok(res.outputs.objects.value >= 10, `objects = ${res.outputs.objects.value}: the gate did not get the chart's objects`);
    assert.deepEqual(res.outputs.webhooks.value, ["ingress-nginx-admission"]);
    await gated.destroy();
    await gated.workspace.removeStack("chartv4");
    await webhook!.send("stop");
});
