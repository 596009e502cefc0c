// The error hook of readiness.autoGate() and readiness.autoRetry() (issue 50) from a TypeScript
// stack, on the real pulumi-kubernetes plugin, as tests/e2e/autogate's
// TestRetryAfterAWebhookWentAwayAfterItsGate: a webhook that answered the gate in front of a
// custom resource goes away right after the gate passed, before the create (a webhook pod
// killed), and comes back 1 s later; the create fails calling it and is tried again once the
// object's admission is proven again. The same for a gate placed by hand with autoRetry. Near
// miss: the webhook denies the object after its gate passed: never retried, the denial fails `up`.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import * as pulumi from "@pulumi/pulumi";
import * as k8s from "@pulumi/kubernetes";
import * as readiness from "@readiness-io/pulumi-readiness";
import { cachesReady, Cluster, crd, createdAt, FakeWebhook, preparePulumi, PulumiEnv, request, sleep, stack, startCluster } from "./harness";

let cluster: Cluster;
let env: PulumiEnv;
const ns = "ag-retry";
// Deletion is not this test's story: background propagation spares destroy the wait for the garbage
// collector to learn a kind whose CRD is new (autogate.test.ts says more).
const background = { "pulumi.com/deletionPropagationPolicy": "background" };

before(async () => {
    cluster = await startCluster();
    env = await preparePulumi();
    assert.equal((await request(cluster, "POST", "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } })).status, 201);
});
after(async () => { await cluster?.stop(); });

// afterGates is a resource transform for the test's fault: the registration of name (registered
// after the program's autoGate, so it sees the gates autoGate added) waits until every readiness
// gate it depends on finished (the engine answers getResource for it once its step finished),
// then fault runs, and only then the engine goes on to create it. Problems go to problems.
function afterGates(name: string, fault: () => Promise<void>, problems: string[]): pulumi.ResourceTransform {
    const als = (globalThis as any).asyncLocalStorage;
    const store = als?.getStore();
    const transform = async (a: pulumi.ResourceTransformArgs): Promise<undefined> => {
        if (a.name !== name) return undefined;
        const raw = await (a.opts.dependsOn as any);
        const deps: pulumi.Resource[] = await Promise.all((Array.isArray(raw) ? raw : raw ? [raw] : []).map((d: any) => d));
        const urns: string[] = await Promise.all(deps.map((d) => (d.urn as any).promise()));
        const gates = urns.filter((u) => (u.split("::")[2] ?? "").split("$").pop()!.startsWith("readiness:"));
        if (gates.length === 0) {
            problems.push(`${name} depends on no readiness gate (${urns.join(", ")}): the fault would not land after one`);
            return undefined;
        }
        for (const urn of gates) {
            for (const deadline = Date.now() + 120_000; ; await sleep(20)) {
                try {
                    await pulumi.runtime.invoke("pulumi:pulumi:getResource", { urn }, {});
                    break;
                } catch (e) {
                    if (!/unknown resource/.test(String(e)) || Date.now() > deadline) {
                        problems.push(`waiting for gate ${urn}: ${e}`);
                        return undefined;
                    }
                }
            }
        }
        await fault();
        return undefined;
    };
    return (a) => (store ? als.run(store, () => transform(a)) : transform(a));
}

for (const r of [
    { name: "autogate" },
    { name: "hand-gate", hand: true },
    { name: "denial", deny: true },
]) {
    test(`retry after a webhook went away after its gate: ${r.name} (TypeScript)`, { timeout: 300_000 }, async () => {
        const group = `${r.name}.retry.readiness.test`;
        assert.equal((await request(cluster, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd(group, "Widget", "widgets"))).status, 201);
        while ((await request(cluster, "GET", `/apis/${group}/v1`)).status !== 200) await sleep(100);
        await cachesReady(cluster, group);
        const hook = await FakeWebhook.start();
        try {
            await hook.send("mode allow");
            await hook.send("start");
            const widget = { apiVersion: `${group}/v1`, kind: "Widget", metadata: { name: r.name, namespace: ns, annotations: background }, spec: { size: 1 } };
            let back: Promise<number> | undefined; // when the webhook came back
            const fault = async () => {
                if (r.deny) return hook.send("mode deny");
                await hook.send("stop");
                back = (async () => { await sleep(1000); await hook.send("start"); return Date.now(); })();
            };
            const problems: string[] = [];
            const program = async () => {
                if (r.hand) readiness.autoRetry();
                else readiness.autoGate({ timeout: "60s" });
                // The engine takes stack transforms registered at once in any order: this one after autoGate's.
                await pulumi.runtime.awaitStackRegistrations();
                pulumi.runtime.registerResourceTransform(afterGates("gizmo", fault, problems));
                const vwc = new k8s.admissionregistration.v1.ValidatingWebhookConfiguration("vwc", hook.configuration(`retry-${r.name}`, group) as any);
                let deps: pulumi.Resource[] = [vwc];
                if (r.hand) deps = [new readiness.AdmissionReady("gizmo-admission", { objects: [widget], timeout: "60s" }, { dependsOn: deps })];
                new k8s.apiextensions.CustomResource("gizmo", widget as any, { dependsOn: deps });
                return {};
            };
            const s = await stack(env, cluster, { stackName: r.name, projectName: "retry-ts", program });
            let out = "";
            const up = s.up({ onOutput: (l) => { out += l; } });
            if (r.deny) {
                await assert.rejects(up, (e: Error) => {
                    const all = `${e.message}\n${out}`;
                    assert.match(all, /spec\.secretStoreRef is required/);
                    assert.doesNotMatch(all, /retrying create/, "a denial was retried");
                    assert.match(all, /not retried: a webhook denied it/, "the error hook did not say why it did not retry");
                    return true;
                });
            } else {
                await up.catch((e) => assert.fail(`up failed though the webhook came back:\n${e}\n${out}`));
                assert.deepEqual(problems, []);
                assert.ok(back, `the fault never ran: the object did not wait for its gate\n${out}`);
                const backAt = await back!;
                const at = await createdAt(cluster, `/apis/${group}/v1/namespaces/${ns}/widgets/${r.name}`);
                assert.match(out, /retrying create due to on-error hook request/, "the Widget's create was not retried");
                assert.match(out, /readiness: create of kubernetes:.*:Widget gizmo: .*admitted again/);
                assert.ok(at >= Math.floor(backAt / 1000) * 1000, `the Widget was created at ${new Date(at).toISOString()}, before its webhook came back (${new Date(backAt).toISOString()})`);
                console.log(`up:\n${out}`);
            }
            assert.deepEqual(problems, []);
            await hook.send("mode allow");
            await hook.setServing(true);
            await s.destroy();
            await s.workspace.removeStack(r.name);
        } finally {
            hook.stop();
        }
    });
}

test("autoGate and autoRetry in one program is an error (TypeScript)", { timeout: 120_000 }, async () => {
    const program = async () => {
        readiness.autoGate();
        try {
            readiness.autoRetry();
            return { error: "" };
        } catch (e) {
            return { error: String(e) };
        }
    };
    const s = await stack(env, cluster, { stackName: "twice", projectName: "retry-ts", program });
    const up = await s.up();
    assert.match(up.outputs.error.value, /the error hook is registered already: call autoGate or autoRetry once per program/);
    await s.destroy();
    await s.workspace.removeStack("twice");
});
