# Field report 000: the Deployment mounts the TLS Secret only once cert-manager has issued it.
# The program is this module's function `program` (Pulumi runs the file as `__main__`, which calls
# it; its exports are the stack's outputs), so a test can import it and run it as an Automation API
# inline program.
import pulumi
import pulumi_kubernetes as k8s
import pulumi_readiness as readiness


def program():
    # Config `chartPath`, if set, installs the chart from that folder instead of the public repo
    # (a mirror; the test's local copy of the same chart).
    chart_path = pulumi.Config().get("chartPath")
    chart = dict(chart=chart_path) if chart_path else dict(
        chart="cert-manager", version="v1.19.0",
        repository_opts={"repo": "https://charts.jetstack.io"},
    )
    cert_manager = k8s.helm.v3.Release(
        "cert-manager", **chart,
        namespace="cert-manager", create_namespace=True,
        values={"crds": {"enabled": True}},
    )
    # One line for "cert-manager is usable": CRDs served, both webhooks answering a dry-run Issuer.
    ready = readiness.CertManagerReady("cert-manager-ready", opts=pulumi.ResourceOptions(depends_on=[cert_manager]))
    issuer = k8s.apiextensions.CustomResource(
        "selfsigned", api_version="cert-manager.io/v1", kind="ClusterIssuer",
        metadata={"name": "selfsigned"}, spec={"selfSigned": {}},
        opts=pulumi.ResourceOptions(depends_on=[ready]))
    cert = k8s.apiextensions.CustomResource(
        "ai-ops-agent-cert", api_version="cert-manager.io/v1", kind="Certificate",
        metadata={"name": "ai-ops-agent", "namespace": "default"},
        spec={"secretName": "ai-ops-agent-tls", "dnsNames": ["ai-ops-agent.default.svc"],
              "issuerRef": {"name": "selfsigned", "kind": "ClusterIssuer"}},
        opts=pulumi.ResourceOptions(depends_on=[issuer]))
    tls = readiness.CertificateReady(
        "ai-ops-agent-tls", name="ai-ops-agent", namespace="default", min_validity="24h",
        opts=pulumi.ResourceOptions(depends_on=[cert]))

    labels = {"app": "ai-ops-agent"}
    k8s.apps.v1.Deployment(
        "ai-ops-agent",
        metadata={"namespace": "default"},
        spec={
            "selector": {"match_labels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [{"name": "agent", "image": "ghcr.io/example/ai-ops-agent:1.0",
                                    "volume_mounts": [{"name": "tls", "mount_path": "/tls"}]}],
                    # Taking the name from the gate makes the ordering explicit.
                    "volumes": [{"name": "tls", "secret": {"secret_name": tls.secret_name}}],
                },
            },
        },
    )
    pulumi.export("certificateExpires", tls.not_after)


if __name__ == "__main__":
    program()
