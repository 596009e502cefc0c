// Field reports 000, 001 and 002 from TypeScript stacks with the real pulumi-kubernetes
// (@pulumi/kubernetes, plugin v4.32.0), as tests/e2e's Go tests: the charts (the rendered real
// charts wrapped as local charts, their webhooks the test's servers on 127.0.0.1) installed by
// k8s.helm.v3.Release, then what each report failed to create, made by pulumi-kubernetes too.
// Without the gate the stack fails with the report's error; with it the stack succeeds on the fresh
// cluster, and then (the last test) 000's and 001's gated stacks, whose Go tests run them once, are
// rebuilt (destroy, then up) until each came up ROUNDS times, as field report 004's rebuild loop
// does (002's Go test rebuilds it five times); the two stacks rebuild side by side.
// The test plays only what no process runs here: the webhook servers (serving late),
// cert-manager issuing the Secret, and the kubelet mounting it.
// Report 002 also with a k8s.helm.v4.Chart (no Helm release record), gated by ChartReady given
// `chart.resources` as it is.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import * as readiness from "@readiness-io/pulumi-readiness";
import { cachesReady, Cluster, createdAt, FakeWebhook, localChart, play, preparePulumi, PulumiEnv, request, serveWhenAvailable, sleep, stack, startCluster } from "./harness";

let cluster: Cluster;
let env: PulumiEnv;
let webhook: FakeWebhook | undefined;

before(async () => {
    cluster = await startCluster();
    env = await preparePulumi();
    webhook = await FakeWebhook.start();
});
after(async () => {
    for (const r of rebuilds.splice(0)) await r.finish().catch(() => undefined);
    webhook?.stop();
    await cluster?.stop();
});

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

// Field report 004: the gated stacks destroyed and brought up again, ROUNDS times in all
// (READINESS_REBUILD_ROUNDS=1 for a quick local run).
const ROUNDS = Number(process.env.READINESS_REBUILD_ROUNDS ?? 5);

// A report's gated stack, kept for the rebuild test: round(n) runs one up + destroy, finish
// removes the stack and stops its webhook.
interface Rebuild { report: string; round: (n: number) => Promise<void>; finish: () => Promise<void> }
const rebuilds: Rebuild[] = [];

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
    const late = serveWhenAvailable(cluster, webhook!, "ingress-nginx", "ingress-nginx-controller", 5000, () => done);
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

test("field report 000: a Deployment mounting a cert-manager Certificate's Secret needs CertificateReady", { timeout: 900_000 }, async () => {
    const hook = await FakeWebhook.start();
    try {
        await hook.send("start"); // cert-manager's own webhook is not this report's story: it serves from the start
        const chart = localChart("cert-manager", hook);
        const labels = { app: "ai-ops-agent" };
        const program = (gated: boolean) => async () => {
            const release = new k8s.helm.v3.Release("cert-manager", {
                chart, name: "cert-manager", namespace: "cert-manager", createNamespace: true, timeout: 180,
            });
            const cert = new k8s.apiextensions.CustomResource("ai-ops-agent-cert", {
                apiVersion: "cert-manager.io/v1", kind: "Certificate",
                metadata: { name: "ai-ops-agent", namespace: "default" },
                spec: { secretName: "ai-ops-agent-tls", dnsNames: ["ai-ops-agent.example.test"], issuerRef: { name: "vault-issuer", kind: "ClusterIssuer" } },
            }, { dependsOn: [release] });
            let before: pulumi.Resource = cert;
            if (gated) {
                before = new readiness.CertificateReady("ai-ops-agent-tls", { name: "ai-ops-agent", namespace: "default", timeout: "2m" }, { dependsOn: [cert] });
            }
            new k8s.apps.v1.Deployment("ai-ops-agent", {
                // pulumi-kubernetes awaits the rollout; 6 s is this stack's patience (the Secret comes at +8 s without the gate).
                metadata: { name: "ai-ops-agent", namespace: "default", annotations: { "pulumi.com/timeoutSeconds": "6" } },
                spec: {
                    selector: { matchLabels: labels },
                    template: {
                        // kwok leaves these pods to the kubelet player, which mounts their Secret.
                        metadata: { labels, annotations: { "pod-ready.stage.kwok.x-k8s.io/delay": "1h" } },
                        spec: {
                            nodeSelector: { type: "kwok" },
                            containers: [{ name: "agent", image: "registry.local/agent:1", volumeMounts: [{ name: "tls", mountPath: "/etc/tls", readOnly: true }] }],
                            volumes: [{ name: "tls", secret: { secretName: "ai-ops-agent-tls" } }],
                        },
                    },
                },
            }, { dependsOn: [before] });
            return {};
        };
        // run brings the stack up with cert-manager (the Secret `issueAfter` the Certificate) and the
        // kubelet played; it returns up's error, if any, and the kubelet's FailedMount messages.
        const run = async (s: Awaited<ReturnType<typeof stack>>, issueAfter: string) => {
            const kubelet = play(cluster, "kubelet", "default", "app=ai-ops-agent");
            const issuer = play(cluster, "issue", "default", "ai-ops-agent", "ai-ops-agent-tls", issueAfter);
            let err: Error | undefined;
            try {
                await s.up();
            } catch (e) {
                err = e as Error;
            } finally {
                kubelet.stop();
                issuer.stop();
            }
            const mounts = (await kubelet.done).filter((l) => l.startsWith("failed-mount: "));
            await issuer.done;
            return { err, mounts };
        };
        const reset = async (s: Awaited<ReturnType<typeof stack>>) => {
            await s.destroy();
            // The issued Secret outlives its Certificate (as cert-manager leaves it).
            await request(cluster, "DELETE", "/api/v1/namespaces/default/secrets/ai-ops-agent-tls");
        };

        // Without the gate: the pod meets the report's FailedMount, and pulumi-kubernetes fails the
        // Deployment, whose rollout it awaits, before the Secret exists.
        const bare = await stack(env, cluster, { stackName: "nogate", projectName: "report000-ts", program: program(false) });
        const b = await run(bare, "8s");
        assert.ok(b.err, "without the gate the stack must fail");
        assert.match(b.err.message, /'ai-ops-agent' timed out waiting to be Ready/, b.err.message);
        assert.match(b.err.message, /Minimum number of live Pods was not attained/);
        assert.ok(b.mounts.length > 0 && b.mounts[0].includes('MountVolume.SetUp failed for volume "tls" : secret "ai-ops-agent-tls" not found'),
            `the kubelet must report the FailedMount; it saw ${JSON.stringify(b.mounts)}`);
        await reset(bare);
        await bare.workspace.removeStack("nogate");

        // With the gate: the Deployment is created after the Secret and mounts it at once.
        const gated = await stack(env, cluster, { stackName: "gated", projectName: "report000-ts", program: program(true) });
        const round = async (n: number) => {
            const t0 = Date.now();
            const g = await run(gated, "2s");
            const tUp = Date.now();
            assert.equal(g.err, undefined, `round ${n}: ${g.err?.message}`);
            assert.deepEqual(g.mounts, [], `round ${n}: with CertificateReady the pod must mount its Secret at once`);
            assert.ok(await createdAt(cluster, "/apis/apps/v1/namespaces/default/deployments/ai-ops-agent") >=
                await createdAt(cluster, "/api/v1/namespaces/default/secrets/ai-ops-agent-tls"), `round ${n}: the Deployment came before its Secret`);
            await reset(gated);
            console.log(`report 000 gated, up ${n}/${ROUNDS}: up ${((tUp - t0) / 1000).toFixed(1)} s, destroy ${((Date.now() - tUp) / 1000).toFixed(1)} s`);
        };
        await round(1);
        rebuilds.push({ report: "000", round, finish: async () => { await gated.workspace.removeStack("gated"); hook.stop(); } });
    } catch (e) {
        hook.stop();
        throw e;
    }
});

test("field report 001: ExternalSecrets and a ClusterSecretStore after a Helm release of External Secrets need HelmReleaseReady", { timeout: 900_000 }, async () => {
    const hook = await FakeWebhook.start();
    try {
        const chart = localChart("external-secrets", hook);
        // pulumi-kubernetes deletes with foreground propagation by default, which waits for the garbage
        // collector; the collector learns a newly installed CRD's kind only at its next discovery sync
        // (every 30 s), so each rebuild's destroy waited up to 30 s per custom resource. Deletion is
        // not this report's story: background propagation.
        const background = { "pulumi.com/deletionPropagationPolicy": "background" };
        const program = (gated: boolean) => async () => {
            const release = new k8s.helm.v3.Release("external-secrets", {
                chart, name: "external-secrets", namespace: "external-secrets", createNamespace: true, timeout: 180,
            });
            let before: pulumi.Resource = release;
            if (gated) {
                before = new readiness.HelmReleaseReady("external-secrets-ready", {
                    name: "external-secrets", namespace: "external-secrets", timeout: "2m", triggers: [release.status.revision],
                }, { dependsOn: [release] });
            }
            new k8s.apiextensions.CustomResource("pulumi-esc", {
                apiVersion: "external-secrets.io/v1", kind: "ClusterSecretStore", metadata: { name: "pulumi-esc", annotations: background },
                spec: { provider: { fake: { data: [{ key: "ghcr", value: "{}" }] } } },
            }, { dependsOn: [before] });
            const team = new k8s.core.v1.Namespace("hello-world", { metadata: { name: "hello-world" } });
            for (const ns of ["default", "hello-world"]) {
                new k8s.apiextensions.CustomResource(`ghcr-pull-secret-${ns}`, {
                    apiVersion: "external-secrets.io/v1", kind: "ExternalSecret",
                    metadata: { name: "ghcr-pull-secret", namespace: ns, annotations: background },
                    spec: {
                        refreshInterval: "1h", secretStoreRef: { kind: "ClusterSecretStore", name: "pulumi-esc" },
                        target: { name: "ghcr-pull-secret" }, dataFrom: [{ extract: { key: "ghcr" } }],
                    },
                }, { dependsOn: [before, team] });
            }
            return {};
        };
        // The chart's webhook also intercepts deletes: destroy while it serves. The release's CRDs
        // are deleted with it: a CRD deleted while the API server's cache of its objects is still
        // starting stays Terminating until the CRD finalizer's backoff retries (minutes on a loaded
        // machine: "could not list instances: storage is (re)initializing"), so the stack is
        // destroyed only once every one of them is listed from that cache.
        let cacheWait = 0, slowest = "";
        const destroy = async (s: Awaited<ReturnType<typeof stack>>) => {
            const tc = Date.now();
            await cachesReady(cluster, "external-secrets.io");
            cacheWait = Date.now() - tc;
            await hook.setServing(true);
            let out = "";
            await s.destroy({ onOutput: (l) => (out += l) });
            slowest = out.split("\n").filter((l) => /deleted \(\d+s\)/.test(l)).map((l) => l.trim()).join("; ");
            await hook.setServing(false);
        };

        // Without the gate: `dependsOn` on the release is not enough (continueOnError: every failure shows).
        const bare = await stack(env, cluster, { stackName: "nogate", projectName: "report001-ts", program: program(false) });
        await assert.rejects(bare.up({ continueOnError: true }), (e: Error) => {
            assert.match(e.message, /failed calling webhook "validate\.externalsecret\.external-secrets\.io"/);
            assert.match(e.message, /failed calling webhook "validate\.clustersecretstore\.external-secrets\.io"/);
            return true;
        });
        await destroy(bare);
        await bare.workspace.removeStack("nogate");

        // With the gate: the webhook serves 1 s after its Deployment is available.
        const gated = await stack(env, cluster, { stackName: "gated", projectName: "report001-ts", program: program(true) });
        const round = async (n: number) => {
            const t0 = Date.now();
            let done = false;
            const late = serveWhenAvailable(cluster, hook, "external-secrets", "external-secrets-webhook", 1000, () => done);
            try {
                await gated.up();
            } finally {
                done = true;
            }
            const tUp = Date.now();
            const servedAt = await late;
            assert.ok(servedAt, `round ${n}: the webhook never started serving`);
            for (const p of ["/apis/external-secrets.io/v1/clustersecretstores/pulumi-esc",
                             "/apis/external-secrets.io/v1/namespaces/default/externalsecrets/ghcr-pull-secret",
                             "/apis/external-secrets.io/v1/namespaces/hello-world/externalsecrets/ghcr-pull-secret"]) {
                assert.ok(await createdAt(cluster, p) >= Math.floor(servedAt! / 1000) * 1000, `round ${n}: ${p} was created before the webhook served`);
            }
            await destroy(gated);
            console.log(`report 001 gated, up ${n}/${ROUNDS}: up ${((tUp - t0) / 1000).toFixed(1)} s (webhook served after ${((servedAt! - t0) / 1000).toFixed(1)} s), destroy ${((Date.now() - tUp) / 1000).toFixed(1)} s (of which ${(cacheWait / 1000).toFixed(1)} s for the CRDs' caches; ${slowest})`);
        };
        await round(1);
        rebuilds.push({ report: "001", round, finish: async () => { await gated.workspace.removeStack("gated"); hook.stop(); } });
    } catch (e) {
        hook.stop();
        throw e;
    }
});

test("field report 004: the gated stacks of 000 and 001 rebuilt, side by side, until each came up ROUNDS times", { timeout: 1_200_000 }, async () => {
    assert.deepEqual(rebuilds.map((r) => r.report).sort(), ["000", "001"], "a report's test failed before its gated stack came up");
    const t0 = Date.now();
    await Promise.all(rebuilds.map(async (r) => {
        for (let n = 2; n <= ROUNDS; n++) await r.round(n);
    }));
    console.log(`rebuilds 2-${ROUNDS} of 000 and 001 side by side: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    for (const r of rebuilds.splice(0)) await r.finish();
});
