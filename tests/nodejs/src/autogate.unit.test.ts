// autoGate's transport and wiring in the SDK, without a cluster or an engine, against a fake
// `autoGateDecide`: every rule and wait is the provider's (provider/pkg/planner and its tests);
// these only check what the SDK sends (program order, each place and each cluster's facts once,
// a registration's facts) and what it does with an answer (one gate per key, after what it
// names, the provider it names; a failed or silent call fails the registration, naming it).
import { test } from "node:test";
import assert from "node:assert/strict";
import * as pulumi from "@pulumi/pulumi";
import { AutoGateDecideArgs, AutoGateDecideResult, AutoGateDeps, AutoGateOptions, AutoGater, childUrn, plain } from "@readiness-io/pulumi-readiness";

const prefix = "urn:pulumi:dev::proj::";
const stackUrn = `${prefix}pulumi:pulumi:Stack::proj-dev`;
const esType = "kubernetes:external-secrets.io/v1:ExternalSecret";
const vwcType = "kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration";
const cmType = "kubernetes:core/v1:ConfigMap";

type Answer = Partial<AutoGateDecideResult> | Promise<Partial<AutoGateDecideResult>>;

interface Fake {
    deps: AutoGateDeps;
    calls: AutoGateDecideArgs[];
    gates: { type: string; name: string; args: pulumi.Inputs; opts: pulumi.CustomResourceOptions }[];
    providers: { name: string; args: any }[];
    logs: { level: string; msg: string }[];
    register: (urn: string, state?: any) => void; // the engine finished this registration
}

function fake(answer: (a: AutoGateDecideArgs) => Answer = () => ({}), config: Record<string, string> = {}): Fake {
    const waits = new Map<string, { p: Promise<any>; resolve: (s: any) => void }>();
    const wait = (urn: string) => {
        let w = waits.get(urn);
        if (!w) {
            let resolve!: (s: any) => void;
            const p = new Promise<any>((r) => (resolve = r));
            waits.set(urn, (w = { p, resolve }));
        }
        return w;
    };
    const f: Fake = { calls: [], gates: [], providers: [], logs: [], register: (urn, state = {}) => wait(urn).resolve(state), deps: undefined as any };
    f.deps = {
        decide: async (a) => {
            f.calls.push(JSON.parse(JSON.stringify(a)));
            return { gates: [], warnings: [], provider: "", ...(await answer(a)) } as AutoGateDecideResult;
        },
        createGate: (type, name, args, opts) => {
            f.gates.push({ type, name, args, opts });
            return new pulumi.DependencyResource(`${prefix}${type}::${name}`);
        },
        createProvider: (name, args) => {
            f.providers.push({ name, args });
            return new pulumi.DependencyProviderResource(`${prefix}pulumi:providers:readiness::${name}::id`);
        },
        registeredState: (urn) => wait(urn).p,
        config: (k) => config[k],
        dryRun: () => false,
        urnPrefix: () => prefix,
        info: (msg) => f.logs.push({ level: "info", msg }),
        warn: (msg) => f.logs.push({ level: "warn", msg }),
        error: (msg) => f.logs.push({ level: "error", msg }),
    };
    return f;
}

function gater(f: Fake, o: AutoGateOptions = {}): AutoGater {
    return new AutoGater(o, f.deps);
}

// reg is a registration as the engine hands it to the transform.
function reg(type: string, name: string, object: any, opts: { parent?: string; dependsOn?: string[]; provider?: string } = {}): pulumi.ResourceTransformArgs {
    return {
        custom: true, type, name, props: object,
        opts: {
            parent: new pulumi.DependencyResource(opts.parent ?? stackUrn),
            dependsOn: (opts.dependsOn ?? []).map((u) => new pulumi.DependencyResource(u)),
            ...(opts.provider ? { provider: new pulumi.DependencyProviderResource(`${opts.provider}::id`) } : {}), // a provider reference: urn::id
        },
    };
}

// construct is what the stack transformation sees as the program constructs a resource.
function construct(g: AutoGater, type: string, name: string, opts: pulumi.CustomResourceOptions = {}, resource?: pulumi.Resource) {
    const urn = childUrn(prefix, undefined, type, name);
    return g.track({ resource: resource ?? new pulumi.DependencyResource(urn), type, name, props: {}, opts });
}

// component: a kubernetes component as the program holds it; in-process (Chart v3, ConfigFile/ConfigGroup v1) when given resources.
function component(type: string, name: string, resources?: Record<string, string>): pulumi.ComponentResource {
    const c: any = Object.create(pulumi.ComponentResource.prototype);
    Object.assign(c, { __pulumiResource: true, __pulumiType: type, __name: name, urn: pulumi.output(`${prefix}${type}::${name}`) });
    if (resources) {
        const children = Object.fromEntries(Object.entries(resources).map(([n, t]) => {
            const child: any = Object.create(pulumi.CustomResource.prototype);
            return [n, Object.assign(child, { __pulumiResource: true, __pulumiType: t, __name: n, __parentResource: c })];
        }));
        c.resources = pulumi.output(Promise.resolve(children));
    }
    return c;
}

const es = (name: string, ns: string) => ({ apiVersion: "external-secrets.io/v1", kind: "ExternalSecret", metadata: { name, namespace: ns } });
const vwc = { apiVersion: "admissionregistration.k8s.io/v1", kind: "ValidatingWebhookConfiguration", metadata: { name: "eso-validate" } };
const cm = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "cm" } };

async function depUrns(r: pulumi.ResourceTransformResult | undefined): Promise<string[]> {
    if (!r) return [];
    return Promise.all((r.opts.dependsOn as pulumi.Resource[]).map((d) => (d.urn as any).promise()));
}

test("program order: the program's kubernetes objects get places as it constructs them, each place and the cluster's facts are sent once", async () => {
    const f = fake(() => ({}), { "kubernetes:context": "kind-a", "kubernetes:namespace": "apps" });
    const g = gater(f, { timeout: "5m", namespaces: ["apps"], settle: 50 });
    const chart = component("kubernetes:helm.sh/v4:Chart", "eso");
    assert.equal(g.track({ resource: chart, type: "kubernetes:helm.sh/v4:Chart", name: "eso", props: {}, opts: {} }), undefined, "a component has no place");
    const t = construct(g, vwcType, "hook");
    assert.deepEqual(t?.opts.transforms?.length, 1, "the no-op transform that makes the engine record dependsOn");
    construct(g, esType, "es-a");
    g.track({ resource: new pulumi.DependencyResource("x"), type: cmType, name: "child", props: {}, opts: { parent: chart } });
    assert.equal(construct(g, "random:index:RandomPet", "pet"), undefined, "not kubernetes");
    // They register in another order than the program's.
    await g.transform(reg(esType, "es-a", es("a", "apps")));
    await g.transform(reg(vwcType, "hook", vwc));
    await g.transform(reg(cmType, "eso:child", cm, { parent: `${prefix}kubernetes:helm.sh/v4:Chart::eso` }));
    assert.deepEqual(f.calls.map((c) => c.entries), [[{ order: 0, type: vwcType, name: "hook" }, { order: 1, type: esType, name: "es-a" }], [], []]);
    assert.deepEqual(f.calls.map((c) => c.clusters), [[{ id: "", context: "kind-a", namespace: "apps" }], [], []]);
    assert.deepEqual(f.calls.map((c) => c.registration.order), [1, 0, undefined], "a component's child has no place");
    assert.equal(new Set(f.calls.map((c) => c.session)).size, 1, "one session per autoGate");
    assert.deepEqual(f.calls[0].options, { timeout: "5m", namespaces: ["apps"], settle: "50ms" });
    assert.deepEqual(f.calls[2].registration, {
        id: `${prefix}kubernetes:helm.sh/v4:Chart$${cmType}::eso:child`, type: cmType, name: "eso:child", object: cm,
        parent: `${prefix}kubernetes:helm.sh/v4:Chart::eso`, parentType: "kubernetes:helm.sh/v4:Chart", dependsOn: [], awaits: [],
    });
    // Not a kubernetes custom resource: no call.
    assert.equal(await g.transform(reg("readiness:index:CrdReady", "x", {})), undefined);
    assert.equal(await g.transform({ ...reg("kubernetes:helm.sh/v4:Chart", "c", {}), custom: false }), undefined);
    assert.equal(f.calls.length, 3);
});

test("a registration's facts: its dependsOn, its explicit provider's cluster (facts once), the children of in-process components it depends on, exclude", async () => {
    const f = fake();
    const g = gater(f, { exclude: (_t, name) => name === "skip-me" });
    const apps = `${prefix}pulumi:providers:kubernetes::apps`;
    const group = component("kubernetes:yaml:ConfigGroup", "widgets", { hook: vwcType, "team-a/a": esType });
    construct(g, esType, "es-a", { dependsOn: [group], provider: new pulumi.DependencyProviderResource(`${apps}::id-apps`) });
    construct(g, cmType, "skip-me", { provider: new pulumi.DependencyProviderResource(`${apps}::id-apps`) });
    f.register(apps, { kubeconfig: { "4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", value: "apiVersion: v1" }, context: "kind-apps", namespace: "" });
    const groupUrn = `${prefix}kubernetes:yaml:ConfigGroup::widgets`;
    await g.transform(reg(esType, "es-a", { ...es("a", "apps"), data: pulumi.secret("s"), later: pulumi.output(pulumi.unknown) }, { dependsOn: [groupUrn], provider: apps }));
    await g.transform(reg(cmType, "skip-me", cm, { provider: apps }));
    assert.deepEqual(f.calls[0].registration, {
        id: `${prefix}${esType}::es-a`, type: esType, name: "es-a", object: es("a", "apps"), dependsOn: [groupUrn], cluster: apps, order: 0,
        awaits: [`${prefix}kubernetes:yaml:ConfigGroup$${vwcType}::hook`, `${prefix}kubernetes:yaml:ConfigGroup$${esType}::team-a/a`],
    });
    assert.deepEqual(f.calls[0].clusters, [{ id: apps, name: "apps", kubeconfig: "apiVersion: v1", context: "kind-apps" }]);
    assert.deepEqual(f.calls.flatMap((c) => c.entries), [{ order: 0, type: esType, name: "es-a", cluster: apps }, { order: 1, type: cmType, name: "skip-me", cluster: apps }],
        "each place once, with its provider's URN");
    assert.equal(f.calls[1].registration.excluded, true);
    assert.deepEqual(f.calls[1].clusters, []);
});

test("a child of an in-process component (ConfigGroup v1, its ConfigFiles' too) awaits its whole family, itself among them; a Chart v4's child awaits none", async () => {
    const f = fake();
    const g = gater(f);
    const group: any = component("kubernetes:yaml:ConfigGroup", "widgets");
    const file: any = component("kubernetes:yaml:ConfigFile", "f.yaml");
    file.__parentResource = group;
    const child = (type: string, name: string, parent: any): any =>
        Object.assign(Object.create(pulumi.CustomResource.prototype), { __pulumiResource: true, __pulumiType: type, __name: name, __parentResource: parent });
    const kids = { hook: child(vwcType, "hook", group), "team-a/a": child(esType, "team-a/a", group), cm: child(cmType, "cm", file) };
    // Its children are constructed before it assigns its (merged) resources.
    for (const [n, k] of Object.entries(kids)) g.track({ resource: k, type: k.__pulumiType, name: n, props: {}, opts: { parent: k.__parentResource } });
    group.resources = pulumi.output(Promise.resolve(kids));
    const groupUrn = `${prefix}kubernetes:yaml:ConfigGroup::widgets`;
    const fileUrn = `${prefix}kubernetes:yaml:ConfigGroup$kubernetes:yaml:ConfigFile::f.yaml`;
    const family = [`${prefix}kubernetes:yaml:ConfigGroup$${vwcType}::hook`, `${prefix}kubernetes:yaml:ConfigGroup$${esType}::team-a/a`,
        `${prefix}kubernetes:yaml:ConfigGroup$kubernetes:yaml:ConfigFile$${cmType}::cm`].sort();
    await g.transform(reg(esType, "team-a/a", es("a", "team-a"), { parent: groupUrn }));
    await g.transform(reg(cmType, "cm", cm, { parent: fileUrn }));
    assert.equal(f.calls.length, 2);
    for (const c of f.calls) {
        assert.deepEqual([...(c.registration.awaits ?? [])].sort(), family, c.registration.name);
        assert.ok(family.includes(c.registration.id));
    }
    const chart: any = component("kubernetes:helm.sh/v4:Chart", "eso", { "eso:hook": vwcType });
    chart.__remote = true;
    g.track({ resource: child(vwcType, "eso:hook", chart), type: vwcType, name: "eso:hook", props: {}, opts: { parent: chart } });
    await g.transform(reg(vwcType, "eso:hook", vwc, { parent: `${prefix}kubernetes:helm.sh/v4:Chart::eso` }));
    assert.deepEqual(f.calls[2].registration.awaits, [], "a Chart v4's children register through the plugin: their family settles");
});

test("near miss: a remote component (Chart v4) has resources too, but its children registered before it returned: nothing to await", async () => {
    const f = fake();
    const g = gater(f);
    const chart: any = component("kubernetes:helm.sh/v4:Chart", "cm", { "cert-manager:crd": "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition" });
    chart.__remote = true;
    construct(g, "kubernetes:cert-manager.io/v1:Certificate", "cert", { dependsOn: [chart] });
    await g.transform(reg("kubernetes:cert-manager.io/v1:Certificate", "cert", {}, { dependsOn: [`${prefix}kubernetes:helm.sh/v4:Chart::cm`] }));
    assert.deepEqual(f.calls[0].registration.awaits, [], "a child URN of a remote component would never register: a 2-minute wait");
});

test("autoGate given a readiness provider: the default cluster is the one it is configured for", async () => {
    const f = fake();
    const g = gater(f, { provider: new pulumi.DependencyProviderResource(`${prefix}pulumi:providers:readiness::mine::id`) });
    await g.transform(reg(cmType, "cm", cm));
    assert.deepEqual(f.calls[0].clusters, [{ id: "", planner: true }]);
});

test("a place whose explicit provider is not registered within a second is another cluster (\"?\"); only the registrations written below it wait for it", async () => {
    const f = fake();
    const g = gater(f);
    const never: any = Object.create(pulumi.ProviderResource.prototype);
    never.__pulumiResource = true;
    never.urn = pulumi.output(new Promise<string>(() => undefined));
    construct(g, cmType, "elsewhere", { provider: never });
    construct(g, cmType, "below");
    // A component's child is not held by it: the place goes with a later call.
    let started = Date.now();
    await g.transform(reg(cmType, "chart:child", cm, { parent: `${prefix}kubernetes:helm.sh/v4:Chart::chart` }));
    assert.ok(Date.now() - started < 500, "a component's child waited for a place it does not need");
    assert.deepEqual(f.calls[0].entries, [{ order: 1, type: cmType, name: "below" }]);
    started = Date.now();
    await g.transform(reg(cmType, "below", cm));
    assert.ok(Date.now() - started >= 900);
    assert.deepEqual(f.calls[1].entries, [{ order: 0, type: cmType, name: "elsewhere", cluster: "?" }]);
});

test("wiring: each gate once per key, after the gates and installers it names (the program's handle, else once registered), secret objects, args from outputs, warnings logged", async () => {
    const hookUrn = childUrn(prefix, undefined, vwcType, "hook");
    const chartHook = `${prefix}kubernetes:helm.sh/v4:Chart$${vwcType}::eso:hook`;
    const gatesFor = (ns: string) => [
        { key: "exists", name: "auto-exists-hook", type: "readiness:index:ResourceReady", args: { kind: "x" }, after: [hookUrn, chartHook], afterGates: [], argsFrom: [], reason: "" },
        { key: `admission-${ns}`, name: `auto-admission-${ns}`, type: "readiness:index:AdmissionReady", args: { objects: [es("a", ns)] },
            after: [hookUrn], afterGates: ["exists"], argsFrom: [{ arg: "name", installer: chartHook, output: "metadata.name" }], reason: "waits for hook" },
    ];
    const f = fake((a) => (a.registration.type === esType ? { gates: gatesFor(a.registration.object!.metadata.namespace), warnings: [`about ${a.registration.name}`] } : {}));
    const g = gater(f);
    const handle = new pulumi.DependencyResource(hookUrn);
    construct(g, vwcType, "hook", {}, handle);
    const [a, b, c] = await Promise.all([["a", "team-a"], ["b", "team-a"], ["c", "team-b"]].map(([n, ns]) =>
        g.transform(reg(esType, `es-${n}`, es(n, ns), { dependsOn: [`${prefix}random:index:RandomPet::pet`] }))));
    assert.deepEqual(f.gates.map((x) => x.name), ["auto-exists-hook", "auto-admission-team-a", "auto-admission-team-b"]);
    const exists = `${prefix}readiness:index:ResourceReady::auto-exists-hook`;
    assert.deepEqual(await depUrns(a), [`${prefix}random:index:RandomPet::pet`, exists, `${prefix}readiness:index:AdmissionReady::auto-admission-team-a`], "the program's dependsOn kept");
    assert.deepEqual(await depUrns(b), await depUrns(a));
    assert.deepEqual((await depUrns(c))[2], `${prefix}readiness:index:AdmissionReady::auto-admission-team-b`);
    const [existsGate, admission] = f.gates;
    assert.equal((existsGate.opts.dependsOn as any[])[0], handle, "the program's own handle");
    // A component's child, known by URN only: a dependency that resolves once the engine registered it.
    const registered = ((existsGate.opts.dependsOn as any[])[1] as Promise<pulumi.Resource>).then((r) => (r.urn as any).promise());
    assert.equal(await Promise.race([registered, new Promise((r) => setTimeout(() => r("pending"), 20))]), "pending");
    f.register(chartHook, { metadata: { name: "eso-hook-x1" } });
    assert.equal(await registered, chartHook);
    assert.deepEqual(await Promise.all((admission.opts.dependsOn as pulumi.Resource[]).map((r) => (r.urn as any).promise())), [exists, hookUrn]);
    assert.equal(await (admission.args.objects as any).isSecret, true);
    assert.equal(await (admission.args.name as any).promise(), "eso-hook-x1");
    assert.equal(existsGate.opts.provider, undefined, "autoGate's own (default) readiness provider");
    assert.deepEqual(f.logs.filter((l) => l.level === "warn").map((l) => l.msg).sort(), ["autoGate: about es-a", "autoGate: about es-b", "autoGate: about es-c"]);
});

test("the answer's named readiness provider is made once, configured as its cluster's facts", async () => {
    const apps = `${prefix}pulumi:providers:kubernetes::apps`;
    const f = fake((a) => ({ provider: "autogate-apps",
        gates: [{ key: a.registration.name, name: `g-${a.registration.name}`, type: "readiness:index:CrdReady", args: {}, after: [], afterGates: [], argsFrom: [], reason: "" }] }));
    const g = gater(f);
    f.register(apps, { kubeconfig: "apiVersion: v1", context: "kind-apps" });
    await Promise.all(["x", "y"].map((n) => g.transform(reg(cmType, n, cm, { provider: apps }))));
    assert.equal(f.providers.length, 1);
    assert.equal(f.providers[0].name, "autogate-apps");
    assert.equal(await f.providers[0].args.kubeconfig.isSecret, true);
    assert.equal(f.providers[0].args.context, "kind-apps");
    assert.equal(f.gates.length, 2);
    for (const gate of f.gates) assert.match(await (gate.opts.provider!.urn as any).promise(), /::autogate-apps$/);
});

test("a failed call fails the registration, naming the object; a later call still works and carries its facts again", async () => {
    let fail = true;
    const f = fake(() => { if (fail) throw new Error("decide exploded"); return {}; });
    const g = gater(f);
    await assert.rejects(g.transform(reg(cmType, "cm", cm)), /the gates of kubernetes:core\/v1:ConfigMap cm, so it is not registered ungated: decide exploded/);
    assert.match(f.logs.find((l) => l.level === "error")!.msg, /ConfigMap cm, so it is not registered ungated/);
    fail = false;
    assert.equal(await g.transform(reg(cmType, "cm2", cm)), undefined);
    // What the failed call carried goes again (the provider may never have heard of it; again is harmless).
    assert.equal(f.calls[1].clusters?.length, 1, "the cluster's facts go again after a failed call");
    assert.deepEqual(f.calls[1].entries?.map((e) => e.order), f.calls[0].entries?.map((e) => e.order), "the places go again after a failed call");
});

test("a call that never answers fails its registration within its bound, and does not stall later ones", async () => {
    let hang = true;
    const f = fake(() => (hang ? new Promise(() => undefined) : {}));
    f.deps.planTimeoutMs = 20; // bound: 3 x 20 + 20 ms
    const g = gater(f);
    await assert.rejects(g.transform(reg(cmType, "cm", cm)), /ConfigMap cm, so it is not registered ungated: the plan call for kubernetes:core\/v1:ConfigMap cm did not answer within 80 ms/);
    assert.equal(f.calls[0].options?.planTimeout, "20ms");
    hang = false;
    assert.equal(await g.transform(reg(cmType, "cm2", cm)), undefined);
});

test("an explicit provider whose facts cannot be read fails the registration; the next call of that cluster tries again", async () => {
    const f = fake();
    const g = gater(f);
    const apps = `${prefix}pulumi:providers:kubernetes::apps`;
    let fail = true;
    const registered = f.deps.registeredState;
    f.deps.registeredState = (u) => (fail ? Promise.reject(new Error("engine said no")) : registered(u));
    await assert.rejects(g.transform(reg(cmType, "a", cm, { provider: apps })), /ConfigMap a, so it is not registered ungated: engine said no/);
    fail = false;
    f.register(apps, { context: "kind-apps" });
    await g.transform(reg(cmType, "b", cm, { provider: apps }));
    assert.deepEqual(f.calls.map((c) => c.clusters), [[{ id: apps, name: "apps", context: "kind-apps" }]]);
});

test("plain: unknowns, secrets and resources become null (omitted), outputs their values", async () => {
    const v = await plain({
        a: pulumi.output("x"), b: pulumi.secret("s"), c: [1, pulumi.output({ d: true })],
        e: { "4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", value: "s" },
        f: new pulumi.DependencyResource(`${prefix}x:y:z::n`), g: undefined,
    });
    assert.deepEqual(v, { a: "x", c: [1, { d: true }] });
});

test("retried: sent when the program's error hook is wired (every kubernetes registration gets it), absent without", async () => {
    const without = fake(() => ({}));
    await gater(without).transform(reg(cmType, "cm", cm));
    assert.equal(without.calls[0].options?.retried, undefined, "no hook: the provider must not count on a retry");
    const withHook = fake(() => ({}));
    const g = gater(withHook);
    g.retryHook = { name: "readiness-retry" } as pulumi.ErrorHook; // a stand-in: registering a real one needs an engine
    await g.transform(reg(cmType, "cm", cm));
    assert.equal(withHook.calls[0].options?.retried, true);
});
