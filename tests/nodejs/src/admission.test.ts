// TypeScript stack using the generated Node SDK: a sidecar injector (a mutating webhook with
// failurePolicy Ignore on 127.0.0.1, registered by URL) starts late. While it is down the API
// server admits Pods unmutated; WebhookReady and AdmissionReady with `expect` wait for the
// injected container, and `up` returns only after the injector serves.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import * as readiness from "@readiness-io/pulumi-readiness";
import { Cluster, FakeWebhook, preparePulumi, PulumiEnv, request, stack, startCluster } from "./harness";

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

test("WebhookReady and AdmissionReady with expect wait for a late Ignore injector", { timeout: 300_000 }, async () => {
    const ns = `inject-${Date.now() % 1_000_000}`;
    const cfg = `injector-${ns}`;
    assert.equal((await request(cluster, "POST", "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } })).status, 201);
    // The API server refuses Pods (even dry-run) until the namespace's default ServiceAccount exists.
    for (let i = 0; i < 300; i++) {
        if ((await request(cluster, "GET", `/api/v1/namespaces/${ns}/serviceaccounts/default`)).status === 200) break;
        await sleep(100);
    }
    const reg = await request(cluster, "POST", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", {
        apiVersion: "admissionregistration.k8s.io/v1", kind: "MutatingWebhookConfiguration", metadata: { name: cfg },
        webhooks: [{
            name: `inject.${cfg}.test`, admissionReviewVersions: ["v1"], sideEffects: "None", failurePolicy: "Ignore", timeoutSeconds: 3,
            clientConfig: { url: webhook!.url, caBundle: webhook!.caBundle },
            namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": ns } },
            rules: [{ apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE", "UPDATE"], resources: ["pods"] }],
        }],
    });
    assert.equal(reg.status, 201, JSON.stringify(reg.body));
    await webhook!.send("mode inject:sidecar");
    // The gates cannot call the injector themselves: only the injected container proves it.
    await webhook!.send("refuse-direct true");

    const expect = "object.spec.containers.exists(c, c.name == 'sidecar')";
    const pod = (meta: object) => ({ apiVersion: "v1", kind: "Pod", metadata: meta,
        spec: { containers: [{ name: "app", image: "readiness.invalid/app" }] } });
    const program = async () => {
        const injector = new readiness.WebhookReady("injector", {
            mutatingWebhookConfiguration: cfg, probe: pod({ generateName: "probe-", namespace: ns }), expect, timeout: "2m",
        });
        const admission = new readiness.AdmissionReady("web", {
            objects: [pod({ name: "web", namespace: ns })], expect, timeout: "2m",
        });
        return { probed: injector.probed, failurePolicy: injector.failurePolicy, mutated: admission.mutated, admitted: admission.admitted };
    };
    const s = await stack(env, cluster, { stackName: "dev", projectName: "admission-ts", program });

    let startedAt = 0;
    const late = (async () => {
        await sleep(5000);
        startedAt = Date.now();
        await webhook!.send("start");
    })();
    const up = await s.up();
    const returnedAt = Date.now();
    await late;
    assert.ok(startedAt > 0 && returnedAt > startedAt, "up returned before the injector served");
    assert.equal(up.outputs.probed.value, true);
    assert.equal(up.outputs.failurePolicy.value, "Ignore");
    assert.deepEqual(up.outputs.mutated.value, [`Pod/${ns}/web`]);
    assert.equal(up.outputs.admitted.value, 1);
    // Nothing was persisted: AdmissionReady only dry-runs.
    assert.equal((await request(cluster, "GET", `/api/v1/namespaces/${ns}/pods/web`)).status, 404);

    await s.destroy();
    await s.workspace.removeStack("dev");
    await request(cluster, "DELETE", `/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/${cfg}`);
});
