// Field reports 000, 001 and 002 from TypeScript stacks on a real node, as tests/e2e/realnode's Go
// tests: a control plane with containerd, a kubelet and kube-proxy (`localcluster up-real-node`),
// real cert-manager v1.11.5 and External Secrets v0.11.0 pods built from their Go modules,
// installed by @pulumi/kubernetes' k8s.helm.v3.Release of their real charts (and ingress-nginx's
// real chart, its webhook served by a stand-in pod made here). Nothing is played: the webhooks
// answer from pods behind their Services; the FailedMount is the kubelet's.
// Each report fails without a gate with the real error, and passes with the hand-placed gate and
// with autoGate's line. Skipped (with the reason) where this machine cannot run a node; under CI
// that fails instead.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import * as https from "https";
import * as path from "path";
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import { Stack } from "@pulumi/pulumi/automation";
import * as readiness from "@readiness-io/pulumi-readiness";
import { cachesReady, Cluster, crdsGone, nodeRequirements, podsGone, preparePulumi, PulumiEnv, request, stack, startCluster, tempDir } from "./harness";

const missing = nodeRequirements();
const skip = missing && !process.env.CI ? `this machine lacks ${missing} to run a real node` : false;

let cluster: Cluster;
let env: PulumiEnv;
let charts: string;

before(async () => {
    if (missing) {
        if (process.env.CI) throw new Error(`a real node needs ${missing}; .ci/run installs them`);
        return;
    }
    charts = tempDir("readiness-realnode-charts-");
    const t0 = Date.now();
    cluster = await startCluster({ realNode: true, chartsDir: charts });
    console.log(`real node with both charts' images ready in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    env = await preparePulumi();
});
after(async () => { await cluster?.stop(); });

const secs = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

// gatesOf lists the stack's readiness resources as "Type name".
async function gatesOf(s: Stack): Promise<string[]> {
    const state = (await s.exportStack()).deployment.resources as { urn: string; type: string }[];
    return state.filter((r) => r.type.startsWith("readiness:index:"))
        .map((r) => `${r.type.replace("readiness:index:", "")} ${r.urn.split("::").pop()}`).sort();
}

// watchFailedMounts collects the kubelet's FailedMount events in ns from now (a watch, as the
// Go test's); it resolves once the watch is open, to a function that stops it and returns their
// messages.
function watchFailedMounts(c: Cluster, ns: string): Promise<() => string[]> {
    return new Promise((resolve, reject) => {
        const msgs: string[] = [];
        const url = new URL(`/api/v1/namespaces/${ns}/events?watch=1&fieldSelector=${encodeURIComponent("reason=FailedMount")}`, c.server);
        const req = https.get(url, { ca: c.ca, headers: { Authorization: `Bearer ${c.token}` } }, (res) => {
            if (res.statusCode !== 200) return reject(new Error(`watch events in ${ns}: ${res.statusCode}`));
            let buf = "";
            res.on("data", (d) => {
                buf += d;
                for (let i = buf.indexOf("\n"); i >= 0; i = buf.indexOf("\n")) {
                    const ev = JSON.parse(buf.slice(0, i));
                    buf = buf.slice(i + 1);
                    if (ev.object?.source?.component === "kubelet") msgs.push(ev.object.message);
                }
            });
            res.on("error", () => undefined); // the destroy below ends it
            resolve(() => { req.destroy(); return msgs; });
        });
        req.on("error", reject);
    });
}

// dropLeases deletes the leader-election Leases in ns whose names start with prefix, as a rebuilt
// cluster starts without them. cert-manager v1.11 keeps its Leases after an uninstall; a reinstall
// within their 60 s leaseDuration waits them out, and until then its webhook serves a CA the
// cainjector has not injected (`x509: certificate signed by unknown authority`), which can fail the
// chart's startupapicheck hook. Real, but not this test's story (see the Go test's dropLeases).
async function dropLeases(c: Cluster, ns: string, prefix: string): Promise<void> {
    const leases = await request(c, "GET", `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases`);
    assert.equal(leases.status, 200, JSON.stringify(leases.body));
    for (const l of leases.body.items as any[]) {
        if (!l.metadata.name.startsWith(prefix)) continue;
        const d = await request(c, "DELETE", `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/${l.metadata.name}`);
        assert.ok(d.status === 200 || d.status === 404, `delete lease ${l.metadata.name}: ${d.status}`);
    }
}

// webhookPodReadyAt is when the first pod matching selector in ns became Ready (whole seconds).
async function webhookPodReadyAt(c: Cluster, ns: string, selector: string): Promise<number> {
    const pods = await request(c, "GET", `/api/v1/namespaces/${ns}/pods?labelSelector=${encodeURIComponent(selector)}`);
    assert.ok(pods.status === 200 && pods.body.items.length > 0, `no pod ${selector} in ${ns}: ${pods.status}`);
    const ready = (pods.body.items[0].status.conditions ?? []).find((c: any) => c.type === "Ready" && c.status === "True");
    assert.ok(ready, `pod ${pods.body.items[0].metadata.name} is not Ready`);
    return Date.parse(ready.lastTransitionTime);
}

type Mode = "none" | "gate" | "autogate";

test("real node, field report 000: a Deployment mounting a cert-manager Certificate's Secret (real kubelet, real cert-manager)", { skip, timeout: 1_200_000 }, async () => {
    const chart = path.join(charts, "cert-manager");
    const ns = "ai-ops";
    const program = (mode: Mode) => async () => {
        if (mode === "autogate") readiness.autoGate({ timeout: "3m" });
        // With its CRDs; Helm runs the chart's startupapicheck hook and waits for the Deployments.
        const release = new k8s.helm.v3.Release("cert-manager", {
            chart, name: "cert-manager", namespace: "cert-manager", createNamespace: true,
            values: { installCRDs: true }, timeout: 240,
        });
        // A CA issuer bootstrapped from a self-signed one (cert-manager's documented pattern).
        const selfSigned = new k8s.apiextensions.CustomResource("selfsigned", {
            apiVersion: "cert-manager.io/v1", kind: "ClusterIssuer", metadata: { name: "selfsigned" }, spec: { selfSigned: {} },
        }, { dependsOn: [release] });
        const caCert = new k8s.apiextensions.CustomResource("readiness-ca", {
            apiVersion: "cert-manager.io/v1", kind: "Certificate", metadata: { name: "readiness-ca", namespace: "cert-manager" },
            spec: { isCA: true, commonName: "readiness-ca", secretName: "readiness-ca", issuerRef: { name: "selfsigned", kind: "ClusterIssuer" } },
        }, { dependsOn: [selfSigned] });
        const caIssuer = new k8s.apiextensions.CustomResource("ca-issuer", {
            apiVersion: "cert-manager.io/v1", kind: "ClusterIssuer", metadata: { name: "ca-issuer" }, spec: { ca: { secretName: "readiness-ca" } },
        }, { dependsOn: [caCert] });
        const aiOps = new k8s.core.v1.Namespace("ns-ai-ops", { metadata: { name: ns } });
        // The report's Certificate, and the Deployment mounting its Secret.
        const cert = new k8s.apiextensions.CustomResource("ai-ops-agent-cert", {
            apiVersion: "cert-manager.io/v1", kind: "Certificate", metadata: { name: "ai-ops-agent", namespace: ns },
            spec: { secretName: "ai-ops-agent-tls", dnsNames: ["ai-ops-agent.ai-ops.svc"], issuerRef: { name: "ca-issuer", kind: "ClusterIssuer" } },
        }, { dependsOn: [caIssuer, aiOps] });
        let before: pulumi.Resource = cert;
        if (mode === "gate") {
            before = new readiness.CertificateReady("ai-ops-agent-tls", { name: "ai-ops-agent", namespace: ns, timeout: "3m" }, { dependsOn: [cert] });
        }
        const labels = { app: "ai-ops-agent" };
        new k8s.apps.v1.Deployment("ai-ops-agent", {
            metadata: { name: "ai-ops-agent", namespace: ns },
            spec: {
                selector: { matchLabels: labels },
                template: {
                    metadata: { labels },
                    spec: {
                        // The node's own pause image: the story is the mount, not the container.
                        containers: [{ name: "agent", image: "readiness.local/pause:1", volumeMounts: [{ name: "tls", mountPath: "/etc/tls", readOnly: true }] }],
                        volumes: [{ name: "tls", secret: { secretName: "ai-ops-agent-tls" } }],
                    },
                },
            },
        }, { dependsOn: [before] });
        return {};
    };

    for (const mode of ["none", "gate", "autogate"] as Mode[]) {
        const s = await stack(env, cluster, { stackName: mode, projectName: "report000-realnode-ts", program: program(mode) });
        const mounts = await watchFailedMounts(cluster, ns);
        const t0 = Date.now();
        let err: Error | undefined;
        try {
            await s.up();
        } catch (e) {
            err = e as Error;
        }
        const took = Date.now() - t0;
        const failed = mounts();
        console.log(`report 000 ${mode}: up returned after ${secs(took)} (failed: ${err !== undefined}); the kubelet's FailedMount events: ${failed.length}`);
        if (mode === "none") {
            // pulumi-kubernetes awaits the rollout, which ends once the kubelet's retry mounts the
            // Secret cert-manager issued meanwhile: the up may pass; the pod met the report's error.
            assert.ok(failed.length > 0 && failed[0].includes('MountVolume.SetUp failed for volume "tls" : secret "ai-ops-agent-tls" not found'),
                `without a gate the pod must meet the report's FailedMount; the kubelet said ${JSON.stringify(failed)} (up: ${err?.message})`);
        } else {
            assert.equal(err, undefined, err?.message);
            assert.deepEqual(failed, [], `with ${mode} the pod must mount its Secret at once`);
            if (mode === "autogate") console.log(`report 000 autoGate's gates: ${(await gatesOf(s)).join(", ")}`);
        }
        // The release deletes its CRDs: their caches must be up first (harness: cachesReady).
        await cachesReady(cluster, "cert-manager.io");
        const td = Date.now();
        await s.destroy();
        await s.workspace.removeStack(mode);
        await crdsGone(cluster, "cert-manager.io");
        await podsGone(cluster, "cert-manager");
        console.log(`report 000 ${mode}: destroy ${secs(Date.now() - td)}`);
        await dropLeases(cluster, "kube-system", "cert-manager");
    }
});

test("real node, field report 001: ExternalSecrets after a Helm release of External Secrets (its real webhook)", { skip, timeout: 1_200_000 }, async () => {
    const chart = path.join(charts, "external-secrets");
    const namespaces = ["default", "hello-world", "nodejs-demo", "storage-validator"];
    const program = (mode: Mode) => async () => {
        if (mode === "autogate") readiness.autoGate({ timeout: "4m" });
        // skipAwait, as users set it when Helm's wait hangs their stack.
        const release = new k8s.helm.v3.Release("external-secrets", {
            chart, name: "external-secrets", namespace: "external-secrets", createNamespace: true, skipAwait: true,
        });
        let before: pulumi.Resource = release;
        if (mode === "gate") {
            before = new readiness.HelmReleaseReady("external-secrets-ready", {
                name: "external-secrets", namespace: "external-secrets", timeout: "4m", triggers: [release.status.revision],
            }, { dependsOn: [release] });
        }
        for (const ns of namespaces) {
            const dependsOn = [before];
            if (ns !== "default") dependsOn.push(new k8s.core.v1.Namespace(`ns-${ns}`, { metadata: { name: ns } }));
            new k8s.apiextensions.CustomResource(`ghcr-pull-secret-${ns}`, {
                apiVersion: "external-secrets.io/v1beta1", kind: "ExternalSecret",
                metadata: { name: "ghcr-pull-secret", namespace: ns },
                spec: {
                    refreshInterval: "1h", secretStoreRef: { kind: "ClusterSecretStore", name: "pulumi-esc" },
                    target: { name: "ghcr-pull-secret" }, dataFrom: [{ extract: { key: "ghcr" } }],
                },
            }, { dependsOn });
        }
        return {};
    };
    await releaseReport("001", program, /failed calling webhook "validate\.externalsecret\.external-secrets\.io"/,
        { namespace: "external-secrets", crdGroup: "external-secrets.io" }, async () => {
            // Every ExternalSecret was admitted by the real webhook, created after its pod became
            // Ready (creationTimestamp has whole seconds: one second of slack, as the Go test).
            const ready = await webhookPodReadyAt(cluster, "external-secrets", "app.kubernetes.io/name=external-secrets-webhook");
            for (const ns of namespaces) {
                const r = await request(cluster, "GET", `/apis/external-secrets.io/v1beta1/namespaces/${ns}/externalsecrets/ghcr-pull-secret`);
                assert.equal(r.status, 200, `ExternalSecret in ${ns}: ${JSON.stringify(r.body)}`);
                const created = Date.parse(r.body.metadata.creationTimestamp);
                assert.ok(created + 1000 >= ready, `the ExternalSecret in ${ns} was created at ${new Date(created).toISOString()}, before the webhook pod was Ready at ${new Date(ready).toISOString()}`);
            }
        });
});

// releaseReport runs a field report whose stack installs a release with a webhook, as the Go
// tests' releaseReport: without a gate the up must fail with the API server's call to that
// webhook (failsWith); with the hand-placed gate and with autoGate it must pass, and passed says
// what its objects must show. Each stack is destroyed until the release's pods (and CRDs of
// crdGroup, which the release deletes: their caches must be up first) are gone, as a rebuilt
// cluster starts.
async function releaseReport(report: string, program: (mode: Mode) => () => Promise<Record<string, unknown>>, failsWith: RegExp,
    release: { namespace: string; crdGroup?: string }, passed: () => Promise<void>): Promise<void> {
    const project = `report${report}-realnode-ts`;
    const destroy = async (s: Stack, name: string) => {
        if (release.crdGroup) await cachesReady(cluster, release.crdGroup);
        const td = Date.now();
        await s.destroy();
        await s.workspace.removeStack(name);
        if (release.crdGroup) await crdsGone(cluster, release.crdGroup);
        await podsGone(cluster, release.namespace);
        console.log(`report ${report} ${name}: destroy ${secs(Date.now() - td)}`);
    };

    const bare = await stack(env, cluster, { stackName: "none", projectName: project, program: program("none") });
    const t0 = Date.now();
    await assert.rejects(bare.up(), (e: Error) => {
        console.log(`report ${report} none: up failed after ${secs(Date.now() - t0)}: ${e.message.split("\n").find((l) => l.includes("failed calling webhook"))?.trim()}`);
        assert.match(e.message, failsWith);
        return true;
    });
    await destroy(bare, "none");

    for (const mode of ["gate", "autogate"] as Mode[]) {
        const s = await stack(env, cluster, { stackName: mode, projectName: project, program: program(mode) });
        const t1 = Date.now();
        await s.up();
        console.log(`report ${report} ${mode}: up in ${secs(Date.now() - t1)}`);
        await passed();
        if (mode === "autogate") {
            const gates = await gatesOf(s);
            assert.ok(gates.length > 0, "autoGate placed no gate");
            console.log(`report ${report} autoGate's gates: ${gates.join(", ")}`);
        }
        await destroy(s, mode);
    }
}

// loggedAt is when the first pod matching selector in ns logged a line containing msg (the
// container runtime's timestamp, read through the kubelet), as the Go test's.
async function loggedAt(c: Cluster, ns: string, selector: string, msg: string): Promise<number> {
    const pods = await request(c, "GET", `/api/v1/namespaces/${ns}/pods?labelSelector=${encodeURIComponent(selector)}`);
    assert.ok(pods.status === 200 && pods.body.items.length > 0, `no pod ${selector} in ${ns}: ${pods.status}`);
    const name = pods.body.items[0].metadata.name;
    const text = await new Promise<string>((resolve, reject) => {
        const url = new URL(`/api/v1/namespaces/${ns}/pods/${name}/log?timestamps=true`, c.server);
        https.get(url, { ca: c.ca, headers: { Authorization: `Bearer ${c.token}` } }, (res) => {
            let data = "";
            res.on("data", (d) => (data += d));
            res.on("end", () => (res.statusCode === 200 ? resolve(data) : reject(new Error(`logs of ${name}: ${res.statusCode} ${data}`))));
        }).on("error", reject);
    });
    for (const line of text.split("\n")) {
        const i = line.indexOf(" ");
        if (i > 0 && line.slice(i + 1).includes(msg)) return Date.parse(line.slice(0, i));
    }
    assert.fail(`pod ${name} never logged ${JSON.stringify(msg)}:\n${text}`);
}

test("real node, field report 002: an Ingress after a Helm release of ingress-nginx (its webhook pod listens after it is Ready)", { skip, timeout: 1_200_000 }, async () => {
    const chart = path.join(charts, "ingress-nginx");
    const program = (mode: Mode) => async () => {
        if (mode === "autogate") readiness.autoGate({ timeout: "4m" });
        // Helm waits for the controller's Deployment and runs the chart's admission hooks; the
        // webhook (a stand-in pod made here: the controller needs nginx) listens 10 s after Ready.
        const release = new k8s.helm.v3.Release("ingress-nginx", {
            chart, name: "ingress-nginx", namespace: "ingress-nginx", createNamespace: true, timeout: 300,
        });
        let before: pulumi.Resource = release;
        if (mode === "gate") {
            before = new readiness.HelmReleaseReady("ingress-nginx-ready", {
                name: "ingress-nginx", namespace: "ingress-nginx", timeout: "4m", triggers: [release.status.revision],
            }, { dependsOn: [release] });
        }
        const apps = new k8s.core.v1.Namespace("ns-apps", { metadata: { name: "apps" } });
        // skipAwait: no load balancer fills its status here.
        new k8s.networking.v1.Ingress("web", {
            metadata: { name: "web", namespace: "apps", annotations: { "pulumi.com/skipAwait": "true" } },
            spec: {
                ingressClassName: "nginx",
                rules: [{ host: "web.example.test", http: { paths: [{ path: "/", pathType: "Prefix", backend: { service: { name: "web", port: { number: 80 } } } }] } }],
            },
        }, { dependsOn: [before, apps] });
        return {};
    };
    // Without a gate Helm's wait ends before the webhook listens: the API server's call is refused.
    await releaseReport("002", program, /failed calling webhook "validate\.nginx\.ingress\.kubernetes\.io"/, { namespace: "ingress-nginx" }, async () => {
        // The Ingress was created after the webhook logged that it listens (creationTimestamp
        // has whole seconds: one second of slack, as the Go test).
        const listening = await loggedAt(cluster, "ingress-nginx", "app.kubernetes.io/component=controller", "admission webhook listening");
        const r = await request(cluster, "GET", "/apis/networking.k8s.io/v1/namespaces/apps/ingresses/web");
        assert.equal(r.status, 200, JSON.stringify(r.body));
        const created = Date.parse(r.body.metadata.creationTimestamp);
        assert.ok(created + 1000 >= listening, `the Ingress was created at ${new Date(created).toISOString()}, before the webhook listened at ${new Date(listening).toISOString()}`);
    });
});
