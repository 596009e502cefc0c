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
import certManager = require("../../../examples/cert-manager/ts/index");
import externalSecrets = require("../../../examples/external-secrets/ts/index");
import image = require("../../../examples/image/ts/index");
import { Cluster, FakeWebhook, localChart, preparePulumi, PulumiEnv, request, repoRoot, stack, startCluster, startRegistry } from "./harness";

let cluster: Cluster;
let env: PulumiEnv;
let kubeconfigPath: string;
const playerBin = path.join(os.tmpdir(), "readiness-player");

before(async () => {
    cluster = await startCluster();
    env = await preparePulumi();
    kubeconfigPath = path.join(env.dir, "kubeconfig");
    fs.writeFileSync(kubeconfigPath, cluster.kubeconfig);
    execFileSync("go", ["build", "-o", playerBin, "./internal/fakes/cmd/player"], { cwd: repoRoot, stdio: "inherit" });
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

test("example admission (TypeScript) runs", { timeout: 600_000 }, async () => {
    for (const ns of ["hello-world", "nodejs-demo", "storage-validator", "apps"]) await namespace(ns);
    // The sidecar injector the example's second gate proves by its mutation: failurePolicy
    // Ignore, Pods in apps, serving (as an istiod that is up).
    const injector = await FakeWebhook.start();
    const webhook = await FakeWebhook.start();
    const mwc = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations";
    try {
        await injector.send("mode inject:istio-proxy");
        await injector.send("start");
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
        let res;
        try {
            res = await s.up();
        } finally {
            done = true;
            await serving;
        }
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
