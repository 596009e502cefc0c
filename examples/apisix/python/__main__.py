# Field report 002: APISIX as a dependency graph. Hard gates only on CRDs and the admission
# webhook; everything else in parallel. The program is this module's function `program` (Pulumi
# runs the file as `__main__`, which calls it), so a test can import it and run it as an
# Automation API inline program.
import pulumi
import pulumi_kubernetes as k8s
import pulumi_readiness as readiness


def program():
    nodes = readiness.NodesReady("nodes", min_count=1)
    # Config `chartPath`, if set, is a local copy of the `apisix` chart (`helm pull --untar`: a
    # mirror; the test's chart shaped as it), installed instead of the public repo's.
    chart_path = pulumi.Config().get("chartPath")
    chart = dict(chart=chart_path) if chart_path else dict(
        chart="apisix", version="2.14.0",
        repository_opts={"repo": "https://charts.apiseven.com"},
    )
    # The release is named (not auto-named) so that the chart's objects have the names the gates
    # below wait for: the gateway Deployment `apisix`, the ingress controller's webhook
    # configuration `apisix-ingress-controller-webhook`. The webhook's failurePolicy is Fail (the
    # chart's default is Ignore, which lets invalid routes in unvalidated while the controller is
    # down): that makes it a hard gate, and the report's `connection refused` real.
    apisix = k8s.helm.v3.Release(
        "apisix",
        name="apisix",
        **chart,
        namespace="apisix", create_namespace=True,
        values={"ingress-controller": {"enabled": True, "webhook": {"failurePolicy": "Fail"}}},
        opts=pulumi.ResourceOptions(depends_on=[nodes]))
    crds = readiness.CrdReady("apisix-crds", group="apisix.apache.org", opts=pulumi.ResourceOptions(depends_on=[apisix]))
    webhook = readiness.WebhookReady(
        "apisix-webhook",
        validating_webhook_configuration="apisix-ingress-controller-webhook",
        probe={"apiVersion": "apisix.apache.org/v2", "kind": "ApisixRoute",
               "metadata": {"name": "readiness-probe", "namespace": "apisix"}, "spec": {"http": []}},
        triggers=[apisix.status.revision],
        opts=pulumi.ResourceOptions(depends_on=[crds]))
    for app in ["hello-world", "nodejs-demo", "grafana"]:
        k8s.apiextensions.CustomResource(
            f"route-{app}", api_version="apisix.apache.org/v2", kind="ApisixRoute",
            metadata={"name": app, "namespace": "apisix"},
            spec={"http": [{"name": app, "match": {"hosts": [f"{app}.home.example"], "paths": ["/*"]},
                            "backends": [{"serviceName": app, "servicePort": 80}]}]},
            opts=pulumi.ResourceOptions(depends_on=[webhook]))
    # The GatewayProxy the report's Helm wave failed to create ("connection refused" to the webhook
    # for 7-10 s): AdmissionReady dry-runs exactly this object, twice in a row, until the webhook
    # admits it; the object is then created from the same values. A denial (a bad spec) fails the
    # gate at once, quoting the webhook, instead of after a timeout.
    gateway_proxy = {
        "apiVersion": "apisix.apache.org/v1alpha1", "kind": "GatewayProxy",
        "metadata": {"name": "apisix-config", "namespace": "apisix"},
        "spec": {"provider": {"type": "ControlPlane", "controlPlane": {
            "endpoints": ["http://apisix-admin.apisix.svc:9180"],
            "auth": {"type": "AdminKey", "adminKey": {"valueFrom": {"secretKeyRef": {"name": "apisix-admin", "key": "key"}}}}}}},
    }
    admitted = readiness.AdmissionReady(
        "gatewayproxy-admitted", objects=[gateway_proxy], triggers=[apisix.status.revision],
        opts=pulumi.ResourceOptions(depends_on=[crds]))
    k8s.apiextensions.CustomResource(
        "gatewayproxy", api_version=gateway_proxy["apiVersion"], kind=gateway_proxy["kind"],
        metadata=gateway_proxy["metadata"], spec=gateway_proxy["spec"],
        opts=pulumi.ResourceOptions(depends_on=[admitted]))
    # The gateway itself must serve before anyone is told the cluster is up.
    readiness.RolloutReady("apisix-gateway", kind="Deployment", namespace="apisix", name="apisix",
                           opts=pulumi.ResourceOptions(depends_on=[apisix]))


if __name__ == "__main__":
    program()
