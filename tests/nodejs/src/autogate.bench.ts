// A measurement, not a test (not named *.test.ts: `npm test` does not run it): the TypeScript
// autoGate against the hand-placed gate at N ExternalSecrets, the shape of the Go bench's
// `-sections autogate` (bench/autogate.go): External Secrets by a helm.sh/v3:Release (the rendered
// real chart, its webhook a test server on 127.0.0.1 that serves 5 s after the webhook Deployment
// is available), then N ExternalSecrets in one namespace that depend on the release.
//
//   cd tests/nodejs && npx tsc && node dist/tests/nodejs/src/autogate.bench.js [N] [hand,auto,none]
//
// Prints each run's `up` wall time and, for autoGate runs, its autoGateDecide calls (one per
// registration): how many, the bytes sent and their summed latency (a call waits in the provider
// for the facts its decision needs, so that sum is not CPU).
import { monitorEventLoopDelay } from "perf_hooks";
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import * as readiness from "@readiness-io/pulumi-readiness";
import { Cluster, FakeWebhook, localChart, preparePulumi, request, stack, startCluster } from "./harness";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function serveWhenAvailable(c: Cluster, webhook: FakeWebhook, ns: string, name: string, ms: number, cancelled: () => boolean): Promise<boolean> {
    while (!cancelled()) {
        const d = await request(c, "GET", `/apis/apps/v1/namespaces/${ns}/deployments/${name}`);
        if (d.status === 200 && (d.body.status?.availableReplicas ?? 0) > 0) break;
        await sleep(200);
    }
    if (cancelled()) return false;
    await sleep(ms);
    if (cancelled()) return false;
    await webhook.send("start");
    return true;
}

// The decide calls, counted by wrapping the runtime's invoke (the SDK calls it through the module):
// how many, the bytes sent and their summed latency.
const calls = { n: 0, bytes: 0, ms: 0 };
function countPlanCalls(): void {
    const rt = pulumi.runtime as any;
    if (rt.__benchWrapped) return;
    const invoke = rt.invoke;
    rt.invoke = async (tok: string, props: any, opts: any) => {
        if (tok !== "readiness:index:autoGateDecide") return invoke(tok, props, opts);
        calls.n++;
        calls.bytes += JSON.stringify(props).length;
        const t = Date.now();
        try {
            return await invoke(tok, props, opts);
        } finally {
            calls.ms += Date.now() - t;
        }
    };
    rt.__benchWrapped = true;
}

async function main(): Promise<void> {
    const n = Number(process.argv[2] ?? 200);
    const labels = (process.argv[3] ?? "hand,auto").split(",");
    const cluster = await startCluster();
    const hook = await FakeWebhook.start();
    try {
        const env = await preparePulumi();
        const chart = localChart("external-secrets", hook);
        await request(cluster, "POST", "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: "bench-es" } });
        for (const label of labels) {
            const program = async () => {
                if (label.startsWith("auto")) {
                    countPlanCalls();
                    readiness.autoGate({ timeout: "5m" });
                }
                const release = new k8s.helm.v3.Release("external-secrets", {
                    chart, name: "external-secrets", namespace: "external-secrets", createNamespace: true, timeout: 300,
                });
                let deps: pulumi.Resource[] = [release];
                if (label === "hand") {
                    deps = [new readiness.HelmReleaseReady("external-secrets-ready", {
                        name: "external-secrets", namespace: "external-secrets", timeout: "5m", triggers: [release.status.revision],
                    }, { dependsOn: [release] })];
                }
                for (let i = 0; i < n; i++) {
                    new k8s.apiextensions.CustomResource(`es-${i}`, {
                        apiVersion: "external-secrets.io/v1", kind: "ExternalSecret",
                        metadata: { name: `es-${i}`, namespace: "bench-es" },
                        spec: {
                            refreshInterval: "1h", secretStoreRef: { kind: "ClusterSecretStore", name: "vault" },
                            target: { name: `es-${i}` }, dataFrom: [{ extract: { key: "ghcr" } }],
                        },
                    }, { dependsOn: deps });
                }
                return {};
            };
            const s = await stack(env, cluster, { stackName: label, projectName: "benchautogate-ts", program });
            calls.n = calls.bytes = calls.ms = 0;
            let done = false;
            const serving = serveWhenAvailable(cluster, hook, "external-secrets", "external-secrets-webhook", 5_000, () => done);
            const loop = monitorEventLoopDelay({ resolution: 10 });
            loop.enable();
            const cpu0 = process.cpuUsage();
            const start = Date.now();
            let err = "";
            try {
                await s.up();
            } catch (e) {
                err = e instanceof Error ? e.message.slice(0, 300) : String(e);
            } finally {
                done = true;
            }
            const wall = (Date.now() - start) / 1000;
            loop.disable();
            const cpu = process.cpuUsage(cpu0);
            const node = `; this Node process (program and Automation API): ${((cpu.user + cpu.system) / 1e6).toFixed(1)} s CPU, event loop delay p50 ${(loop.percentile(50) / 1e6).toFixed(0)} ms, p99 ${(loop.percentile(99) / 1e6).toFixed(0)} ms, max ${(loop.max / 1e6).toFixed(0)} ms`;
            const served = await serving;
            const state = (await s.exportStack()).deployment.resources as { type: string }[];
            const gates = state.filter((r) => r.type.startsWith("readiness:")).length;
            const plan = label.startsWith("auto") ? ` decide calls ${calls.n}, ${(calls.bytes / 1e6).toFixed(2)} MB sent, ${(calls.ms / 1000).toFixed(1)} s summed invoke latency` : "";
            console.log(`RESULT ${label} n=${n}: up ${wall.toFixed(1)} s, ${gates} gates${plan}${node}${err ? ` ERROR ${err}` : ""} (load ${require("os").loadavg()[0].toFixed(1)})`);
            if (!served) await hook.send("start"); // the chart's webhook intercepts deletes too
            await s.destroy();
            await s.workspace.removeStack(label);
            await hook.send("stop");
        }
    } finally {
        hook.stop();
        await cluster.stop();
    }
}

main().catch((e) => {
    console.error(e);
    process.exit(1);
});
