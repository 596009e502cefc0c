// Test harness: starts the local control plane (the same Go harness the Go tests use), builds
// the provider binaries, and talks to the API server directly for what the test plays itself.
import assert from "node:assert/strict";
import { ChildProcess, execFileSync, spawn } from "child_process";
import { createHash } from "crypto";
import * as fs from "fs";
import * as https from "https";
import * as os from "os";
import * as path from "path";
import * as readline from "readline";
import { LocalWorkspace, PulumiCommand, InlineProgramArgs, Stack } from "@pulumi/pulumi/automation";
import YAML from "yaml";
import * as pulumi from "@pulumi/pulumi";

// The repository's root: the first folder up from here with internal/k8splugin/VERSION (the
// compiled tests sit at dist/tests/nodejs/src, as they also compile the examples they import).
export const repoRoot = ((): string => {
    for (let d = __dirname; d !== path.dirname(d); d = path.dirname(d)) {
        if (fs.existsSync(path.join(d, "internal", "k8splugin", "VERSION"))) return d;
    }
    throw new Error(`no repository root above ${__dirname}`);
})();

export interface Cluster {
    kubeconfig: string;
    server: string;
    token: string;
    ca: Buffer;
    stop: () => Promise<void>;
}

export interface ClusterOptions {
    // A real node (containerd, kubelet, kube-proxy: `localcluster up-real-node`) instead of
    // kwok's. It takes the machine's node lock: this waits while another real node runs.
    realNode?: boolean;
    // With realNode: External Secrets' and cert-manager's charts are written to
    // <chartsDir>/external-secrets and <chartsDir>/cert-manager, their images loaded into the
    // node, before the cluster is given back.
    chartsDir?: string;
}

// startCluster runs `localcluster up` (or `up-real-node`) and resolves once it printed its
// kubeconfig path.
export async function startCluster(opts: ClusterOptions = {}): Promise<Cluster> {
    const localcluster = goBinary("./internal/localcluster");
    const args = opts.realNode ? ["up-real-node", ...(opts.chartsDir ? ["-charts", opts.chartsDir] : [])] : ["up"];
    const child: ChildProcess = spawn(localcluster, args, { cwd: repoRoot, stdio: ["ignore", "pipe", "inherit"] });
    const kubeconfigPath: string = await new Promise((resolve, reject) => {
        const rl = readline.createInterface({ input: child.stdout! });
        rl.once("line", (line) => resolve(line.trim()));
        child.once("exit", (code) => reject(new Error(`localcluster exited with ${code}`)));
    });
    const kubeconfig = fs.readFileSync(kubeconfigPath, "utf8");
    const doc = YAML.parse(kubeconfig);
    return {
        kubeconfig,
        server: doc.clusters[0].cluster.server,
        token: doc.users[0].user.token,
        ca: Buffer.from(doc.clusters[0].cluster["certificate-authority-data"], "base64"),
        stop: () => new Promise((resolve) => { child.once("exit", () => resolve()); child.kill("SIGTERM"); }),
    };
}

// nodeRequirements is what this machine lacks to run a real node ("" when nothing): the
// real-node tests skip with it, or fail under CI (as tests/e2e/realnode does).
export function nodeRequirements(): string {
    return execFileSync(goBinary("./internal/localcluster"), ["node-requirements"]).toString().trim();
}

// request sends one API request to the control plane (loopback only).
export function request(c: Cluster, method: string, apiPath: string, body?: unknown): Promise<{ status: number; body: any }> {
    return new Promise((resolve, reject) => {
        const url = new URL(apiPath, c.server);
        const req = https.request(url, {
            method, ca: c.ca,
            headers: { Authorization: `Bearer ${c.token}`, "Content-Type": "application/json" },
        }, (res) => {
            let data = "";
            res.on("data", (d) => (data += d));
            // Not always JSON: the API server answers an unknown path (a CRD's group not served yet) with "404 page not found".
            res.on("end", () => { try { resolve({ status: res.statusCode ?? 0, body: data ? JSON.parse(data) : undefined }); } catch { resolve({ status: res.statusCode ?? 0, body: data }); } });
        });
        req.on("error", reject);
        if (body !== undefined) req.write(JSON.stringify(body));
        req.end();
    });
}

export function crd(group: string, kind: string, plural: string): object {
    return {
        apiVersion: "apiextensions.k8s.io/v1", kind: "CustomResourceDefinition",
        metadata: { name: `${plural}.${group}` },
        spec: {
            group, scope: "Namespaced",
            names: { kind, plural, singular: kind.toLowerCase(), listKind: `${kind}List` },
            versions: [{ name: "v1", served: true, storage: true,
                schema: { openAPIV3Schema: { type: "object", "x-kubernetes-preserve-unknown-fields": true } } }],
        },
    };
}

export interface PulumiEnv {
    dir: string;
    envVars: Record<string, string>;
    command: PulumiCommand;
}

// tempDir makes a folder that is removed when this test process exits: a TypeScript stack test
// leaves Pulumi state and work folders of hundreds of MB, and CI runs dozens of them on one disk.
export function tempDir(prefix: string): string {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
    process.once("exit", () => fs.rmSync(dir, { recursive: true, force: true }));
    return dir;
}

// checkoutBin is this checkout's folder for the binaries the tests build (the same one
// internal/stack builds the provider into).
function checkoutBin(): string {
    const key = createHash("sha256").update(repoRoot).digest("hex").slice(0, 12);
    return path.join(os.tmpdir(), `readiness-provider-bin-${key}`);
}

// goBinary builds one of this repository's commands (once per process) into checkoutBin and
// returns its path. Test files run side by side: a build that lands while another file runs the
// binary swaps the file by a rename, and the running process keeps its copy.
const built = new Map<string, string>();
export function goBinary(pkg: string): string {
    let bin = built.get(pkg);
    if (!bin) {
        bin = path.join(checkoutBin(), path.basename(pkg));
        execFileSync("go", ["build", "-o", bin, pkg], { cwd: repoRoot, stdio: "inherit" });
        built.set(pkg, bin);
    }
    return bin;
}

// providerBin is the folder of the provider binary (110 MB), built once per process (goBinary),
// which the test files and the Go stack tests (internal/stack) share on disk.
function buildProviders(): string {
    return path.dirname(goBinary("./provider/cmd/pulumi-resource-readiness"));
}

// preparePulumi builds the provider and sets up a local backend.
export async function preparePulumi(): Promise<PulumiEnv> {
    const dir = tempDir("readiness-node-");
    const bin = buildProviders();
    const toolsBin = execFileSync("go", ["run", "./internal/localcluster", "tools"], { cwd: repoRoot }).toString().trim();
    for (const d of ["state", "home", "tmp"]) fs.mkdirSync(path.join(dir, d), { recursive: true });
    // pulumi-kubernetes (the pinned plugin), installed once into the project's PULUMI_HOME; this
    // environment's home sees that plugins folder.
    const pluginDir = execFileSync("go", ["run", "./internal/k8splugin/cmd/k8splugin"], { cwd: repoRoot, stdio: ["ignore", "pipe", "inherit"] }).toString().trim();
    fs.symlinkSync(path.dirname(pluginDir), path.join(dir, "home", "plugins"));
    const command = await PulumiCommand.get({ root: path.dirname(toolsBin), skipVersionCheck: true });
    return {
        dir, command,
        envVars: {
            PATH: `${bin}:${toolsBin}:${process.env.PATH}`,
            PULUMI_BACKEND_URL: `file://${path.join(dir, "state")}`,
            PULUMI_CONFIG_PASSPHRASE: "readiness-local-only",
            PULUMI_HOME: path.join(dir, "home"),
            PULUMI_SKIP_UPDATE_CHECK: "true",
            PULUMI_DIY_BACKEND_NO_LEGACY_WARNING: "true",
            // A plugin missing here must fail the test, never be fetched from the internet.
            PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION: "true",
            // pulumi-kubernetes writes the kubeconfig it is given to a new temporary file at each
            // configure and never removes it: the Pulumi processes' temporary files stay in this
            // environment's folder, and go with it.
            TMPDIR: path.join(dir, "tmp"),
        },
    };
}

export async function stack(env: PulumiEnv, c: Cluster, args: InlineProgramArgs): Promise<Stack> {
    const workDir = path.join(env.dir, `work-${args.projectName}-${args.stackName}`);
    fs.mkdirSync(workDir, { recursive: true });
    const s = await LocalWorkspace.createOrSelectStack(args, { workDir, envVars: env.envVars, pulumiCommand: env.command });
    await s.setConfig("readiness:kubeconfig", { value: c.kubeconfig, secret: true });
    await s.setConfig("kubernetes:kubeconfig", { value: c.kubeconfig, secret: true });
    return s;
}

// localChart writes a real chart rendered by the Helm CLI (provider/testdata/charts) as a local
// chart whose webhooks go to the test webhook server (internal/charts says what else changes);
// it returns the chart's path, for k8s.helm.v3.Release or k8s.helm.v4.Chart.
export function localChart(fixture: string, webhook: FakeWebhook): string {
    const dir = tempDir("readiness-chart-");
    return execFileSync("go", ["run", "./internal/charts/cmd/localchart", fixture, dir, webhook.url, webhook.caBundle],
        { cwd: repoRoot, stdio: ["ignore", "pipe", "inherit"] }).toString().trim();
}

// toNextSecond is a delay of at least ms that ends just after a whole second: an event then can
// be compared with the API server's whole-second creationTimestamp with no second of slack.
export function toNextSecond(ms: number): number {
    const end = Date.now() + ms;
    return ms + (1000 - end % 1000);
}

// createdBefore: an object whose creationTimestamp (whole seconds) is `created` was created before
// `t`, an instant just after a whole second (toNextSecond).
export function createdBefore(created: string, t: number): boolean {
    return Date.parse(created) < Math.floor(t / 1000) * 1000;
}

export interface Registry {
    host: string;  // 127.0.0.1:<port>
    ca: string;    // PEM of the CA that signed its certificate (with -tls)
    // push sends one command to the registry process ("image app:v1 linux/amd64",
    // "index app:v1 linux/amd64 linux/arm64") and resolves to the pushed digest.
    push: (command: string) => Promise<string>;
    stop: () => void;
}

// startRegistry runs a real OCI registry on 127.0.0.1 (internal/testregistry/cmd/testregistry).
export async function startRegistry(args: string[] = []): Promise<Registry> {
    const bin = goBinary("./internal/testregistry/cmd/testregistry");
    const child = spawn(bin, args, { stdio: ["pipe", "pipe", "inherit"] });
    const lines: string[] = [];
    const waiters: { resolve: (l: string) => void; reject: (e: Error) => void }[] = [];
    readline.createInterface({ input: child.stdout! }).on("line", (l) => {
        const w = waiters.shift();
        w ? w.resolve(l) : lines.push(l);
    });
    child.once("exit", (code) => waiters.splice(0).forEach((w) => w.reject(new Error(`testregistry exited with ${code}`))));
    const next = () => new Promise<string>((resolve, reject) => {
        const l = lines.shift();
        l !== undefined ? resolve(l) : waiters.push({ resolve, reject });
    });
    const hello = JSON.parse(await next());
    return {
        host: hello.host, ca: hello.ca,
        push: async (command) => {
            child.stdin!.write(command + "\n");
            const r = JSON.parse(await next());
            if (r.error) throw new Error(r.error);
            return r.digest;
        },
        stop: () => { child.stdin!.end(); },
    };
}

// FakeWebhook drives internal/fakes/cmd/fakewebhook: a TLS webhook on 127.0.0.1 that serves
// only once started; it also answers ConversionReviews at convertUrl.
export class FakeWebhook {
    private constructor(private child: ChildProcess, private lines: AsyncIterator<string>, public url: string, public convertUrl: string, public caBundle: string) {}
    static async start(): Promise<FakeWebhook> {
        const bin = goBinary("./internal/fakes/cmd/fakewebhook");
        const child = spawn(bin, [], { stdio: ["pipe", "pipe", "inherit"] });
        const lines = readline.createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
        const { url, convertUrl, caBundle } = JSON.parse((await lines.next()).value);
        return new FakeWebhook(child, lines, url, convertUrl, caBundle);
    }
    private serving = false;
    async send(cmd: string): Promise<void> {
        this.child.stdin!.write(cmd + "\n");
        const ans = await this.lines.next();
        assert.equal(ans.value, "ok", `fakewebhook: ${cmd}`);
        if (cmd === "start" || cmd === "stop") this.serving = cmd === "start";
    }
    // setServing starts or stops serving unless it already is or is not (a second start fails).
    async setServing(on: boolean): Promise<void> {
        if (on !== this.serving) await this.send(on ? "start" : "stop");
    }
    // calls is the number of admission requests the server has answered so far.
    async calls(): Promise<number> {
        this.child.stdin!.write("calls\n");
        return Number((await this.lines.next()).value);
    }
    // configuration is a ValidatingWebhookConfiguration named name that sends CREATE and UPDATE
    // of group's widgets to this server, failurePolicy Fail (as fakes.Webhook.Configuration).
    configuration(name: string, group: string): object {
        return {
            apiVersion: "admissionregistration.k8s.io/v1", kind: "ValidatingWebhookConfiguration", metadata: { name },
            webhooks: [{
                name: `validating.${name}.${group}`, admissionReviewVersions: ["v1"], sideEffects: "None", failurePolicy: "Fail", timeoutSeconds: 3,
                clientConfig: { url: this.url, caBundle: this.caBundle },
                rules: [{ apiGroups: [group], apiVersions: ["*"], operations: ["CREATE", "UPDATE"], resources: ["widgets"] }],
            }],
        };
    }
    stop(): void { this.child.stdin!.end(); }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// serveWhenAvailable plays a chart's webhook pod: the webhook starts serving `ms` after the
// Deployment ns/name first has an available replica (pod Ready is not webhook serving); it
// resolves with the time it started, or undefined if cancelled first.
export async function serveWhenAvailable(c: Cluster, webhook: FakeWebhook, ns: string, name: string, ms: number,
                                         cancelled: () => boolean): Promise<number | undefined> {
    while (!cancelled()) {
        const d = await request(c, "GET", `/apis/apps/v1/namespaces/${ns}/deployments/${name}`);
        if (d.status === 200 && (d.body.status?.availableReplicas ?? 0) > 0 && !d.body.metadata.deletionTimestamp) break;
        await sleep(200);
    }
    if (cancelled()) return undefined;
    await sleep(ms);
    if (cancelled()) return undefined;
    const started = Date.now();
    await webhook.send("start");
    return started;
}

// play runs one of internal/fakes' controller players (internal/fakes/cmd/player: "issue ...",
// "sync-externalsecrets ...", "kubelet <namespace> <selector>") against the cluster; done
// resolves with the lines it printed when it exits ("done" last), stop ends it.
let kubeconfigFile: string | undefined;
export function play(c: Cluster, ...args: string[]): { done: Promise<string[]>; stop: () => void } {
    const playerBin = goBinary("./internal/fakes/cmd/player");
    if (!kubeconfigFile) {
        kubeconfigFile = path.join(tempDir("readiness-kubeconfig-"), "kubeconfig");
        fs.writeFileSync(kubeconfigFile, c.kubeconfig);
    }
    const child: ChildProcess = spawn(playerBin, [kubeconfigFile, ...args], { stdio: ["pipe", "pipe", "inherit"] });
    const lines: string[] = [];
    readline.createInterface({ input: child.stdout! }).on("line", (l) => lines.push(l));
    return { done: new Promise((resolve) => child.once("close", () => resolve(lines))), stop: () => child.stdin!.end() };
}

// createdAt is an object's creationTimestamp (ms; whole seconds).
export async function createdAt(c: Cluster, apiPath: string): Promise<number> {
    const r = await request(c, "GET", apiPath);
    assert.equal(r.status, 200, `GET ${apiPath}: ${JSON.stringify(r.body)}`);
    return Date.parse(r.body.metadata.creationTimestamp);
}

// cachesReady resolves once the API server lists the objects of every CRD of group from its watch
// cache (resourceVersion=0), which the CRD finalizer needs when the CRD is deleted.
// inGroup says whether a CRD's group is group or one of its subgroups (External Secrets' release
// has external-secrets.io and generators.external-secrets.io): controlplane's inGroup.
function inGroup(crdGroup: string, group: string): boolean {
    return crdGroup === group || crdGroup.endsWith("." + group);
}

// podsGone waits until namespace ns has no pod, as a rebuilt cluster starts: an uninstall returns
// while its pods terminate, and External Secrets' old cert-controller then races the new one for
// the webhook's CA (controlplane.WaitPodsGone).
export async function podsGone(cluster: Cluster, ns: string): Promise<void> {
    const t0 = Date.now();
    for (;;) {
        const pods = (await request(cluster, "GET", `/api/v1/namespaces/${ns}/pods`)).body?.items as any[] | undefined ?? [];
        if (pods.length === 0) return;
        assert.ok(Date.now() - t0 < 120_000, `pods of namespace ${ns} still there after two minutes: ${pods.map((p) => p.metadata.name).join(", ")}`);
        await new Promise((r) => setTimeout(r, 100));
    }
}

// crdsGone waits until no CRD of group (or its subgroups) is left, as a rebuilt cluster starts: a release that deletes
// its CRDs returns while they are still Terminating, and a reinstall meanwhile ends up without them
// (the Go harness's controlplane.WaitCRDsGone).
export async function crdsGone(cluster: Cluster, group: string): Promise<void> {
    const t0 = Date.now();
    for (;;) {
        const crds = (await request(cluster, "GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions")).body.items as any[];
        const left = crds.filter((c) => inGroup(c.spec.group, group)).map((c) => c.metadata.name);
        if (left.length === 0) return;
        assert.ok(Date.now() - t0 < 120_000, `CRDs of ${group} still there after two minutes: ${left.join(", ")}`);
        await new Promise((r) => setTimeout(r, 100));
    }
}

export async function cachesReady(cluster: Cluster, group: string): Promise<void> {
    const crds = (await request(cluster, "GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions")).body.items as any[];
    for (const c of crds.filter((c) => inGroup(c.spec.group, group))) {
        const version = c.spec.versions.find((v: any) => v.storage).name;
        const t0 = Date.now();
        while ((await request(cluster, "GET", `/apis/${c.spec.group}/${version}/${c.spec.names.plural}?resourceVersion=0&limit=1`)).status !== 200) {
            assert.ok(Date.now() - t0 < 60_000, `${c.metadata.name}: objects not listed from the cache after a minute`);
            await new Promise((r) => setTimeout(r, 100));
        }
    }
}
