// autoGate's corpus (tests/corpus/autogate.json, issue 47) run as TypeScript programs: each shape
// becomes a program written as TypeScript users write it (typed classes for Kubernetes' own kinds,
// CustomResource for the others, Outputs for references, a ComponentResource, an explicit
// Provider, a yaml v1 ConfigGroup), previewed on the real plugin and a real API server. The
// gates autoGate registers must be exactly the shape's: the Go and Python drivers check the same.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import * as fs from "fs";
import * as path from "path";
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import * as readiness from "@readiness-io/pulumi-readiness";
import { Cluster, crd, FakeWebhook, localChart, preparePulumi, PulumiEnv, repoRoot, request, sleep, stack, startCluster } from "./harness";

interface Item {
    name: string;
    object?: any;
    kubernetesProvider?: Record<string, string>;
    component?: string;
    configGroupV1?: any[];
    chartV4?: { chart: string; namespace: string };
    release?: { chart: string; namespace: string };
    resourceReady?: Record<string, any>;
    dependsOn?: string[];
    provider?: string;
    parent?: string;
}
interface Shape { name: string; why: string; config?: Record<string, string>; cluster?: any[]; otherCluster?: any[]; program: Item[]; gates: string[]; warnings?: string[]; previewError?: string }
const corpus: { setup: any[]; shapes: Shape[] } = JSON.parse(fs.readFileSync(path.join(repoRoot, "tests", "corpus", "autogate.json"), "utf8"));

let cluster: Cluster;
let other: Cluster | undefined; // a second cluster, while a shape needs it ("$other-cluster")
let env: PulumiEnv;
let up: FakeWebhook;
let down: FakeWebhook;

before(async () => {
    cluster = await startCluster();
    env = await preparePulumi();
    up = await FakeWebhook.start();
    await up.send("start");
    down = await FakeWebhook.start(); // never serves: its port refuses connections
    for (const o of corpus.setup) await apply(expand(o, {}));
});
after(async () => {
    up?.stop();
    down?.stop();
    await cluster?.stop();
});

// expand replaces the corpus' placeholders: {"$crd": [group, kind, plural]}, "$webhook-up" and
// "$webhook-down" (a clientConfig), {"$ref": name, "path": "a.b"} (an Output of the program's
// resource name, only inside a program), "$chart:NAME" (a local chart of fixture NAME, its webhooks
// the down server's).
const charts = new Map<string, string>();
function expand(v: any, handles: Record<string, any>): any {
    if (typeof v === "string" && v.startsWith("$chart:")) {
        const name = v.slice("$chart:".length);
        if (!charts.has(name)) charts.set(name, localChart(name, down));
        return charts.get(name);
    }
    if (v === "$webhook-up") return { url: up.url, caBundle: up.caBundle };
    if (v === "$webhook-down") return { url: down.url, caBundle: down.caBundle };
    if (Array.isArray(v)) return v.map((e) => expand(e, handles));
    if (v && typeof v === "object") {
        if (v.$crd) return crd(v.$crd[0], v.$crd[1], v.$crd[2]);
        if (v.$ref) {
            const [head, ...rest] = String(v.path).split(".");
            return rest.reduce((o: any, k: string) => o.apply((x: any) => x?.[k]), handles[v.$ref][head] as pulumi.Output<any>);
        }
        return Object.fromEntries(Object.entries(v).map(([k, e]) => [k, expand(e, handles)]));
    }
    return v;
}

// apply creates an object in cluster c as another stack would have (a CRD: until it is served).
async function apply(o: any, c: Cluster = cluster): Promise<void> {
    const [group, version] = o.apiVersion.includes("/") ? o.apiVersion.split("/") : ["", o.apiVersion];
    const plural = o.kind === "CustomResourceDefinition" ? "customresourcedefinitions" : `${o.kind.toLowerCase()}s`;
    const base = group ? `/apis/${group}/${version}` : `/api/${version}`;
    const res = await request(c, "POST", `${base}/${plural}`, o);
    assert.ok(res.status === 201 || res.status === 409, `creating ${o.kind} ${o.metadata.name}: ${res.status} ${JSON.stringify(res.body)}`);
    if (o.kind === "CustomResourceDefinition") {
        // Established: the API server serves its kind (a 404 of the kind's own path is not JSON).
        const established = (c: any) => (c?.status?.conditions ?? []).some((x: any) => x.type === "Established" && x.status === "True");
        for (let i = 0; !established((await request(c, "GET", `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${o.metadata.name}`)).body); i++) {
            assert.ok(i < 300, `${o.metadata.name} is not served`);
            await sleep(100);
        }
    }
}

async function remove(o: any, c: Cluster = cluster): Promise<void> {
    const [group, version] = o.apiVersion.includes("/") ? o.apiVersion.split("/") : ["", o.apiVersion];
    const base = group ? `/apis/${group}/${version}` : `/api/${version}`;
    await request(c, "DELETE", `${base}/${o.kind.toLowerCase()}s/${o.metadata.name}`);
}

// Kubernetes' own groups have typed classes (k8s.apps.v1.Deployment); the others are custom resources.
function typedClass(apiVersion: string, kind: string): any {
    const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
    if (group !== "" && !group.endsWith(".k8s.io") && !["apps", "batch", "policy", "autoscaling"].includes(group)) return undefined;
    return (k8s as any)[group === "" ? "core" : group.split(".")[0]]?.[version]?.[kind];
}

class Component extends pulumi.ComponentResource {
    constructor(type: string, name: string) {
        super(type, name, {}, {});
        this.registerOutputs({});
    }
}

// program is the shape as a TypeScript program.
function program(shape: Shape) {
    return async () => {
        readiness.autoGate({ timeout: "2m" });
        const handles: Record<string, any> = {};
        for (const item of shape.program) {
            const opts: pulumi.CustomResourceOptions = {};
            if (item.dependsOn) opts.dependsOn = item.dependsOn.map((n) => handles[n]);
            if (item.provider) opts.provider = handles[item.provider];
            if (item.parent) opts.parent = handles[item.parent];
            if (item.kubernetesProvider) {
                const args = { kubeconfig: cluster.kubeconfig, ...item.kubernetesProvider };
                if (args.kubeconfig === "$other-cluster") args.kubeconfig = other!.kubeconfig;
                handles[item.name] = new k8s.Provider(item.name, args);
            } else if (item.component) {
                handles[item.name] = new Component(item.component, item.name);
            } else if (item.chartV4) {
                handles[item.name] = new k8s.helm.v4.Chart(item.name, { chart: expand(item.chartV4.chart, handles), namespace: item.chartV4.namespace }, opts);
            } else if (item.release) {
                handles[item.name] = new k8s.helm.v3.Release(item.name, { chart: expand(item.release.chart, handles), namespace: item.release.namespace }, opts);
            } else if (item.resourceReady) {
                handles[item.name] = new readiness.ResourceReady(item.name, item.resourceReady as readiness.ResourceReadyArgs, opts);
            } else if (item.configGroupV1) {
                handles[item.name] = new k8s.yaml.ConfigGroup(item.name, { objs: expand(item.configGroupV1, handles) }, opts);
            } else {
                const obj = expand(item.object, handles);
                const cls = typedClass(obj.apiVersion, obj.kind);
                handles[item.name] = cls ? new cls(item.name, obj, opts) : new k8s.apiextensions.CustomResource(item.name, obj, opts);
            }
        }
        return {};
    };
}

for (const shape of corpus.shapes) {
    test(`corpus: ${shape.name}`, { timeout: 600_000 }, async () => {
        const objects = (shape.cluster ?? []).map((o) => expand(o, {}));
        for (const o of objects) await apply(o);
        if (shape.otherCluster) other = await startCluster();
        for (const o of shape.otherCluster ?? []) await apply(expand(o, {}), other);
        try {
            const s = await stack(env, cluster, { stackName: shape.name, projectName: "corpus-ts", program: program(shape) });
            for (const [k, v] of Object.entries(shape.config ?? {})) await s.setConfig(k, { value: v });
            const gates = new Set<string>();
            let out = "";
            let failed: Error | undefined;
            await s.preview({
                onOutput: (l) => (out += l),
                onEvent: (e) => {
                    const m = e.resourcePreEvent?.metadata;
                    if (m && m.type.startsWith("readiness:index:")) gates.add(`${m.type.split(":").pop()} ${m.urn.split("::").pop()}`);
                },
            }).catch((e: Error) => (failed = e));
            if (shape.previewError) assert.ok(failed && out.includes(shape.previewError), `${shape.name}: the preview did not fail with ${shape.previewError}\n${out}`);
            else assert.ok(!failed, `${shape.name}: ${failed}\n${out}`);
            assert.deepEqual([...gates].sort(), [...shape.gates].sort(), `${shape.name}: ${shape.why}\n${out}`);
            for (const w of shape.warnings ?? []) assert.ok(out.includes(w), `${shape.name}: no warning "${w}"\n${out}`);
            await s.workspace.removeStack(shape.name);
        } finally {
            for (const o of [...objects].reverse()) await remove(o);
            await other?.stop();
            other = undefined;
        }
    });
}
