// Field report 002: APISIX as a dependency graph. Hard gates only on CRDs and the admission
// webhook; everything else in parallel. The program is this module's exported function (Pulumi
// runs it), so a test can run it as an Automation API inline program.
import * as k8s from "@pulumi/kubernetes";
import * as pulumi from "@pulumi/pulumi";
import * as readiness from "@readiness-io/pulumi-readiness";

export = () => {
    const nodes = new readiness.NodesReady("nodes", { minCount: 1 });
    // Config `chartPath`, if set, is a local copy of the `apisix` chart (`helm pull --untar`: a
    // mirror; the test's chart shaped as it), installed instead of the public repo's.
    const chartPath = new pulumi.Config().get("chartPath");
    // The release is named (not auto-named) so that the chart's objects have the names the gates
    // below wait for: the gateway Deployment `apisix`, the ingress controller's webhook
    // configuration `apisix-ingress-controller-webhook`. The webhook's failurePolicy is Fail (the
    // chart's default is Ignore, which lets invalid routes in unvalidated while the controller is
    // down): that makes it a hard gate, and the report's `connection refused` real.
    const apisix = new k8s.helm.v3.Release("apisix", {
        name: "apisix",
        ...(chartPath ? { chart: chartPath } : {
            chart: "apisix", version: "2.14.0",
            repositoryOpts: { repo: "https://charts.apiseven.com" },
        }),
        namespace: "apisix", createNamespace: true,
        values: { "ingress-controller": { enabled: true, webhook: { failurePolicy: "Fail" } } },
    }, { dependsOn: [nodes] });
    const crds = new readiness.CrdReady("apisix-crds", { group: "apisix.apache.org" }, { dependsOn: [apisix] });
    const webhook = new readiness.WebhookReady("apisix-webhook", {
        validatingWebhookConfiguration: "apisix-ingress-controller-webhook",
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
    // The gateway itself must serve before anyone is told the cluster is up.
    new readiness.RolloutReady("apisix-gateway", { kind: "Deployment", namespace: "apisix", name: "apisix" }, { dependsOn: [apisix] });
};
