// autoGate: one call at the top of a program puts the right readiness gate in front of every
// Kubernetes object that something else in the stack can block (issue #24). Hand-written (an
// overlay kept beside the generated SDK). Every decision is the provider's
// (`readiness:index:autoGateDecide`): this file carries each registration's facts to it and wires
// the gates it answers (sdk/overlay/README.md, "autoGate: the SDK carries facts, the provider
// decides"; the Go overlay does the same).
import * as crypto from "crypto";
import * as pulumi from "@pulumi/pulumi";
import * as utilities from "./utilities";
import * as inputs from "./types/input";
import * as outputs from "./types/output";
import { autoGateDecide, AutoGateDecideArgs, AutoGateDecideResult } from "./autoGateDecide";
import { autoGateRetry, AutoGateRetryArgs, AutoGateRetryResult } from "./autoGateRetry";
import { Provider, ProviderArgs } from "./provider";

/** Options of {@link autoGate}; all optional. */
export interface AutoGateOptions {
    /** A readiness Provider for the gates and for the decision invoke. */
    provider?: pulumi.ProviderResource;
    /** Passed to every gate it makes, as a Go duration (`10m`). */
    timeout?: string;
    /** Passed to every gate it makes, as a Go duration (`10s`). */
    stableFor?: string;
    /** Passed to every gate it makes, as a Go duration (`30s`). */
    failureGrace?: string;
    /** Only objects in these namespaces are gated. */
    namespaces?: string[];
    /** Only installers with these Pulumi resource names count (a CRD, a webhook configuration, a Release, ...). */
    installers?: string[];
    /** True: never gate this resource (type token, Pulumi name). */
    exclude?: (type: string, name: string) => boolean;
    /**
     * Children of a component (a Chart v4, a ConfigGroup) are registered concurrently, in no
     * guaranteed order: each child's decision waits until no new child of the same component
     * arrived for this many milliseconds. Default 200.
     */
    settle?: number;
    /**
     * False keeps autoGate's error hook off: a create or update the API server could not admit
     * because it could not call a webhook, or could not be reached, then fails the `up` (see
     * docs/retry.md). Default true.
     */
    retry?: boolean;
}

/** Options of {@link autoRetry}; all optional. */
export interface AutoRetryOptions {
    /** The readiness Provider that decides and proves (the default one if unset). */
    provider?: pulumi.ProviderResource;
    /** Bounds each wait for an object's admission to be proven again, as a Go duration (default `5m`). */
    timeout?: string;
}

/** The annotation that opts one object out: `readiness.io/auto-gate: "false"`. */
export const autoGateOptOutAnnotation = "readiness.io/auto-gate";

/**
 * autoGate registers a stack transform that gates every later `kubernetes:` registration on
 * what it needs (a CRD the stack installs, a webhook that intercepts it, the Secret a
 * Certificate or ExternalSecret produces, a Helm release): it only adds `dependsOn` entries,
 * never changes props, and (unless `retry: false`) gives each of them the error hook
 * {@link autoRetry} describes. Call it once, before the resources it should see.
 */
export function autoGate(opts?: AutoGateOptions): void {
    const gater = new AutoGater(opts ?? {}, pulumiDeps(opts ?? {}));
    const inProgram = programContext();
    if (opts?.retry !== false) {
        const missing = errorHooksMissing();
        if (missing) {
            pulumi.log.warn(`autoGate: ${missing}: a create that fails after its gate passed is not retried (docs/retry.md); pass \`retry: false\` to silence this`);
        } else {
            gater.retryHook = registerRetryHook(gater, inProgram);
        }
    }
    pulumi.runtime.registerStackTransformation((a) => gater.track(a));
    pulumi.runtime.registerResourceTransform((a) => inProgram(() => gater.transform(a)));
}

/**
 * autoRetry, for a program that places its gates by hand (no {@link autoGate}), gives every
 * Kubernetes resource registered after it the error hook autoGate gives: a create or update the
 * API server could not admit because it could not call a webhook (connection refused, no
 * endpoints, timeout, TLS) or could not be reached is tried again once the object's own admission
 * is proven again; never a denial, an invalid object, a quota or RBAC refusal. Every decision is
 * the provider's (`readiness:index:autoGateRetry`). Needs a Pulumi CLI with error hooks (3.217 or
 * later). Call it once, before the resources it should see; see docs/retry.md.
 */
export function autoRetry(opts?: AutoRetryOptions): void {
    const o: AutoGateOptions = { provider: opts?.provider, timeout: opts?.timeout };
    const gater = new AutoGater(o, pulumiDeps(o));
    gater.retryOnly = true;
    const inProgram = programContext();
    const missing = errorHooksMissing();
    if (missing) throw new Error(`readiness: autoRetry needs error hooks: ${missing} (docs/retry.md)`);
    gater.retryHook = registerRetryHook(gater, inProgram);
    pulumi.runtime.registerResourceTransform((a) => inProgram(() => gater.transform(a)));
}

// errorHooksMissing says what lacks error hooks ("" when they work): this @pulumi/pulumi (3.248
// or later), or the Pulumi CLI (3.217 or later), as the SDK's run state records it.
function errorHooksMissing(): string {
    if (typeof (pulumi as any).ErrorHook !== "function") return "this @pulumi/pulumi has no error hooks (3.248 or later has)";
    try {
        const store = require("@pulumi/pulumi/runtime/state").getStore();
        if (store && store.supportsErrorHooks === false) return "this Pulumi CLI has no error hooks (3.217 or later has)";
    } catch {
        // an SDK without that module: the hook's registration says it if the CLI lacks them
    }
    return "";
}

// retryHookName is the one error hook a program registers (autoGate or autoRetry).
const retryHookName = "readiness-retry";

// The programs that registered the error hook, by their run state (an Automation API process
// runs one program after another, each in a run state of its own).
const hooked = new WeakSet<object>();

// registerRetryHook registers the program's error hook, once: autoGate and autoRetry both
// called is an error, not two hooks of one name. The Node SDK registers a hook on construction;
// a CLI without error hooks fails the program with the SDK's "does not support error hooks".
function registerRetryHook(gater: AutoGater, inProgram: <T>(f: () => T) => T): pulumi.ErrorHook {
    const als = (globalThis as any).asyncLocalStorage;
    const key: object = als?.getStore() ?? globalThis;
    if (hooked.has(key)) throw new Error("readiness: the error hook is registered already: call autoGate or autoRetry once per program");
    const hook = new pulumi.ErrorHook(retryHookName, (a) => inProgram(() => gater.onError(a)));
    hooked.add(key);
    return hook;
}

// programContext runs a function in the program's async context. The engine calls transforms
// and hooks back from the SDK's gRPC server, outside it: in an Automation API inline program its
// run state (the resource monitor an invoke or a new resource needs) lives in that context only.
function programContext(): <T>(f: () => T) => T {
    const als = (globalThis as any).asyncLocalStorage;
    const store = als?.getStore();
    return (f) => (store ? als.run(store, f) : f());
}

// keepAsIs is a resource transform that changes nothing: the engine records in the state the
// dependsOn a stack transform adds only for a registration carrying transforms of its own, and
// `destroy` needs it (a custom resource deleted before its gate, the gate before what it waited for).
const keepAsIs: pulumi.ResourceTransform = () => undefined;

/** What {@link AutoGater} needs from Pulumi; tests give fakes (not a stable API). */
export interface AutoGateDeps {
    /** The `autoGateDecide` invoke, through autoGate's readiness provider. */
    decide(args: AutoGateDecideArgs): Promise<AutoGateDecideResult>;
    /** Registers a gate (at the top level: a gate in a component whose child waits for it would deadlock). */
    createGate(type: string, name: string, args: pulumi.Inputs, opts: pulumi.CustomResourceOptions): pulumi.Resource;
    createProvider(name: string, args: ProviderArgs): pulumi.ProviderResource;
    /** A resource's outputs, once the engine registered it in this deployment. */
    registeredState(urn: string): Promise<any>;
    /** Stack configuration (`kubernetes:kubeconfig`). */
    config(key: string): string | undefined;
    dryRun(): boolean;
    /** "urn:pulumi:<stack>::<project>::" */
    urnPrefix(): string;
    info(msg: string): void;
    warn(msg: string): void;
    error(msg: string): void;
    /** The `autoGateRetry` invoke, through autoGate's readiness provider (the error hook's decision). */
    retry?(args: AutoGateRetryArgs): Promise<AutoGateRetryResult>;
    /** Bounds each wait of a decision in the provider (default 2 minutes); the call is bounded by 3x it plus min(it, 30 s). */
    planTimeoutMs?: number;
}

/** AutoGater is autoGate's transport and wiring (exported for its tests; not a stable API). */
export class AutoGater {
    private session = crypto.randomBytes(8).toString("hex");
    // Program order. cluster: undefined until its explicit provider's URN is known.
    private places: { entry: inputs.AutoGateEntry; provider?: pulumi.ProviderResource; cluster?: string; resolving?: Promise<void>; sent?: boolean }[] = [];
    private sentUpTo = 0; // every place below it was sent
    private orderOf = new Map<string, number>(); // by URN
    private handles = new Map<string, pulumi.Resource>(); // the program's own kubernetes objects, by URN
    private components = new Map<string, pulumi.Resource[]>(); // in-process components a registration depends on, by URN
    private families = new Map<string, pulumi.Resource>(); // a child's outermost in-process component, by the child's URN
    private facts = new Map<string, Promise<inputs.AutoGateCluster>>(); // by cluster id, once a call carried them
    private gates = new Map<string, Promise<pulumi.Resource>>(); // by key
    private providers = new Map<string, Promise<pulumi.ProviderResource>>(); // readiness providers for other clusters, by name
    private clusterOf = new Map<string, string>(); // a registration's cluster by its URN, for the error hook
    /** The program's error hook (unset: `retry: false`), added to every registration it transforms. */
    retryHook?: pulumi.ErrorHook;
    /** autoRetry: no gates, the error hook only. */
    retryOnly = false;

    constructor(private opts: AutoGateOptions, private deps: AutoGateDeps) {}

    /**
     * track is the legacy stack transformation: it runs inside each Resource's constructor, in
     * program order (Node sends a registration only once its inputs resolve, so the engine's
     * order is not the program's).
     */
    track(a: pulumi.ResourceTransformationArgs): pulumi.ResourceTransformationResult | undefined {
        // (Inside Resource's constructor a CustomResource is not marked as one yet: ask its class.)
        if (!a.type.startsWith("kubernetes:") || a.resource instanceof pulumi.ComponentResource) return undefined;
        const urn = this.deps.urnPrefix() + qualifiedType(a.opts.parent, a.type) + "::" + a.name;
        this.handles.set(urn, a.resource);
        const root = inProcessRoot(a.opts.parent);
        if (root) this.families.set(urn, root);
        // A kubernetes component's child has no place: its family settles in the provider.
        if (!String((a.opts.parent as any)?.__pulumiType ?? "").startsWith("kubernetes:") && !this.orderOf.has(urn)) {
            this.orderOf.set(urn, this.places.length);
            const provider = (a.opts as pulumi.CustomResourceOptions).provider;
            this.places.push({ entry: { order: this.places.length, type: a.type, name: a.name }, provider, cluster: provider ? undefined : "" });
        }
        // The SDK sends an unrendered Chart v3 (ConfigFile/ConfigGroup v1) dependency as no child: noted here.
        const comps = toArray(a.opts.dependsOn as any).filter(isInProcess);
        if (comps.length) this.components.set(urn, comps);
        const transforms = [...((a.opts as pulumi.CustomResourceOptions).transforms ?? []), keepAsIs];
        return { props: a.props, opts: { ...a.opts, transforms } };
    }

    /**
     * transform is the resource transform: one decision per registration. A call that fails or
     * times out fails the registration, naming it: let through ungated it would be a false ready.
     */
    async transform(a: pulumi.ResourceTransformArgs): Promise<pulumi.ResourceTransformResult | undefined> {
        if (!a.custom || !a.type.startsWith("kubernetes:")) return undefined;
        try {
            let gates: pulumi.Resource[] = [];
            if (!this.retryOnly) {
                gates = await this.decide(a);
            } else if (!(await this.noteCluster(a))) {
                return undefined;
            }
            if (gates.length === 0 && !this.retryHook) return undefined;
            let opts = a.opts;
            if (gates.length > 0) opts = { ...opts, dependsOn: [...toArray(opts.dependsOn as any), ...gates] };
            if (this.retryHook) opts = { ...opts, hooks: { ...opts.hooks, onError: [...(opts.hooks?.onError ?? []), this.retryHook] } };
            return { props: a.props, opts };
        } catch (e) {
            const err = new Error(`autoGate could not decide the gates of ${a.type} ${a.name}, so it is not registered ungated: ${errorText(e)}`);
            this.deps.error(err.message);
            throw err;
        }
    }

    // noteCluster records the registration's cluster for the error hook (autoRetry: no decision);
    // false when it is not known (the registration then gets no hook).
    private async noteCluster(a: pulumi.ResourceTransformArgs): Promise<boolean> {
        try {
            const parent = await urnOf(a.opts.parent);
            const cluster = clusterId(await urnOf((a.opts as pulumi.CustomResourceOptions).provider));
            this.clusterOf.set(childUrn(this.deps.urnPrefix(), parent, a.type, a.name), cluster);
            return true;
        } catch (e) {
            this.deps.warn(`readiness: ${a.type} ${a.name} gets no error hook: ${errorText(e)}`);
            return false;
        }
    }

    /**
     * onError is the error hook: it asks the provider whether the failed step may be tried again;
     * the provider waits until the object is admitted again before it says yes. A preview is
     * never retried: it proves nothing.
     */
    async onError(a: pulumi.ErrorHookArgs): Promise<boolean> {
        if (this.deps.dryRun()) return false;
        const cluster = this.clusterOf.get(a.urn);
        if (cluster === undefined) {
            this.deps.warn(`readiness: ${a.type} ${a.name} failed to ${a.failedOperation} and is not retried: its cluster is not known to the error hook`);
            return false;
        }
        if (!this.deps.retry) throw new Error("readiness: this autoGate has no autoGateRetry call");
        const r = await this.deps.retry(strip({
            type: a.type, name: a.name, failedOperation: a.failedOperation, errors: a.errors,
            object: await plainWalk(a.newInputs ?? {}, true), cluster: await this.factsOf(cluster), timeout: this.opts.timeout,
        }));
        const msg = `readiness: ${a.failedOperation} of ${a.type} ${a.name}: ${r.why}`;
        r.retry ? this.deps.info(msg) : this.deps.warn(msg);
        return r.retry;
    }

    // factsOf are the facts of cluster id as a decision got them, else read now (as a decision
    // would, without marking them sent: a later decision still carries them).
    private factsOf(id: string): Promise<inputs.AutoGateCluster> {
        return this.facts.get(id) ?? this.clusterFacts(id);
    }

    private async decide(a: pulumi.ResourceTransformArgs): Promise<pulumi.Resource[]> {
        const parent = await urnOf(a.opts.parent);
        const id = childUrn(this.deps.urnPrefix(), parent, a.type, a.name);
        const parentType = parent ? typeOfUrn(parent) : "";
        const cluster = clusterId(await urnOf((a.opts as pulumi.CustomResourceOptions).provider));
        this.clusterOf.set(id, cluster);
        const registration: inputs.AutoGateRegistration = {
            id, type: a.type, name: a.name, object: await plain(a.props),
            ...(parentType && parentType !== "pulumi:pulumi:Stack" ? { parent, parentType } : {}),
            dependsOn: (await Promise.all(toArray(a.opts.dependsOn as any).map(urnOf))).filter((u): u is string => !!u),
            ...(cluster ? { cluster } : {}),
            ...(this.orderOf.has(id) ? { order: this.orderOf.get(id) } : {}),
            // A child of an in-process component awaits its whole family (itself too): the
            // provider decides it once all arrived, not after a pause a loaded machine exceeds.
            awaits: (await Promise.all([...(this.components.get(id) ?? []), ...(this.families.has(id) ? [this.families.get(id)] : [])]
                .map((c) => childUrns(this.deps.urnPrefix(), c)))).flat(),
            ...(this.opts.exclude?.(a.type, a.name) ? { excluded: true } : {}),
        };
        const clusters = await this.clusterFactsOnce(cluster);
        const entries = await this.unsentPlaces(registration.order);
        const answer = await this.ask({ session: this.session, options: this.options(), entries, clusters, registration }).catch((e) => {
            this.unsend(entries, clusters);
            throw e;
        });
        for (const w of answer.warnings ?? []) this.deps.warn(`autoGate: ${w}`);
        if (!answer.gates?.length) return [];
        const provider = await this.gateProvider(answer.provider ?? "", cluster);
        const made = answer.gates.map((g) => this.gate(g, provider)); // in order: afterGates name earlier ones
        return Promise.all(made);
    }

    private options(): inputs.AutoGateSessionOptions {
        const o = this.opts;
        const ms = this.deps.planTimeoutMs;
        return strip({ timeout: o.timeout, stableFor: o.stableFor, failureGrace: o.failureGrace, namespaces: o.namespaces, installers: o.installers,
            settle: o.settle !== undefined ? `${o.settle}ms` : undefined, planTimeout: ms ? `${ms}ms` : undefined,
            // Every Kubernetes registration gets the hook: the provider may count on its retry.
            retried: this.retryHook ? true : undefined });
    }

    // unsentPlaces are the places no call carried yet whose cluster is known (an explicit provider
    // not registered within a second is another cluster, "?"). A call waits only for those written
    // above its registration: the provider needs no other, and a component's child is not held.
    private async unsentPlaces(order?: number): Promise<inputs.AutoGateEntry[]> {
        const open = this.places.slice(this.sentUpTo).filter((p) => !p.sent);
        for (const p of open) {
            if (p.cluster === undefined && !p.resolving) p.resolving = within(1000, urnOf(p.provider).then(clusterId, () => "?"), "?").then((u) => { p.cluster = u; });
        }
        await Promise.all(open.filter((p) => p.cluster === undefined && order !== undefined && p.entry.order < order).map((p) => p.resolving));
        const ready = open.filter((p) => p.cluster !== undefined && !p.sent);
        for (const p of ready) p.sent = true;
        while (this.places[this.sentUpTo]?.sent) this.sentUpTo++;
        return ready.map((p) => (p.cluster ? { ...p.entry, cluster: p.cluster } : p.entry));
    }

    // unsend puts back the places and cluster facts a failed call carried: the next call carries
    // them (the provider never heard of them, and registrations below would wait for them in vain).
    private unsend(entries: inputs.AutoGateEntry[], clusters: inputs.AutoGateCluster[]): void {
        for (const e of entries) {
            this.places[e.order].sent = false;
            this.sentUpTo = Math.min(this.sentUpTo, e.order);
        }
        for (const c of clusters) this.facts.delete(c.id);
    }

    // clusterFactsOnce is the cluster's facts the first time a call names it (later calls: none;
    // the provider waits for the call that carries them).
    private async clusterFactsOnce(id: string): Promise<inputs.AutoGateCluster[]> {
        if (this.facts.has(id)) return [];
        const f = this.clusterFacts(id);
        this.facts.set(id, f);
        f.catch(() => this.facts.delete(id)); // a later call tries again
        return [await f];
    }

    // clusterFacts: the stack's kubernetes configuration for the default provider; an explicit
    // provider's inputs as the engine holds them (its kubeconfig sent as it is, never shown).
    private async clusterFacts(id: string): Promise<inputs.AutoGateCluster> {
        if (id === "" && this.opts.provider) return { id, planner: true };
        const keys = ["kubeconfig", "context", "namespace", "cluster", "renderYamlToDirectory"];
        if (id === "") return strip({ id, ...Object.fromEntries(keys.map((k) => [k, this.deps.config(`kubernetes:${k}`) || undefined])) });
        const state = (await this.deps.registeredState(id)) ?? {};
        const str = (k: string) => { const v = unsecret(state[k]); return typeof v === "string" && v !== "" ? v : undefined; };
        const unknown = this.deps.dryRun() && pulumi.isUnknown(unsecret(state.kubeconfig));
        return strip({ id, name: id.split("::").pop(), ...Object.fromEntries(keys.map((k) => [k, str(k)])), ...(unknown ? { unknown } : {}) });
    }

    // gateProvider is the readiness provider the answer names: autoGate's own for "", else one
    // made once per name, configured as the cluster's kubernetes provider.
    private gateProvider(name: string, cluster: string): Promise<pulumi.ProviderResource | undefined> {
        if (name === "") return Promise.resolve(this.opts.provider);
        let p = this.providers.get(name);
        if (!p) {
            p = (this.facts.get(cluster) ?? Promise.resolve({ id: cluster } as inputs.AutoGateCluster)).then((f) => {
                const prov = this.deps.createProvider(name, strip({ kubeconfig: f.kubeconfig ? pulumi.secret(f.kubeconfig) : undefined, context: f.context, namespace: f.namespace }));
                this.deps.info(`autoGate: objects of ${cluster || "the stack's kubernetes provider"} are gated by readiness provider ${name}, configured as their kubernetes provider`);
                return prov;
            });
            this.providers.set(name, p);
        }
        return p;
    }

    // ask is one call, bounded: the provider's waits (the cluster's facts, in-process children,
    // the places above) are bounded by the plan timeout each.
    private ask(call: AutoGateDecideArgs): Promise<AutoGateDecideResult> {
        const t = this.deps.planTimeoutMs ?? 120_000;
        const bound = 3 * t + Math.min(t, 30_000);
        const r = call.registration;
        return within(bound, this.deps.decide(call), () => { throw new Error(`the plan call for ${r.type} ${r.name} did not answer within ${bound} ms`); });
    }

    // gate is the gate of spec's key, made the first time: after the gates and installers it
    // names, the program's own by their handle, others once the engine registered them.
    private gate(g: outputs.AutoGatePlanGate, provider?: pulumi.ProviderResource): Promise<pulumi.Resource> {
        let p = this.gates.get(g.key);
        if (p) return p;
        p = (async () => {
            const before = (g.afterGates ?? []).map((k) => this.gates.get(k) ?? Promise.reject(new Error(`gate ${g.key} comes after an unknown gate ${k}`)));
            const after = (g.after ?? []).map((u) => this.handles.get(u) ?? this.deps.registeredState(u).then(() => new pulumi.DependencyResource(u)));
            const args: pulumi.Inputs = { ...(g.args ?? {}) };
            for (const f of g.argsFrom ?? []) args[f.arg] = this.outputOf(f.installer, f.output);
            // AdmissionReady's objects may be Secrets: secret from the start, as the provider stores them.
            if (args.objects !== undefined) args.objects = pulumi.secret(args.objects);
            const gate = this.deps.createGate(g.type, g.name, args, { dependsOn: [...(await Promise.all(before)), ...after], ...(provider ? { provider } : {}) });
            if (g.reason) this.deps.info(`autoGate: ${g.name}: ${g.reason}`);
            return gate;
        })();
        this.gates.set(g.key, p);
        p.catch(() => this.gates.delete(g.key));
        return p;
    }

    // outputOf is an installer's output at a dotted path (an autonamed installer's name exists
    // nowhere else), read once the engine created it; unknown in a preview.
    private outputOf(urn: string, path: string): pulumi.Output<any> {
        if (this.deps.dryRun()) return pulumi.output(pulumi.unknown as any);
        return pulumi.output(this.deps.registeredState(urn).then((state) => {
            const v = unsecret(path.split(".").reduce((x: any, k) => (x && typeof x === "object" ? unsecret(x)[k] : undefined), state));
            if (typeof v !== "string" || v === "") throw new Error(`autoGate: ${urn} has no output ${path} to name its gate with`);
            return v;
        }));
    }
}

// ---------------------------------------------------------------------------------------------
// Pulumi glue.

function pulumiDeps(o: AutoGateOptions): AutoGateDeps {
    return {
        decide: (args) => autoGateDecide(args, o.provider ? { provider: o.provider } : {}),
        retry: (args) => autoGateRetry(args, o.provider ? { provider: o.provider } : {}),
        createGate: (type, name, args, opts) => new Gate(type, name, args, pulumi.mergeOptions(utilities.resourceOptsDefaults(), opts)),
        createProvider: (name, args) => new Provider(name, args),
        registeredState,
        config: (k) => pulumi.runtime.getConfig(k),
        dryRun: () => pulumi.runtime.isDryRun(),
        urnPrefix: () => `urn:pulumi:${pulumi.getStack()}::${pulumi.getProject()}::`,
        info: (m) => pulumi.log.info(m),
        warn: (m) => pulumi.log.warn(m),
        error: (m) => pulumi.log.error(m),
    };
}

// registeredState asks the engine for a resource's outputs (its built-in getResource answers
// once the resource's step finished in this deployment) until it answers; any error other than
// "unknown resource" ends it. No event for "that registration finished" reaches an SDK.
async function registeredState(urn: string): Promise<any> {
    const deadline = Date.now() + 30 * 60_000;
    for (let delay = 50; ; delay = Math.min(delay * 2, 1000)) {
        try {
            const got: any = await pulumi.runtime.invoke("pulumi:pulumi:getResource", { urn }, {});
            return got?.state ?? {};
        } catch (e) {
            if (!/unknown resource/.test(errorText(e)) || Date.now() > deadline) throw e;
        }
        await new Promise((r) => setTimeout(r, delay));
    }
}

// Gate is a readiness gate registered by token (the provider names its type and inputs).
class Gate extends pulumi.CustomResource {
    constructor(type: string, name: string, args: pulumi.Inputs, opts: pulumi.CustomResourceOptions) {
        super(type, name, args, opts);
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers.

// isInProcess: a component the SDK renders in the program's process (Chart v3, ConfigFile/ConfigGroup
// v1). A remote one (Chart v4, ConfigGroup v2) has `resources` too, but its children registered
// before it returned: a dependent registers after them, and has no URNs of them to await.
function isInProcess(d: any): d is pulumi.ComponentResource {
    return d instanceof pulumi.ComponentResource && !(d as any).__remote && pulumi.Output.isInstance((d as any).resources);
}

// inProcessRoot is the outermost in-process component p is or is in (a ConfigGroup v1 for its
// ConfigFiles' children), undefined when none. Asked inside a child's constructor, before its
// component assigned its `resources`: told by type.
function inProcessRoot(p: any): pulumi.Resource | undefined {
    let root: pulumi.Resource | undefined;
    for (; p instanceof pulumi.ComponentResource && IN_PROCESS_TYPES.has(String((p as any).__pulumiType)) && !(p as any).__remote; p = (p as any).__parentResource) root = p;
    return root;
}

const IN_PROCESS_TYPES = new Set(["kubernetes:helm.sh/v3:Chart", "kubernetes:yaml:ConfigFile", "kubernetes:yaml:ConfigGroup"]);

// childUrns are the URNs of the kubernetes objects in-process component d renders, recursively,
// once rendered (its `resources`).
async function childUrns(prefix: string, d: any): Promise<string[]> {
    const children = Object.values((await d.resources.promise()) ?? {}) as any[];
    const out = await Promise.all(children.map(async (c): Promise<string[]> => {
        if (isInProcess(c)) return childUrns(prefix, c);
        const type = String(c?.__pulumiType ?? "");
        if (!type.startsWith("kubernetes:") || c instanceof pulumi.ComponentResource || !c.__name) return [];
        return [`${prefix}${qualifiedType(c.__parentResource, type)}::${c.__name}`];
    }));
    return out.flat();
}

// qualifiedType is a resource's type as its URN carries it: its ancestors' types (the stack
// aside) and its own, joined by "$".
function qualifiedType(parent: pulumi.Resource | undefined, type: string): string {
    const chain = [type];
    for (let p: any = parent; p && p.__pulumiType !== "pulumi:pulumi:Stack"; p = p.__parentResource) chain.unshift(String(p.__pulumiType));
    return chain.join("$");
}

/** typeOfUrn is the resource's own type token in a URN (the last of its qualified type). */
export function typeOfUrn(urn: string): string {
    return (urn.split("::")[2] ?? "").split("$").pop() ?? "";
}

/** childUrn is the URN the engine gives a registration (the root stack is no parent in it). */
export function childUrn(prefix: string, parentUrn: string | undefined, type: string, name: string): string {
    const parentType = parentUrn ? parentUrn.split("::")[2] ?? "" : "";
    const qualified = parentType && parentType !== "pulumi:pulumi:Stack" ? `${parentType}$${type}` : type;
    return `${prefix}${qualified}::${name}`;
}

// clusterId is a kubernetes provider's URN as the provider names its cluster: "" for the default one.
function clusterId(urn: string | undefined): string {
    const name = urn?.split("::").pop() ?? "";
    return !urn || name === "default" || name.startsWith("default_") ? "" : urn;
}

async function urnOf(r: any): Promise<string | undefined> {
    const res = pulumi.Output.isInstance(r) ? await (r as any).promise() : await r;
    return res?.urn ? await (res.urn as any).promise() : undefined;
}

function toArray<T>(v: T | T[] | undefined): T[] {
    return v === undefined ? [] : Array.isArray(v) ? v : [v];
}

// within is p's value, or onTimeout's (a value, or a function that may throw) once ms passed.
function within<T>(ms: number, p: Promise<T>, onTimeout: T | (() => T)): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<T>((resolve, reject) => {
        timer = setTimeout(() => {
            try { resolve(typeof onTimeout === "function" ? (onTimeout as () => T)() : onTimeout); } catch (e) { reject(e); }
        }, ms);
    });
    return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

// strip drops undefined fields (the provider reads a field sent as null as set).
function strip<T extends object>(o: T): T {
    return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}

const sigKey = "4dabf18193072939515e22adb298388d";
const secretSig = "1b47061264138c4ac30d75fd1eb44270";

// unsecret is a value the engine's invoke answered, a nested secret unwrapped.
function unsecret(v: any): any {
    return v && typeof v === "object" && v[sigKey] === secretSig ? v.value : v;
}

/**
 * plain turns props as a transform sees them into JSON for the provider: unknown values
 * (preview) and secrets are left out (no rule reads a secret), resources and assets too. Only an
 * Output or a Promise is waited for: a chart's CRD is a large object walked once, synchronously.
 */
export function plain(v: any): Promise<any> {
    return Promise.resolve(plainWalk(v));
}

// plainWalk is plain's walk; with secrets, secret values are kept (the error hook's object: the
// provider takes it as a secret, and a Secret's dry run needs its data).
function plainWalk(v: any, secrets = false): any | Promise<any> {
    const walk = (x: any) => plainWalk(x, secrets);
    if (v === null || v === undefined) return null;
    if (pulumi.Output.isInstance(v)) {
        const o = v as any;
        return Promise.all([o.isKnown, o.isSecret]).then(([known, secret]) => (!known || (secret && !secrets) ? null : o.promise().then(walk)));
    }
    if (v instanceof Promise) return v.then(walk);
    if (pulumi.isUnknown(v)) return null;
    if (typeof v !== "object") return v;
    if (Array.isArray(v)) {
        const items = v.map(walk);
        return items.some((x) => x instanceof Promise) ? Promise.all(items) : items;
    }
    if (secrets && v[sigKey] === secretSig) return walk(v.value);
    if (v[sigKey] !== undefined || pulumi.Resource.isInstance(v) || pulumi.asset.Asset.isInstance(v) || pulumi.asset.Archive.isInstance(v)) return null;
    const entries = Object.entries(v).map(([k, e]) => [k, walk(e)] as [string, any]);
    const build = (es: [string, any][]) => Object.fromEntries(es.filter(([, p]) => p !== null));
    if (!entries.some(([, p]) => p instanceof Promise)) return build(entries);
    return Promise.all(entries.map(async ([k, p]) => [k, await p] as [string, any])).then(build);
}

function errorText(e: unknown): string {
    return e instanceof Error ? e.message : String(e);
}
