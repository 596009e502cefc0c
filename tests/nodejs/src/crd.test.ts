// TypeScript stack using the generated Node SDK: CrdReady blocks until a late CRD is served,
// and the custom resource behind it is created only afterwards.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import * as k8s from "@pulumi/kubernetes";
import * as readiness from "@readiness-io/pulumi-readiness";
import { Cluster, crd, createdBefore, FakeWebhook, preparePulumi, PulumiEnv, request, stack, startCluster, toNextSecond } from "./harness";

let cluster: Cluster;
let env: PulumiEnv;
let webhook: FakeWebhook | undefined;

before(async () => {
    cluster = await startCluster();
    env = await preparePulumi();
    webhook = await FakeWebhook.start();
});
after(async () => { webhook?.stop(); await cluster?.stop(); });

test("CrdReady in a TypeScript stack: preview, up, refresh, input change, destroy", { timeout: 300_000 }, async () => {
    const group = `ts${Date.now() % 1_000_000}.readiness.test`;
    let timeout = "2m";
    const program = async () => {
        // stableFor: the CRD must stay Established and served for a second before the gate passes.
        const gate = new readiness.CrdReady("widgets-crd", { names: [`widgets.${group}`], timeout, stableFor: "1s" });
        const widget = new k8s.apiextensions.CustomResource("widget",
            { apiVersion: `${group}/v1`, kind: "Widget", metadata: { name: "w1", namespace: "default" } },
            { dependsOn: [gate] });
        return { kinds: gate.kinds, servedVersions: gate.servedVersions, widgetCreatedAt: widget.metadata.creationTimestamp };
    };
    const s = await stack(env, cluster, { stackName: "dev", projectName: "crd-ts", program });

    const pv = await s.preview();
    assert.ok((pv.changeSummary.create ?? 0) >= 3, `preview should create the gate and the object: ${JSON.stringify(pv.changeSummary)}`);

    let crdAt = 0;
    const late = new Promise<void>((resolve, reject) => setTimeout(async () => {
        crdAt = Date.now();
        const res = await request(cluster, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd(group, "Widget", "widgets"));
        res.status === 201 ? resolve() : reject(new Error(`creating the CRD: ${res.status} ${JSON.stringify(res.body)}`));
    }, toNextSecond(3000)));
    const up = await s.up();
    await late;
    assert.ok(crdAt > 0, "up returned before the CRD was installed");
    assert.deepEqual(up.outputs.kinds.value, ["Widget"]);
    assert.deepEqual(up.outputs.servedVersions.value, [`${group}/v1`]);
    const createdAt = up.outputs.widgetCreatedAt.value;
    assert.ok(!createdBefore(createdAt, crdAt + 1000), `the Widget (${createdAt}) must be created after its CRD (${new Date(crdAt).toISOString()}) held for stableFor 1s`);

    // Re-running with nothing changed waits for nothing and changes nothing.
    const again = await s.up();
    assert.equal(again.summary.resourceChanges?.create ?? 0, 0);

    // Refresh after the CRD was deleted: the gate is reported gone, and the next up waits again.
    const del = await request(cluster, "DELETE", `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.${group}`);
    assert.ok(del.status === 200 || del.status === 202, `deleting the CRD: ${del.status}`);
    let gone = false;
    for (let i = 0; i < 100 && !gone; i++) {
        gone = (await request(cluster, "GET", `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.${group}`)).status === 404;
        if (!gone) await new Promise((r) => setTimeout(r, 100));
    }
    const ref = await s.refresh();
    assert.ok((ref.summary.resourceChanges?.delete ?? 0) >= 1, `refresh should drop the gate: ${JSON.stringify(ref.summary.resourceChanges)}`);
    let reinstalledAt = 0;
    setTimeout(async () => {
        reinstalledAt = Date.now();
        await request(cluster, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd(group, "Widget", "widgets"));
    }, 2000);
    const rewait = await s.up();
    assert.ok(reinstalledAt > 0, "up after refresh returned before the CRD came back");
    assert.ok((rewait.summary.resourceChanges?.create ?? 0) >= 1, `the gate should be created again: ${JSON.stringify(rewait.summary.resourceChanges)}`);

    // An input change that only touches the timeout updates in place, without waiting.
    timeout = "3m";
    const pv2 = await s.preview();
    assert.equal(pv2.changeSummary.update ?? 0, 1, `timeout change should be one in-place update: ${JSON.stringify(pv2.changeSummary)}`);
    assert.equal(pv2.changeSummary.replace ?? 0, 0);
    await s.up();

    await s.destroy();
    await s.workspace.removeStack("dev");
});

test("CrdReady in a TypeScript stack waits for a late conversion webhook", { timeout: 300_000 }, async () => {
    const group = `conv${Date.now() % 1_000_000}.readiness.test`;
    const name = `gizmos.${group}`;
    // Served at v1 (storage) and v2, converted by a webhook on 127.0.0.1 that is not serving yet:
    // the CRD is Established at once, but nothing can be read or written through v2.
    const schema = { openAPIV3Schema: { type: "object", "x-kubernetes-preserve-unknown-fields": true } };
    const res = await request(cluster, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", {
        apiVersion: "apiextensions.k8s.io/v1", kind: "CustomResourceDefinition", metadata: { name },
        spec: {
            group, scope: "Namespaced",
            names: { kind: "Gizmo", plural: "gizmos", singular: "gizmo", listKind: "GizmoList" },
            versions: [{ name: "v1", served: true, storage: true, schema }, { name: "v2", served: true, storage: false, schema }],
            conversion: { strategy: "Webhook", webhook: { conversionReviewVersions: ["v1"],
                clientConfig: { url: webhook!.convertUrl, caBundle: webhook!.caBundle } } },
        },
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const program = async () => {
        // conversion defaults to true for a CRD whose spec.conversion.strategy is Webhook.
        const gate = new readiness.CrdReady("gizmos-crd", { names: [name], timeout: "2m" });
        const gizmo = new k8s.apiextensions.CustomResource("gizmo",
            { apiVersion: `${group}/v2`, kind: "Gizmo", metadata: { name: "g1", namespace: "default" }, spec: { count: 2 } },
            { dependsOn: [gate] });
        return { conversionVerified: gate.conversionVerified, gizmoCreatedAt: gizmo.metadata.creationTimestamp };
    };
    const s = await stack(env, cluster, { stackName: "dev", projectName: "conversion-ts", program });
    let startedAt = 0;
    const late = new Promise<void>((resolve) => setTimeout(async () => {
        startedAt = Date.now();
        await webhook!.send("start");
        resolve();
    }, toNextSecond(4000)));
    const up = await s.up();
    await late;
    assert.ok(startedAt > 0, "up returned before the conversion webhook served");
    assert.deepEqual(up.outputs.conversionVerified.value, [name]);
    assert.ok(!createdBefore(up.outputs.gizmoCreatedAt.value, startedAt), "the Gizmo was created before its conversion webhook served");
    // The object went through the webhook: v2's count is stored as v1's size.
    const stored = await request(cluster, "GET", `/apis/${group}/v1/namespaces/default/gizmos/g1`);
    assert.equal(stored.body?.spec?.size, 2, JSON.stringify(stored.body));
    await s.destroy();
    await s.workspace.removeStack("dev");
    await request(cluster, "DELETE", `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}`);
});
