// The TypeScript examples (examples/*/ts) run as they are: each example's module exports its
// program, which runs here as an Automation API inline program against the local control plane
// with the real pulumi-kubernetes plugin (v4.32.0, @pulumi/kubernetes 4.32.0). Their charts are
// the rendered real charts as local charts (config `chartPath`), their webhooks the test's
// servers on 127.0.0.1 serving late; what no process runs here is played (cert-manager issuing,
// External Secrets syncing: internal/fakes/cmd/player; CI pushing an image). Each example is
// brought up once and destroyed.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { ChildProcess, execFileSync, spawn } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import * as readline from "readline";
import admission = require("../../../examples/admission/ts/index");
import apisix = require("../../../examples/apisix/ts/index");
import certManager = require("../../../examples/cert-manager/ts/index");
import externalSecrets = require("../../../examples/external-secrets/ts/index");
import image = require("../../../examples/image/ts/index");
import injector = require("../../../examples/injector/ts/index");
import { Cluster, FakeWebhook, localChart, preparePulumi, PulumiEnv, request, repoRoot, stack, startCluster, startRegistry, goBinary } from "./harness";

let cluster: Cluster;
let env: PulumiEnv;
let kubeconfigPath: string;
let playerBin: string;

before(async () => {
    cluster = await startCluster();
    env = await preparePulumi();
    kubeconfigPath = path.join(env.dir, "kubeconfig");
    fs.writeFileSync(kubeconfigPath, cluster.kubeconfig);
    playerBin = goBinary("./internal/fakes/cmd/player");
});
after(async () => { await cluster?.stop(); });

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// play runs one of internal/fakes' players (see internal/fakes/cmd/player); it resolves with
// its last line ("done", or its error) once it ends; stop ends it early.
function play(...args: string[]): { done: Promise<string>; stop: () => void } {
    const child: ChildProcess = spawn(playerBin, [kubeconfigPath, ...args], { stdio: ["pipe", "pipe", "inherit"] });
    let last = "";
    readline.createInterface({ input: child.stdout! }).on("line", (l) => (last = l));
    return { done: new Promise((resolve) => child.once("exit", () => resolve(last))), stop: () => child.stdin!.end() };
}

// serveWhenAvailable plays a chart's webhook pod: it serves `ms` after the Deployment has an
// available replica (pod Ready is not webhook serving).
async function serveWhenAvailable(webhook: FakeWebhook, ns: string, name: string, ms: number, cancelled: () => boolean): Promise<void> {
    while (!cancelled()) {
        const d = await request(cluster, "GET", `/apis/apps/v1/namespaces/${ns}/deployments/${name}`);
        if (d.status === 200 && (d.body.status?.availableReplicas ?? 0) > 0) break;
        await sleep(200);
    }
    if (cancelled()) return;
    await sleep(ms);
    if (!cancelled()) await webhook.send("start");
}

// podContainers dry-runs a Pod in ns and returns its containers' names as the API server would
// store it (after mutating webhooks): what a Pod created now would run.
async function podContainers(ns: string): Promise<string[]> {
    const r = await request(cluster, "POST", `/api/v1/namespaces/${ns}/pods?dryRun=All`, {
        apiVersion: "v1", kind: "Pod", metadata: { generateName: "uninjected-", namespace: ns },
        spec: { containers: [{ name: "web", image: "registry.local/web:1" }] },
    });
    assert.equal(r.status, 201, `dry-run of a Pod in ${ns}: ${JSON.stringify(r.body)}`);
    return r.body.spec.containers.map((c: { name: string }) => c.name);
}

async function namespace(name: string): Promise<void> {
    const r = await request(cluster, "POST", "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name } });
    assert.ok(r.status === 201 || r.status === 409, `creating namespace ${name}: ${JSON.stringify(r.body)}`);
}

test("example cert-manager (TypeScript) runs", { timeout: 600_000 }, async () => {
    const webhook = await FakeWebhook.start();
    try {
        const s = await stack(env, cluster, { stackName: "dev", projectName: "readiness-example-cert-manager-ts", program: async () => certManager() });
        await s.setConfig("chartPath", { value: localChart("cert-manager", webhook) });
        let done = false;
        const serving = serveWhenAvailable(webhook, "cert-manager", "cert-manager-webhook", 3000, () => done);
        const issuer = play("issue", "default", "ai-ops-agent", "ai-ops-agent-tls", "2s");
        let res;
        try {
            res = await s.up();
        } finally {
            done = true;
            await serving;
            issuer.stop();
        }
        assert.equal(await issuer.done, "done");
        assert.ok(res.outputs.certificateExpires?.value, "certificateExpires is the issued certificate's notAfter");
        await s.destroy();
        await s.workspace.removeStack("dev");
    } finally {
        webhook.stop();
    }
});

test("example external-secrets (TypeScript) runs", { timeout: 600_000 }, async () => {
    const namespaces = ["default", "hello-world", "nodejs-demo", "storage-validator"];
    for (const ns of namespaces.slice(1)) await namespace(ns);
    const webhook = await FakeWebhook.start();
    try {
        const s = await stack(env, cluster, { stackName: "dev", projectName: "readiness-example-external-secrets-ts", program: async () => externalSecrets() });
        await s.setConfig("chartPath", { value: localChart("external-secrets", webhook) });
        let done = false;
        const serving = serveWhenAvailable(webhook, "external-secrets", "external-secrets-webhook", 3000, () => done);
        const eso = play("sync-externalsecrets", "ghcr-pull-secret", "1s", ...namespaces);
        try {
            await s.up();
        } finally {
            done = true;
            await serving;
            eso.stop();
        }
        assert.equal(await eso.done, "done");
        await s.destroy(); // the chart's webhook intercepts deletes too: it still serves
        await s.workspace.removeStack("dev");
    } finally {
        webhook.stop();
    }
});

test("example injector (TypeScript) runs", { timeout: 600_000 }, async () => {
    // Linkerd's charts are not among the rendered charts: chartPath holds charts shaped as
    // Linkerd's proxy injector (internal/charts.LinkerdShaped), its webhook (failurePolicy
    // Ignore) sent to this server, which injects a linkerd-proxy container. It serves 3 s after
    // Linkerd's release is deployed, as the injector pod does; at that moment only the gate holds
    // `web` back, and a Pod created then would run without a proxy, silently. It runs before the
    // tests that create the namespace apps themselves (the example creates it).
    const webhook = await FakeWebhook.start();
    try {
        await webhook.send("mode inject:linkerd-proxy");
        const s = await stack(env, cluster, { stackName: "dev", projectName: "readiness-example-injector-ts", program: async () => injector() });
        await s.setConfig("chartPath", { value: localChart("linkerd", webhook) });
        // Placeholders: the charts shaped as Linkerd's do not read them.
        for (const key of ["trustAnchorPEM", "issuerCrtPEM", "issuerKeyPEM"]) {
            await s.setConfig(key, { value: `test ${key}`, secret: key === "issuerKeyPEM" });
        }
        let done = false;
        const serving = (async () => {
            while (!done) {
                const r = await request(cluster, "GET", "/api/v1/namespaces/linkerd/secrets?labelSelector=owner%3Dhelm%2Cstatus%3Ddeployed");
                if ((r.body?.items ?? []).some((i: any) => (i.metadata.labels?.name ?? "").startsWith("linkerd-control-plane"))) break;
                await sleep(200);
            }
            if (done) return "up ended before Linkerd's release was deployed";
            await sleep(3000);
            // Whatever the checks find, the injector then serves, so that `up` ends and the test reports.
            let found = "served";
            const web = await request(cluster, "GET", "/apis/apps/v1/namespaces/apps/deployments/web");
            if (web.status !== 404) found = `web exists (${web.status}) before the injector serves: the gate did not hold it`;
            else if ((await podContainers("apps")).includes("linkerd-proxy")) found = "a Pod was injected before the injector served";
            await webhook.send("start");
            return found;
        })();
        let res;
        try {
            res = await s.up();
        } finally {
            done = true;
        }
        assert.equal(await serving, "served");
        assert.equal(res.outputs.injectorFailurePolicy?.value, "Ignore");
        const pods = await request(cluster, "GET", "/api/v1/namespaces/apps/pods?labelSelector=app%3Dweb");
        assert.ok(pods.body.items.length > 0, "web has no Pods");
        for (const p of pods.body.items) {
            assert.ok(p.spec.containers.some((c: { name: string }) => c.name === "linkerd-proxy"),
                `Pod ${p.metadata.name} runs without linkerd-proxy: the gate let web through before the injector served`);
        }
        await s.destroy();
        await s.workspace.removeStack("dev");
    } finally {
        // After a failure the stack stays: its Ignore webhook, left pointing at a server gone,
        // would hold every later gate on Pods (they wait for such a webhook to answer).
        await request(cluster, "DELETE", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/linkerd-proxy-injector-webhook-config");
        webhook.stop();
    }
});

test("example apisix (TypeScript) runs", { timeout: 600_000 }, async () => {
    // The `apisix` umbrella chart is not among the rendered charts: chartPath is the rendered
    // apisix-ingress-controller chart (its CRDs, Deployment, webhook configuration with every
    // webhook Fail, sent to this server) beside a gateway shaped as the umbrella's
    // (internal/charts.APISIXShaped). The server plays the controller's webhook: it serves 3 s
    // after the release is deployed; at that moment only the gates hold the routes and the
    // GatewayProxy back, and creating the GatewayProxy then fails the report's way.
    const webhook = await FakeWebhook.start();
    const routes = "/apis/apisix.apache.org/v2/namespaces/apisix/apisixroutes";
    const proxies = "/apis/apisix.apache.org/v1alpha1/namespaces/apisix/gatewayproxies";
    const apps = ["hello-world", "nodejs-demo", "grafana"];
    try {
        const s = await stack(env, cluster, { stackName: "dev", projectName: "readiness-example-apisix-ts", program: async () => apisix() });
        await s.setConfig("chartPath", { value: localChart("apisix", webhook) });
        let done = false;
        const serving = (async () => {
            while (!done) {
                const r = await request(cluster, "GET", "/api/v1/namespaces/apisix/secrets?labelSelector=owner%3Dhelm%2Cname%3Dapisix%2Cstatus%3Ddeployed");
                if ((r.body?.items ?? []).length > 0) break;
                await sleep(200);
            }
            if (done) return "up ended before the apisix release was deployed";
            await sleep(3000);
            // Whatever the checks find, the webhook then serves, so that `up` ends and the test reports.
            const found: string[] = [];
            for (const path of [...apps.map((a) => `${routes}/${a}`), `${proxies}/apisix-config`]) {
                const r = await request(cluster, "GET", path);
                if (r.status !== 404) found.push(`${path} exists (${r.status}) before the webhook serves: the gate did not hold it`);
            }
            const dry = await request(cluster, "POST", `${proxies}?dryRun=All`, {
                apiVersion: "apisix.apache.org/v1alpha1", kind: "GatewayProxy", metadata: { name: "apisix-config", namespace: "apisix" },
                spec: { provider: { type: "ControlPlane", controlPlane: { endpoints: ["http://apisix-admin.apisix.svc:9180"],
                    auth: { type: "AdminKey", adminKey: { value: "x" } } } } },
            });
            const msg: string = dry.body?.message ?? "";
            if (!msg.includes('failed calling webhook "vgatewayproxy-v1alpha1.kb.io"') || !msg.includes("connection refused")) {
                found.push(`creating the GatewayProxy while the webhook is down: ${dry.status} ${msg}, not the report's error`);
            }
            await webhook.send("start");
            return found.length ? found.join("; ") : "served";
        })();
        try {
            await s.up();
        } finally {
            done = true;
        }
        assert.equal(await serving, "served");
        assert.ok(await webhook.calls() > 0, "up succeeded without the ingress controller's webhooks ever answering");
        for (const path of [...apps.map((a) => `${routes}/${a}`), `${proxies}/apisix-config`]) {
            assert.equal((await request(cluster, "GET", path)).status, 200, `${path} was not created`);
        }
        await s.destroy();
        await s.workspace.removeStack("dev");
    } finally {
        webhook.stop();
    }
});

test("example admission (TypeScript) runs", { timeout: 600_000 }, async () => {
    for (const ns of ["hello-world", "nodejs-demo", "storage-validator", "apps"]) await namespace(ns);
    // The sidecar injector the example's second gate proves by its mutation: failurePolicy
    // Ignore, Pods in apps. It plays an istiod that comes up late: it serves 3 s after the gate
    // began (the engine's event for it), once a dry-run showed that a Pod created then would
    // run without the sidecar, silently.
    const injector = await FakeWebhook.start();
    const webhook = await FakeWebhook.start();
    const mwc = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations";
    try {
        await injector.send("mode inject:istio-proxy");
        const r = await request(cluster, "POST", mwc, {
            apiVersion: "admissionregistration.k8s.io/v1", kind: "MutatingWebhookConfiguration", metadata: { name: "examples-istio-injector" },
            webhooks: [{ name: "sidecar-injector.istio.io", admissionReviewVersions: ["v1"], sideEffects: "None", failurePolicy: "Ignore",
                clientConfig: { url: injector.url, caBundle: injector.caBundle },
                namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "apps" } },
                rules: [{ apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["pods"] }] }],
        });
        assert.equal(r.status, 201, `registering the injector: ${JSON.stringify(r.body)}`);
        const s = await stack(env, cluster, { stackName: "dev", projectName: "readiness-example-admission-ts", program: async () => admission() });
        await s.setConfig("chartPath", { value: localChart("external-secrets", webhook) });
        let done = false;
        const serving = serveWhenAvailable(webhook, "external-secrets", "external-secrets-webhook", 8000, () => done);
        const order: string[] = [];
        let injectorServing: Promise<void> | undefined;
        const gate = "::web-injected";
        let res;
        try {
            res = await s.up({ onEvent: (e) => {
                if (e.resourcePreEvent?.metadata.urn.endsWith(gate) && !injectorServing) {
                    order.push("gate began");
                    injectorServing = sleep(3000).then(async () => {
                        try {
                            assert.deepEqual(await podContainers("apps"), ["web"], "a Pod was injected before the injector served");
                        } finally {
                            await injector.send("start"); // so that `up` ends whatever the check found
                            order.push("injector serves");
                        }
                    });
                }
                if (e.resOutputsEvent?.metadata.urn.endsWith(gate)) order.push("gate passed");
            } });
        } finally {
            done = true;
            await serving;
        }
        await injectorServing;
        assert.deepEqual(order, ["gate began", "injector serves", "gate passed"], "the gate did not wait for the injector");
        assert.deepEqual(res.outputs.injected?.value, ["Pod/apps/web"]);
        assert.ok((res.outputs.webhooksThatWereDown?.value ?? []).length > 0,
            "the gate never met External Secrets' webhook down, so it proved nothing here");
        await s.destroy();
        await s.workspace.removeStack("dev");
    } finally {
        await request(cluster, "DELETE", `${mwc}/examples-istio-injector`);
        webhook.stop();
        injector.stop();
    }
});

test("example image (TypeScript) runs", { timeout: 300_000 }, async () => {
    const registry = await startRegistry(["-user", "ci:examples-ts-pass"]);
    try {
        await namespace("apps");
        const dockerconfig = { auths: { [registry.host]: { auth: Buffer.from("ci:examples-ts-pass").toString("base64") } } };
        const r = await request(cluster, "POST", "/api/v1/namespaces/apps/secrets", {
            apiVersion: "v1", kind: "Secret", metadata: { name: "ghcr-pull-secret" }, type: "kubernetes.io/dockerconfigjson",
            data: { ".dockerconfigjson": Buffer.from(JSON.stringify(dockerconfig)).toString("base64") },
        });
        assert.equal(r.status, 201, `creating the pull Secret: ${JSON.stringify(r.body)}`);
        const s = await stack(env, cluster, { stackName: "dev", projectName: "readiness-example-image-ts", program: async () => image() });
        await s.setConfig("imageTag", { value: "3f2a9c1" });
        await s.setConfig("imageRepository", { value: `${registry.host}/acme/api` });
        // CI pushes the image while `pulumi up` runs.
        const pushed = sleep(3000).then(() => registry.push("index acme/api:3f2a9c1 linux/amd64 linux/arm64"));
        const res = await s.up();
        const digest = await pushed;
        assert.equal(res.outputs.digest?.value, digest);
        const d = await request(cluster, "GET", "/apis/apps/v1/namespaces/apps/deployments/api");
        const img: string = d.body.spec.template.spec.containers[0].image;
        assert.ok(img.startsWith(`${registry.host}/acme/api@sha256:`), `the Deployment runs ${img}, not the pinned image`);
        await s.destroy();
        await s.workspace.removeStack("dev");
    } finally {
        registry.stop();
    }
});
