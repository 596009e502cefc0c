# A sidecar injector whose failurePolicy is Ignore (Linkerd's proxy injector): while it is not
# serving, the API server admits Pods without asking it, and they run without a proxy, silently.
# WebhookReady with `expect` dry-runs a Pod in an injected namespace and waits until the result
# carries the injected container: the mutation is the only proof such a webhook gives. The
# workloads depend on the gate, so none of their Pods is created before the injector serves. The
# program is this module's function `program` (Pulumi runs the file as `__main__`, which calls it;
# its exports are the stack's outputs), so a test can import it and run it as an Automation API
# inline program.
import os

import pulumi
import pulumi_kubernetes as k8s
import pulumi_readiness as readiness


def program():
    config = pulumi.Config()
    # Config `chartPath`, if set, is a folder holding the charts linkerd-crds/ and
    # linkerd-control-plane/ (`helm pull --untar` of both: a mirror; the test's charts shaped as
    # Linkerd's), installed instead of the public repo's.
    chart_path = config.get("chartPath")

    def chart(name: str) -> dict:
        return dict(chart=os.path.join(chart_path, name)) if chart_path \
            else dict(chart=name, repository_opts={"repo": "https://helm.linkerd.io/edge"})

    crds = k8s.helm.v3.Release(
        "linkerd-crds", **chart("linkerd-crds"),
        namespace="linkerd", create_namespace=True,
    )
    linkerd = k8s.helm.v3.Release(
        "linkerd-control-plane", **chart("linkerd-control-plane"),
        namespace="linkerd",
        values={
            # Your own trust anchor and issuer (see Linkerd's "generating certificates" guide).
            "identityTrustAnchorsPEM": config.require("trustAnchorPEM"),
            "identity": {"issuer": {"tls": {"crtPEM": config.require("issuerCrtPEM"), "keyPEM": config.require_secret("issuerKeyPEM")}}},
        },
        opts=pulumi.ResourceOptions(depends_on=[crds]))

    apps = k8s.core.v1.Namespace(
        "apps", metadata={"name": "apps", "annotations": {"linkerd.io/inject": "enabled"}})

    # The probe is a Pod in the injected namespace; `expect` looks for what only the injector adds.
    injector = readiness.WebhookReady(
        "linkerd-injector",
        mutating_webhook_configuration="linkerd-proxy-injector-webhook-config",
        probe={
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": "injection-probe-", "namespace": "apps"},
            "spec": {"containers": [{"name": "probe", "image": "registry.local/probe:1"}]},
        },
        expect="object.spec.containers.exists(c, c.name == 'linkerd-proxy')",
        timeout="10m",
        opts=pulumi.ResourceOptions(depends_on=[linkerd, apps]))

    k8s.apps.v1.Deployment(
        "web",
        metadata={"name": "web", "namespace": "apps"},
        spec={
            "selector": {"match_labels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "registry.local/web:1"}]},
            },
        },
        opts=pulumi.ResourceOptions(depends_on=[injector]))

    pulumi.export("injectorFailurePolicy", injector.failure_policy)


if __name__ == "__main__":
    program()
