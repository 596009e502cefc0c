// readiness.autoGate() decides from what pulumi-kubernetes and the cluster will really do (issue
// 47), the same in every language as the Go and Python stacks: a webhook installed outside this
// stack (by a platform stack) validates Widgets in one namespace only; this stack picks that
// namespace with `kubernetes:namespace` and creates an autonamed Widget without
// metadata.namespace while the webhook's server is down. The Widget waits for the webhook, in the
// namespace pulumi-kubernetes really uses, through a readiness provider configured as the
// stack's kubernetes configuration. Near miss: a ConfigMap nothing intercepts is not gated.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import * as k8s from "@pulumi/kubernetes";
import * as readiness from "@readiness-io/pulumi-readiness";
import { Cluster, crd, createdAt, FakeWebhook, preparePulumi, PulumiEnv, request, sleep, stack, startCluster } from "./harness";

let cluster: Cluster;
let env: PulumiEnv;
let webhook: FakeWebhook;

before(async () => {
    cluster = await startCluster();
    env = await preparePulumi();
    webhook = await FakeWebhook.start();
});
after(async () => { webhook?.stop(); await cluster?.stop(); });

test("autoGate: a webhook outside the stack, in the namespace kubernetes:namespace picks (TypeScript)", { timeout: 300_000 }, async () => {
    const label = `out${Date.now() % 1_000_000}`;
    const group = `${label}.readiness.test`;
    const apps = `apps-${label}`;
    const cfg = `platform-${label}`;
    assert.equal((await request(cluster, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd(group, "Widget", "widgets"))).status, 201);
    assert.equal((await request(cluster, "POST", "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: apps } })).status, 201);
    const hook: any = webhook.configuration(cfg, group);
    hook.webhooks[0].namespaceSelector = { matchLabels: { "kubernetes.io/metadata.name": apps } };
    assert.equal((await request(cluster, "POST", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations", hook)).status, 201);
    while ((await request(cluster, "GET", `/apis/${group}/v1`)).status !== 200) await sleep(100);

    const program = async () => {
        readiness.autoGate({ timeout: "90s" });
        new k8s.apiextensions.CustomResource("widget", { apiVersion: `${group}/v1`, kind: "Widget", spec: { size: 1 } } as any);
        const settings = new k8s.core.v1.ConfigMap("settings", { data: { a: "b" } });
        return { settings: settings.metadata.name };
    };
    const s = await stack(env, cluster, { stackName: "dev", projectName: "autogate-outside-ts", program });
    await s.setConfig("kubernetes:namespace", { value: apps });
    // The webhook's server starts once the gate's step begins (the plan-time dry run was refused),
    // at the next whole second: the Widget's whole-second creationTimestamp is then comparable.
    let started: Promise<number> | undefined;
    const serve = async () => { await sleep(1000 - (Date.now() % 1000)); const t = Date.now(); await webhook.setServing(true); return t; };
    let out = "";
    const up = await s.up({ onOutput: (l) => {
        out += l;
        if (!started && /readiness:index:AdmissionReady\s+\S+\s+creating/.test(out)) started = serve();
    } });
    assert.ok(started, "no AdmissionReady began: the Widget was not gated while the webhook's server was down");
    const at = await started!;
    const widgets = (await request(cluster, "GET", `/apis/${group}/v1/namespaces/${apps}/widgets`)).body.items;
    assert.equal(widgets.length, 1, "the autonamed Widget, in the namespace kubernetes:namespace names");
    const widgetAt = await createdAt(cluster, `/apis/${group}/v1/namespaces/${apps}/widgets/${widgets[0].metadata.name}`);
    assert.ok(widgetAt >= Math.floor(at / 1000) * 1000, `the Widget was created at ${new Date(widgetAt).toISOString()}, before the webhook served (${new Date(at).toISOString()})`);
    assert.equal((await request(cluster, "GET", `/api/v1/namespaces/${apps}/configmaps/${up.outputs.settings.value}`)).status, 200);

    const state = (await s.exportStack()).deployment.resources as { urn: string; type: string; provider?: string }[];
    const gates = state.filter((r) => r.type.startsWith("readiness:index:"));
    const want = `auto-admission-widgets.${group}-${apps}-${cfg}`;
    assert.deepEqual(gates.map((g) => `${g.type.split(":").pop()} ${g.urn.split("::").pop()}`), [`AdmissionReady ${want}`],
        "one gate, for the Widget (the ConfigMap, which nothing intercepts, has none)");
    assert.match(gates[0].provider ?? "", /::autogate-default::/, "the gate runs through the readiness provider configured as the stack's kubernetes configuration");
    assert.match(out, /autogate-default/);
    await s.destroy();
    await s.workspace.removeStack("dev");
});
