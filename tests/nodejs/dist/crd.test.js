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
// TypeScript stack using the generated Node SDK: CrdReady blocks until a late CRD is served,
// and the custom resource behind it is created only afterwards.
const node_test_1 = require("node:test");
const strict_1 = __importDefault(require("node:assert/strict"));
const readiness = __importStar(require("@readiness-io/pulumi-readiness"));
const harness_1 = require("./harness");
let cluster;
let env;
(0, node_test_1.before)(async () => {
    cluster = await (0, harness_1.startCluster)();
    env = await (0, harness_1.preparePulumi)();
});
(0, node_test_1.after)(async () => { await cluster?.stop(); });
(0, node_test_1.test)("CrdReady gates a custom resource in a TypeScript stack", { timeout: 300000 }, async () => {
    const group = `ts${Date.now() % 1000000}.readiness.test`;
    const program = async () => {
        const gate = new readiness.CrdReady("widgets-crd", { names: [`widgets.${group}`], timeout: "2m" });
        const widget = new harness_1.KubeObject("widget", { apiVersion: `${group}/v1`, kind: "Widget", metadata: { name: "w1", namespace: "default" } }, { dependsOn: [gate] });
        return { kinds: gate.kinds, servedVersions: gate.servedVersions, widgetCreatedAt: widget.createdAt };
    };
    const s = await (0, harness_1.stack)(env, cluster, { stackName: "dev", projectName: "crd-ts", program });
    const pv = await s.preview();
    strict_1.default.ok((pv.changeSummary.create ?? 0) >= 3, `preview should create the gate and the object: ${JSON.stringify(pv.changeSummary)}`);
    let crdAt = 0;
    const late = new Promise((resolve, reject) => setTimeout(async () => {
        crdAt = Date.now();
        const res = await (0, harness_1.request)(cluster, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", (0, harness_1.crd)(group, "Widget", "widgets"));
        res.status === 201 ? resolve() : reject(new Error(`creating the CRD: ${res.status} ${JSON.stringify(res.body)}`));
    }, 3000));
    const up = await s.up();
    await late;
    strict_1.default.ok(crdAt > 0, "up returned before the CRD was installed");
    strict_1.default.deepEqual(up.outputs.kinds.value, ["Widget"]);
    strict_1.default.deepEqual(up.outputs.servedVersions.value, [`${group}/v1`]);
    const createdAt = Date.parse(up.outputs.widgetCreatedAt.value);
    strict_1.default.ok(createdAt > crdAt, `the Widget (${createdAt}) must be created after its CRD (${crdAt})`);
    // Re-running with nothing changed waits for nothing and changes nothing.
    const again = await s.up();
    strict_1.default.equal(again.summary.resourceChanges?.create ?? 0, 0);
    await s.destroy();
    await s.workspace.removeStack("dev");
});
