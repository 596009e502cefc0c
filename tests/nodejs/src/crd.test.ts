// TypeScript stack using the generated Node SDK: CrdReady blocks until a late CRD is served,
// and the custom resource behind it is created only afterwards.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import * as readiness from "@readiness-io/pulumi-readiness";
import { Cluster, crd, KubeObject, preparePulumi, PulumiEnv, request, stack, startCluster } from "./harness";

let cluster: Cluster;
let env: PulumiEnv;

before(async () => {
    cluster = await startCluster();
    env = await preparePulumi();
});
after(async () => { await cluster?.stop(); });

test("CrdReady gates a custom resource in a TypeScript stack", { timeout: 300_000 }, async () => {
    const group = `ts${Date.now() % 1_000_000}.readiness.test`;
    const program = async () => {
        const gate = new readiness.CrdReady("widgets-crd", { names: [`widgets.${group}`], timeout: "2m" });
        const widget = new KubeObject("widget",
            { apiVersion: `${group}/v1`, kind: "Widget", metadata: { name: "w1", namespace: "default" } },
            { dependsOn: [gate] });
        return { kinds: gate.kinds, servedVersions: gate.servedVersions, widgetCreatedAt: widget.createdAt };
    };
    const s = await stack(env, cluster, { stackName: "dev", projectName: "crd-ts", program });

    const pv = await s.preview();
    assert.ok((pv.changeSummary.create ?? 0) >= 3, `preview should create the gate and the object: ${JSON.stringify(pv.changeSummary)}`);

    let crdAt = 0;
    const late = new Promise<void>((resolve, reject) => setTimeout(async () => {
        crdAt = Date.now();
        const res = await request(cluster, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd(group, "Widget", "widgets"));
        res.status === 201 ? resolve() : reject(new Error(`creating the CRD: ${res.status} ${JSON.stringify(res.body)}`));
    }, 3000));
    const up = await s.up();
    await late;
    assert.ok(crdAt > 0, "up returned before the CRD was installed");
    assert.deepEqual(up.outputs.kinds.value, ["Widget"]);
    assert.deepEqual(up.outputs.servedVersions.value, [`${group}/v1`]);
    const createdAt = Date.parse(up.outputs.widgetCreatedAt.value);
    assert.ok(createdAt > crdAt, `the Widget (${createdAt}) must be created after its CRD (${crdAt})`);

    // Re-running with nothing changed waits for nothing and changes nothing.
    const again = await s.up();
    assert.equal(again.summary.resourceChanges?.create ?? 0, 0);
    await s.destroy();
    await s.workspace.removeStack("dev");
});
