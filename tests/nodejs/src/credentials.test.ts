// TypeScript stack (issue 51): HttpReady gates whose url carries a password or a token and whose
// headers carry a bearer token, pasted as plain strings, gate autonamed pulumi-kubernetes
// ConfigMaps. The state as stored (`pulumi stack export` without --show-secrets) and the
// engine's output hold none of them; a URL without credentials stays plain.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import * as http from "node:http";
import { AddressInfo } from "node:net";
import * as k8s from "@pulumi/kubernetes";
import * as readiness from "@readiness-io/pulumi-readiness";
import { Cluster, preparePulumi, PulumiEnv, stack, startCluster } from "./harness";

let cluster: Cluster;
let env: PulumiEnv;
let server: http.Server;

const password = "Pw-ts51-1c7e", token = "Tok-ts51-84b2", bearer = "Bearer-ts51-3a9d";

before(async () => {
    cluster = await startCluster();
    env = await preparePulumi();
    server = http.createServer((req, res) => {
        const u = new URL(req.url ?? "/", "http://x");
        const basic = Buffer.from(`admin:${password}`).toString("base64");
        const ok = req.headers.authorization === `Basic ${basic}` || u.searchParams.get("token") === token ||
            req.headers.authorization === `Bearer ${bearer}` || u.pathname === "/public";
        res.writeHead(ok ? 200 : 401).end(ok ? "ok" : "no");
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
});
after(async () => { server?.close(); await cluster?.stop(); });

test("HttpReady credentials never reach the state in plain text (TypeScript)", { timeout: 300_000 }, async () => {
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const plain = `${base}/public`;
    const program = async () => {
        const gates: Record<string, readiness.HttpReadyArgs> = {
            userinfo: { url: base.replace("http://", `http://admin:${password}@`) + "/health" },
            query: { url: `${base}/health?token=${token}` },
            header: { url: `${base}/health`, headers: { Authorization: `Bearer ${bearer}` } },
            plain: { url: plain },
        };
        for (const [name, args] of Object.entries(gates)) {
            const gate = new readiness.HttpReady(`api-${name}`, { ...args, timeout: "30s" });
            new k8s.core.v1.ConfigMap(`app-config-${name}`, { data: { ready: "yes" } }, { dependsOn: [gate] });
        }
    };
    const s = await stack(env, cluster, { stackName: "dev", projectName: "creds-ts", program });
    let out = "";
    const onOutput = (line: string) => { out += line; };
    await s.up({ onOutput, diff: true });
    const again = await s.up({ onOutput });
    assert.equal((again.summary.resourceChanges?.create ?? 0) + (again.summary.resourceChanges?.replace ?? 0), 0,
        "a second up should change nothing");
    // `pulumi stack export` as a user runs it: the Automation API's exportStack decrypts secrets.
    const exported = execFileSync(env.command.command, ["stack", "export", "--stack", "dev"],
        { cwd: s.workspace.workDir, env: { ...process.env, ...env.envVars } }).toString();
    for (const [what, text] of Object.entries({ "stack export": exported, "the engine's output": out })) {
        for (const secret of [password, token, bearer]) {
            assert.ok(!text.includes(secret), `${what} holds ${secret}`);
        }
    }
    assert.ok(exported.includes(plain), "a URL without credentials should stay plain in the state");
    assert.ok(exported.includes("4dabf18193072939515e22adb298388d"), "the credentials should be kept as secrets, not dropped");
    await s.destroy();
    await s.workspace.removeStack("dev");
});
