// readiness.autoGate() on the real pulumi-kubernetes plugin (v4.32.0, @pulumi/kubernetes 4.32.0):
// field reports 000, 001 and 002 as ONE ordinary program with no hand-written gate, the one line
// at its top. External Secrets by a helm.sh/v3:Release (its CRDs inside, its webhook serving
// late) with ExternalSecrets after it (001); cert-manager by a helm.sh/v4:Chart whose own
// ClusterIssuer its own webhook validates (002's shape: a chart's custom resource behind the
// chart's webhook); a Certificate issued late and a Deployment mounting its Secret (000). The
// charts are the rendered real charts as local charts, their webhooks test servers on 127.0.0.1.
// On a fresh cluster the first `up` succeeds and each dependent is created only after its proof
// (creation timestamps); the same program without the line fails with the reports' errors.
// Near miss: a ConfigMap nothing can block gets no gate.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { ChildProcess, execFileSync, spawn } from "child_process";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import * as readline from "readline";
import * as k8s from "@pulumi/kubernetes";
import * as readiness from "@readiness-io/pulumi-readiness";
import { Cluster, FakeWebhook, localChart, preparePulumi, PulumiEnv, repoRoot, request, stack, startCluster } from "./harness";

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

function play(...args: string[]): { done: Promise<string>; stop: () => void } {
    const child: ChildProcess = spawn(playerBin, [kubeconfigPath, ...args], { stdio: ["pipe", "pipe", "inherit"] });
    let last = "";
    readline.createInterface({ input: child.stdout! }).on("line", (l) => (last = l));
    return { done: new Promise((resolve) => child.once("exit", () => resolve(last))), stop: () => child.stdin!.end() };
}

// serveWhenAvailable plays a chart's webhook pod: it serves `ms` after the Deployment has an
// available replica (pod Ready is not webhook serving); it resolves with the time it started.
async function serveWhenAvailable(webhook: FakeWebhook, ns: string, name: string, ms: number, cancelled: () => boolean): Promise<number | undefined> {
    while (!cancelled()) {
        const d = await request(cluster, "GET", `/apis/apps/v1/namespaces/${ns}/deployments/${name}`);
        if (d.status === 200 && (d.body.status?.availableReplicas ?? 0) > 0) break;
        await sleep(200);
    }
    if (cancelled()) return undefined;
    await sleep(ms);
    if (cancelled()) return undefined;
    const started = Date.now();
    await webhook.send("start");
    return started;
}

async function created(apiPath: string): Promise<number> {
    const r = await request(cluster, "GET", apiPath);
    assert.equal(r.status, 200, `GET ${apiPath}: ${JSON.stringify(r.body)}`);
    return Date.parse(r.body.metadata.creationTimestamp);
}

// createdAfter: creationTimestamp has whole seconds; an object created in the second before
// `t` started would pass, one created a second or more before it fails.
async function assertCreatedAfter(apiPath: string, t: number, what: string): Promise<void> {
    const c = await created(apiPath);
    assert.ok(c >= Math.floor(t / 1000) * 1000, `${apiPath} was created at ${new Date(c).toISOString()}, before ${what} (${new Date(t).toISOString()})`);
}

const esPath = (ns: string) => `/apis/external-secrets.io/v1/namespaces/${ns}/externalsecrets/ghcr-pull-secret`;

test("autoGate: field reports 000, 001 and 002 as one gate-free program", { timeout: 1_200_000 }, async () => {
    const esoHook = await FakeWebhook.start();
    const cmHook = await FakeWebhook.start();
    try {
        const esoChart = localChart("external-secrets", esoHook);
        const cmChart = localChart("cert-manager", cmHook);
        // The chart's own custom resource, validated by the chart's own webhook.
        fs.writeFileSync(path.join(cmChart, "templates", "selfsigned-issuer.yaml"),
            "apiVersion: cert-manager.io/v1\nkind: ClusterIssuer\nmetadata: {name: selfsigned}\nspec: {selfSigned: {}}\n");
        const program = (auto: boolean) => async () => {
            if (auto) readiness.autoGate({ timeout: "5m" });
            // 001: External Secrets, then ExternalSecrets that depend on the release.
            const eso = new k8s.helm.v3.Release("external-secrets", {
                chart: esoChart, name: "external-secrets", namespace: "external-secrets", createNamespace: true, timeout: 300,
            });
            const team = new k8s.core.v1.Namespace("team-a", { metadata: { name: "team-a" } });
            for (const ns of ["default", "team-a"]) {
                new k8s.apiextensions.CustomResource(`ghcr-pull-secret-${ns}`, {
                    apiVersion: "external-secrets.io/v1", kind: "ExternalSecret",
                    metadata: { name: "ghcr-pull-secret", namespace: ns },
                    spec: {
                        refreshInterval: "1h", secretStoreRef: { kind: "ClusterSecretStore", name: "vault" },
                        target: { name: "ghcr-pull-secret" }, dataFrom: [{ extract: { key: "ghcr" } }],
                    },
                }, { dependsOn: [eso, team] });
            }
            // 002's shape: a Chart v4 whose ClusterIssuer its own webhook validates.
            const cmNs = new k8s.core.v1.Namespace("cert-manager", { metadata: { name: "cert-manager" } });
            const certManager = new k8s.helm.v4.Chart("cert-manager", { chart: cmChart, namespace: "cert-manager" }, { dependsOn: [cmNs] });
            // 000: a Certificate, and a Deployment that mounts the Secret it produces.
            new k8s.apiextensions.CustomResource("ai-ops-agent-cert", {
                apiVersion: "cert-manager.io/v1", kind: "Certificate",
                metadata: { name: "ai-ops-agent", namespace: "default" },
                spec: { secretName: "ai-ops-agent-tls", dnsNames: ["ai-ops-agent.default.svc"], issuerRef: { name: "selfsigned", kind: "ClusterIssuer" } },
            }, { dependsOn: [certManager] });
            const labels = { app: "ai-ops-agent" };
            new k8s.apps.v1.Deployment("ai-ops-agent", {
                metadata: { name: "ai-ops-agent", namespace: "default" },
                spec: {
                    selector: { matchLabels: labels },
                    template: {
                        metadata: { labels },
                        spec: {
                            containers: [{ name: "agent", image: "ghcr.io/example/ai-ops-agent:1.0", volumeMounts: [{ name: "tls", mountPath: "/tls" }] }],
                            volumes: [{ name: "tls", secret: { secretName: "ai-ops-agent-tls" } }],
                        },
                    },
                },
            });
            // Near miss: nothing in the stack can block it.
            new k8s.core.v1.ConfigMap("app-config", { metadata: { name: "app-config", namespace: "default" }, data: { mode: "prod" } });
            return {};
        };
        // The webhooks intercept deletes too: destroy while they serve.
        const destroy = async (s: Awaited<ReturnType<typeof stack>>, name: string, serving: boolean) => {
            if (!serving) {
                await esoHook.send("start");
                await cmHook.send("start");
            }
            await s.destroy();
            await s.workspace.removeStack(name);
            await esoHook.send("stop");
            await cmHook.send("stop");
        };

        // With the line, on the fresh cluster: the first up succeeds.
        const auto = await stack(env, cluster, { stackName: "auto", projectName: "autogate-ts", program: program(true) });
        let done = false;
        const esoServing = serveWhenAvailable(esoHook, "external-secrets", "external-secrets-webhook", 10_000, () => done);
        const cmServing = serveWhenAvailable(cmHook, "cert-manager", "cert-manager-webhook", 10_000, () => done);
        const issuer = play("issue", "default", "ai-ops-agent", "ai-ops-agent-tls", "3s");
        let res;
        try {
            res = await auto.up({ onOutput: (l) => process.stdout.write(l) });
        } finally {
            done = true;
            issuer.stop();
        }
        const esoStart = await esoServing, cmStart = await cmServing;
        assert.ok(esoStart && cmStart, "a webhook never started serving");
        assert.equal(await issuer.done, "done");
        // Each dependent was created only after its proof.
        for (const ns of ["default", "team-a"]) await assertCreatedAfter(esPath(ns), esoStart!, "External Secrets' webhook served");
        await assertCreatedAfter("/apis/cert-manager.io/v1/clusterissuers/selfsigned", cmStart!, "cert-manager's webhook served");
        // Near miss: the ConfigMap nothing can block went ahead at once, long before either webhook served.
        assert.ok(await created("/api/v1/namespaces/default/configmaps/app-config") < Math.floor(Math.min(esoStart!, cmStart!) / 1000) * 1000,
            "the ConfigMap was held");
        const secretAt = await created("/api/v1/namespaces/default/secrets/ai-ops-agent-tls");
        assert.ok(await created("/apis/apps/v1/namespaces/default/deployments/ai-ops-agent") >= secretAt,
            "the Deployment was created before the Secret it mounts was issued");
        // The gates in the stack, named after what they guard: one per batch key, none for the
        // near miss. (The engine holds the dependents, but does not record dependsOn that a stack
        // transform added in the state's dependencies: the timestamps above are the proof of order.)
        const state = (await auto.exportStack()).deployment.resources as { urn: string; type: string }[];
        const gates = state.filter((r) => r.type.startsWith("readiness:")).map((r) => r.urn.split("::").pop()).sort();
        assert.deepEqual(gates, [
            "auto-admission-certificates.cert-manager.io-default-cert-manager-cert-manager-webhook",
            "auto-admission-clusterissuers.cert-manager.io-cluster-cert-manager-cert-manager-webhook",
            "auto-admission-externalsecrets.external-secrets.io-default-external-secrets",
            "auto-admission-externalsecrets.external-secrets.io-team-a-external-secrets",
            "auto-certificate-default-ai-ops-agent",
            "auto-exists-cert-manager-cert-manager-webhook",
            "auto-helmrelease-external-secrets-external-secrets",
        ]);
        assert.ok(res.summary.result === "succeeded");
        await destroy(auto, "auto", true);
        // The issued Secret outlives its Certificate (as cert-manager leaves it): a fresh start for the next run.
        await request(cluster, "DELETE", "/api/v1/namespaces/default/secrets/ai-ops-agent-tls");

        // Without the line: the field reports' errors (continueOnError: every failure shows). The
        // webhooks do not serve during this up: what a dependent meets when nothing waits for them.
        const bare = await stack(env, cluster, { stackName: "bare", projectName: "autogate-ts", program: program(false) });
        const bareIssuer = play("issue", "default", "ai-ops-agent", "ai-ops-agent-tls", "3s");
        try {
            await assert.rejects(bare.up({ continueOnError: true }), (e: Error) => {
                assert.match(e.message, /failed calling webhook "validate\.externalsecret\.external-secrets\.io"/);
                assert.match(e.message, /failed calling webhook "webhook\.cert-manager\.io"/);
                return true;
            });
        } finally {
            bareIssuer.stop();
        }
        // 000: the Deployment went ahead with no Secret to mount (its pods would wait in ContainerCreating).
        assert.equal((await request(cluster, "GET", "/apis/apps/v1/namespaces/default/deployments/ai-ops-agent")).status, 200);
        assert.equal((await request(cluster, "GET", "/api/v1/namespaces/default/secrets/ai-ops-agent-tls")).status, 404);
        await destroy(bare, "bare", false);
    } finally {
        esoHook.stop();
        cmHook.stop();
    }
});
