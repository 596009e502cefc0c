// TypeScript stack using the generated Node SDK: ImageReady waits for an image that "CI" pushes
// late to a real registry on 127.0.0.1 (TLS from a test CA, basic auth from a dockerconfigjson
// Secret), and the Deployment behind it runs the image pinned by the gate's digest.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import * as k8s from "@pulumi/kubernetes";
import * as readiness from "@readiness-io/pulumi-readiness";
import { Cluster, createdBefore, preparePulumi, PulumiEnv, Registry, request, stack, startCluster, startRegistry, toNextSecond } from "./harness";

let cluster: Cluster;
let env: PulumiEnv;
let registry: Registry;

before(async () => {
    cluster = await startCluster();
    env = await preparePulumi();
    registry = await startRegistry(["-tls", "-user", "ci:ts-registry-pass"]);
});
after(async () => { registry?.stop(); await cluster?.stop(); });

test("ImageReady in a TypeScript stack: waits for a late push, pins the digest", { timeout: 300_000 }, async () => {
    const ns = "default";
    const secret = `pull-${Date.now() % 1_000_000}`;
    const dockerconfig = { auths: { [registry.host]: { auth: Buffer.from("ci:ts-registry-pass").toString("base64") } } };
    const res = await request(cluster, "POST", `/api/v1/namespaces/${ns}/secrets`, {
        apiVersion: "v1", kind: "Secret", metadata: { name: secret },
        type: "kubernetes.io/dockerconfigjson",
        data: { ".dockerconfigjson": Buffer.from(JSON.stringify(dockerconfig)).toString("base64") },
    });
    assert.equal(res.status, 201, `creating the pull Secret: ${JSON.stringify(res.body)}`);

    const program = async () => {
        const image = new readiness.ImageReady("app-image", {
            image: `${registry.host}/app:v1`,
            platform: "linux/arm64",
            pullSecret: { namespace: ns, name: secret },
            caCertificate: registry.ca,
            timeout: "2m",
        });
        const deploy = new k8s.apps.v1.Deployment("app", {
            metadata: { name: "app-ts-image", namespace: ns },
            spec: {
                replicas: 1,
                selector: { matchLabels: { app: "app-ts-image" } },
                template: {
                    metadata: { labels: { app: "app-ts-image" } },
                    spec: {
                        nodeSelector: { type: "kwok" }, // kwok runs it, so that pulumi-kubernetes sees the rollout
                        containers: [{ name: "app", image: image.pinned }], imagePullSecrets: [{ name: secret }],
                    },
                },
            },
        }, { dependsOn: [image] });
        return { digest: image.digest, platformDigest: image.platformDigest, platforms: image.platforms, createdAt: deploy.metadata.creationTimestamp };
    };
    const s = await stack(env, cluster, { stackName: "dev", projectName: "image-ts", program });

    let pushedAt = 0;
    let pushed = "";
    const late = new Promise<void>((resolve, reject) => setTimeout(async () => {
        try {
            pushedAt = Date.now();
            pushed = await registry.push("index app:v1 linux/amd64 linux/arm64");
            resolve();
        } catch (e) { reject(e); }
    }, toNextSecond(3000)));
    const up = await s.up();
    await late;
    assert.ok(pushedAt > 0, "up returned before the image was pushed");
    assert.equal(up.outputs.digest.value, pushed);
    assert.match(up.outputs.platformDigest.value, /^sha256:[0-9a-f]{64}$/);
    assert.notEqual(up.outputs.platformDigest.value, pushed);
    assert.deepEqual(up.outputs.platforms.value, ["linux/amd64", "linux/arm64"]);
    assert.ok(!createdBefore(up.outputs.createdAt.value, pushedAt),
        `the Deployment (${up.outputs.createdAt.value}) must be created after the push began (${new Date(pushedAt).toISOString()})`);

    const dep = await request(cluster, "GET", `/apis/apps/v1/namespaces/${ns}/deployments/app-ts-image`);
    assert.equal(dep.body.spec.template.spec.containers[0].image, `${registry.host}/app@${pushed}`);

    // Re-running waits for nothing and changes nothing.
    const again = await s.up();
    assert.equal(again.summary.resourceChanges?.create ?? 0, 0);

    await s.destroy();
    await s.workspace.removeStack("dev");
});
