// autoGate: one call at the top of a program puts the right readiness gate in front of every
// Kubernetes object that something else in the stack can block (issue #24). Hand-written (an
// overlay kept beside the generated SDK): every rule lives in the provider's function
// `readiness:index:autoGatePlan`; this file only carries registrations to it and wires the
// gates it answers with into `dependsOn`.
import * as pulumi from "@pulumi/pulumi";
import * as utilities from "./utilities";
import { Provider } from "./provider";

/** Options of {@link autoGate}; all optional. */
export interface AutoGateOptions {
    /** A readiness Provider for the gates and for the plan invoke. */
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
}

/** The annotation that opts one object out: `readiness.io/auto-gate: "false"`. */
export const autoGateOptOutAnnotation = "readiness.io/auto-gate";

/**
 * autoGate registers a stack transform that gates every later `kubernetes:` registration on
 * what it needs (a CRD the stack installs, a webhook that intercepts it, the Secret a
 * Certificate or ExternalSecret produces, a Helm release): it only adds `dependsOn` entries,
 * never changes props. Call it once, before the resources it should see.
 */
export function autoGate(opts?: AutoGateOptions): void {
    const gater = new AutoGater(opts ?? {}, pulumiDeps(opts ?? {}));
    // The legacy (in-process) transformation sees the program's own resources as they are
    // constructed, in program order and as objects: a gate then depends on an installer the
    // program created by its real handle.
    pulumi.runtime.registerStackTransformation((a) => {
        try {
            gater.track(a.type, a.name, a.resource, a.props, a.opts);
        } catch (e) {
            pulumi.log.warn(`autoGate: ${a.type} ${a.name} is decided when it registers: ${e instanceof Error ? e.message : e}`);
        }
        // Its props are never changed. A resource transform of its own that changes nothing makes
        // the engine record in the state the dependsOn the stack transform below adds (it does so
        // only for a registration that carries transforms of its own): `destroy` then deletes a
        // custom resource before its gate, and the gate before what it waited for.
        if (!a.type.startsWith("kubernetes:") || a.resource instanceof pulumi.ComponentResource) return undefined;
        const transforms = [...((a.opts as pulumi.CustomResourceOptions).transforms ?? []), keepAsIs];
        return { props: a.props, opts: { ...a.opts, transforms } };
    });
    // The engine calls the transform back from the SDK's gRPC server, outside the program's
    // async context: in an Automation API inline program its run state (the resource monitor
    // an invoke or a new resource needs) lives in that context only. Re-enter it.
    const als = (globalThis as any).asyncLocalStorage;
    const store = als?.getStore();
    pulumi.runtime.registerResourceTransform((a) => (store ? als.run(store, () => gater.transform(a)) : gater.transform(a)));
}

// keepAsIs is a resource transform that changes nothing (see autoGate).
const keepAsIs: pulumi.ResourceTransform = () => undefined;

// ---------------------------------------------------------------------------------------------
// The contract with `readiness:index:autoGatePlan` (provider/pkg/autogate).

export interface PlanResource { type: string; name: string; parentType?: string; parent?: string; object: any; cluster?: string }
export interface PlanInstaller { id: string; type: string; name: string; object: any; cluster?: string; parent?: string }
export interface PlanArgs {
    resource: PlanResource;
    installers: PlanInstaller[];
    dependsOn: string[];
    options: { timeout?: string; stableFor?: string; failureGrace?: string; namespaces?: string[] };
}
export interface PlannedGate {
    key: string; name: string; type: string; args: any;
    /** Installer ids the gate depends on. */
    after?: string[];
    /** Keys of gates earlier in the same answer the gate depends on (AdmissionReady after proof its webhook configuration exists). */
    afterGates?: string[];
    reason?: string;
    /** Inputs read from installers' outputs once the engine created them (an autonamed installer's name). */
    argsFrom?: { arg: string; installer: string; output: string }[];
}
export interface PlanResult {
    remember?: boolean;
    /** With remember: the object to send as this installer's in later calls (trimmed to what the rules read). Absent from an older provider. */
    installer?: any;
    gates?: PlannedGate[];
    warnings?: string[];
}

/** What the gater needs from Pulumi; tests give fakes. */
export interface AutoGateDeps {
    /** Asks the plan, through the readiness provider of the registration's cluster (undefined: autoGate's own). */
    plan(args: PlanArgs, provider?: pulumi.ProviderResource): Promise<PlanResult>;
    /** Registers a gate (top level, never a component's child) after the given resources. */
    createGate(gate: PlannedGate, after: pulumi.Resource[], provider?: pulumi.ProviderResource): pulumi.Resource;
    /** Resolves once the resource with this URN was registered and its step finished. */
    waitRegistered(urn: string): Promise<void>;
    /** A registered resource's outputs at a dotted path (unknown in a preview). */
    outputOf?(urn: string, path: string): pulumi.Input<any>;
    /**
     * The readiness provider for the cluster of an explicit kubernetes provider (by its URN),
     * configured as it is; or why its objects cannot be gated.
     */
    clusterProvider?(urn: string): Promise<{ provider?: pulumi.ProviderResource; skip?: string }>;
    /**
     * The readiness provider for the objects of the default kubernetes provider (undefined: the
     * default readiness provider), configured as the stack's kubernetes configuration; or why
     * its objects cannot be gated.
     */
    defaultProvider?(): Promise<{ provider?: pulumi.ProviderResource; skip?: string }>;
    /** "urn:pulumi:<stack>::<project>::" */
    urnPrefix(): string;
    info(msg: string): void;
    warn(msg: string): void;
    /** Logs an error (the registration it names fails). */
    error?(msg: string): void;
    /** How long one plan call may take before the registration fails (default 2 minutes). */
    planTimeoutMs?: number;
}

// An installer: a resource the plan answered `remember: true` for; its id is its URN (as in Go).
interface Installer extends PlanInstaller {
    urn: string;
    seq: number; // the order it was registered (or constructed) in: installers are sent in that order
    order: number; // where the program wrote it (a component's child: where the component is written)
    handle?: pulumi.Resource; // the program's own object, when it constructed it
}

// A registration as decide needs it.
interface Reg {
    type: string;
    name: string;
    urn: string;
    parentType?: string;
    object: any;
    deps: { urn?: string; handle?: pulumi.Resource; type: string }[];
    handle?: pulumi.Resource;
    /** Where the program wrote it: only installers written above it count (a cycle otherwise). */
    order?: number;
    parentUrn?: string;
    /** The URN of its explicit kubernetes provider; undefined for the default one. */
    cluster?: string;
    provider?: pulumi.ProviderResource;
    valuesKnown?: () => void;
}

// A resource the program constructed at the top level, decided in program order: Node sends a
// registration only once its inputs and dependsOn resolved, so the engine's order is not the
// program's (a Deployment without dependsOn registers before the Certificate written above it).
interface Constructed {
    resource: pulumi.Resource;
    decision: Promise<{ gates: PlannedGate[]; objectKey: string; late: number }>;
    order: number;
    valuesKnown?: () => void;
    /** Local kubernetes components (Chart v3, ConfigFile/ConfigGroup v1) it depends on. */
    components: pulumi.ComponentResource[];
}

interface Pending {
    args: pulumi.ResourceTransformArgs;
    parentUrn?: string;
    /** The outermost kubernetes component it is in, and that component's URN: its group. */
    root?: pulumi.Resource;
    key?: string;
    resolve: (r: pulumi.ResourceTransformResult | undefined) => void;
    reject: (e: Error) => void;
}

/** AutoGater is autoGate's bookkeeping (exported for its tests; not a stable API). */
export class AutoGater {
    private installers: Installer[] = [];
    private byUrn = new Map<string, Installer>();
    private late = 0; // installers remembered at registration time rather than in program order
    private gates = new Map<string, Promise<pulumi.Resource>>();
    private constructed = new Map<string, Constructed>(); // by URN
    private groups = new Map<string, { timer?: NodeJS.Timeout; items: Pending[]; waiting?: boolean; arrived?: () => void }>();
    // By outermost component the SDK renders in-process (ConfigGroup v1): how many children it
    // constructed, and how many reached the transform so far.
    private localChildren = new WeakMap<object, number>();
    private localArrived = new WeakMap<object, number>();
    // The kubernetes components the program constructed, by URN and back (a transform sees its
    // parent by URN only).
    private localComponents = new Map<string, pulumi.Resource>();
    private urnOfLocal = new WeakMap<object, string>();
    private seq = 0;
    private unanswered = new Map<number, Reg>(); // by seq: registrations whose first answer has not come yet
    private allRemembered: Promise<void> = Promise.resolve(); // every decision asked so far knows whether it is an installer
    private inFlight = 0;
    private finals = new Map<string, Reg>(); // registrations whose decision is final, by URN
    private slots: (() => void)[] = [];
    private settleMs: number;
    private componentOrder = new Map<string, number>(); // kubernetes components the program constructed, by URN
    private pendingValues = new Map<string, Promise<void>>(); // installers constructed with unknown values, until registered
    private clusters = new Map<string, Promise<{ provider?: pulumi.ProviderResource; skip?: string }>>();
    private decidedAtRegistration = new Set<string>(); // URNs whose registration's decision is made
    // Objects of explicit kubernetes providers, by URN: where the program wrote them, their
    // provider, and a promise resolved once their registration was decided.
    private explicitOrder = new Map<string, { order: number; provider: pulumi.ProviderResource; decided: Promise<void>; done: () => void }>();
    private decidedChildren = new Map<string, { count: number; waiters: { n: number; resolve: () => void }[] }>(); // by parent URN

    constructor(private opts: AutoGateOptions, private deps: AutoGateDeps) {
        this.settleMs = opts.settle ?? 200;
    }

    /**
     * track is called as the program constructs a resource (a legacy stack transformation, in
     * program order): a kubernetes resource the program writes (at the top level or in a
     * component of its own) is decided now, from the values known now.
     */
    track(type: string, name: string, resource: pulumi.Resource, props: pulumi.Inputs, opts: pulumi.ResourceOptions): void {
        if (!type.startsWith("kubernetes:")) return;
        // A kubernetes component's children arrive concurrently and settle together (hold).
        const parentType = String((opts.parent as any)?.__pulumiType ?? "");
        const urn = this.deps.urnPrefix() + qualifiedType(opts.parent, type) + "::" + name;
        // (Inside Resource's constructor a CustomResource is not marked as one yet: ask its class.)
        if (resource instanceof pulumi.ComponentResource) {
            this.localComponents.set(urn, resource);
            this.urnOfLocal.set(resource, urn);
        }
        if (parentType.startsWith("kubernetes:")) {
            // A child the SDK renders in-process: counted, so that its component's children settle
            // once they all arrived, not after a pause a loaded machine can exceed.
            if (!(resource instanceof pulumi.ComponentResource)) {
                const root = outermostComponent(opts.parent!);
                this.localChildren.set(root, (this.localChildren.get(root) ?? 0) + 1);
            }
            return;
        }
        if (resource instanceof pulumi.ComponentResource) {
            // Its children register later, concurrently: they count as written here.
            this.componentOrder.set(urn, this.seq++);
            return;
        }
        // An object of an explicit kubernetes provider is decided when it registers, once its
        // provider (its cluster) is known, but in program order among that cluster's (inOrderOf).
        if (opts.provider) {
            let done!: () => void;
            const decided = new Promise<void>((r) => (done = r));
            this.explicitOrder.set(urn, { order: this.seq++, provider: opts.provider, decided, done });
            return;
        }
        const object = plainNow(props);
        const deps = toArray(opts.dependsOn as any).flatMap((d: any) =>
            pulumi.Resource.isInstance(d) ? [{ handle: d, type: String((d as any).__pulumiType ?? "") }] : []);
        const reg: Reg = { type, name, urn, object, deps, handle: resource, order: this.seq };
        if (hasUnknowns(props)) {
            // Its values (a namespace from another resource's outputs) are known at registration:
            // decisions that may need them as an installer's wait for them there.
            let done!: () => void;
            this.pendingValues.set(reg.urn, new Promise<void>((r) => (done = r)));
            reg.valuesKnown = done;
        }
        const decision = this.decideInOrder(reg, false).then((d) => {
            this.finals.set(reg.urn, reg);
            return { gates: d.gates, objectKey: stableKey(object), late: this.late };
        });
        decision.catch(() => undefined);
        // A component the SDK renders in-process (Chart v3, ConfigFile/ConfigGroup v1) registers its
        // children after its own URN is known: a resource that depends on it is decided once they are.
        const components = toArray(opts.dependsOn as any).filter((d: any) =>
            d instanceof pulumi.ComponentResource && pulumi.Output.isInstance((d as any).resources)) as pulumi.ComponentResource[];
        this.constructed.set(urn, { resource, decision, order: reg.order!, valuesKnown: reg.valuesKnown, components });
    }

    /**
     * transform is the stack transform. When it cannot decide an object's gates (a failed or
     * timed-out plan call, a gate it cannot create) it throws an error naming the object and the
     * cause, so that registration fails: an object let through ungated would be a false ready.
     * It never hangs on an error.
     */
    async transform(a: pulumi.ResourceTransformArgs): Promise<pulumi.ResourceTransformResult | undefined> {
        if (!a.custom || !a.type.startsWith("kubernetes:")) return undefined;
        let explicit: { done: () => void } | undefined; // decided: objects written below it may go on
        try {
            const parentUrn = await urnOf(a.opts.parent);
            if (parentUrn && isComponentChild(parentUrn)) {
                // Children of a Chart v4 / ConfigGroup: wait until the component's registrations settle.
                const local = this.localComponents.get(parentUrn);
                const root = local && outermostComponent(local);
                const key = (root && this.urnOfLocal.get(root)) ?? parentUrn;
                return await new Promise((resolve, reject) => this.hold({ args: a, parentUrn, root, key, resolve, reject }));
            }
            const c = this.constructed.get(childUrn(this.deps.urnPrefix(), parentUrn, a.type, a.name));
            const reg = await this.reg(a, parentUrn, c?.resource);
            const inOrder = this.explicitOrder.get(reg.urn);
            explicit = inOrder;
            const skip = await this.cluster(reg, a);
            if (skip) {
                c?.valuesKnown?.();
                this.deps.warn(`autoGate: ${a.type} ${a.name} is not gated: ${skip}`);
                return undefined;
            }
            if (c) {
                // Decided in program order; again only when its values were not all known then, or
                // an installer appeared since that program order did not show (a component's child).
                reg.order = c.order;
                reg.valuesKnown = c.valuesKnown;
                // Outside the ordered decisions: a decision waiting here holds no later one.
                await this.childrenOf(c.components, reg);
                await this.valuesOfInstallers(reg, this.seq);
                try {
                    const d = await c.decision.catch(() => undefined);
                    // (Program order assumed the default cluster: another one's is decided again.)
                    if (d && d.objectKey === stableKey(reg.object) && d.late === this.late && !reg.cluster) {
                        this.decidedAtRegistration.add(reg.urn);
                        return await this.wire(a, d.gates, reg);
                    }
                    const again = (await this.decideInOrder(reg, true, true)).gates;
                    this.finals.set(reg.urn, reg);
                    this.decidedAtRegistration.add(reg.urn);
                    return await this.wire(a, again, reg);
                } finally {
                    c.valuesKnown?.();
                }
            }
            if (inOrder) {
                reg.order = inOrder.order;
                await this.inOrderOf(reg, inOrder.order);
            }
            await this.valuesOfInstallers(reg, this.seq);
            const gates = (await this.decideInOrder(reg, true)).gates;
            this.finals.set(reg.urn, reg);
            this.decidedAtRegistration.add(reg.urn);
            inOrder?.done();
            return await this.wire(a, gates, reg);
        } catch (e) {
            throw this.failure(a, e);
        } finally {
            explicit?.done(); // every way out: nothing written below waits for it in vain
        }
    }

    // inOrderOf waits (at most the plan timeout) until every object the program wrote above r for
    // r's explicit kubernetes provider was decided: they register in no guaranteed order, and an
    // installer among them (a Certificate above the Deployment that mounts its Secret) must count.
    // A provider still unregistered is another cluster's (r's own is registered).
    private async inOrderOf(r: Reg, order: number): Promise<void> {
        const waits: Promise<void>[] = [];
        await Promise.all([...this.explicitOrder.entries()]
            .filter(([urn, e]) => urn !== r.urn && e.order < order)
            .map(async ([, e]) => {
                if ((await Promise.race([urnOf(e.provider), sleep(1000).then(() => "")])) === r.cluster) waits.push(e.decided);
            }));
        if (waits.length === 0) return;
        await withTimeout(this.deps.planTimeoutMs ?? 120_000, `the objects written above ${r.type} ${r.name}`, () => Promise.all(waits))
            .catch((e) => this.deps.warn(`autoGate: ${r.type} ${r.name} is decided without every object written above it: ${errorText(e)}`));
    }

    // failure is the error that fails a registration autoGate could not decide, logged as one.
    private failure(a: pulumi.ResourceTransformArgs, e: unknown): Error {
        const err = new Error(`autoGate could not decide the gates of ${a.type} ${a.name}, so it is not registered ungated: ${errorText(e)}`);
        (this.deps.error ?? this.deps.warn)(err.message);
        return err;
    }

    // defaultCluster is the readiness provider for the default kubernetes provider's objects:
    // autoGate's own when given, else as the stack's kubernetes configuration says (once).
    private defaultCluster(): Promise<{ provider?: pulumi.ProviderResource; skip?: string }> {
        if (this.opts.provider || !this.deps.defaultProvider) return Promise.resolve({ provider: this.opts.provider });
        let p = this.clusters.get("");
        if (!p) this.clusters.set("", (p = this.deps.defaultProvider()));
        return p;
    }

    // providerOf is the readiness provider a registration is planned and gated through: its
    // cluster's, or (decided in program order, before its registration said) the default's.
    private async providerOf(r: Reg): Promise<pulumi.ProviderResource | undefined> {
        if (r.cluster || r.provider) return r.provider;
        return (await this.defaultCluster()).provider;
    }

    // cluster sets the registration's cluster from its explicit kubernetes provider, and says
    // why it cannot be gated when its cluster cannot be told ("" when it can).
    private async cluster(r: Reg, a: pulumi.ResourceTransformArgs): Promise<string> {
        const urn = a.opts.provider ? await urnOf(a.opts.provider as any) : undefined;
        const name = urn?.split("::").pop() ?? "";
        if (!urn || name === "default" || name.startsWith("default_")) {
            const c = await this.defaultCluster();
            if (c.skip) return c.skip;
            r.provider = c.provider;
            return "";
        }
        if (!this.deps.clusterProvider) return `its kubernetes provider ${name} talks to a cluster autoGate cannot configure a readiness provider for`;
        let p = this.clusters.get(urn);
        if (!p) this.clusters.set(urn, (p = this.deps.clusterProvider(urn)));
        const c = await p;
        if (c.skip) return c.skip;
        r.cluster = urn;
        r.provider = c.provider;
        return "";
    }

    private async reg(a: pulumi.ResourceTransformArgs, parentUrn: string | undefined, handle?: pulumi.Resource): Promise<Reg> {
        const depUrns = await Promise.all(dependsOnOf(a).map((d) => urnOf(d)));
        const child = parentUrn && isComponentChild(parentUrn);
        return {
            ...(child ? { parentUrn, order: this.componentOrder.get(parentUrn!) } : {}),
            type: a.type, name: a.name, urn: childUrn(this.deps.urnPrefix(), parentUrn, a.type, a.name),
            ...(parentUrn && isComponentChild(parentUrn) ? { parentType: typeOfUrn(parentUrn) } : {}),
            object: await plain(a.props),
            deps: depUrns.flatMap((u) => (u ? [{ urn: u, type: typeOfUrn(u) }] : [])),
            handle,
        };
    }

    // hold keeps a component's child until its siblings are there too. The children of a component
    // the SDK renders in-process (ConfigFile/ConfigGroup v1, Chart v3) are counted as the program
    // constructs them: they settle once all arrived. Those the plugin registers (Chart v4,
    // ConfigGroup v2) settle once none arrived for a pause (settle).
    private hold(p: Pending): void {
        const key = p.key ?? p.parentUrn!;
        let g = this.groups.get(key);
        if (!g) this.groups.set(key, (g = { items: [] }));
        g.items.push(p);
        const root: any = p.root;
        if (root && !root.__remote && this.localChildren.has(root)) {
            this.localArrived.set(root, (this.localArrived.get(root) ?? 0) + 1);
            if (!g.waiting) {
                g.waiting = true;
                void this.settleLocal(key, g, root);
            } else g.arrived?.();
            return;
        }
        if (g.timer) clearTimeout(g.timer);
        g.timer = setTimeout(() => {
            if (this.groups.get(key) === g) this.groups.delete(key);
            void this.settle(g!.items);
        }, this.settleMs);
    }

    // settleLocal settles an in-process component's group once its children are all constructed
    // (its resources resolved) and have all arrived; bounded, with a warning past the plan timeout.
    private async settleLocal(key: string, g: { items: Pending[]; arrived?: () => void }, root: pulumi.Resource): Promise<void> {
        const name = `${typeOfUrn(key)} ${key.split("::").pop()}`;
        const allArrived = async () => {
            const resources = (root as any).resources;
            if (pulumi.Output.isInstance(resources)) await valueOf(resources as pulumi.Output<any>);
            while ((this.localArrived.get(root) ?? 0) < (this.localChildren.get(root) ?? 0)) {
                await new Promise<void>((resolve) => (g.arrived = resolve));
            }
        };
        await withTimeout(this.deps.planTimeoutMs ?? 120_000, `every child of ${name} to register`, allArrived)
            .catch((e) => this.deps.warn(`autoGate: the children of ${name} are decided without every sibling: ${errorText(e)}`));
        if (this.groups.get(key) === g) this.groups.delete(key);
        await this.settle(g.items);
    }

    // settle decides a component's children once they stopped arriving: in arrival order, then
    // once more for those decided before an installer of the same component was remembered.
    private async settle(items: Pending[]): Promise<void> {
        const decided = await Promise.all(items.map(async (p) => {
            try {
                const reg = await this.reg(p.args, p.parentUrn);
                const skip = await this.cluster(reg, p.args);
                if (skip) throw new Error(skip);
                return { p, reg, ...(await this.decideInOrder(reg, true)), ok: true as const };
            } catch (e) {
                return { p, ok: false as const, err: e };
            }
        }));
        for (const d of decided) {
            void (async () => {
                try {
                    if (!d.ok) throw d.err;
                    let gates = d.gates;
                    // An installer of the same component arrived after this child (itself aside): ask again with all of them.
                    if (this.missing(d.sent, d.reg)) gates = (await this.decide(d.reg, true, true, d.seq)).gates;
                    this.finals.set(d.reg.urn, d.reg);
                    this.decidedAtRegistration.add(d.reg.urn);
                    this.childDecided(d.reg.parentUrn);
                    d.p.resolve(await this.wire(d.p.args, gates, d.reg));
                } catch (e) {
                    d.p.reject(this.failure(d.p.args, e));
                }
            })();
        }
    }

    // decideInOrder asks the plan at once (calls run concurrently), then, once every decision
    // asked before it knows whether it is an installer, asks again if one of those was not in
    // its question: the answer is the one for everything registered before it, in order.
    private async decideInOrder(r: Reg, registered: boolean, again = false): Promise<{ gates: PlannedGate[]; sent: Set<string>; seq: number }> {
        const seq = this.seq++;
        const before = this.allRemembered;
        let remembered!: () => void;
        const mine = new Promise<void>((resolve) => (remembered = resolve));
        this.allRemembered = before.then(() => mine);
        let first: { gates: PlannedGate[]; sent: Set<string> };
        this.unanswered.set(seq, r);
        try {
            first = await this.decide(r, again, registered, seq);
        } finally {
            this.unanswered.delete(seq);
            remembered();
        }
        await before;
        if (!this.missing(first.sent, r, seq)) return { ...first, seq };
        return { ...(await this.decide(r, true, registered, seq)), seq };
    }

    // missing: an installer (registered before seq, when given) that counts for r and that a
    // question did not include.
    private missing(sent: Set<string>, r: Reg, seq?: number): boolean {
        return this.installers.some((i) => i.urn !== r.urn && !sent.has(i.id) && (seq === undefined || i.seq < seq) && this.counts(i, r, seq ?? this.seq));
    }

    // counts: whether installer i may gate r. Only what the program wrote above r counts (an
    // installer written below it may depend on it: a cycle), and, for a component's child, its
    // siblings, which the plugin registers in no guaranteed order; and only one of r's cluster.
    private counts(i: { order: number; parent?: string; cluster?: string }, r: Reg, seq: number): boolean {
        if ((i.cluster ?? "") !== (r.cluster ?? "")) return false;
        if (r.parentUrn && i.parent === r.parentUrn) return true;
        return i.order < (r.order ?? seq);
    }

    // slot bounds the plan calls in flight: the calls made together go as one batch invoke
    // (planBatcher), so this bounds a batch's size.
    private async slot<T>(f: () => Promise<T>): Promise<T> {
        if (this.inFlight >= maxPlansInFlight) await new Promise<void>((resolve) => this.slots.push(resolve));
        this.inFlight++;
        try {
            return await f();
        } finally {
            this.inFlight--;
            this.slots.shift()?.();
        }
    }

    // decide asks the plan about one registration, remembers it when it is an installer and
    // returns the gates it must wait for (none when the user opted it out or gated it by hand).
    private async decide(r: Reg, again: boolean, registered: boolean, seq: number): Promise<{ gates: PlannedGate[]; sent: Set<string> }> {
        const sent = new Set<string>();
        // The question is taken once a slot is free: fewer earlier answers are missing from it then.
        const provider = await this.providerOf(r);
        const result = await this.slot(() => {
            const installers = this.question(r, seq, sent);
            return withTimeout(this.deps.planTimeoutMs ?? 120_000, `the plan call for ${r.type} ${r.name}`, () => this.deps.plan({
                resource: { type: r.type, name: r.name, ...(r.parentType ? { parentType: r.parentType, parent: r.parentUrn } : {}), object: r.object, ...(r.cluster ? { cluster: r.cluster } : {}) },
                installers,
                dependsOn: this.dependsOnIds(r, sent),
                options: {
                    timeout: this.opts.timeout, stableFor: this.opts.stableFor, failureGrace: this.opts.failureGrace,
                    namespaces: this.opts.namespaces,
                },
            }, provider));
        });
        if (!again) for (const w of result.warnings ?? []) this.deps.warn(`autoGate: ${w}`);
        // Its values as registered are remembered below: decisions waiting for them may go on.
        if (registered) r.valuesKnown?.();
        // What later decisions need of an installer, as the plan trimmed it (an older provider: the props).
        const remembered = result.installer ?? r.object;
        const known = this.byUrn.get(r.urn);
        if (known) {
            // The values as registered: more of them are known than at construction (a decision
            // made with the old ones is made again when its own registration comes).
            if (stableKey(known.object) !== stableKey(remembered)) this.late++;
            known.object = remembered;
        } else if (result.remember && (!this.opts.installers || this.opts.installers.includes(r.name))) {
            const inst: Installer = {
                id: r.urn, seq, order: r.order ?? seq, type: r.type, name: r.name, object: remembered, urn: r.urn, handle: r.handle,
                ...(r.parentUrn ? { parent: r.parentUrn } : {}), ...(r.cluster ? { cluster: r.cluster } : {}),
            };
            const at = this.installers.findIndex((i) => i.seq > seq);
            this.installers.splice(at < 0 ? this.installers.length : at, 0, inst);
            this.byUrn.set(r.urn, inst);
            if (registered) this.late++;
            if (r.type.endsWith("WebhookConfiguration")) void this.warnInterceptedOnceDecided(inst);
        }
        const handGated = r.deps.some((d) => d.type.startsWith("readiness:"));
        const optedOut = String(r.object?.metadata?.annotations?.[autoGateOptOutAnnotation] ?? "").toLowerCase() === "false";
        if (handGated || optedOut || this.opts.exclude?.(r.type, r.name)) return { gates: [], sent };
        return { gates: result.gates ?? [], sent };
    }

    // childrenOf waits (bounded) until every child of the in-process components r depends on was
    // decided (an installer among them, a Chart v3's webhook configuration, is then remembered).
    private async childrenOf(components: pulumi.ComponentResource[], r: Reg): Promise<void> {
        if (components.length === 0) return;
        const all = Promise.all(components.map(async (comp) => {
            const [urn, children] = await Promise.all([valueOf(comp.urn), valueOf((comp as any).resources as pulumi.Output<any>)]);
            const n = Object.keys(children ?? {}).length;
            const e = this.decidedChildren.get(urn) ?? { count: 0, waiters: [] };
            this.decidedChildren.set(urn, e);
            if (e.count < n) await new Promise<void>((resolve) => e.waiters.push({ n, resolve }));
        }));
        await withTimeout(this.deps.planTimeoutMs ?? 120_000, `the children of the components ${r.type} ${r.name} depends on`, () => all)
            .catch((e) => this.deps.warn(`autoGate: ${r.type} ${r.name} is decided without every child of what it depends on: ${errorText(e)}`));
    }

    private childDecided(parentUrn?: string): void {
        if (!parentUrn) return;
        const e = this.decidedChildren.get(parentUrn) ?? { count: 0, waiters: [] };
        this.decidedChildren.set(parentUrn, e);
        e.count++;
        e.waiters = e.waiters.filter((w) => (w.n <= e.count ? (w.resolve(), false) : true));
    }

    // valuesOfInstallers waits (bounded) until the installers that count for r and were
    // constructed with unknown values (a Certificate whose namespace is another resource's
    // output) have registered with them: decided before, r would see them in the wrong place.
    private async valuesOfInstallers(r: Reg, seq: number): Promise<void> {
        const waits = this.installers.filter((i) => i.urn !== r.urn && this.counts(i, r, seq)).flatMap((i) => {
            const p = this.pendingValues.get(i.urn);
            return p ? [p] : [];
        });
        if (waits.length === 0) return;
        await withTimeout(this.deps.planTimeoutMs ?? 120_000, `the values of the installers before ${r.type} ${r.name}`, () => Promise.all(waits))
            .catch((e) => this.deps.warn(`autoGate: ${r.type} ${r.name} is decided without every installer's values: ${errorText(e)}`));
    }

    // warnInterceptedOnceDecided is warnIntercepted once every resource the program wrote above the
    // webhook configuration was decided: their decisions run concurrently with its own, and one
    // not final yet when it is remembered would not be warned about.
    private async warnInterceptedOnceDecided(hook: Installer): Promise<void> {
        const above = [...this.constructed.entries()].filter(([urn, c]) => urn !== hook.urn && c.order < hook.order);
        await Promise.all(above.map(([, c]) => c.decision.catch(() => undefined)));
        await this.warnIntercepted(hook, [...this.finals.values()]);
    }

    // warnIntercepted warns about registrations decided before a webhook configuration installer
    // that it intercepts (top-level ones before it, or a component's children whose group had
    // settled before it arrived): nothing held them for it.
    private async warnIntercepted(hook: Installer, before: Reg[]): Promise<void> {
        for (const r of before) {
            if (r.urn === hook.urn || (r.cluster ?? "") !== (hook.cluster ?? "")) continue;
            // Decided in program order but not registered yet: its registration decides again,
            // with this installer when it counts for it (a Chart v3 child, above it).
            if (!this.decidedAtRegistration.has(r.urn) && this.counts(hook, r, this.seq)) continue;
            try {
                const provider = await this.providerOf(r);
                const result = await this.slot(() => withTimeout(this.deps.planTimeoutMs ?? 120_000, `the plan call for ${r.type} ${r.name}`, () => this.deps.plan({
                    resource: { type: r.type, name: r.name, ...(r.parentType ? { parentType: r.parentType, parent: r.parentUrn } : {}), object: r.object, ...(r.cluster ? { cluster: r.cluster } : {}) },
                    installers: [{ id: hook.id, type: hook.type, name: hook.name, object: hook.object, ...(hook.cluster ? { cluster: hook.cluster } : {}), ...(hook.parent ? { parent: hook.parent } : {}) }],
                    dependsOn: [],
                    options: {},
                }, provider)));
                if ((result.gates ?? []).some((g) => g.type === "readiness:index:AdmissionReady" && (g.after ?? []).includes(hook.id))) {
                    this.deps.warn(`autoGate: ${r.type} ${r.name} was registered before ${hook.type} ${hook.name}, which intercepts it: it was not held for that webhook. ` +
                        "Register the webhook configuration (or what installs it) first, or give it a dependsOn on a readiness.AdmissionReady of it by hand");
                }
            } catch {
                // a warning only: the registration itself was decided already
            }
        }
    }

    // question is the installers a decision is asked with (their ids added to sent): every
    // installer but the registration itself and, in registration order among them, every earlier
    // registration whose answer has not come yet, as it is. The plan ignores those that are no
    // installer; without them, decisions asked concurrently would each miss the one before and
    // all be asked twice (200 ExternalSecrets, each an installer: 401 calls).
    private question(r: Reg, seq: number, sent: Set<string>): PlanInstaller[] {
        const earlier: { seq: number; i: PlanInstaller }[] = this.installers
            .filter((i) => i.urn !== r.urn && this.counts(i, r, seq))
            .map(({ seq, id, type, name, object, cluster, parent }) => ({ seq, i: { id, type, name, object, ...(cluster ? { cluster } : {}), ...(parent ? { parent } : {}) } }));
        const have = new Set(earlier.map((e) => e.i.id));
        for (const [s, u] of this.unanswered) {
            if (s >= seq || u.urn === r.urn || have.has(u.urn) || (this.opts.installers && !this.opts.installers.includes(u.name))) continue;
            if (!this.counts({ order: u.order ?? s, parent: u.parentUrn, cluster: u.cluster }, r, seq)) continue;
            have.add(u.urn);
            earlier.push({ seq: s, i: { id: u.urn, type: u.type, name: u.name, object: u.object, ...(u.cluster ? { cluster: u.cluster } : {}), ...(u.parentUrn ? { parent: u.parentUrn } : {}) } });
        }
        earlier.sort((a, b) => a.seq - b.seq);
        for (const e of earlier) sent.add(e.i.id);
        return earlier.map((e) => e.i);
    }

    // dependsOnIds: the ids, among those sent, of what the registration's dependsOn names (its
    // handle when the program constructed it, else its URN).
    private dependsOnIds(r: Reg, sent: Set<string>): string[] {
        const all = [...this.installers, ...this.unanswered.values()];
        return r.deps.flatMap((d) => {
            const i = d.urn ? all.find((x) => x.urn === d.urn) : all.find((x) => x.handle !== undefined && x.handle === d.handle);
            return i && sent.has(i.urn) ? [i.urn] : [];
        });
    }

    // wire creates (or reuses, by batch key) the gates and adds them to the resource's dependsOn.
    private async wire(a: pulumi.ResourceTransformArgs, planned: PlannedGate[], r: Reg): Promise<pulumi.ResourceTransformResult | undefined> {
        if (planned.length === 0) return undefined;
        const pending: Promise<pulumi.Resource>[] = [];
        const left = new Set<string>();
        const provider = await this.providerOf(r);
        for (const g of planned) { // in order: afterGates name earlier ones
            const why = this.cycle(g, r, left);
            if (why) {
                // The gate would wait for what it guards: left out, never a deadlock.
                left.add(g.key);
                this.deps.warn(`autoGate: ${r.type} ${r.name} is not held by ${g.name}: ${why}`);
                continue;
            }
            pending.push(this.gate(g, provider));
        }
        const gates = await Promise.all(pending);
        if (gates.length === 0) return undefined;
        return { props: a.props, opts: { ...a.opts, dependsOn: [...dependsOnOf(a), ...gates] } };
    }

    // cycle says why gate g would wait for r, the registration it guards ("" when it would not): an
    // installer it comes after depends on r (through the dependsOn and parents the program wrote),
    // or a gate it comes after was left out for that reason.
    private cycle(g: PlannedGate, r: Reg, left: Set<string>): string {
        if ((g.afterGates ?? []).some((k) => left.has(k))) return "the gate it comes after was left out";
        const targets = new Set<any>([r.urn, r.handle].filter((x) => x !== undefined));
        for (const id of g.after ?? []) {
            const inst = this.byUrn.get(id);
            if (inst && this.dependsOnAny(inst.urn, targets, new Set())) return `${inst.type} ${inst.name} depends on it`;
        }
        return "";
    }

    // dependsOnAny: whether the registration urn depends (dependsOn, parent) on one of targets (URNs or handles).
    private dependsOnAny(urn: string, targets: Set<any>, seen: Set<string>): boolean {
        if (seen.has(urn)) return false;
        seen.add(urn);
        const reg = this.finals.get(urn) ?? [...this.unanswered.values()].find((u) => u.urn === urn);
        if (!reg) return false;
        const next = [...reg.deps.flatMap((d) => [d.urn, d.handle]), reg.parentUrn];
        if (next.some((n) => n !== undefined && targets.has(n))) return true;
        return reg.deps.some((d) => d.urn !== undefined && this.dependsOnAny(d.urn, targets, seen));
    }

    // gate is the one gate of a batch key, created once every installer it comes after exists.
    private gate(g: PlannedGate, provider?: pulumi.ProviderResource): Promise<pulumi.Resource> {
        let p = this.gates.get(g.key);
        if (!p) {
            const after = (g.after ?? []).map((id) => {
                const i = this.installers.find((x) => x.id === id);
                if (!i) throw new Error(`the plan answered an unknown installer id ${id}`);
                return i;
            });
            const afterGates = (g.afterGates ?? []).map((k) => {
                const gp = this.gates.get(k);
                if (!gp) throw new Error(`the plan answered gate ${g.key} after an unknown gate ${k}`);
                return gp;
            });
            p = (async () => {
                // A gate must never start before the installer it is about exists: the program's
                // own objects by their handle, a component's children once the engine has them.
                await Promise.all(after.map((i) => (i.handle ? valueOf(i.handle.urn) : this.deps.waitRegistered(i.urn))));
                const before = await Promise.all(afterGates);
                if (g.reason) this.deps.info(`autoGate: ${g.name}: ${g.reason}`);
                let spec = g;
                if (g.argsFrom?.length) {
                    // An autonamed installer's name is in its outputs only.
                    if (!this.deps.outputOf) throw new Error(`gate ${g.name} needs an installer's outputs`);
                    const args = { ...(g.args ?? {}) };
                    for (const f of g.argsFrom) args[f.arg] = this.deps.outputOf(f.installer, f.output);
                    spec = { ...g, args };
                }
                return this.deps.createGate(spec, [...after.map((i) => i.handle ?? new pulumi.DependencyResource(i.urn)), ...before], provider);
            })();
            this.gates.set(g.key, p);
            p.catch(() => this.gates.delete(g.key));
        }
        return p;
    }
}

// maxPlansInFlight: 200 top-level ExternalSecrets a program's loop makes are decided in one batch.
const maxPlansInFlight = 256;

// ---------------------------------------------------------------------------------------------
// Pulumi glue.

function pulumiDeps(o: AutoGateOptions): AutoGateDeps {
    // One batcher per readiness provider: a batch is one invoke, through one provider.
    const batchers = new Map<pulumi.ProviderResource | undefined, (a: PlanArgs) => Promise<PlanResult>>();
    const batcher = (provider?: pulumi.ProviderResource) => {
        let b = batchers.get(provider);
        if (!b) {
            const invokeOpts: pulumi.InvokeOptions = { ...utilities.resourceOptsDefaults(), ...(provider ? { provider } : {}) };
            b = planBatcher((batch) => pulumi.runtime.invoke("readiness:index:autoGatePlanBatch", batch as any, invokeOpts) as Promise<PlanBatchResult>);
            batchers.set(provider, b);
        }
        return b;
    };
    return {
        plan: (args, provider) => batcher(provider ?? o.provider)(args),
        // AdmissionReady's objects may be Secrets: secret from the start, as the provider stores them (as in Go).
        createGate: (g, after, provider) => new Gate(g.type, g.name, g.args?.objects ? { ...g.args, objects: pulumi.secret(g.args.objects) } : g.args ?? {},
            pulumi.mergeOptions(utilities.resourceOptsDefaults(), { dependsOn: after, ...((provider ?? o.provider) ? { provider: provider ?? o.provider } : {}) })),
        waitRegistered,
        outputOf: (urn, path) => (pulumi.runtime.isDryRun() ? pulumi.output(pulumi.unknown as any)
            : pulumi.output(registeredState(urn).then((state) => {
                const v = path.split(".").reduce((x: any, k) => (x && typeof x === "object" ? x[k] : undefined), state);
                if (typeof v !== "string" || v === "") throw new Error(`autoGate: ${urn} has no output ${path} to name its gate with`);
                return v;
            }))),
        clusterProvider: (urn) => clusterProvider(urn),
        defaultProvider: () => defaultProvider((k) => pulumi.runtime.getConfig(k) || undefined),
        urnPrefix: () => `urn:pulumi:${pulumi.getStack()}::${pulumi.getProject()}::`,
        info: (m) => pulumi.log.info(m),
        warn: (m) => pulumi.log.warn(m),
        error: (m) => pulumi.log.error(m),
    };
}

/** The arguments of `readiness:index:autoGatePlanBatch`: plan calls whose installers are indexes into `installers`. */
export interface PlanBatchArgs {
    installers: PlanInstaller[];
    plans: (Omit<PlanArgs, "installers"> & { installers: number[] })[];
}
/** Its answer: one per plan, gates as indexes into `gates` (one per key, as the first plan naming it answers it). */
export interface PlanBatchResult {
    gates?: PlannedGate[];
    results: (Omit<PlanResult, "gates"> & { gates?: number[] })[];
}

/**
 * planBatcher turns plan calls into batch invokes: the calls made in one turn of the event loop
 * (the decisions a program's loop or a settled component starts together, and those a batch's
 * answer lets start) go as one invoke, each distinct installer in it once. The engine converts an
 * invoke's arguments several times on their way to the provider; 200 separate calls, each with
 * every installer seen so far, cost it more CPU than the rest of the stack's `up`.
 * (Exported for its tests; not a stable API.)
 */
export function planBatcher(invoke: (b: PlanBatchArgs) => Promise<PlanBatchResult>): (a: PlanArgs) => Promise<PlanResult> {
    let queue: { args: PlanArgs; resolve: (r: PlanResult) => void; reject: (e: unknown) => void }[] = [];
    const flush = () => {
        const calls = queue;
        queue = [];
        // An installer is the same entry when its id and its object are: an installer's object may
        // be replaced between two questions (its values as registered), so the id alone is not enough.
        const installers: PlanInstaller[] = [];
        const index = new Map<string, { object: any; at: number }[]>();
        const indexOf = (i: PlanInstaller) => {
            const seen = index.get(i.id) ?? [];
            let e = seen.find((x) => x.object === i.object);
            if (!e) {
                e = { object: i.object, at: installers.push(i) - 1 };
                index.set(i.id, [...seen, e]);
            }
            return e.at;
        };
        const plans = calls.map(({ args }) => ({ ...args, installers: args.installers.map(indexOf) }));
        invoke({ installers, plans }).then((r) => {
            const results = r?.results ?? [];
            const gates = r?.gates ?? [];
            calls.forEach((c, n) => {
                if (n >= results.length) return c.reject(new Error(`the batch plan answered ${results.length} of ${calls.length} calls`));
                const named = (results[n].gates ?? []).map((i) => gates[i]);
                if (named.some((g) => g === undefined)) return c.reject(new Error(`the batch plan answered an unknown gate index for ${c.args.resource.type} ${c.args.resource.name}`));
                c.resolve({ ...results[n], gates: named });
            });
        }, (e) => calls.forEach((c) => c.reject(e)));
    };
    return (args) => new Promise<PlanResult>((resolve, reject) => {
        if (queue.length === 0) setImmediate(flush);
        queue.push({ args, resolve, reject });
    });
}

// waitRegistered asks the engine for the resource (its built-in getResource answers once the
// resource's step finished) until it answers; any other error than "unknown resource" ends it.
// No event for "that registration finished" reaches an SDK from outside the registering code.
async function waitRegistered(urn: string): Promise<void> {
    await registeredState(urn);
}

// registeredState is waitRegistered that also returns the resource's outputs as the engine has them.
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

// configuredAs is a readiness provider configured as a kubernetes provider's configuration (cfg:
// "kubeconfig", "context", "namespace"; the kubeconfig passed on as a secret).
function configuredAs(name: string, cfg: (key: string) => string | undefined): Provider {
    const kubeconfig = cfg("kubeconfig");
    return new Provider(name, {
        ...(kubeconfig ? { kubeconfig: pulumi.secret(kubeconfig) } : {}),
        ...(cfg("context") ? { context: cfg("context") } : {}),
        ...(cfg("namespace") ? { namespace: cfg("namespace") } : {}),
    });
}

// defaultProvider is the readiness provider for the objects of the default kubernetes provider,
// as pulumi-kubernetes reads the stack's kubernetes configuration (provider.go, Configure:
// kubernetes:kubeconfig, :context, and :namespace, which overrides the context's): none (the
// default readiness provider) when the readiness configuration names the same, else
// `autogate-default` configured so. As the Go SDK's defaultClusterProvider.
export async function defaultProvider(cfg: (key: string) => string | undefined): Promise<{ provider?: pulumi.ProviderResource; skip?: string }> {
    if (cfg("kubernetes:renderYamlToDirectory")) {
        return { skip: "the stack's kubernetes provider renders YAML to a directory (kubernetes:renderYamlToDirectory) and talks to no cluster" };
    }
    if (cfg("kubernetes:cluster")) {
        return { skip: `the stack's kubernetes provider selects kubeconfig cluster ${cfg("kubernetes:cluster")} (kubernetes:cluster), which a readiness provider cannot; gate its objects by hand with a readiness.Provider for that cluster` };
    }
    if (["kubeconfig", "context", "namespace"].every((k) => (cfg(`kubernetes:${k}`) ?? "") === (cfg(`readiness:${k}`) ?? ""))) return {};
    const provider = configuredAs("autogate-default", (k) => cfg(`kubernetes:${k}`));
    pulumi.log.info("autoGate: objects of the stack's kubernetes provider are gated by readiness provider autogate-default, configured as the stack's kubernetes configuration (kubeconfig, context, namespace)");
    return { provider };
}

// clusterProvider makes the readiness provider for the cluster of an explicit kubernetes provider,
// configured from that provider's configuration as pulumi-kubernetes reads it (kubeconfig,
// context, namespace); a provider that renders YAML or selects a kubeconfig cluster is not
// guessed at.
async function clusterProvider(urn: string): Promise<{ provider?: pulumi.ProviderResource; skip?: string }> {
    const state = await registeredState(urn);
    const name = urn.split("::").pop() ?? urn;
    const cfg = (k: string): string | undefined => {
        const v = state?.[k];
        return typeof v === "string" && v !== "" ? v : undefined;
    };
    if (cfg("renderYamlToDirectory")) return { skip: `its kubernetes provider ${name} renders YAML to a directory and talks to no cluster` };
    if (cfg("cluster")) {
        return { skip: `its kubernetes provider ${name} selects kubeconfig cluster ${cfg("cluster")}, which a readiness provider cannot; gate its objects by hand with a readiness.Provider for that cluster` };
    }
    if (pulumi.runtime.isDryRun() && pulumi.isUnknown(state?.kubeconfig)) {
        return { skip: `its kubernetes provider ${name}'s kubeconfig is not known in a preview (decided at up)` };
    }
    const provider = configuredAs(`autogate-${name}`, cfg);
    pulumi.log.info(`autoGate: objects of kubernetes provider ${name} are gated by readiness provider autogate-${name}, configured as it is`);
    return { provider };
}

// ---------------------------------------------------------------------------------------------
// Pure helpers.

// hasUnknowns: whether props hold a value not known yet (an Output, a Promise, an unknown).
function hasUnknowns(v: any): boolean {
    if (v === null || v === undefined) return false;
    if (pulumi.Output.isInstance(v) || v instanceof Promise || pulumi.isUnknown(v)) return true;
    if (typeof v !== "object" || pulumi.Resource.isInstance(v)) return false;
    return (Array.isArray(v) ? v : Object.values(v)).some(hasUnknowns);
}

// withTimeout is f's answer, or an error once ms passed: one plan call that never returns must
// not hold its registration (and every later decision waiting on it) forever.
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function withTimeout<T>(ms: number, what: string, f: () => Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what} did not answer within ${ms} ms`)), ms);
    });
    try {
        return await Promise.race([f(), expired]);
    } finally {
        clearTimeout(timer);
    }
}

// qualifiedType is a resource's type as its URN carries it: its ancestors' types (the stack aside)
// and its own, joined by "$".
// outermostComponent is the outermost kubernetes component r is in (a ConfigGroup v1 for its
// ConfigFiles), r itself when it is in none.
function outermostComponent(r: pulumi.Resource): pulumi.Resource {
    let out: any = r;
    for (let p: any = r && (r as any).__parentResource; p && String(p.__pulumiType ?? "").startsWith("kubernetes:"); p = p.__parentResource) out = p;
    return out;
}

function qualifiedType(parent: pulumi.Resource | undefined, type: string): string {
    const chain = [type];
    for (let p: any = parent; p && p.__pulumiType !== "pulumi:pulumi:Stack"; p = p.__parentResource) chain.unshift(String(p.__pulumiType));
    return chain.join("$");
}

/** typeOfUrn is the resource's own type token in a URN (the last of its qualified type). */
export function typeOfUrn(urn: string): string {
    const q = urn.split("::")[2] ?? "";
    return q.split("$").pop() ?? "";
}

/** isComponentChild: the parent is a pulumi-kubernetes component (Chart v4, ConfigGroup, ...). */
export function isComponentChild(parentUrn: string): boolean {
    return typeOfUrn(parentUrn).startsWith("kubernetes:");
}

/** childUrn is the URN the engine gives a registration (the root stack is no parent in it). */
export function childUrn(prefix: string, parentUrn: string | undefined, type: string, name: string): string {
    const parentType = parentUrn ? parentUrn.split("::")[2] ?? "" : "";
    const qualified = parentType && parentType !== "pulumi:pulumi:Stack" ? `${parentType}$${type}` : type;
    return `${prefix}${qualified}::${name}`;
}

async function urnOf(r: pulumi.Resource | pulumi.Input<pulumi.Resource> | undefined): Promise<string | undefined> {
    if (!r) return undefined;
    const x: any = r;
    const res: pulumi.Resource | undefined = pulumi.Resource.isInstance(x) ? x : pulumi.Output.isInstance(x) ? await valueOf(x) : await x;
    return res?.urn ? await valueOf(res.urn) : undefined;
}

function toArray<T>(v: T | T[] | undefined): T[] {
    return v === undefined ? [] : Array.isArray(v) ? v : [v];
}

// dependsOnOf is a registration's dependsOn as a list (a transform gets DependencyResources).
function dependsOnOf(a: pulumi.ResourceTransformArgs): pulumi.Input<pulumi.Resource>[] {
    return toArray(a.opts.dependsOn as pulumi.Input<pulumi.Resource> | pulumi.Input<pulumi.Resource>[] | undefined);
}

// valueOf is an Output's value (the SDK's own internal promise; unknown values resolve undefined).
function valueOf<T>(o: pulumi.Output<T>): Promise<T> {
    return (o as any).promise();
}

// Gate is a readiness gate registered by token (the plan names its type and inputs).
class Gate extends pulumi.CustomResource {
    constructor(type: string, name: string, args: pulumi.Inputs, opts: pulumi.CustomResourceOptions) {
        super(type, name, args, opts);
    }
}

const sigKey = "4dabf18193072939515e22adb298388d";

/**
 * plain turns props as a transform sees them into JSON for the plan: unknown values (preview)
 * and secrets become null (the plan needs no secret value), resources and assets too. Only an
 * Output or a Promise is waited for: a chart's CRD is a large object walked once, synchronously.
 */
export async function plain(v: any): Promise<any> {
    return plainWalk(v);
}

function plainWalk(v: any): any | Promise<any> {
    if (v === null || v === undefined) return null;
    if (pulumi.Output.isInstance(v)) {
        const o = v as any;
        return Promise.all([o.isKnown, o.isSecret]).then(([known, secret]) => (!known || secret ? null : o.promise().then(plainWalk)));
    }
    if (v instanceof Promise) return v.then(plainWalk);
    if (pulumi.isUnknown(v)) return null;
    if (typeof v !== "object") return v;
    if (Array.isArray(v)) {
        const items = v.map(plainWalk);
        return items.some((x) => x instanceof Promise) ? Promise.all(items) : items;
    }
    if (v[sigKey] !== undefined || pulumi.Resource.isInstance(v) || pulumi.asset.Asset.isInstance(v) || pulumi.asset.Archive.isInstance(v)) return null;
    const entries = Object.entries(v).map(([k, e]) => [k, plainWalk(e)] as [string, any]);
    const build = (es: [string, any][]) => {
        const out: Record<string, any> = {};
        for (const [k, p] of es) if (p !== null) out[k] = p;
        return out;
    };
    if (!entries.some(([, p]) => p instanceof Promise)) return build(entries);
    return Promise.all(entries.map(async ([k, p]) => [k, await p] as [string, any])).then(build);
}

/** plainNow is {@link plain} for values known now, without waiting: any Output or Promise is null. */
export function plainNow(v: any): any {
    if (v === null || v === undefined || pulumi.Output.isInstance(v) || v instanceof Promise || pulumi.isUnknown(v)) return null;
    if (typeof v !== "object") return v;
    if (Array.isArray(v)) return v.map(plainNow);
    if (v[sigKey] !== undefined || pulumi.Resource.isInstance(v) || pulumi.asset.Asset.isInstance(v) || pulumi.asset.Archive.isInstance(v)) return null;
    const out: Record<string, any> = {};
    for (const [k, e] of Object.entries(v)) {
        const p = plainNow(e);
        if (p !== null) out[k] = p;
    }
    return out;
}

// stableKey is JSON with sorted keys: the same object whatever order its keys came in.
function stableKey(v: any): string {
    return JSON.stringify(v, (_k, x) => (x && typeof x === "object" && !Array.isArray(x)
        ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : x));
}

function errorText(e: unknown): string {
    return e instanceof Error ? e.message : String(e);
}
