"use strict";
var __createBinding = (this && this.__createBinding) || (Object.create ? (function(o, m, k, k2) {
    if (k2 === undefined) k2 = k;
    var desc = Object.getOwnPropertyDescriptor(m, k);
    if (!desc || ("get" in desc ? !m.__esModule : desc.writable || desc.configurable)) {
      desc = { enumerable: true, get: function() { return m[k]; } };
    }
    Object.defineProperty(o, k2, desc);
}) : (function(o, m, k, k2) {
    if (k2 === undefined) k2 = k;
    o[k2] = m[k];
}));
var __setModuleDefault = (this && this.__setModuleDefault) || (Object.create ? (function(o, v) {
    Object.defineProperty(o, "default", { enumerable: true, value: v });
}) : function(o, v) {
    o["default"] = v;
});
var __importStar = (this && this.__importStar) || (function () {
    var ownKeys = function(o) {
        ownKeys = Object.getOwnPropertyNames || function (o) {
            var ar = [];
            for (var k in o) if (Object.prototype.hasOwnProperty.call(o, k)) ar[ar.length] = k;
            return ar;
        };
        return ownKeys(o);
    };
    return function (mod) {
        if (mod && mod.__esModule) return mod;
        var result = {};
        if (mod != null) for (var k = ownKeys(mod), i = 0; i < k.length; i++) if (k[i] !== "default") __createBinding(result, mod, k[i]);
        __setModuleDefault(result, mod);
        return result;
    };
})();
var __importDefault = (this && this.__importDefault) || function (mod) {
    return (mod && mod.__esModule) ? mod : { "default": mod };
};
Object.defineProperty(exports, "__esModule", { value: true });
exports.KubeObject = exports.repoRoot = void 0;
exports.startCluster = startCluster;
exports.request = request;
exports.crd = crd;
exports.preparePulumi = preparePulumi;
exports.stack = stack;
// Test harness: starts the local control plane (the same Go harness the Go tests use), builds
// the provider binaries, and talks to the API server directly for what the test plays itself.
const child_process_1 = require("child_process");
const fs = __importStar(require("fs"));
const https = __importStar(require("https"));
const os = __importStar(require("os"));
const path = __importStar(require("path"));
const readline = __importStar(require("readline"));
const automation_1 = require("@pulumi/pulumi/automation");
const yaml_1 = __importDefault(require("yaml"));
const pulumi = __importStar(require("@pulumi/pulumi"));
exports.repoRoot = path.resolve(__dirname, "..", "..", "..");
// startCluster runs `localcluster up` and resolves once it printed its kubeconfig path.
async function startCluster() {
    (0, child_process_1.execFileSync)("go", ["build", "-o", path.join(os.tmpdir(), "readiness-localcluster"), "./internal/controlplane/cmd/localcluster"], { cwd: exports.repoRoot, stdio: "inherit" });
    const child = (0, child_process_1.spawn)(path.join(os.tmpdir(), "readiness-localcluster"), ["up"], { cwd: exports.repoRoot, stdio: ["ignore", "pipe", "inherit"] });
    const kubeconfigPath = await new Promise((resolve, reject) => {
        const rl = readline.createInterface({ input: child.stdout });
        rl.once("line", (line) => resolve(line.trim()));
        child.once("exit", (code) => reject(new Error(`localcluster exited with ${code}`)));
    });
    const kubeconfig = fs.readFileSync(kubeconfigPath, "utf8");
    const doc = yaml_1.default.parse(kubeconfig);
    return {
        kubeconfig,
        server: doc.clusters[0].cluster.server,
        token: doc.users[0].user.token,
        ca: Buffer.from(doc.clusters[0].cluster["certificate-authority-data"], "base64"),
        stop: () => new Promise((resolve) => { child.once("exit", () => resolve()); child.kill("SIGTERM"); }),
    };
}
// request sends one API request to the control plane (loopback only).
function request(c, method, apiPath, body) {
    return new Promise((resolve, reject) => {
        const url = new URL(apiPath, c.server);
        const req = https.request(url, {
            method, ca: c.ca,
            headers: { Authorization: `Bearer ${c.token}`, "Content-Type": "application/json" },
        }, (res) => {
            let data = "";
            res.on("data", (d) => (data += d));
            res.on("end", () => resolve({ status: res.statusCode ?? 0, body: data ? JSON.parse(data) : undefined }));
        });
        req.on("error", reject);
        if (body !== undefined)
            req.write(JSON.stringify(body));
        req.end();
    });
}
function crd(group, kind, plural) {
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
// preparePulumi builds the provider and the kubetest stand-in and sets up a local backend.
async function preparePulumi() {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "readiness-node-"));
    const bin = path.join(dir, "bin");
    for (const [name, pkg] of [["pulumi-resource-readiness", "./provider/cmd/pulumi-resource-readiness"],
        ["pulumi-resource-kubetest", "./internal/standin/cmd/pulumi-resource-kubetest"]]) {
        (0, child_process_1.execFileSync)("go", ["build", "-o", path.join(bin, name), pkg], { cwd: exports.repoRoot, stdio: "inherit" });
    }
    const toolsBin = (0, child_process_1.execFileSync)("go", ["run", "./internal/controlplane/cmd/localcluster", "tools"], { cwd: exports.repoRoot }).toString().trim();
    for (const d of ["state", "home"])
        fs.mkdirSync(path.join(dir, d), { recursive: true });
    const command = await automation_1.PulumiCommand.get({ root: path.dirname(toolsBin), skipVersionCheck: true });
    return {
        dir, command,
        envVars: {
            PATH: `${bin}:${toolsBin}:${process.env.PATH}`,
            PULUMI_BACKEND_URL: `file://${path.join(dir, "state")}`,
            PULUMI_CONFIG_PASSPHRASE: "readiness-local-only",
            PULUMI_HOME: path.join(dir, "home"),
            PULUMI_SKIP_UPDATE_CHECK: "true",
            PULUMI_DIY_BACKEND_NO_LEGACY_WARNING: "true",
        },
    };
}
async function stack(env, c, args) {
    const workDir = path.join(env.dir, `work-${args.projectName}-${args.stackName}`);
    fs.mkdirSync(workDir, { recursive: true });
    const s = await automation_1.LocalWorkspace.createOrSelectStack(args, { workDir, envVars: env.envVars, pulumiCommand: env.command });
    await s.setConfig("readiness:kubeconfig", { value: c.kubeconfig, secret: true });
    await s.setConfig("kubetest:kubeconfig", { value: c.kubeconfig, secret: true });
    return s;
}
// KubeObject is a Kubernetes object created by the kubetest stand-in provider, as a
// pulumi-kubernetes resource would be for a user.
class KubeObject extends pulumi.CustomResource {
    constructor(name, manifest, opts) {
        super("kubetest:index:Object", name, { manifest: JSON.stringify(manifest), createdAt: undefined, uid: undefined }, opts);
    }
}
exports.KubeObject = KubeObject;
