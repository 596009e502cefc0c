"""readiness.auto_gate() from Python programs on the real pulumi-kubernetes plugin (pulumi_kubernetes
4.32.0), as tests/nodejs/src/autogate.test.ts and autogate.corpus.test.ts do from TypeScript:

- field reports 000, 001 and 002 as ONE ordinary program with no hand-written gate, the one line at
  its top, rebuilt (field report 004) ROUNDS times; without the line it fails with the reports' errors;
- a ConfigGroup whose own custom resource its own webhook validates, in either order in the YAML;
- field report 001 as its author wrote it, with helm.v3.Chart (rendered in-process by the Python SDK);
- the shapes Python programs have: autonamed objects, Outputs in namespaces, a webhook server written
  above the configuration that depends on it (no cycle), a yaml v1 ConfigGroup, a component of the
  user's own, and a second cluster through an explicit kubernetes provider.

The charts are the rendered real charts as local charts, their webhooks test servers on 127.0.0.1;
only what no process runs here is played (webhook servers serving late, cert-manager issuing)."""

import os
import threading
import time

import pulumi
import pulumi_kubernetes as k8s
import pulumi_readiness as readiness
import pytest
import yaml
from pulumi import automation as auto

import harness

pytestmark = pytest.mark.timeout(1800)

# Field report 004: the stack destroyed and brought up again (the TypeScript test does five).
ROUNDS = int(os.environ.get("READINESS_AUTOGATE_ROUNDS", "2"))

BACKGROUND = {"pulumi.com/deletionPropagationPolicy": "background"}


def assert_created_after(cluster: harness.Cluster, path: str, t: float, what: str) -> None:
    """creationTimestamp has whole seconds: an object created in the second before t would pass, one
    created a second or more before it fails."""
    c = cluster.created_at(path)
    assert c >= int(t), f"{path} was created at {c}, before {what} ({t})"


def gates_of(s: auto.Stack) -> list[dict]:
    return [r for r in s.export_stack().deployment["resources"] if r["type"].startswith("readiness:")]


def name_of(urn: str) -> str:
    return urn.split("::")[-1]


def delete_kept_crds(cluster: harness.Cluster, suffix: str) -> float:
    """Deletes the CRDs of groups ending in suffix and returns once they are gone. cert-manager's chart
    marks its CRDs `helm.sh/resource-policy: keep`, which Chart v4 honours: the next up's Chart would
    fail creating them. Deleting them by hand, as a user rebuilding would, starts each round as the first."""
    t0 = time.time()

    def kept() -> list[str]:
        items = cluster.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions")["items"]
        return [c["metadata"]["name"] for c in items if c["spec"]["group"].endswith(suffix)]

    for name in kept():
        cluster.request("DELETE", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
    while left := kept():
        assert time.time() - t0 < 120, f"CRDs still there two minutes after their delete: {left}"
        time.sleep(0.2)
    return time.time() - t0


def es_path(ns: str) -> str:
    return f"/apis/external-secrets.io/v1/namespaces/{ns}/externalsecrets/ghcr-pull-secret"


def test_field_reports_as_one_gate_free_program_rebuilt(cluster, env):
    eso_hook, cm_hook = harness.FakeWebhook(), harness.FakeWebhook()
    try:
        eso_chart = harness.local_chart("external-secrets", eso_hook)
        cm_chart = harness.local_chart("cert-manager", cm_hook)
        # The chart's own custom resource, validated by the chart's own webhook.
        with open(os.path.join(cm_chart, "templates", "selfsigned-issuer.yaml"), "w") as f:
            f.write(yaml.safe_dump({"apiVersion": "cert-manager.io/v1", "kind": "ClusterIssuer",
                                    "metadata": {"name": "selfsigned", "annotations": BACKGROUND}, "spec": {"selfSigned": {}}}))

        def program(line: bool):
            def run():
                if line:
                    readiness.auto_gate(timeout="5m")
                # 001: External Secrets, then ExternalSecrets that depend on the release.
                eso = k8s.helm.v3.Release("external-secrets", k8s.helm.v3.ReleaseArgs(
                    chart=eso_chart, name="external-secrets", namespace="external-secrets", create_namespace=True, timeout=300))
                team = k8s.core.v1.Namespace("team-a", metadata={"name": "team-a"})
                for ns in ("default", "team-a"):
                    k8s.apiextensions.CustomResource(
                        f"ghcr-pull-secret-{ns}", api_version="external-secrets.io/v1", kind="ExternalSecret",
                        metadata={"name": "ghcr-pull-secret", "namespace": ns},
                        spec={"refreshInterval": "1h", "secretStoreRef": {"kind": "ClusterSecretStore", "name": "vault"},
                              "target": {"name": "ghcr-pull-secret"}, "dataFrom": [{"extract": {"key": "ghcr"}}]},
                        opts=pulumi.ResourceOptions(depends_on=[eso, team]))
                # 002's shape: a Chart v4 whose ClusterIssuer its own webhook validates.
                cm_ns = k8s.core.v1.Namespace("cert-manager", metadata={"name": "cert-manager"})
                cert_manager = k8s.helm.v4.Chart("cert-manager", k8s.helm.v4.ChartArgs(chart=cm_chart, namespace="cert-manager"),
                                                 opts=pulumi.ResourceOptions(depends_on=[cm_ns]))
                # 000: a Certificate, and a Deployment that mounts the Secret it produces.
                k8s.apiextensions.CustomResource(
                    "ai-ops-agent-cert", api_version="cert-manager.io/v1", kind="Certificate",
                    metadata={"name": "ai-ops-agent", "namespace": "default", "annotations": BACKGROUND},
                    spec={"secretName": "ai-ops-agent-tls", "dnsNames": ["ai-ops-agent.default.svc"],
                          "issuerRef": {"name": "selfsigned", "kind": "ClusterIssuer"}},
                    opts=pulumi.ResourceOptions(depends_on=[cert_manager]))
                labels = {"app": "ai-ops-agent"}
                k8s.apps.v1.Deployment(
                    "ai-ops-agent", metadata={"name": "ai-ops-agent", "namespace": "default"},
                    spec={"selector": {"match_labels": labels}, "template": {
                        "metadata": {"labels": labels},
                        "spec": {"containers": [{"name": "agent", "image": "ghcr.io/example/ai-ops-agent:1.0",
                                                 "volume_mounts": [{"name": "tls", "mount_path": "/tls"}]}],
                                 "volumes": [{"name": "tls", "secret": {"secret_name": "ai-ops-agent-tls"}}]}}})
                # Near miss: nothing in the stack can block it.
                k8s.core.v1.ConfigMap("app-config", metadata={"name": "app-config", "namespace": "default"}, data={"mode": "prod"})
            return run

        def destroy(s: auto.Stack, remove: bool) -> None:
            """The webhooks intercept deletes too: destroy while they serve."""
            eso_hook.set_serving(True)
            cm_hook.set_serving(True)
            s.destroy()
            if remove:
                s.workspace.remove_stack(s.name)
            eso_hook.set_serving(False)
            cm_hook.set_serving(False)

        def up_gated(s: auto.Stack, round_: int) -> None:
            at = f"round {round_}"
            done = threading.Event()
            eso_serving = harness.serve_when_available(cluster, eso_hook, "external-secrets", "external-secrets-webhook", 5, done)
            cm_serving = harness.serve_when_available(cluster, cm_hook, "cert-manager", "cert-manager-webhook", 5, done)
            issuer = harness.Player(cluster, "issue", "default", "ai-ops-agent", "ai-ops-agent-tls", "3s")
            try:
                res = s.up()
            finally:
                done.set()
                issuer.stop()
                eso_serving["thread"].join()
                cm_serving["thread"].join()
            assert res.summary.result == "succeeded", at
            assert "started" in eso_serving and "started" in cm_serving, f"{at}: a webhook never started serving"
            assert issuer.done()[-1] == "done", at
            # Each dependent was created only after its proof.
            for ns in ("default", "team-a"):
                assert_created_after(cluster, es_path(ns), eso_serving["started"], f"External Secrets' webhook served ({at})")
            assert_created_after(cluster, "/apis/cert-manager.io/v1/clusterissuers/selfsigned", cm_serving["started"],
                                 f"cert-manager's webhook served ({at})")
            # Near miss: the ConfigMap nothing can block went ahead at once, long before either webhook served.
            assert cluster.created_at("/api/v1/namespaces/default/configmaps/app-config") < \
                int(min(eso_serving["started"], cm_serving["started"])), f"{at}: the ConfigMap was held"
            assert cluster.created_at("/apis/apps/v1/namespaces/default/deployments/ai-ops-agent") >= \
                cluster.created_at("/api/v1/namespaces/default/secrets/ai-ops-agent-tls"), \
                f"{at}: the Deployment was created before the Secret it mounts was issued"
            # The same gates as TypeScript's and Go's autoGate choose for this program.
            gates = sorted(name_of(g["urn"]) for g in gates_of(s))
            print(f"{at} gates: {gates}")
            assert gates == [
                "auto-admission-certificates.cert-manager.io-default-cert-manager-cert-manager-webhook",
                "auto-admission-clusterissuers.cert-manager.io-cluster-cert-manager-cert-manager-webhook",
                "auto-admission-externalsecrets.external-secrets.io-default-external-secrets",
                "auto-admission-externalsecrets.external-secrets.io-team-a-external-secrets",
                "auto-certificate-default-ai-ops-agent",
                "auto-exists-cert-manager-cert-manager-webhook",
            ], at
            # Each AdmissionReady guards an object's own create, which the program's error hook retries.
            unretried = [name_of(g["urn"]) for g in gates_of(s)
                         if g["type"] == "readiness:index:AdmissionReady" and g.get("inputs", {}).get("retried") is not True]
            assert unretried == [], f"{at}: AdmissionReady gates without retried: {unretried}"

        s = harness.stack(env, cluster, "autogate-py", "auto", program(True))
        for round_ in range(1, ROUNDS + 1):
            t0 = time.time()
            up_gated(s, round_)
            destroy(s, round_ == ROUNDS)
            # The issued Secret outlives its Certificate (as cert-manager leaves it).
            cluster.request("DELETE", "/api/v1/namespaces/default/secrets/ai-ops-agent-tls")
            crd_wait = delete_kept_crds(cluster, "cert-manager.io")
            print(f"auto_gate rebuild {round_}/{ROUNDS}: up + destroy {time.time() - t0:.1f} s "
                  f"(of which {crd_wait:.1f} s deleting cert-manager's kept CRDs)")

        # Without the line: the field reports' errors (continue_on_error: every failure shows). The
        # webhooks do not serve during this up.
        bare = harness.stack(env, cluster, "autogate-py", "bare", program(False))
        issuer = harness.Player(cluster, "issue", "default", "ai-ops-agent", "ai-ops-agent-tls", "3s")
        try:
            with pytest.raises(auto.CommandError) as e:
                bare.up(continue_on_error=True)
        finally:
            issuer.stop()
        assert 'failed calling webhook "validate.externalsecret.external-secrets.io"' in str(e.value)
        assert 'failed calling webhook "webhook.cert-manager.io"' in str(e.value)
        # 000: the Deployment went ahead with no Secret to mount.
        assert cluster.exists("/apis/apps/v1/namespaces/default/deployments/ai-ops-agent")
        assert not cluster.exists("/api/v1/namespaces/default/secrets/ai-ops-agent-tls")
        destroy(bare, True)
    finally:
        eso_hook.stop()
        cm_hook.stop()


@pytest.mark.parametrize("order", ["webhook-first", "resource-first"])
def test_config_group_webhook_and_the_custom_resource_it_intercepts(cluster, env, order):
    """The plugin registers a ConfigGroup's children concurrently, so the custom resource may reach
    the transform before the webhook configuration: either order in the YAML, auto_gate holds the
    custom resource until the webhook answers (it serves 3 s after its configuration exists)."""
    hook = harness.FakeWebhook()
    try:
        def widgets(group: str):
            hook_name = f"widgets-{group.split('.')[0]}"
            docs = [yaml.safe_dump(hook.configuration(hook_name, group)), yaml.safe_dump(harness.crd(group, "Widget", "widgets")),
                    f"apiVersion: {group}/v1\nkind: Widget\nmetadata: {{name: w1, namespace: default}}\nspec: {{size: 1}}\n"]
            if order == "resource-first":
                docs.reverse()
            return hook_name, f"/apis/{group}/v1/namespaces/default/widgets/w1", "\n---\n".join(docs)

        def program(line: bool, text: str):
            def run():
                if line:
                    readiness.auto_gate(timeout="2m")
                k8s.yaml.v2.ConfigGroup("app", yaml=text)
            return run

        ident = int(time.time() * 1000) % 1_000_000
        # Without the line: the Widget is created while its webhook does not answer yet.
        _, off_path, off_yaml = widgets(f"pag{ident}off.readiness.test")
        bare = harness.stack(env, cluster, "autogate-py", f"cg-bare-{order}", program(False, off_yaml))
        with pytest.raises(auto.CommandError, match=r'failed calling webhook "validating\.widgets-'):
            bare.up(continue_on_error=True)
        assert not cluster.exists(off_path)
        harness.remove(bare)

        group = f"pag{ident}.readiness.test"
        hook_name, widget_path, text = widgets(group)
        s = harness.stack(env, cluster, "autogate-py", f"cg-{order}", program(True, text))
        done = threading.Event()
        served: dict = {}

        def serve() -> None:
            while not done.is_set() and not cluster.exists(f"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{hook_name}"):
                done.wait(0.1)
            if done.wait(3):
                return
            served["at"] = time.time()
            hook.send("start")

        t = threading.Thread(target=serve, daemon=True)
        t.start()
        try:
            res = s.up()
        finally:
            done.set()
            t.join()
        assert res.summary.result == "succeeded"
        assert "at" in served, "the webhook configuration never existed"
        assert_created_after(cluster, widget_path, served["at"], "its webhook served")
        assert hook.calls() > 0, "the Widget was created without the webhook answering"
        state = s.export_stack().deployment["resources"]
        gates = sorted(f"{g['type'].replace('readiness:index:', '')} {name_of(g['urn'])}" for g in gates_of(s))
        assert len(gates) == 2, gates
        assert gates[0].startswith(f"AdmissionReady auto-admission-widgets.{group}-default-"), gates
        assert gates[1].startswith("ResourceReady auto-exists-"), gates
        # The exists gate depends on the configuration itself (a child known only by URN).
        hook_urn = next(r["urn"] for r in state if r["type"] == "kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration")
        exists = next(r for r in state if r["type"] == "readiness:index:ResourceReady")
        assert hook_urn in exists.get("dependencies", []), f"the exists gate's dependencies {exists.get('dependencies')} lack {hook_urn}"
        harness.remove(s)
    finally:
        hook.stop()


def test_field_report_001_as_written_with_a_chart_v3(cluster, env):
    """Field report 001 as its author wrote it: helm.v3.Chart of External Secrets (rendered by the
    Python SDK in-process, its children registered after the chart), an ExternalSecret that
    depends_on the chart, and the one line."""
    hook = harness.FakeWebhook()
    try:
        chart = harness.local_chart("external-secrets", hook)
        # The program makes the chart's namespace, which another test's Release left behind.
        cluster.request("DELETE", "/api/v1/namespaces/external-secrets")
        deadline = time.time() + 120
        while cluster.exists("/api/v1/namespaces/external-secrets"):
            assert time.time() < deadline, "namespace external-secrets still there two minutes after its delete"
            time.sleep(0.2)

        def program():
            readiness.auto_gate(timeout="3m")
            ns = k8s.core.v1.Namespace("external-secrets", metadata={"name": "external-secrets"})
            eso = k8s.helm.v3.Chart("external-secrets", k8s.helm.v3.LocalChartOpts(path=chart, namespace="external-secrets"),
                                    opts=pulumi.ResourceOptions(depends_on=[ns]))
            k8s.apiextensions.CustomResource(
                "ghcr-pull-secret", api_version="external-secrets.io/v1", kind="ExternalSecret",
                metadata={"name": "ghcr-pull-secret", "namespace": "default", "annotations": BACKGROUND},
                spec={"refreshInterval": "1h", "secretStoreRef": {"kind": "ClusterSecretStore", "name": "pulumi-esc"},
                      "target": {"name": "ghcr-pull-secret"}, "dataFrom": [{"extract": {"key": "ghcr"}}]},
                opts=pulumi.ResourceOptions(depends_on=[eso]))

        s = harness.stack(env, cluster, "chartv3-py", "gated", program)
        done = threading.Event()
        late = harness.serve_when_available(cluster, hook, "external-secrets", "external-secrets-webhook", 5, done)
        out: list[str] = []
        try:
            s.up(on_output=out.append)
        finally:
            done.set()
            late["thread"].join()
        text = "".join(out)
        assert "started" in late, "the webhook never started serving"
        assert_created_after(cluster, es_path("default"), late["started"], "its webhook served")
        gates = [f"{g['type'].split(':')[-1]} {name_of(g['urn'])}" for g in gates_of(s)]
        print(f"chart v3 gates (Python): {gates}")
        assert any(g.startswith("AdmissionReady auto-admission-externalsecrets.external-secrets.io-default-externalsecret-validate") for g in gates), gates
        assert "ResourceReady auto-exists-externalsecret-validate" in gates, gates
        assert "was registered before" not in text, "a warning that the ExternalSecret was decided before the chart's webhook"
        cluster.caches_ready("external-secrets.io")
        hook.set_serving(True)  # its webhook intercepts deletes too
        harness.remove(s)
        hook.set_serving(False)
    finally:
        hook.stop()


class Team(pulumi.ComponentResource):
    """A component of the user's own: a Certificate and the Deployment that reads its Secret."""

    def __init__(self, name: str, namespace: pulumi.Input[str]) -> None:
        super().__init__("corpus:index:Team", name)
        k8s.apiextensions.CustomResource(
            f"{name}-cert", api_version="cert-manager.io/v1", kind="Certificate",
            metadata={"name": name, "namespace": namespace, "annotations": BACKGROUND},
            spec={"secretName": f"{name}-tls", "dnsNames": [f"{name}.example.test"], "issuerRef": {"name": "ca", "kind": "ClusterIssuer"}},
            opts=pulumi.ResourceOptions(parent=self))
        labels = {"app": name}
        k8s.apps.v1.Deployment(
            f"{name}-app", metadata={"namespace": namespace, "annotations": {"pulumi.com/skipAwait": "true"}},
            spec={"selector": {"match_labels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
                "node_selector": {"type": "kwok"},
                "containers": [{"name": "app", "image": "registry.local/team:1", "env_from": [{"secret_ref": {"name": f"{name}-tls"}}]}]}}},
            opts=pulumi.ResourceOptions(parent=self))
        self.register_outputs({})


def test_python_shapes(cluster, env):
    """Autonamed objects, Outputs in namespaces, a server written above its webhook (no cycle), a yaml
    v1 ConfigGroup, a component of the user's own and a second cluster."""
    staging = harness.start_cluster()
    widgets, injector = harness.FakeWebhook(), harness.FakeWebhook()
    injector.send("mode inject:sidecar")
    label = f"py{int(time.time() * 1000) % 1_000_000}"
    group = f"{label}.readiness.test"
    ns_name = f"corpus-{label}"
    # cert-manager's Certificate kind is served (its controller is played by the issue player).
    certs = harness.crd("cert-manager.io", "Certificate", "certificates")
    certs["spec"]["versions"][0]["subresources"] = {"status": {}}
    cluster.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", certs)
    try:
        def program():
            readiness.auto_gate(timeout="90s")
            # Its name is an Output of the Namespace, as programs pass it on.
            ns = k8s.core.v1.Namespace("corpus", metadata={"name": ns_name})
            namespace = ns.metadata.name
            # Autonamed: a CRD's custom resource behind an autonamed webhook configuration.
            d = harness.crd(group, "Widget", "widgets")
            widgets_crd = k8s.apiextensions.v1.CustomResourceDefinition("widgets", metadata=d["metadata"], spec=d["spec"])
            widgets_hook = k8s.admissionregistration.v1.ValidatingWebhookConfiguration(
                "widgets-hook", metadata={"labels": {"corpus": label}},
                webhooks=[{"name": f"validating.widgets.{group}", "admission_review_versions": ["v1"], "side_effects": "None",
                           "failure_policy": "Fail", "timeout_seconds": 3,
                           "client_config": {"url": widgets.url, "ca_bundle": widgets.ca_bundle},
                           "rules": [{"api_groups": [group], "api_versions": ["*"], "operations": ["CREATE", "UPDATE"], "resources": ["widgets"]}]}])
            widget = k8s.apiextensions.CustomResource(
                "widget", api_version=f"{group}/v1", kind="Widget", metadata={"namespace": namespace}, spec={"size": 1},
                opts=pulumi.ResourceOptions(depends_on=[widgets_crd, widgets_hook]))
            # A sidecar injector's server, written above its webhook configuration, which depends on
            # it: the server is never held for its own webhook.
            labels = {"app": "injector"}
            server = k8s.apps.v1.Deployment(
                "injector-server", metadata={"namespace": namespace, "annotations": {"pulumi.com/skipAwait": "true"}},
                spec={"selector": {"match_labels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
                    "node_selector": {"type": "kwok"}, "containers": [{"name": "s", "image": "registry.local/injector:1"}]}}})
            injector_hook = k8s.admissionregistration.v1.MutatingWebhookConfiguration(
                "injector", metadata={"labels": {"corpus": f"{label}-pods"}},
                webhooks=[{"name": f"inject.{group}", "admission_review_versions": ["v1"], "side_effects": "None",
                           "failure_policy": "Ignore", "timeout_seconds": 3,
                           "client_config": {"url": injector.url, "ca_bundle": injector.ca_bundle},
                           "namespace_selector": {"match_labels": {"kubernetes.io/metadata.name": namespace}},
                           "rules": [{"api_groups": [""], "api_versions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]}],
                opts=pulumi.ResourceOptions(depends_on=[server]))
            # A Certificate whose namespace is an Output, and a Deployment that mounts its Secret.
            k8s.apiextensions.CustomResource(
                "web-cert", api_version="cert-manager.io/v1", kind="Certificate",
                metadata={"name": "web", "namespace": namespace, "annotations": BACKGROUND},
                spec={"secretName": "web-tls", "dnsNames": ["web.example.test"], "issuerRef": {"name": "ca", "kind": "ClusterIssuer"}})
            web = {"app": "web"}
            app = k8s.apps.v1.Deployment(
                "web", metadata={"namespace": namespace, "annotations": {"pulumi.com/skipAwait": "true"}},
                spec={"selector": {"match_labels": web}, "template": {"metadata": {"labels": web}, "spec": {
                    "node_selector": {"type": "kwok"},
                    "containers": [{"name": "web", "image": "registry.local/web:1", "volume_mounts": [{"name": "tls", "mount_path": "/tls"}]}],
                    "volumes": [{"name": "tls", "secret": {"secret_name": "web-tls"}}]}}},
                opts=pulumi.ResourceOptions(depends_on=[injector_hook]))
            # Issue 47: an autonamed ServiceAccount pulling with the Certificate's Secret, and a
            # Deployment that runs as it by the name it got (an Output): held for the Certificate.
            puller = k8s.core.v1.ServiceAccount("puller", metadata={"namespace": namespace}, image_pull_secrets=[{"name": "web-tls"}])
            pulls = {"app": "pulls"}
            pulls_app = k8s.apps.v1.Deployment(
                "pulls-via-auto", metadata={"namespace": namespace, "annotations": {"pulumi.com/skipAwait": "true"}},
                spec={"selector": {"match_labels": pulls}, "template": {"metadata": {"labels": pulls}, "spec": {
                    "node_selector": {"type": "kwok"}, "service_account_name": puller.metadata.name,
                    "containers": [{"name": "app", "image": "registry.local/app:1"}]}}})
            # A yaml v1 ConfigGroup (rendered in-process by the Python SDK): its CRD, its webhook
            # configuration and its custom resource, which its own webhook validates.
            g1 = f"v1{group}"
            k8s.yaml.ConfigGroup("widgets-v1", yaml=[yaml.safe_dump(o) for o in [harness.crd(g1, "Widget", "widgets"), {
                "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration", "metadata": {"name": f"widgets-v1-{label}"},
                "webhooks": [{"name": f"validating.widgets.{g1}", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                              "failurePolicy": "Fail", "timeoutSeconds": 3,
                              "clientConfig": {"url": widgets.url, "caBundle": widgets.ca_bundle},
                              "rules": [{"apiGroups": [g1], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"], "resources": ["widgets"]}]}],
            }, {"apiVersion": f"{g1}/v1", "kind": "Widget", "metadata": {"name": "w1", "namespace": "default"}, "spec": {"size": 1}}]])
            # A component of the user's own: a Certificate and the Deployment that reads its Secret.
            Team("team", namespace)
            # A second cluster, through an explicit provider: its CRD's custom resource waits on a
            # CrdReady of a readiness provider configured as that provider is.
            other = k8s.Provider("staging", kubeconfig=staging.kubeconfig)
            sd = harness.crd(f"s{group}", "Widget", "widgets")
            other_crd = k8s.apiextensions.v1.CustomResourceDefinition("staging-widgets", metadata=sd["metadata"], spec=sd["spec"],
                                                                       opts=pulumi.ResourceOptions(provider=other))
            k8s.apiextensions.CustomResource(
                "staging-widget", api_version=f"s{group}/v1", kind="Widget", metadata={"name": "w1", "namespace": "default"}, spec={"size": 1},
                opts=pulumi.ResourceOptions(provider=other, depends_on=[other_crd]))
            pulumi.export("widget", widget.metadata.apply(lambda m: m["name"]))  # a CustomResource's metadata is a plain dict
            pulumi.export("widgetsHook", widgets_hook.metadata.name)
            pulumi.export("app", app.metadata.name)
            pulumi.export("pullsApp", pulls_app.metadata.name)

        s = harness.stack(env, cluster, "autogate-shapes-py", "shapes", program)
        done = threading.Event()
        served: dict = {}

        def when_labelled(hook: harness.FakeWebhook, resource: str, lbl: str) -> None:
            while not done.is_set():
                status, body = cluster.request("GET", f"/apis/admissionregistration.k8s.io/v1/{resource}?labelSelector=corpus%3D{lbl}")
                if status == 200 and body["items"]:
                    break
                done.wait(0.1)
            if done.wait(3):
                return
            hook.send("start")
            served[lbl] = time.time()

        threads = [threading.Thread(target=when_labelled, args=a, daemon=True) for a in
                   ((widgets, "validatingwebhookconfigurations", label), (injector, "mutatingwebhookconfigurations", f"{label}-pods"))]
        for t in threads:
            t.start()
        issuer = harness.Player(cluster, "issue", ns_name, "web", "web-tls", "3s")
        team_issuer = harness.Player(cluster, "issue", ns_name, "team", "team-tls", "3s")
        out: list[str] = []
        try:
            res = s.up(on_output=out.append)
        finally:
            done.set()
            issuer.stop()
            team_issuer.stop()
            for t in threads:
                t.join()
        issued_lines = issuer.done()
        assert label in served and f"{label}-pods" in served, f"a webhook never served: {served}"
        widget = res.outputs["widget"].value
        assert widget.startswith("widget-") and len(widget) == len("widget-") + 8, f"the Widget is autonamed by pulumi-kubernetes: {widget}"
        assert_created_after(cluster, f"/apis/{group}/v1/namespaces/{ns_name}/widgets/{widget}", served[label], "its webhook served")
        app_path = f"/apis/apps/v1/namespaces/{ns_name}/deployments/{res.outputs['app'].value}"
        assert_created_after(cluster, app_path, served[f"{label}-pods"], "the injector served")
        status, secret = cluster.request("GET", f"/api/v1/namespaces/{ns_name}/secrets/web-tls")
        assert status == 200, f"the Certificate was never issued ({issued_lines})"
        assert cluster.created_at(app_path) >= cluster.created_at(f"/api/v1/namespaces/{ns_name}/secrets/web-tls"), \
            "the app was created before the Secret it mounts"
        pulls_path = f"/apis/apps/v1/namespaces/{ns_name}/deployments/{res.outputs['pullsApp'].value}"
        assert cluster.created_at(pulls_path) >= cluster.created_at(f"/api/v1/namespaces/{ns_name}/secrets/web-tls"), \
            "the Deployment running as the autonamed ServiceAccount was created before the Secret that ServiceAccount pulls with"

        state = s.export_stack().deployment["resources"]
        gates = gates_of(s)
        names = sorted(f"{g['type'].split(':')[-1]} {name_of(g['urn'])}" for g in gates)
        print(f"shapes gates (Python): {names}")
        exists = next(g for g in gates if name_of(g["urn"]) == "auto-exists-widgets-hook")
        assert exists["inputs"]["name"] == res.outputs["widgetsHook"].value, "the exists gate must wait for the configuration's real (autonamed) name"
        assert f"CertificateReady auto-certificate-{ns_name}-web" in names, "the Certificate with an Output namespace gates the Deployment that mounts its Secret"
        assert f"CrdReady auto-crd-widgets.s{group}-staging" in names, "the other cluster's custom resource waits on its CRD there"
        # The ConfigGroup v1's Widget waits for its own webhook's admission, named after the group's
        # configuration: its children settle once all arrived, whatever order a loaded machine
        # registers them in (the unit test holds them apart).
        assert any(n.startswith(f"AdmissionReady auto-admission-widgets.v1{group}-default-") for n in names), \
            f"the ConfigGroup v1's Widget waits for its own webhook's configuration: {names}"
        # Its children settled once all arrived (counted as the SDK constructed them), not at the plan timeout.
        assert "decided without every sibling" not in "".join(out), "".join(out)
        assert f"CertificateReady auto-certificate-{ns_name}-team" in names, "the user component's Deployment waits for its Certificate"
        crd_gate = next(g for g in gates if name_of(g["urn"]) == f"auto-crd-widgets.s{group}-staging")
        assert "::autogate-staging::" in crd_gate["provider"], "its CrdReady runs through a readiness provider configured as the kubernetes provider"
        # No cycle: the server written above the injector that depends on it got no gate.
        # (Its recorded dependencies hold every gate auto_gate added to it, as the Widget's below do.)
        server = next(r for r in state if r["type"] == "kubernetes:apps/v1:Deployment" and name_of(r["urn"]) == "injector-server")
        assert not [d for d in server.get("dependencies", []) if "::readiness:" in d], f"the injector's server was gated: {server.get('dependencies')}"
        # The state records the gates auto_gate added: destroy deletes the Widget before its gate.
        widget_state = next(r for r in state if r["type"] == f"kubernetes:{group}/v1:Widget" and name_of(r["urn"]) == "widget")
        assert any(name_of(d).startswith(f"auto-admission-widgets.{group}-") for d in widget_state.get("dependencies", [])), \
            f"the Widget's recorded dependencies {widget_state.get('dependencies')} lack its gate"
        providers = [name_of(r["urn"]) for r in state if r["type"] == "pulumi:providers:readiness"]
        assert len([p for p in providers if not p.startswith("autogate-")]) == 1, f"one readiness provider for the stack's own cluster: {providers}"
        harness.remove(s)  # both webhooks serve
    finally:
        widgets.stop()
        injector.stop()
        staging.stop()
