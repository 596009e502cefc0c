# Field report 001: ExternalSecrets in several namespaces wait for the webhook that validates
# them, not for the Helm release that installs it. The program is this module's function
# `program` (Pulumi runs the file as `__main__`, which calls it), so a test can import it and run
# it as an Automation API inline program.
import pulumi
import pulumi_kubernetes as k8s
import pulumi_readiness as readiness


def program():
    # Config `chartPath`, if set, installs the chart from that folder instead of the public repo
    # (a mirror; the test's local copy of the same chart).
    chart_path = pulumi.Config().get("chartPath")
    chart = dict(chart=chart_path) if chart_path else dict(
        chart="external-secrets", version="0.12.1",
        repository_opts={"repo": "https://charts.external-secrets.io"},
    )
    eso = k8s.helm.v3.Release(
        "external-secrets", **chart,
        namespace="external-secrets", create_namespace=True,
        values={"installCRDs": True},
    )
    # The missing link of field report 001: CRDs served, both webhooks answering dry-run probes,
    # the controller rolled out. Not just "the release was submitted".
    webhook = readiness.ExternalSecretsReady("external-secrets-ready", opts=pulumi.ResourceOptions(depends_on=[eso]))

    for ns in ["default", "hello-world", "nodejs-demo", "storage-validator"]:
        es = k8s.apiextensions.CustomResource(
            f"ghcr-pull-secret-{ns}", api_version="external-secrets.io/v1beta1", kind="ExternalSecret",
            metadata={"name": "ghcr-pull-secret", "namespace": ns},
            spec={
                "refreshInterval": "1h",
                "secretStoreRef": {"name": "vault", "kind": "ClusterSecretStore"},
                "target": {"name": "ghcr-pull-secret", "template": {"type": "kubernetes.io/dockerconfigjson"}},
                "data": [{"secretKey": ".dockerconfigjson", "remoteRef": {"key": "ghcr"}}],
            },
            opts=pulumi.ResourceOptions(depends_on=[webhook]))
        readiness.ExternalSecretReady(f"ghcr-pull-secret-synced-{ns}", name="ghcr-pull-secret", namespace=ns,
                                      opts=pulumi.ResourceOptions(depends_on=[es]))


if __name__ == "__main__":
    program()
