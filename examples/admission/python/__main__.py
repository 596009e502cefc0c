# Field report 001 with AdmissionReady: before the ExternalSecrets are created, the API server
# dry-runs exactly those objects. The gate waits while External Secrets' CRDs are not served and
# while its webhook cannot be called (`failed calling webhook`), fails at once quoting the webhook
# if it denies them, and the ExternalSecrets are then created from the very same values. The program
# is this module's function `program` (Pulumi runs the file as `__main__`, which calls it), so a test
# can import it and run it as an Automation API inline program.
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

    external_secrets = [{
        "apiVersion": "external-secrets.io/v1beta1", "kind": "ExternalSecret",
        "metadata": {"name": "ghcr-pull-secret", "namespace": ns},
        "spec": {
            "refreshInterval": "1h",
            "secretStoreRef": {"name": "vault", "kind": "ClusterSecretStore"},
            "target": {"name": "ghcr-pull-secret", "template": {"type": "kubernetes.io/dockerconfigjson"}},
            "data": [{"secretKey": ".dockerconfigjson", "remoteRef": {"key": "ghcr"}}],
        },
    } for ns in ["default", "hello-world", "nodejs-demo", "storage-validator"]]

    # The strongest proof that they can be created: the API server admits exactly them, twice in a
    # row. Nothing is persisted.
    admitted = readiness.AdmissionReady(
        "ghcr-pull-secrets-admitted", objects=external_secrets, timeout="10m",
        opts=pulumi.ResourceOptions(depends_on=[eso]))

    for es in external_secrets:
        k8s.apiextensions.CustomResource(
            f"ghcr-pull-secret-{es['metadata']['namespace']}",
            api_version=es["apiVersion"], kind=es["kind"], metadata=es["metadata"], spec=es["spec"],
            opts=pulumi.ResourceOptions(depends_on=[admitted]))

    # A mutating webhook proves itself by what it changes: an injector whose failurePolicy is Ignore
    # admits without it, so only the sidecar in the dry-run result is proof.
    injected = readiness.AdmissionReady(
        "web-injected",
        objects=[{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "apps", "labels": {"app": "web"}},
                  "spec": {"containers": [{"name": "web", "image": "registry.local/web:1"}]}}],
        expect="object.spec.containers.exists(c, c.name == 'istio-proxy')",
    ).mutated

    pulumi.export("injected", injected)
    pulumi.export("webhooksThatWereDown", admitted.deniers)


if __name__ == "__main__":
    program()
