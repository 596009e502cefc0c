// Field report 002: APISIX as a dependency graph. Hard gates only on CRDs and the admission
// webhook; everything else in parallel.
import * as k8s from "@pulumi/kubernetes";
import * as readiness from "@readiness-io/pulumi-readiness";

const nodes = new readiness.NodesReady("nodes", { minCount: 1 });
const apisix = new k8s.helm.v3.Release("apisix", {
    chart: "apisix", version: "2.10.0",
    repositoryOpts: { repo: "https://charts.apiseven.com" },
    namespace: "apisix", createNamespace: true,
    values: { "ingress-controller": { enabled: true } },
}, { dependsOn: [nodes] });
const crds = new readiness.CrdReady("apisix-crds", { group: "apisix.apache.org" }, { dependsOn: [apisix] });
const webhook = new readiness.WebhookReady("apisix-webhook", {
    service: { namespace: "apisix", name: "apisix-ingress-controller-webhook", port: 443 },
    probe: { apiVersion: "apisix.apache.org/v2", kind: "ApisixRoute",
             metadata: { name: "readiness-probe", namespace: "apisix" }, spec: { http: [] } },
    triggers: [apisix.status.revision],
}, { dependsOn: [crds] });
for (const app of ["hello-world", "nodejs-demo", "grafana"]) {
    new k8s.apiextensions.CustomResource(`route-${app}`, {
        apiVersion: "apisix.apache.org/v2", kind: "ApisixRoute",
        metadata: { name: app, namespace: "apisix" },
        spec: { http: [{ name: app, match: { hosts: [`${app}.home.example`], paths: ["/*"] },
                         backends: [{ serviceName: app, servicePort: 80 }] }] },
    }, { dependsOn: [webhook] });
}
// The GatewayProxy the report's Helm wave failed to create ("connection refused" to the webhook
// for 7-10 s): AdmissionReady dry-runs exactly this object, twice in a row, until the webhook
// admits it; the object is then created from the same values. A denial (a bad spec) fails the
// gate at once, quoting the webhook, instead of after a timeout.
const gatewayProxy = {
    apiVersion: "apisix.apache.org/v1alpha1", kind: "GatewayProxy",
    metadata: { name: "apisix-config", namespace: "apisix" },
    spec: { provider: { type: "ControlPlane", controlPlane: {
        endpoints: ["http://apisix-admin.apisix.svc:9180"],
        auth: { type: "AdminKey", adminKey: { valueFrom: { secretKeyRef: { name: "apisix-admin", key: "key" } } } } } } },
};
const admitted = new readiness.AdmissionReady("gatewayproxy-admitted", {
    objects: [gatewayProxy], triggers: [apisix.status.revision],
}, { dependsOn: [crds] });
new k8s.apiextensions.CustomResource("gatewayproxy", gatewayProxy, { dependsOn: [admitted] });
new readiness.RolloutReady("apisix-gateway", { kind: "Deployment", namespace: "apisix", name: "apisix" }, { dependsOn: [apisix] });
