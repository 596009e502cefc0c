// readiness.autoGate() on TypeScript programs as people write them (issue 32), on the real
// pulumi-kubernetes plugin: field report 001 as its author wrote it (k8s.helm.v3.Chart of External
// Secrets, ExternalSecrets that dependsOn the chart), and one program of shapes the transform used
// to get wrong: an autonamed webhook configuration and custom resource, a webhook server's
// Deployment whose inputs hold Outputs written above the webhook configuration that depends on it
// (decided again at registration against installers written below it: a cycle, `up` hung), a
// Certificate whose namespace is another resource's output, and a second cluster reached through
// an explicit kubernetes provider.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import * as readiness from "@readiness-io/pulumi-readiness";
import { cachesReady, Cluster, crd, createdAt, FakeWebhook, localChart, play, preparePulumi, PulumiEnv, request, serveWhenAvailable, sleep, stack, startCluster } from "./harness";

let cluster: Cluster;
let env: PulumiEnv;

before(async () => {
    cluster = await startCluster();
    env = await preparePulumi();
});
after(async () => { await cluster?.stop(); });

const background = { "pulumi.com/deletionPropagationPolicy": "background" };

// stateOf is the stack's resources (urn, type, inputs, provider) from its exported state.
async function stateOf(s: Awaited<ReturnType<typeof stack>>): Promise<any[]> {
    return ((await s.exportStack()).deployment.resources ?? []) as any[];
}
const nameOfUrn = (urn: string) => urn.split("::").pop()!;

// whenLabelled plays a webhook's pod: it starts serving `ms` after a webhook configuration
// (resource, e.g. validatingwebhookconfigurations) labelled corpus=label exists, and resolves then.
async function whenLabelled(webhook: FakeWebhook, resource: string, label: string, ms: number, cancelled: () => boolean): Promise<number | undefined> {
    while (!cancelled()) {
        const l = await request(cluster, "GET", `/apis/admissionregistration.k8s.io/v1/${resource}?labelSelector=corpus%3D${label}`);
        if (l.status === 200 && l.body.items.length > 0) break;
        await sleep(100);
    }
    if (cancelled()) return undefined;
    await sleep(ms);
    await webhook.send("start");
    return Date.now();
}

test("field report 001 as written: k8s.helm.v3.Chart of External Secrets, ExternalSecrets that dependsOn the chart, and the one line", { timeout: 900_000 }, async () => {
    const hook = await FakeWebhook.start();
    try {
        const chart = localChart("external-secrets", hook);
        const program = (auto: boolean) => async () => {
            if (auto) readiness.autoGate({ timeout: "3m" });
            const ns = new k8s.core.v1.Namespace("external-secrets", { metadata: { name: "external-secrets" } });
            const eso = new k8s.helm.v3.Chart("external-secrets", { path: chart, namespace: "external-secrets" }, { dependsOn: [ns] });
            new k8s.apiextensions.CustomResource("ghcr-pull-secret", {
                apiVersion: "external-secrets.io/v1", kind: "ExternalSecret",
                metadata: { name: "ghcr-pull-secret", namespace: "default", annotations: background },
                spec: {
                    refreshInterval: "1h", secretStoreRef: { kind: "ClusterSecretStore", name: "pulumi-esc" },
                    target: { name: "ghcr-pull-secret" }, dataFrom: [{ extract: { key: "ghcr" } }],
                },
            }, { dependsOn: [eso] });
            return {};
        };
        const destroy = async (s: Awaited<ReturnType<typeof stack>>) => {
            await cachesReady(cluster, "external-secrets.io"); // see fieldreports.test.ts
            await hook.setServing(true); // its webhook intercepts deletes too
            await s.destroy();
            await hook.setServing(false);
        };
        const bare = await stack(env, cluster, { stackName: "nogate", projectName: "chartv3-ts", program: program(false) });
        let done = false;
        const lateBare = serveWhenAvailable(cluster, hook, "external-secrets", "external-secrets-webhook", 5000, () => done);
        // Without the line nothing holds the ExternalSecret for the webhook. A dependsOn on a
        // Chart v3 waits for the children Node knows when the ExternalSecret registers, which may be
        // none of them yet: then it is created before the webhook configuration exists and passes
        // with no webhook having seen it; else it meets field report 001's error. Either way nothing
        // holds it until its webhook serves: the line does (below).
        let bareErr: Error | undefined;
        await bare.up().catch((e: Error) => (bareErr = e));
        done = true;
        const bareServed = await lateBare;
        if (bareErr) {
            assert.match(bareErr.message, /failed calling webhook "validate\.externalsecret\.external-secrets\.io"/);
        } else {
            const es = await createdAt(cluster, "/apis/external-secrets.io/v1/namespaces/default/externalsecrets/ghcr-pull-secret");
            const before = bareServed === undefined || es < Math.floor(bareServed / 1000) * 1000;
            console.log(`chart v3 without the line: up succeeded, the ExternalSecret created ${before ? "before its webhook served (unproven)" : "after its webhook served (by chance)"}`);
        }
        await destroy(bare);
        await bare.workspace.removeStack("nogate");

        const gated = await stack(env, cluster, { stackName: "gated", projectName: "chartv3-ts", program: program(true) });
        done = false;
        const late = serveWhenAvailable(cluster, hook, "external-secrets", "external-secrets-webhook", 5000, () => done);
        let out = "";
        try {
            await gated.up({ onOutput: (l) => (out += l) });
        } finally {
            done = true;
        }
        console.log(out.split("\n").filter((l) => l.includes("autoGate")).join("\n"));
        const servedAt = await late;
        assert.ok(servedAt, "the webhook never started serving");
        const es = await createdAt(cluster, "/apis/external-secrets.io/v1/namespaces/default/externalsecrets/ghcr-pull-secret");
        assert.ok(es >= Math.floor(servedAt! / 1000) * 1000, "the ExternalSecret was created before its webhook served");
        const gates = (await stateOf(gated)).filter((r) => r.type.startsWith("readiness:index:")).map((r) => `${r.type.split(":").pop()} ${nameOfUrn(r.urn)}`);
        console.log(`chart v3 gates: ${gates.join(", ")}`);
        // The chart's own webhook configuration (a Chart v3 child, registered after the chart's URN
        // was known) is what the ExternalSecret waited for.
        assert.ok(gates.some((g) => g.startsWith("AdmissionReady auto-admission-externalsecrets.external-secrets.io-default-externalsecret-validate")), `gates ${gates}`);
        assert.ok(gates.includes("ResourceReady auto-exists-externalsecret-validate"), `gates ${gates}`);
        assert.ok(!out.includes("was registered before"), "a warning that the ExternalSecret was decided before the chart's webhook");
        await destroy(gated);
        await gated.workspace.removeStack("gated");
    } finally {
        hook.stop();
    }
});

test("TypeScript shapes: autonamed, Outputs in namespaces, a server written above its webhook (no cycle), a second cluster", { timeout: 900_000 }, async () => {
    const staging = await startCluster();
    const widgets = await FakeWebhook.start();
    const injector = await FakeWebhook.start();
    await injector.send("mode inject:sidecar");
    const label = `ts${Date.now() % 1_000_000}`;
    const group = `${label}.readiness.test`;
    const nsName = `corpus-${label}`;
    // cert-manager's Certificate kind is served (its controller is played by the issue player).
    const certs: any = crd("cert-manager.io", "Certificate", "certificates");
    certs.spec.versions[0].subresources = { status: {} };
    await request(cluster, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", certs);
    try {
        const program = async () => {
            readiness.autoGate({ timeout: "90s" });
            // Its name is an Output of the Namespace, as programs pass it on.
            const ns = new k8s.core.v1.Namespace("corpus", { metadata: { name: nsName } });
            const namespace = ns.metadata.name;
            // Autonamed: a CRD's custom resource behind an autonamed webhook configuration.
            const widgetsCrd = new k8s.apiextensions.v1.CustomResourceDefinition("widgets", crd(group, "Widget", "widgets") as any);
            const widgetsHook = new k8s.admissionregistration.v1.ValidatingWebhookConfiguration("widgets-hook", {
                metadata: { labels: { corpus: label } },
                webhooks: [{
                    name: `validating.widgets.${group}`, admissionReviewVersions: ["v1"], sideEffects: "None", failurePolicy: "Fail", timeoutSeconds: 3,
                    clientConfig: { url: widgets.url, caBundle: widgets.caBundle },
                    rules: [{ apiGroups: [group], apiVersions: ["*"], operations: ["CREATE", "UPDATE"], resources: ["widgets"] }],
                }],
            });
            const widget = new k8s.apiextensions.CustomResource("widget", {
                apiVersion: `${group}/v1`, kind: "Widget", metadata: { namespace }, spec: { size: 1 },
            }, { dependsOn: [widgetsCrd, widgetsHook] });
            // A sidecar injector's server, written above its webhook configuration, which
            // depends on it: the server is never held for its own webhook.
            const labels = { app: "injector" };
            const server = new k8s.apps.v1.Deployment("injector-server", {
                metadata: { namespace, annotations: { "pulumi.com/skipAwait": "true" } },
                spec: { selector: { matchLabels: labels }, template: { metadata: { labels }, spec: { nodeSelector: { type: "kwok" }, containers: [{ name: "s", image: "registry.local/injector:1" }] } } },
            });
            const injectorHook = new k8s.admissionregistration.v1.MutatingWebhookConfiguration("injector", {
                metadata: { labels: { corpus: `${label}-pods` } },
                webhooks: [{
                    name: `inject.${group}`, admissionReviewVersions: ["v1"], sideEffects: "None", failurePolicy: "Ignore", timeoutSeconds: 3,
                    clientConfig: { url: injector.url, caBundle: injector.caBundle },
                    namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": namespace } },
                    rules: [{ apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["pods"] }],
                }],
            }, { dependsOn: [server] });
            // A Certificate whose namespace is an Output, and a Deployment that mounts its Secret.
            new k8s.apiextensions.CustomResource("web-cert", {
                apiVersion: "cert-manager.io/v1", kind: "Certificate",
                metadata: { name: "web", namespace, annotations: background },
                spec: { secretName: "web-tls", dnsNames: ["web.example.test"], issuerRef: { name: "ca", kind: "ClusterIssuer" } },
            });
            const web = { app: "web" };
            const app = new k8s.apps.v1.Deployment("web", {
                metadata: { namespace, annotations: { "pulumi.com/skipAwait": "true" } },
                spec: {
                    selector: { matchLabels: web },
                    template: {
                        metadata: { labels: web },
                        spec: {
                            nodeSelector: { type: "kwok" },
                            containers: [{ name: "web", image: "registry.local/web:1", volumeMounts: [{ name: "tls", mountPath: "/tls" }] }],
                            volumes: [{ name: "tls", secret: { secretName: "web-tls" } }],
                        },
                    },
                },
            }, { dependsOn: [injectorHook] });
            // Issue 47: an autonamed ServiceAccount pulling with the Certificate's Secret, and a
            // Deployment that runs as it by the name it got (an Output): held for the Certificate.
            const puller = new k8s.core.v1.ServiceAccount("puller", { metadata: { namespace }, imagePullSecrets: [{ name: "web-tls" }] });
            const pulls = { app: "pulls" };
            const pullsApp = new k8s.apps.v1.Deployment("pulls-via-auto", {
                metadata: { namespace, annotations: { "pulumi.com/skipAwait": "true" } },
                spec: {
                    selector: { matchLabels: pulls },
                    template: {
                        metadata: { labels: pulls },
                        spec: { nodeSelector: { type: "kwok" }, serviceAccountName: puller.metadata.name, containers: [{ name: "app", image: "registry.local/app:1" }] },
                    },
                },
            });
            // A yaml v1 ConfigGroup (rendered in-process): its CRD, its webhook configuration and its
            // custom resource, which its own webhook validates.
            const g1 = `v1${group}`;
            new k8s.yaml.ConfigGroup("widgets-v1", {
                objs: [crd(g1, "Widget", "widgets"), {
                    apiVersion: "admissionregistration.k8s.io/v1", kind: "ValidatingWebhookConfiguration", metadata: { name: `widgets-v1-${label}` },
                    webhooks: [{
                        name: `validating.widgets.${g1}`, admissionReviewVersions: ["v1"], sideEffects: "None", failurePolicy: "Fail", timeoutSeconds: 3,
                        clientConfig: { url: widgets.url, caBundle: widgets.caBundle },
                        rules: [{ apiGroups: [g1], apiVersions: ["*"], operations: ["CREATE", "UPDATE"], resources: ["widgets"] }],
                    }],
                }, { apiVersion: `${g1}/v1`, kind: "Widget", metadata: { name: "w1", namespace: "default" }, spec: { size: 1 } }],
            });
            // A component of the user's own: a Certificate and the Deployment that mounts its Secret.
            new Team("team", namespace);
            // A second cluster, through an explicit provider: its CRD's custom resource waits on a
            // CrdReady of a readiness provider configured as that provider is.
            const other = new k8s.Provider("staging", { kubeconfig: staging.kubeconfig });
            const otherCrd = new k8s.apiextensions.v1.CustomResourceDefinition("staging-widgets", crd(`s${group}`, "Widget", "widgets") as any, { provider: other });
            new k8s.apiextensions.CustomResource("staging-widget", {
                apiVersion: `s${group}/v1`, kind: "Widget", metadata: { name: "w1", namespace: "default" }, spec: { size: 1 },
            }, { provider: other, dependsOn: [otherCrd] });
            return { widget: widget.metadata.name, widgetsHook: widgetsHook.metadata.name, app: app.metadata.name, server: server.metadata.name, pullsApp: pullsApp.metadata.name };
        };
        const s = await stack(env, cluster, { stackName: "shapes", projectName: "autogate-shapes-ts", program });
        let done = false;
        const widgetsServed = whenLabelled(widgets, "validatingwebhookconfigurations", label, 3000, () => done);
        const injectorServed = whenLabelled(injector, "mutatingwebhookconfigurations", `${label}-pods`, 3000, () => done);
        const issuer = play(cluster, "issue", nsName, "web", "web-tls", "3s");
        const teamIssuer = play(cluster, "issue", nsName, "team", "team-tls", "3s");
        let res;
        let out = "";
        try {
            res = await s.up({ onOutput: (l) => (out += l) });
        } finally {
            done = true;
            issuer.stop();
            teamIssuer.stop();
        }
        const issuedLines = await issuer.done;
        const ws = await widgetsServed, is = await injectorServed;
        assert.ok(ws && is, "a webhook never served");
        const sec = (t: number) => Math.floor(t / 1000) * 1000;
        const widget = res.outputs.widget.value as string;
        assert.match(widget, /^widget-[0-9a-f]{8}$/, "the Widget is autonamed by pulumi-kubernetes");
        assert.ok(await createdAt(cluster, `/apis/${group}/v1/namespaces/${nsName}/widgets/${widget}`) >= sec(ws!), "the Widget was created before its webhook served");
        assert.ok(await createdAt(cluster, `/apis/apps/v1/namespaces/${nsName}/deployments/${res.outputs.app.value}`) >= sec(is!), "the app was created before the injector served");
        const issued = await request(cluster, "GET", `/api/v1/namespaces/${nsName}/secrets/web-tls`);
        assert.equal(issued.status, 200, `the Certificate was never issued (${issuedLines.join("; ")})`);
        assert.ok(await createdAt(cluster, `/apis/apps/v1/namespaces/${nsName}/deployments/${res.outputs.app.value}`) >= Date.parse(issued.body.metadata.creationTimestamp),
            "the app was created before the Secret it mounts");
        assert.ok(await createdAt(cluster, `/apis/apps/v1/namespaces/${nsName}/deployments/${res.outputs.pullsApp.value}`) >= Date.parse(issued.body.metadata.creationTimestamp),
            "the Deployment running as the autonamed ServiceAccount was created before the Secret that ServiceAccount pulls with");

        const state = await stateOf(s);
        const gates = state.filter((r) => r.type.startsWith("readiness:index:"));
        const names = gates.map((r) => `${r.type.split(":").pop()} ${nameOfUrn(r.urn)}`).sort();
        console.log(`shapes gates: ${names.join(", ")}`);
        const exists = gates.find((r) => nameOfUrn(r.urn) === "auto-exists-widgets-hook");
        assert.equal(exists?.inputs?.name, res.outputs.widgetsHook.value, "the exists gate must wait for the configuration's real (autonamed) name");
        assert.ok(names.includes(`CertificateReady auto-certificate-${nsName}-web`), "the Certificate with an Output namespace gates the Deployment that mounts its Secret");
        assert.ok(names.includes(`CrdReady auto-crd-widgets.s${group}-staging`), "the other cluster's custom resource waits on its CRD there");
        assert.ok(names.some((n) => n.startsWith(`AdmissionReady auto-admission-widgets.v1${group}-default-`)), "the ConfigGroup v1's Widget waits for its own webhook");
        // Its children settled once all arrived (counted as the SDK constructed them), not at the plan timeout.
        assert.ok(!out.includes("decided without every sibling"), out);
        assert.ok(names.includes(`CertificateReady auto-certificate-${nsName}-team`), "the user component's Deployment waits for its Certificate");
        const crdGate = gates.find((r) => nameOfUrn(r.urn) === `auto-crd-widgets.s${group}-staging`);
        assert.match(crdGate.provider, /::autogate-staging::/, "its CrdReady runs through a readiness provider configured as the kubernetes provider");
        // No cycle: the server written above the injector that depends on it got no gate.
        const serverUrn = state.find((r) => r.type === "kubernetes:apps/v1:Deployment" && nameOfUrn(r.urn) === "injector-server")!.urn;
        assert.equal(gates.filter((g) => (g.inputs?.objects ?? "").toString().includes("injector-server")).length, 0, `the injector's server was gated (${serverUrn})`);
        // The state records the gates autoGate added: destroy deletes the Widget before its gate.
        const widgetState = state.find((r) => r.type === `kubernetes:${group}/v1:Widget` && nameOfUrn(r.urn) === "widget");
        assert.ok((widgetState?.dependencies ?? []).some((d: string) => nameOfUrn(d).startsWith(`auto-admission-widgets.${group}-`)),
            `the Widget's recorded dependencies ${JSON.stringify(widgetState?.dependencies)} lack its gate`);
        const readinessProviders = state.filter((r) => r.type === "pulumi:providers:readiness").map((r) => nameOfUrn(r.urn)).sort();
        assert.deepEqual(readinessProviders.filter((n) => !n.startsWith("autogate-")).length, 1, `one readiness provider for the stack's own cluster: ${readinessProviders}`);

        await s.destroy(); // both webhooks serve
        await s.workspace.removeStack("shapes");
    } finally {
        widgets.stop();
        injector.stop();
        await staging.stop();
    }
});

// Team is a component of the user's own, as programs write them.
class Team extends pulumi.ComponentResource {
    constructor(name: string, namespace: pulumi.Input<string>) {
        super("corpus:index:Team", name);
        new k8s.apiextensions.CustomResource(`${name}-cert`, {
            apiVersion: "cert-manager.io/v1", kind: "Certificate", metadata: { name, namespace, annotations: background },
            spec: { secretName: `${name}-tls`, dnsNames: [`${name}.example.test`], issuerRef: { name: "ca", kind: "ClusterIssuer" } },
        }, { parent: this });
        const labels = { app: name };
        new k8s.apps.v1.Deployment(`${name}-app`, {
            metadata: { namespace, annotations: { "pulumi.com/skipAwait": "true" } },
            spec: {
                selector: { matchLabels: labels },
                template: {
                    metadata: { labels },
                    spec: {
                        nodeSelector: { type: "kwok" },
                        containers: [{ name: "app", image: "registry.local/team:1", envFrom: [{ secretRef: { name: `${name}-tls` } }] }],
                    },
                },
            },
        }, { parent: this });
        this.registerOutputs({});
    }
}
