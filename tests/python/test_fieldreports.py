"""Field reports 000, 001 and 002 from Python stacks with the real pulumi-kubernetes (its Python
package 4.32.0 and plugin v4.32.0), as tests/nodejs/src/fieldreports.test.ts does from TypeScript:
the real charts (rendered by the Helm CLI, wrapped as local charts whose webhooks are the test's
servers on 127.0.0.1) installed by helm.v3.Release, then what each report failed to create, made by
pulumi-kubernetes too. Without the gate the stack fails with the report's error; with it the stack
succeeds. The test plays only what no process runs here: the webhook servers (serving late),
cert-manager issuing the Secret, and the kubelet mounting it."""

import threading
import time

import pulumi
import pulumi_kubernetes as k8s
import pulumi_readiness as readiness
import pytest
from pulumi import automation as auto

import harness

pytestmark = pytest.mark.timeout(900)


def web_ingress(namespace: str, depends_on: list) -> k8s.networking.v1.Ingress:
    """Report 002's Ingress, which the chart's validating webhook intercepts."""
    return k8s.networking.v1.Ingress(
        "web",
        # No ingress controller fills status.loadBalancer here, which the Ingress await waits for.
        metadata={"name": "web", "namespace": namespace, "annotations": {"pulumi.com/skipAwait": "true"}},
        spec={
            "ingress_class_name": "nginx",
            "rules": [{"host": "web.example.test", "http": {"paths": [{"path": "/", "path_type": "Prefix",
                                                                       "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}],
        },
        opts=pulumi.ResourceOptions(depends_on=depends_on))


def test_report_002_ingress_after_ingress_nginx_release_needs_helm_release_ready(cluster, env, webhook):
    chart = harness.local_chart("ingress-nginx", webhook)

    def program(gated: bool):
        def run():
            release = k8s.helm.v3.Release("ingress-nginx", k8s.helm.v3.ReleaseArgs(
                chart=chart, name="ingress-nginx", namespace="ingress-nginx", create_namespace=True, timeout=180))
            before = release
            if gated:
                before = readiness.HelmReleaseReady(
                    "ingress-nginx-ready", name="ingress-nginx", namespace="ingress-nginx", timeout="2m",
                    triggers=[release.status.revision], opts=pulumi.ResourceOptions(depends_on=[release]))
            ns = k8s.core.v1.Namespace("apps", metadata={"name": "apps"})
            web_ingress("apps", [before, ns])
        return run

    bare = harness.stack(env, cluster, "report002-py", "nogate", program(False))
    with pytest.raises(auto.CommandError) as e:
        bare.up()
    assert 'failed calling webhook "validate.nginx.ingress.kubernetes.io"' in str(e.value)
    assert "connection refused" in str(e.value)
    harness.remove(bare)

    gated = harness.stack(env, cluster, "report002-py", "gated", program(True))
    done = threading.Event()
    late = harness.serve_when_available(cluster, webhook, "ingress-nginx", "ingress-nginx-controller", 5, done)
    try:
        gated.up()
    finally:
        done.set()
        late["thread"].join()
    assert "started" in late, "the webhook never started serving"
    assert cluster.created_at("/apis/networking.k8s.io/v1/namespaces/apps/ingresses/web") >= int(late["started"])
    harness.remove(gated)
    webhook.send("stop")


def test_report_002_chart_v4_chart_ready_on_chart_resources(cluster, env, webhook):
    """A Chart v4 writes no release record: ChartReady takes its `resources` output as it is (the
    Python SDK passes references to the chart's objects, whose classes pulumi_kubernetes
    registers)."""
    chart = harness.local_chart("ingress-nginx", webhook)
    status, _ = cluster.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ingress-nginx"}})
    assert status in (201, 409)

    def program():
        c = k8s.helm.v4.Chart("ingress-nginx", k8s.helm.v4.ChartArgs(chart=chart, namespace="ingress-nginx"))
        gate = readiness.ChartReady("ingress-nginx-ready", resources=c.resources, timeout="2m")
        web_ingress("default", [gate])
        pulumi.export("objects", gate.objects)
        pulumi.export("webhooks", gate.webhooks)

    gated = harness.stack(env, cluster, "report002-py", "chartv4", program)
    gated.preview()  # the Chart's resources are unknown on a first preview: the gate must accept that
    calls_before = webhook.calls()
    # The webhook serves 3 s after the gate's create began: after everything the Chart awaited
    # itself, so the Ingress succeeds only if the gate held it for the webhook.
    serving: list[threading.Timer] = []

    def on_event(e: auto.EngineEvent) -> None:
        m = e.resource_pre_event.metadata if e.resource_pre_event else None
        if not serving and m and m.type == "readiness:index:ChartReady" and m.op == auto.OpType.CREATE:
            t = threading.Timer(3, webhook.send, args=("start",))
            serving.append(t)
            t.start()

    res = gated.up(on_event=on_event)
    assert serving, "the ChartReady gate was never created"
    serving[0].join()
    assert webhook.calls() > calls_before, "the Ingress was created without the webhook ever answering"
    assert res.outputs["objects"].value >= 10, f"objects = {res.outputs['objects'].value}: the gate did not get the chart's objects"
    assert res.outputs["webhooks"].value == ["ingress-nginx-admission"]
    harness.remove(gated)
    webhook.send("stop")


def test_report_000_deployment_mounting_certificate_secret_needs_certificate_ready(cluster, env):
    hook = harness.FakeWebhook()
    try:
        hook.send("start")  # cert-manager's own webhook is not this report's story: it serves from the start
        chart = harness.local_chart("cert-manager", hook)
        labels = {"app": "ai-ops-agent"}

        def program(gated: bool):
            def run():
                release = k8s.helm.v3.Release("cert-manager", k8s.helm.v3.ReleaseArgs(
                    chart=chart, name="cert-manager", namespace="cert-manager", create_namespace=True, timeout=180))
                cert = k8s.apiextensions.CustomResource(
                    "ai-ops-agent-cert", api_version="cert-manager.io/v1", kind="Certificate",
                    metadata={"name": "ai-ops-agent", "namespace": "default"},
                    spec={"secretName": "ai-ops-agent-tls", "dnsNames": ["ai-ops-agent.example.test"],
                          "issuerRef": {"name": "vault-issuer", "kind": "ClusterIssuer"}},
                    opts=pulumi.ResourceOptions(depends_on=[release]))
                before = cert
                if gated:
                    before = readiness.CertificateReady("ai-ops-agent-tls", name="ai-ops-agent", namespace="default",
                                                        timeout="2m", opts=pulumi.ResourceOptions(depends_on=[cert]))
                k8s.apps.v1.Deployment(
                    "ai-ops-agent",
                    # pulumi-kubernetes awaits the rollout; 6 s is this stack's patience (the Secret comes at +8 s without the gate).
                    metadata={"name": "ai-ops-agent", "namespace": "default", "annotations": {"pulumi.com/timeoutSeconds": "6"}},
                    spec={
                        "selector": {"match_labels": labels},
                        "template": {
                            # kwok leaves these pods to the kubelet player, which mounts their Secret.
                            "metadata": {"labels": labels, "annotations": {"pod-ready.stage.kwok.x-k8s.io/delay": "1h"}},
                            "spec": {
                                "node_selector": {"type": "kwok"},
                                "containers": [{"name": "agent", "image": "registry.local/agent:1",
                                                "volume_mounts": [{"name": "tls", "mount_path": "/etc/tls", "read_only": True}]}],
                                "volumes": [{"name": "tls", "secret": {"secret_name": "ai-ops-agent-tls"}}],
                            },
                        },
                    },
                    opts=pulumi.ResourceOptions(depends_on=[before]))
            return run

        def run(s: auto.Stack, issue_after: str):
            """Brings the stack up with cert-manager (the Secret issue_after the Certificate) and the
            kubelet played; returns up's error, if any, and the kubelet's FailedMount messages."""
            kubelet = harness.Player(cluster, "kubelet", "default", "app=ai-ops-agent")
            issuer = harness.Player(cluster, "issue", "default", "ai-ops-agent", "ai-ops-agent-tls", issue_after)
            err = None
            try:
                s.up()
            except auto.CommandError as e:
                err = e
            finally:
                kubelet.stop()
                issuer.stop()
            mounts = [l for l in kubelet.done() if l.startswith("failed-mount: ")]
            issuer.done()
            return err, mounts

        def reset(s: auto.Stack) -> None:
            s.destroy()
            # The issued Secret outlives its Certificate (as cert-manager leaves it).
            cluster.request("DELETE", "/api/v1/namespaces/default/secrets/ai-ops-agent-tls")

        # Without the gate: the pod meets the report's FailedMount, and pulumi-kubernetes fails the
        # Deployment, whose rollout it awaits, before the Secret exists.
        bare = harness.stack(env, cluster, "report000-py", "nogate", program(False))
        err, mounts = run(bare, "8s")
        assert err is not None, "without the gate the stack must fail"
        assert "'ai-ops-agent' timed out waiting to be Ready" in str(err), str(err)
        assert "Minimum number of live Pods was not attained" in str(err)
        assert mounts and 'MountVolume.SetUp failed for volume "tls" : secret "ai-ops-agent-tls" not found' in mounts[0], \
            f"the kubelet must report the FailedMount; it saw {mounts}"
        reset(bare)
        bare.workspace.remove_stack("nogate")

        # With the gate: the Deployment is created after the Secret and mounts it at once.
        gated = harness.stack(env, cluster, "report000-py", "gated", program(True))
        err, mounts = run(gated, "2s")
        assert err is None, str(err)
        assert mounts == [], "with CertificateReady the pod must mount its Secret at once"
        assert cluster.created_at("/apis/apps/v1/namespaces/default/deployments/ai-ops-agent") >= \
            cluster.created_at("/api/v1/namespaces/default/secrets/ai-ops-agent-tls"), "the Deployment came before its Secret"
        reset(gated)
        gated.workspace.remove_stack("gated")
    finally:
        hook.stop()


# pulumi-kubernetes deletes with foreground propagation by default, which waits for the garbage
# collector; the collector learns a newly installed CRD's kind only at its next discovery sync (every
# 30 s). Deletion is not report 001's story: background propagation.
BACKGROUND = {"pulumi.com/deletionPropagationPolicy": "background"}


def report_001_objects(before: pulumi.Resource) -> None:
    """Field report 001's objects: a ClusterSecretStore and two ExternalSecrets, one in a namespace
    the stack makes."""
    k8s.apiextensions.CustomResource(
        "pulumi-esc", api_version="external-secrets.io/v1", kind="ClusterSecretStore",
        metadata={"name": "pulumi-esc", "annotations": BACKGROUND},
        spec={"provider": {"fake": {"data": [{"key": "ghcr", "value": "{}"}]}}},
        opts=pulumi.ResourceOptions(depends_on=[before]))
    team = k8s.core.v1.Namespace("hello-world", metadata={"name": "hello-world"})
    for ns in ("default", "hello-world"):
        k8s.apiextensions.CustomResource(
            f"ghcr-pull-secret-{ns}", api_version="external-secrets.io/v1", kind="ExternalSecret",
            metadata={"name": "ghcr-pull-secret", "namespace": ns, "annotations": BACKGROUND},
            spec={"refreshInterval": "1h", "secretStoreRef": {"kind": "ClusterSecretStore", "name": "pulumi-esc"},
                  "target": {"name": "ghcr-pull-secret"}, "dataFrom": [{"extract": {"key": "ghcr"}}]},
            opts=pulumi.ResourceOptions(depends_on=[before, team]))


REPORT_001_PATHS = ["/apis/external-secrets.io/v1/clustersecretstores/pulumi-esc",
                    "/apis/external-secrets.io/v1/namespaces/default/externalsecrets/ghcr-pull-secret",
                    "/apis/external-secrets.io/v1/namespaces/hello-world/externalsecrets/ghcr-pull-secret"]


def destroy_with_webhook(cluster: harness.Cluster, hook: harness.FakeWebhook, s: auto.Stack) -> None:
    """The chart's webhook also intercepts deletes: destroy while it serves, once the API server
    lists the release's custom resources from its cache (a CRD deleted before that stays
    Terminating until the CRD finalizer's backoff retries)."""
    cluster.caches_ready("external-secrets.io")
    hook.set_serving(True)
    s.destroy()
    hook.set_serving(False)


def test_report_001_external_secrets_after_release_need_helm_release_ready(cluster, env):
    hook = harness.FakeWebhook()
    try:
        chart = harness.local_chart("external-secrets", hook)

        def program(gated: bool):
            def run():
                release = k8s.helm.v3.Release("external-secrets", k8s.helm.v3.ReleaseArgs(
                    chart=chart, name="external-secrets", namespace="external-secrets", create_namespace=True, timeout=180))
                before = release
                if gated:
                    before = readiness.HelmReleaseReady(
                        "external-secrets-ready", name="external-secrets", namespace="external-secrets", timeout="2m",
                        triggers=[release.status.revision], opts=pulumi.ResourceOptions(depends_on=[release]))
                report_001_objects(before)
            return run

        # Without the gate: dependsOn on the release is not enough (continue_on_error: every failure shows).
        bare = harness.stack(env, cluster, "report001-py", "nogate", program(False))
        with pytest.raises(auto.CommandError) as e:
            bare.up(continue_on_error=True)
        assert 'failed calling webhook "validate.externalsecret.external-secrets.io"' in str(e.value)
        assert 'failed calling webhook "validate.clustersecretstore.external-secrets.io"' in str(e.value)
        destroy_with_webhook(cluster, hook, bare)
        bare.workspace.remove_stack("nogate")

        # With the gate: the webhook serves 1 s after its Deployment is available.
        gated = harness.stack(env, cluster, "report001-py", "gated", program(True))
        done = threading.Event()
        late = harness.serve_when_available(cluster, hook, "external-secrets", "external-secrets-webhook", 1, done)
        t0 = time.time()
        try:
            gated.up()
        finally:
            done.set()
            late["thread"].join()
        assert "started" in late, "the webhook never started serving"
        for p in REPORT_001_PATHS:
            assert cluster.created_at(p) >= int(late["started"]), f"{p} was created before the webhook served"
        print(f"report 001 gated (Python): up {time.time() - t0:.1f} s, webhook served after {late['started'] - t0:.1f} s")
        destroy_with_webhook(cluster, hook, gated)
        gated.workspace.remove_stack("gated")
    finally:
        hook.stop()
