// autoGate's bookkeeping in the SDK, without a cluster or an engine: the transform against a fake
// plan (the rules live in the provider; these tests only check what the SDK does with answers):
// one gate per batch key, installers in registration order, a gate created only after the
// installer it is about was registered, a component's children decided once they settle (a
// webhook configuration arriving after the custom resource it validates), the opt-outs, and a
// failing or silent plan that fails the registration (never lets it through ungated) without hanging.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as pulumi from "@pulumi/pulumi";
import { AutoGateDeps, AutoGateOptions, AutoGater, PlanArgs, PlanBatchArgs, PlannedGate, PlanResult, childUrn, plain, planBatcher } from "@readiness-io/pulumi-readiness";

const prefix = "urn:pulumi:dev::proj::";
const stackUrn = `${prefix}pulumi:pulumi:Stack::proj-dev`;

// fakePlan: webhook configurations and Releases are installers; an ExternalSecret waits for the
// webhook installer (key per namespace); anything depending on a Release waits for it.
function fakePlan(a: PlanArgs): PlanResult {
    const kind = a.resource.object?.kind;
    if (kind === "ValidatingWebhookConfiguration" || kind === "Certificate" || kind === "CustomResourceDefinition" || a.resource.type === "kubernetes:helm.sh/v3:Release") return { remember: true };
    const gates: PlannedGate[] = [];
    if (kind === "Deployment") {
        const mounted = (a.resource.object.spec?.template?.spec?.volumes ?? []).map((v: any) => v.secret?.secretName);
        for (const c of a.installers.filter((i) => i.object?.kind === "Certificate" && mounted.includes(i.object.spec?.secretName))) {
            gates.push({ key: `cert-${c.id}`, name: `auto-certificate-${c.name}`, type: "readiness:index:CertificateReady", args: {}, after: [c.id] });
        }
    }
    const hook = a.installers.find((i) => i.object?.kind === "ValidatingWebhookConfiguration");
    if (kind === "ExternalSecret" && hook) {
        const ns = a.resource.object.metadata?.namespace;
        gates.push({ key: `exists-${hook.id}`, name: `auto-exists-${hook.name}`, type: "readiness:index:ResourceReady", args: {}, after: [hook.id] });
        gates.push({ key: `admission-${hook.id}-${ns}`, name: `auto-admission-${ns}`, type: "readiness:index:AdmissionReady",
            args: { objects: [a.resource.object] }, after: [hook.id], afterGates: [`exists-${hook.id}`], reason: `waits for ${hook.name}` });
    }
    for (const id of a.dependsOn) {
        const rel = a.installers.find((i) => i.id === id && i.type === "kubernetes:helm.sh/v3:Release");
        if (rel) gates.push({ key: `release-${rel.id}`, name: `auto-${rel.name}`, type: "readiness:index:HelmReleaseReady", args: { name: rel.name }, after: [rel.id] });
    }
    return { gates, remember: kind === "ExternalSecret" };
}

interface Fake {
    deps: AutoGateDeps;
    calls: PlanArgs[];
    created: { gate: PlannedGate; after: string[] }[];
    warnings: string[];
    register: (urn: string) => void; // the engine finished this registration: its waitRegistered resolves
}

function fake(plan: (a: PlanArgs) => PlanResult | Promise<PlanResult> = fakePlan): Fake {
    const waits = new Map<string, { p: Promise<void>; resolve: () => void }>();
    const wait = (urn: string) => {
        let w = waits.get(urn);
        if (!w) {
            let resolve!: () => void;
            const p = new Promise<void>((r) => (resolve = r));
            waits.set(urn, (w = { p, resolve }));
        }
        return w;
    };
    const f: Fake = { calls: [], created: [], warnings: [], register: (urn) => wait(urn).resolve(), deps: undefined as any };
    f.deps = {
        plan: async (a) => { f.calls.push(JSON.parse(JSON.stringify(a))); return plan(a); },
        createGate: (gate, after) => {
            f.created.push({ gate, after: [] });
            const entry = f.created[f.created.length - 1];
            void Promise.all(after.map((r) => (r.urn as any).promise())).then((u) => (entry.after = u));
            return new pulumi.DependencyResource(`${prefix}${gate.type}::${gate.name}`);
        },
        waitRegistered: (urn) => wait(urn).p,
        urnPrefix: () => prefix,
        info: () => undefined,
        warn: (m) => f.warnings.push(m),
    };
    return f;
}

function reg(type: string, name: string, object: any, opts: { parent?: string; dependsOn?: string[] } = {}): pulumi.ResourceTransformArgs {
    return {
        custom: true, type, name, props: object,
        opts: {
            parent: new pulumi.DependencyResource(opts.parent ?? stackUrn),
            dependsOn: (opts.dependsOn ?? []).map((u) => new pulumi.DependencyResource(u)),
        },
    };
}

const es = (name: string, ns: string, extra: any = {}) => ({
    apiVersion: "external-secrets.io/v1", kind: "ExternalSecret", metadata: { name, namespace: ns, ...extra }, spec: { target: { name } },
});
const vwc = { apiVersion: "admissionregistration.k8s.io/v1", kind: "ValidatingWebhookConfiguration", metadata: { name: "eso-validate" } };

async function depUrns(r: pulumi.ResourceTransformResult | undefined): Promise<string[]> {
    if (!r) return [];
    const deps = r.opts.dependsOn as pulumi.Resource[];
    return Promise.all(deps.map((d) => (d.urn as any).promise()));
}

function gater(f: Fake, o: AutoGateOptions = {}): AutoGater {
    return new AutoGater({ settle: 20, ...o }, f.deps);
}

test("one gate per batch key: ExternalSecrets of one namespace behind one webhook share a gate", async () => {
    const f = fake();
    const g = gater(f);
    const hookUrn = childUrn(prefix, stackUrn, "kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration", "eso-validate");
    assert.equal(await g.transform(reg("kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration", "eso-validate", vwc)), undefined);
    const pending = ["a", "b", "c"].map((n) => g.transform(reg("kubernetes:external-secrets.io/v1:ExternalSecret", `es-${n}`, es(n, "team-a"))));
    const other = g.transform(reg("kubernetes:external-secrets.io/v1:ExternalSecret", "es-x", es("x", "team-b")));
    await new Promise((r) => setTimeout(r, 10));
    assert.equal(f.created.length, 0, "a gate was registered before the webhook configuration it is about");
    f.register(hookUrn);
    const results = await Promise.all([...pending, other]);
    const exists = `${prefix}readiness:index:ResourceReady::auto-exists-eso-validate`;
    assert.deepEqual(f.created.map((c) => c.gate.name), ["auto-exists-eso-validate", "auto-admission-team-a", "auto-admission-team-b"]);
    for (const r of results.slice(0, 3)) assert.deepEqual(await depUrns(r), [exists, `${prefix}readiness:index:AdmissionReady::auto-admission-team-a`]);
    assert.deepEqual(await depUrns(results[3]), [exists, `${prefix}readiness:index:AdmissionReady::auto-admission-team-b`]);
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(f.created[0].after, [hookUrn], "the exists gate depends on the webhook configuration");
    assert.deepEqual(f.created[1].after, [hookUrn, exists], "the admission gate depends on the configuration and on the exists gate");
    // Installers in registration order, each ExternalSecret remembered once.
    assert.deepEqual(f.calls[f.calls.length - 1].installers.map((i) => i.name), ["eso-validate", "es-a", "es-b", "es-c"]);
});

test("a resource that depends on a Release is gated on it; the plan sees the dependsOn as installer ids", async () => {
    const f = fake();
    const g = gater(f);
    const relUrn = childUrn(prefix, stackUrn, "kubernetes:helm.sh/v3:Release", "eso");
    await g.transform(reg("kubernetes:helm.sh/v3:Release", "eso", { chart: "external-secrets", namespace: "eso" }));
    const cm = g.transform(reg("kubernetes:core/v1:ConfigMap", "cm", { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "cm" } }, { dependsOn: [relUrn] }));
    await new Promise((r) => setTimeout(r, 10));
    f.register(relUrn);
    assert.deepEqual(await depUrns(await cm), [relUrn, `${prefix}readiness:index:HelmReleaseReady::auto-eso`], "the user's dependsOn is kept, the gate added");
    assert.deepEqual(f.calls[1].dependsOn, [relUrn], "installer ids are their URNs, as in the Go SDK");
});

test("near misses: nothing gated gives no gate; opt-out annotation, exclude and a hand gate win, installers are still remembered", async () => {
    const f = fake();
    const g = gater(f, { exclude: (_t, name) => name === "es-excluded" });
    const hookUrn = childUrn(prefix, stackUrn, "kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration", "eso-validate");
    await g.transform(reg("kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration", "eso-validate", vwc));
    f.register(hookUrn);
    assert.equal(await g.transform(reg("kubernetes:core/v1:ConfigMap", "cm", { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "cm" } })), undefined);
    assert.equal(await g.transform(reg("kubernetes:external-secrets.io/v1:ExternalSecret", "es-out",
        es("out", "team-a", { annotations: { "readiness.io/auto-gate": "false" } }))), undefined);
    assert.equal(await g.transform(reg("kubernetes:external-secrets.io/v1:ExternalSecret", "es-excluded", es("excluded", "team-a"))), undefined);
    assert.equal(await g.transform(reg("kubernetes:external-secrets.io/v1:ExternalSecret", "es-hand", es("hand", "team-a"),
        { dependsOn: [`${prefix}readiness:index:AdmissionReady::by-hand`] })), undefined);
    assert.equal(f.created.length, 0);
    assert.deepEqual(f.calls[f.calls.length - 1].installers.map((i) => i.name), ["eso-validate", "es-out", "es-excluded"]);
    // Not a kubernetes registration, or a component: the plan is not asked.
    const n = f.calls.length;
    assert.equal(await g.transform(reg("readiness:index:CrdReady", "x", {})), undefined);
    assert.equal(await g.transform({ ...reg("kubernetes:helm.sh/v4:Chart", "c", {}), custom: false }), undefined);
    assert.equal(f.calls.length, n);
});

test("installers option: only the named installers count", async () => {
    const f = fake();
    const g = gater(f, { installers: ["other"] });
    await g.transform(reg("kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration", "eso-validate", vwc));
    assert.equal(await g.transform(reg("kubernetes:external-secrets.io/v1:ExternalSecret", "es-a", es("a", "team-a"))), undefined);
    assert.deepEqual(f.calls[1].installers, []);
});

test("a component's children are decided once they settle: a webhook configuration after the custom resource it validates", async () => {
    const f = fake();
    const g = gater(f);
    const chart = `${prefix}kubernetes:helm.sh/v4:Chart::eso`;
    const hookUrn = childUrn(prefix, chart, "kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration", "eso:eso-validate");
    assert.equal(hookUrn, `${prefix}kubernetes:helm.sh/v4:Chart$kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration::eso:eso-validate`);
    const cr = g.transform(reg("kubernetes:external-secrets.io/v1:ExternalSecret", "eso:team-a/a", es("a", "team-a"), { parent: chart }));
    const cm = g.transform(reg("kubernetes:core/v1:ConfigMap", "eso:cm", { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "cm" } }, { parent: chart }));
    const hook = g.transform(reg("kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration", "eso:eso-validate", vwc, { parent: chart }));
    assert.equal(await hook, undefined);
    assert.equal(await cm, undefined);
    assert.equal(f.calls[0].resource.parentType, "kubernetes:helm.sh/v4:Chart");
    f.register(hookUrn);
    assert.deepEqual(await depUrns(await cr), [`${prefix}readiness:index:ResourceReady::auto-exists-eso:eso-validate`, `${prefix}readiness:index:AdmissionReady::auto-admission-team-a`]);
    assert.deepEqual(f.created[0].after, [hookUrn]);
});

// localComponent: a component the SDK renders in-process (ConfigGroup v1) as autoGate sees it, never registered.
function localComponent(type: string, resources: pulumi.Output<any>, remote = false): pulumi.ComponentResource {
    const c: any = Object.create(pulumi.ComponentResource.prototype);
    c.__pulumiType = type;
    c.__remote = remote;
    c.resources = resources;
    return c;
}

const esType = "kubernetes:external-secrets.io/v1:ExternalSecret";
const vwcType = "kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration";

test("a ConfigGroup v1's children settle once every child the SDK constructed has arrived, however far apart; a Chart v4's after the pause", async () => {
    const f = fake();
    const g = gater(f); // settle: 20 ms
    const group = localComponent("kubernetes:yaml:ConfigGroup", pulumi.output({}));
    const groupUrn = `${prefix}kubernetes:yaml:ConfigGroup::widgets`;
    g.track("kubernetes:yaml:ConfigGroup", "widgets", group, {}, {});
    // The SDK constructs both children (in the component's own applies), then they register.
    g.track(esType, "team-a/a", new pulumi.DependencyResource(childUrn(prefix, groupUrn, esType, "team-a/a")), es("a", "team-a"), { parent: group });
    g.track(vwcType, "eso-validate", new pulumi.DependencyResource(childUrn(prefix, groupUrn, vwcType, "eso-validate")), vwc, { parent: group });
    let settled = false;
    const cr = g.transform(reg(esType, "team-a/a", es("a", "team-a"), { parent: groupUrn })).finally(() => (settled = true));
    await new Promise((r) => setTimeout(r, 200)); // ten settle pauses
    assert.equal(settled, false, "decided before its sibling webhook configuration arrived");
    assert.equal(f.calls.length, 0);
    const hook = g.transform(reg(vwcType, "eso-validate", vwc, { parent: groupUrn }));
    assert.equal(await hook, undefined);
    f.register(childUrn(prefix, groupUrn, vwcType, "eso-validate"));
    assert.deepEqual(await depUrns(await cr), [`${prefix}readiness:index:ResourceReady::auto-exists-eso-validate`, `${prefix}readiness:index:AdmissionReady::auto-admission-team-a`]);
    assert.deepEqual(f.warnings, []);

    // A remote component (Chart v4: the plugin registers its children) settles after the pause.
    const f2 = fake();
    const g2 = gater(f2);
    const chart = localComponent("kubernetes:helm.sh/v4:Chart", pulumi.output([]), true);
    g2.track("kubernetes:helm.sh/v4:Chart", "eso", chart, {}, {});
    assert.equal(await g2.transform(reg(esType, "eso:team-a/a", es("a", "team-a"), { parent: `${prefix}kubernetes:helm.sh/v4:Chart::eso` })), undefined,
        "a remote component's child is decided after the settle pause");
});

test("a ConfigFile v1 child that never reaches the transform holds its siblings no longer than the plan timeout, with a warning", async () => {
    const f = fake();
    f.deps.planTimeoutMs = 200;
    const g = gater(f);
    const file = localComponent("kubernetes:yaml:ConfigFile", pulumi.output({}));
    const fileUrn = `${prefix}kubernetes:yaml:ConfigFile::app`;
    g.track("kubernetes:yaml:ConfigFile", "app", file, {}, {});
    for (const n of ["a", "b"]) {
        g.track("kubernetes:core/v1:ConfigMap", n, new pulumi.DependencyResource(childUrn(prefix, fileUrn, "kubernetes:core/v1:ConfigMap", n)),
            { apiVersion: "v1", kind: "ConfigMap" }, { parent: file });
    }
    assert.equal(await g.transform(reg("kubernetes:core/v1:ConfigMap", "a", { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "a" } }, { parent: fileUrn })), undefined);
    assert.equal(f.warnings.length, 1, f.warnings.join("\n"));
    assert.match(f.warnings[0], /kubernetes:yaml:ConfigFile app are decided without every sibling/);
});

test("a failing plan fails the registration, naming the object and the cause (never ungated), and the next one still works", async () => {
    let fail = true;
    const f = fake((a) => { if (fail) throw new Error("plan exploded"); return fakePlan(a); });
    const g = gater(f);
    await assert.rejects(g.transform(reg("kubernetes:core/v1:ConfigMap", "cm", { apiVersion: "v1", kind: "ConfigMap" })),
        /kubernetes:core\/v1:ConfigMap cm, so it is not registered ungated: plan exploded/);
    const chart = `${prefix}kubernetes:yaml/v2:ConfigGroup::g`;
    await assert.rejects(g.transform(reg("kubernetes:core/v1:ConfigMap", "g:cm", { apiVersion: "v1", kind: "ConfigMap" }, { parent: chart })),
        /ConfigMap g:cm, so it is not registered ungated: plan exploded/);
    fail = false;
    assert.equal(await g.transform(reg("kubernetes:helm.sh/v3:Release", "eso", { chart: "x" })), undefined);
    assert.equal(f.calls[f.calls.length - 1].resource.name, "eso");
});

test("a plan call that never answers fails its registration after the plan timeout, and does not stall later ones", async () => {
    let hang = true;
    const f = fake((a) => (hang ? new Promise<PlanResult>(() => undefined) : fakePlan(a)));
    f.deps.planTimeoutMs = 30;
    const g = gater(f);
    await assert.rejects(g.transform(reg("kubernetes:core/v1:ConfigMap", "cm", { apiVersion: "v1", kind: "ConfigMap" })),
        /ConfigMap cm, so it is not registered ungated: the plan call for kubernetes:core\/v1:ConfigMap cm did not answer/);
    hang = false;
    assert.equal(await g.transform(reg("kubernetes:helm.sh/v3:Release", "eso", { chart: "x" })), undefined);
});

test("a webhook configuration registered after objects it intercepts warns, naming them (top level, and a component's late child)", async () => {
    const f = fake();
    const g = gater(f);
    assert.equal(await g.transform(reg("kubernetes:external-secrets.io/v1:ExternalSecret", "es-early", es("early", "team-a"))), undefined);
    const chart = `${prefix}kubernetes:yaml/v2:ConfigGroup::g`;
    assert.equal(await g.transform(reg("kubernetes:external-secrets.io/v1:ExternalSecret", "g:team-a/child", es("child", "team-a"), { parent: chart })), undefined);
    assert.equal(await g.transform(reg("kubernetes:core/v1:ConfigMap", "cm", { apiVersion: "v1", kind: "ConfigMap" })), undefined);
    assert.equal(f.warnings.length, 0);
    // The group above had settled when its sibling webhook configuration arrives.
    assert.equal(await g.transform(reg("kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration", "g:eso-validate", vwc, { parent: chart })), undefined);
    for (let i = 0; i < 20 && f.warnings.length < 2; i++) await new Promise((r) => setTimeout(r, 10));
    assert.equal(f.warnings.length, 2, f.warnings.join("\n"));
    assert.match(f.warnings[0], /ExternalSecret es-early was registered before .*ValidatingWebhookConfiguration g:eso-validate, which intercepts it/);
    assert.match(f.warnings[1], /ExternalSecret g:team-a\/child was registered before/);
});

test("top-level resources are decided in program order, not in the order Node registers them", async () => {
    const f = fake();
    const g = gater(f);
    const cert = { apiVersion: "cert-manager.io/v1", kind: "Certificate", metadata: { name: "agent", namespace: "default" }, spec: { secretName: "agent-tls" } };
    const deploy = { apiVersion: "apps/v1", kind: "Deployment", metadata: { name: "agent", namespace: "default" },
        spec: { template: { spec: { volumes: [{ name: "tls", secret: { secretName: "agent-tls" } }] } } } };
    const certUrn = childUrn(prefix, undefined, "kubernetes:cert-manager.io/v1:Certificate", "agent-cert");
    const certRes = new pulumi.DependencyResource(certUrn);
    const deployRes = new pulumi.DependencyResource(`${prefix}kubernetes:apps/v1:Deployment::agent`);
    // The program constructs the Certificate (it waits for a chart: registered later), then the Deployment.
    g.track("kubernetes:cert-manager.io/v1:Certificate", "agent-cert", certRes, cert, { dependsOn: [] });
    g.track("kubernetes:apps/v1:Deployment", "agent", deployRes, { ...deploy, status: pulumi.output(undefined) }, {});
    const d = await g.transform(reg("kubernetes:apps/v1:Deployment", "agent", deploy));
    assert.deepEqual(await depUrns(d), [`${prefix}readiness:index:CertificateReady::auto-certificate-agent-cert`]);
    assert.deepEqual(f.created[0].after, [certUrn], "the gate depends on the Certificate's own handle");
    assert.equal(await g.transform(reg("kubernetes:cert-manager.io/v1:Certificate", "agent-cert", cert)), undefined);
    assert.equal(f.calls.filter((c) => c.resource.name === "agent-cert").length, 1, "decided at construction, its values all known then");
    assert.deepEqual(f.calls.filter((c) => c.resource.name === "agent").pop()!.installers.map((i) => i.name), ["agent-cert"]);
});

test("objects of an explicit kubernetes provider are decided in program order among that provider's, whatever order they register in", async () => {
    const f = fake();
    f.deps.clusterProvider = async () => ({});
    const g = gater(f);
    const apps = new pulumi.DependencyProviderResource(`${prefix}pulumi:providers:kubernetes::apps::id-apps`);
    const cert = { apiVersion: "cert-manager.io/v1", kind: "Certificate", metadata: { name: "web" }, spec: { secretName: "web-tls" } };
    const deploy = { apiVersion: "apps/v1", kind: "Deployment", metadata: { name: "web" },
        spec: { template: { spec: { volumes: [{ name: "tls", secret: { secretName: "web-tls" } }] } } } };
    const onApps = (a: pulumi.ResourceTransformArgs) => ({ ...a, opts: { ...a.opts, provider: apps } });
    // The program writes the Certificate, then the Deployment; the Deployment registers first.
    g.track("kubernetes:cert-manager.io/v1:Certificate", "web-cert", new pulumi.DependencyResource(`${prefix}kubernetes:cert-manager.io/v1:Certificate::web-cert`), cert, { provider: apps });
    g.track("kubernetes:apps/v1:Deployment", "web", new pulumi.DependencyResource(`${prefix}kubernetes:apps/v1:Deployment::web`), deploy, { provider: apps });
    let decided = false;
    const d = g.transform(onApps(reg("kubernetes:apps/v1:Deployment", "web", deploy))).then((r) => ((decided = true), r));
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(decided, false, "the Deployment was decided before the Certificate written above it");
    assert.equal(await g.transform(onApps(reg("kubernetes:cert-manager.io/v1:Certificate", "web-cert", cert))), undefined);
    f.register(`${prefix}kubernetes:cert-manager.io/v1:Certificate::web-cert`); // the engine registered it: its gate may be made
    assert.deepEqual(await depUrns(await d), [`${prefix}readiness:index:CertificateReady::auto-certificate-web-cert`]);
});

test("plan calls run concurrently and every answer still counts every installer registered before it", async () => {
    let inFlight = 0, most = 0;
    const f = fake(async (a) => {
        most = Math.max(most, ++inFlight);
        await new Promise((r) => setTimeout(r, a.resource.name === "eso-validate" ? 30 : 5)); // the installer answers last
        inFlight--;
        return fakePlan(a);
    });
    const g = gater(f);
    const hookUrn = childUrn(prefix, undefined, "kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration", "eso-validate");
    f.register(hookUrn);
    const track = (type: string, name: string, obj: any) => g.track(type, name, new pulumi.DependencyResource(childUrn(prefix, undefined, type, name)), obj, {});
    track("kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration", "eso-validate", vwc);
    for (const n of ["a", "b", "c", "d"]) track("kubernetes:external-secrets.io/v1:ExternalSecret", `es-${n}`, es(n, "team-a"));
    const results = await Promise.all(["a", "b", "c", "d"].map((n) => g.transform(reg("kubernetes:external-secrets.io/v1:ExternalSecret", `es-${n}`, es(n, "team-a")))));
    assert.ok(most > 1, "the plan calls ran one at a time");
    for (const r of results) assert.equal((await depUrns(r)).length, 2, "an ExternalSecret asked before the webhook's answer was not asked again");
});

test("installers are sent to later calls as the plan trimmed them; whole when an older provider does not say", async () => {
    const crd = { apiVersion: "apiextensions.k8s.io/v1", kind: "CustomResourceDefinition", metadata: { name: "widgets.example.com" },
        spec: { group: "example.com", names: { kind: "Widget", plural: "widgets" },
            versions: [{ name: "v1", served: true, storage: true, schema: { openAPIV3Schema: { type: "object", properties: { spec: { type: "object" } } } } }] } };
    const trimmed = { apiVersion: crd.apiVersion, kind: crd.kind, metadata: crd.metadata, spec: { group: "example.com", names: crd.spec.names, versions: [{ name: "v1", served: true }] } };
    for (const [answer, want] of [[{ remember: true, installer: trimmed }, trimmed], [{ remember: true }, crd]] as const) {
        const f = fake((a) => (a.resource.object?.kind === "CustomResourceDefinition" ? answer : {}));
        const g = gater(f);
        await g.transform(reg("kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition", "widgets", crd));
        await g.transform(reg("kubernetes:core/v1:ConfigMap", "cm", { apiVersion: "v1", kind: "ConfigMap" }));
        assert.deepEqual(f.calls[0].resource.object, crd, "the registration itself is sent whole");
        assert.deepEqual(f.calls[1].installers[0].object, want);
    }
});

test("plain: unknowns, secrets and resources become null (omitted), outputs their values", async () => {
    const v = await plain({
        a: pulumi.output("x"), b: pulumi.secret("s"), c: [1, pulumi.output({ d: true })],
        e: { "4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", value: "s" },
        f: new pulumi.DependencyResource(`${prefix}x:y:z::n`), g: undefined,
    });
    assert.deepEqual(v, { a: "x", c: [1, { d: true }] });
});

test("concurrent decisions are asked once: earlier registrations not answered yet are sent as installers, a dependsOn on one among them too", async () => {
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const f = fake(async (a) => {
        if (a.resource.type === "kubernetes:helm.sh/v3:Release") await held; // the release answers last
        return fakePlan(a);
    });
    const g = gater(f);
    const relType = "kubernetes:helm.sh/v3:Release";
    const relUrn = childUrn(prefix, undefined, relType, "eso");
    const relRes = new pulumi.DependencyResource(relUrn);
    g.track(relType, "eso", relRes, { chart: "x", name: "eso" }, {});
    const names = ["a", "b", "c", "d"];
    for (const n of names) g.track("kubernetes:external-secrets.io/v1:ExternalSecret", `es-${n}`,
        new pulumi.DependencyResource(childUrn(prefix, undefined, "kubernetes:external-secrets.io/v1:ExternalSecret", `es-${n}`)), es(n, "team-a"), { dependsOn: [relRes] });
    await new Promise((r) => setTimeout(r, 10));
    release();
    f.register(relUrn);
    const results = await Promise.all(names.map((n) => g.transform(reg("kubernetes:external-secrets.io/v1:ExternalSecret", `es-${n}`, es(n, "team-a"), { dependsOn: [relUrn] }))));
    for (const r of results) assert.deepEqual(await depUrns(r), [relUrn, `${prefix}readiness:index:HelmReleaseReady::auto-eso`]);
    assert.equal(f.calls.length, 5, `asked again: ${f.calls.map((c) => c.resource.name)}`);
    const last = f.calls.find((c) => c.resource.name === "es-d")!;
    assert.deepEqual(last.installers.map((i) => i.name), ["eso", "es-a", "es-b", "es-c"]);
    assert.deepEqual(last.dependsOn, [relUrn]);
});

test("plan calls made together go as one batch invoke, each installer once, each call answered by its own result", async () => {
    const batches: PlanBatchArgs[] = [];
    // As the provider answers: each gate key once, as the first plan naming it answers it.
    const plan = planBatcher(async (b) => {
        batches.push(JSON.parse(JSON.stringify(b)));
        const gates: PlannedGate[] = [];
        const results = b.plans.map((p) => {
            const r = fakePlan({ ...p, installers: p.installers.map((i) => b.installers[i]) });
            return { ...r, gates: (r.gates ?? []).map((g) => {
                const at = gates.findIndex((x) => x.key === g.key);
                return at >= 0 ? at : gates.push(g) - 1;
            }) };
        });
        return { gates, results };
    });
    const hook = { id: "hook", type: "kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration", name: "eso-validate", object: vwc };
    const esType = "kubernetes:external-secrets.io/v1:ExternalSecret";
    const ask = (name: string, installers: PlanArgs["installers"]) => plan({ resource: { type: esType, name, object: es(name, "team-a") }, installers, dependsOn: [], options: {} });
    const a = { id: "a", type: esType, name: "a", object: es("a", "team-a") };
    const together = await Promise.all([ask("a", [hook]), ask("b", [hook, a]), ask("c", [hook, a, { ...a, object: es("a", "team-b") }])]);
    assert.equal(batches.length, 1, "calls made in one turn went as separate invokes");
    assert.deepEqual(batches[0].installers.map((i) => i.id), ["hook", "a", "a"], "the same installer sent twice, or one with new values merged into it");
    assert.deepEqual(batches[0].plans.map((p) => p.installers), [[0], [0, 1], [0, 1, 2]]);
    assert.deepEqual(together.map((r) => r.remember), [true, true, true]);
    assert.deepEqual(together.map((r) => r.gates?.map((g) => g.name)), Array(3).fill(["auto-exists-eso-validate", "auto-admission-team-a"]), "an answer went to another call");
    assert.deepEqual(together.map((r) => r.gates?.[1]?.args.objects[0].metadata.name), ["a", "a", "a"], "a batch key's gate is not the first plan's");
    // A later call is a batch of its own.
    await ask("d", [hook]);
    assert.equal(batches.length, 2);
});

test("a failing batch invoke fails every call in it; a short answer fails the calls it left out, an unknown gate index its call", async () => {
    let answer: "fail" | "short" = "fail";
    const plan = planBatcher(async (b) => {
        if (answer === "fail") throw new Error("invoke exploded");
        return { results: b.plans.slice(1).map(() => ({ gates: [0] })), gates: [] };
    });
    const ask = (name: string) => plan({ resource: { type: "kubernetes:core/v1:ConfigMap", name, object: {} }, installers: [], dependsOn: [], options: {} });
    const failed = await Promise.allSettled([ask("x"), ask("y")]);
    assert.deepEqual(failed.map((r) => r.status === "rejected" && String(r.reason)), ["Error: invoke exploded", "Error: invoke exploded"]);
    answer = "short";
    const short = await Promise.allSettled([ask("x"), ask("y")]);
    assert.match(String((short[0] as PromiseRejectedResult).reason), /unknown gate index for kubernetes:core\/v1:ConfigMap x/);
    assert.match(String((short[1] as PromiseRejectedResult).reason), /answered 1 of 2 calls/);
});
