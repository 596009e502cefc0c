"""The Python examples (examples/*/python) run as they are, as tests/nodejs/src/examples.test.ts runs
the TypeScript ones: each example's __main__.py defines its program as the function `program` (Pulumi
runs the file as __main__, which calls it), imported here and run as an Automation API inline
program against the local control plane with the real pulumi-kubernetes plugin (v4.32.0,
pulumi_kubernetes 4.32.0). Their charts are the rendered real charts as local charts (config
`chartPath`), their webhooks the test's servers on 127.0.0.1 serving late; what no process runs here
is played (cert-manager issuing, External Secrets syncing: internal/fakes/cmd/player; CI pushing an
image). Each example is brought up once and destroyed."""

import base64
import importlib.util
import json
import sys
import threading
import time
from typing import Callable

import pytest
from pulumi import automation as auto

import harness

EXAMPLES = harness.REPO_ROOT / "examples"


def example(name: str) -> Callable[[], None]:
    """The program of examples/<name>/python (its __main__.py, imported under another name: the
    module does not run its program itself then)."""
    path = EXAMPLES / name / "python" / "__main__.py"
    spec = importlib.util.spec_from_file_location(f"readiness_example_{name.replace('-', '_')}", path)
    module = importlib.util.module_from_spec(spec)
    dont_write = sys.dont_write_bytecode
    sys.dont_write_bytecode = True  # no __pycache__ left in the examples' folders
    try:
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = dont_write
    return module.program


def namespace(cluster: harness.Cluster, name: str) -> None:
    status, body = cluster.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    assert status in (201, 409), f"creating namespace {name}: {body}"


def pod_containers(cluster: harness.Cluster, ns: str) -> list[str]:
    """Dry-runs a Pod in ns and returns its containers' names as the API server would store it (after
    mutating webhooks): what a Pod created now would run."""
    status, body = cluster.request("POST", f"/api/v1/namespaces/{ns}/pods?dryRun=All", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "uninjected-", "namespace": ns},
        "spec": {"containers": [{"name": "web", "image": "registry.local/web:1"}]},
    })
    assert status == 201, f"dry-run of a Pod in {ns}: {body}"
    return [c["name"] for c in body["spec"]["containers"]]


def in_thread(fn: Callable[[], object]) -> Callable[[], object]:
    """Runs fn in a thread; the returned function joins it and returns fn's result (or raises its error)."""
    out: dict = {}

    def run() -> None:
        try:
            out["result"] = fn()
        except BaseException as e:  # noqa: BLE001 (re-raised by the join)
            out["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()

    def join() -> object:
        t.join()
        if "error" in out:
            raise out["error"]
        return out.get("result")
    return join


def remove(s: auto.Stack) -> None:
    s.destroy()
    s.workspace.remove_stack("dev")


@pytest.mark.timeout(600)
def test_example_cert_manager_runs(cluster, env):
    webhook = harness.FakeWebhook()
    try:
        s = harness.stack(env, cluster, "readiness-example-cert-manager-py", "dev", example("cert-manager"))
        s.set_config("chartPath", auto.ConfigValue(value=harness.local_chart("cert-manager", webhook)))
        done = threading.Event()
        serving = harness.serve_when_available(cluster, webhook, "cert-manager", "cert-manager-webhook", 3, done)
        issuer = harness.Player(cluster, "issue", "default", "ai-ops-agent", "ai-ops-agent-tls", "2s")
        try:
            res = s.up()
        finally:
            done.set()
            serving["thread"].join()
            issuer.stop()
        assert issuer.done()[-1:] == ["done"]
        assert res.outputs.get("certificateExpires") and res.outputs["certificateExpires"].value, \
            "certificateExpires is the issued certificate's notAfter"
        remove(s)
    finally:
        webhook.stop()


@pytest.mark.timeout(600)
def test_example_external_secrets_runs(cluster, env):
    namespaces = ["default", "hello-world", "nodejs-demo", "storage-validator"]
    for ns in namespaces[1:]:
        namespace(cluster, ns)
    webhook = harness.FakeWebhook()
    try:
        s = harness.stack(env, cluster, "readiness-example-external-secrets-py", "dev", example("external-secrets"))
        s.set_config("chartPath", auto.ConfigValue(value=harness.local_chart("external-secrets", webhook)))
        done = threading.Event()
        serving = harness.serve_when_available(cluster, webhook, "external-secrets", "external-secrets-webhook", 3, done)
        eso = harness.Player(cluster, "sync-externalsecrets", "ghcr-pull-secret", "1s", *namespaces)
        try:
            s.up()
        finally:
            done.set()
            serving["thread"].join()
            eso.stop()
        assert eso.done()[-1:] == ["done"]
        remove(s)  # the chart's webhook intercepts deletes too: it still serves
    finally:
        webhook.stop()


@pytest.mark.timeout(600)
def test_example_injector_runs(cluster, env):
    # Linkerd's charts are not among the rendered charts: chartPath holds charts shaped as Linkerd's
    # proxy injector (internal/charts.LinkerdShaped), its webhook (failurePolicy Ignore) sent to this
    # server, which injects a linkerd-proxy container. It serves 3 s after Linkerd's release is
    # deployed, as the injector pod does; at that moment only the gate holds `web` back, and a Pod
    # created then would run without a proxy, silently. It runs before the tests that create the
    # namespace apps themselves (the example creates it).
    webhook = harness.FakeWebhook()
    try:
        assert webhook.send("mode inject:linkerd-proxy") == "ok"
        s = harness.stack(env, cluster, "readiness-example-injector-py", "dev", example("injector"))
        s.set_config("chartPath", auto.ConfigValue(value=harness.local_chart("linkerd", webhook)))
        # Placeholders: the charts shaped as Linkerd's do not read them.
        for key in ["trustAnchorPEM", "issuerCrtPEM", "issuerKeyPEM"]:
            s.set_config(key, auto.ConfigValue(value=f"test {key}", secret=key == "issuerKeyPEM"))
        done = threading.Event()

        def serve() -> str:
            while not done.is_set():
                _, r = cluster.request("GET", "/api/v1/namespaces/linkerd/secrets?labelSelector=owner%3Dhelm%2Cstatus%3Ddeployed")
                if any((i["metadata"].get("labels") or {}).get("name", "").startswith("linkerd-control-plane")
                       for i in (r or {}).get("items") or []):
                    break
                done.wait(0.2)
            if done.is_set():
                return "up ended before Linkerd's release was deployed"
            time.sleep(3)
            # Whatever the checks find, the injector then serves, so that `up` ends and the test reports.
            found = "served"
            try:
                status, _ = cluster.request("GET", "/apis/apps/v1/namespaces/apps/deployments/web")
                if status != 404:
                    found = f"web exists ({status}) before the injector serves: the gate did not hold it"
                elif "linkerd-proxy" in pod_containers(cluster, "apps"):
                    found = "a Pod was injected before the injector served"
            finally:
                webhook.send("start")
            return found

        serving = in_thread(serve)
        try:
            res = s.up()
        finally:
            done.set()
        assert serving() == "served"
        assert res.outputs["injectorFailurePolicy"].value == "Ignore"
        _, pods = cluster.request("GET", "/api/v1/namespaces/apps/pods?labelSelector=app%3Dweb")
        assert len(pods["items"]) > 0, "web has no Pods"
        for p in pods["items"]:
            assert any(c["name"] == "linkerd-proxy" for c in p["spec"]["containers"]), \
                f"Pod {p['metadata']['name']} runs without linkerd-proxy: the gate let web through before the injector served"
        remove(s)
    finally:
        # After a failure the stack stays: its Ignore webhook, left pointing at a server gone,
        # would hold every later gate on Pods (they wait for such a webhook to answer).
        cluster.request("DELETE", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/linkerd-proxy-injector-webhook-config")
        webhook.stop()


@pytest.mark.timeout(600)
def test_example_apisix_runs(cluster, env):
    # The `apisix` umbrella chart is not among the rendered charts: chartPath is the rendered
    # apisix-ingress-controller chart (its CRDs, Deployment, webhook configuration with every
    # webhook Fail, sent to this server) beside a gateway shaped as the umbrella's
    # (internal/charts.APISIXShaped). The server plays the controller's webhook: it serves 3 s
    # after the release is deployed; at that moment only the gates hold the routes and the
    # GatewayProxy back, and creating the GatewayProxy then fails the report's way.
    webhook = harness.FakeWebhook()
    routes = "/apis/apisix.apache.org/v2/namespaces/apisix/apisixroutes"
    proxies = "/apis/apisix.apache.org/v1alpha1/namespaces/apisix/gatewayproxies"
    paths = [f"{routes}/{a}" for a in ["hello-world", "nodejs-demo", "grafana"]] + [f"{proxies}/apisix-config"]
    try:
        s = harness.stack(env, cluster, "readiness-example-apisix-py", "dev", example("apisix"))
        s.set_config("chartPath", auto.ConfigValue(value=harness.local_chart("apisix", webhook)))
        done = threading.Event()

        def serve() -> str:
            while not done.is_set():
                _, r = cluster.request("GET", "/api/v1/namespaces/apisix/secrets?labelSelector=owner%3Dhelm%2Cname%3Dapisix%2Cstatus%3Ddeployed")
                if (r or {}).get("items"):
                    break
                done.wait(0.2)
            if done.is_set():
                return "up ended before the apisix release was deployed"
            time.sleep(3)
            # Whatever the checks find, the webhook then serves, so that `up` ends and the test reports.
            found = []
            try:
                for path in paths:
                    status, _ = cluster.request("GET", path)
                    if status != 404:
                        found.append(f"{path} exists ({status}) before the webhook serves: the gate did not hold it")
                status, body = cluster.request("POST", f"{proxies}?dryRun=All", {
                    "apiVersion": "apisix.apache.org/v1alpha1", "kind": "GatewayProxy", "metadata": {"name": "apisix-config", "namespace": "apisix"},
                    "spec": {"provider": {"type": "ControlPlane", "controlPlane": {"endpoints": ["http://apisix-admin.apisix.svc:9180"],
                                                                                  "auth": {"type": "AdminKey", "adminKey": {"value": "x"}}}}},
                })
                msg = (body or {}).get("message", "")
                if 'failed calling webhook "vgatewayproxy-v1alpha1.kb.io"' not in msg or "connection refused" not in msg:
                    found.append(f"creating the GatewayProxy while the webhook is down: {status} {msg}, not the report's error")
            finally:
                webhook.send("start")
            return "; ".join(found) or "served"

        serving = in_thread(serve)
        try:
            s.up()
        finally:
            done.set()
        assert serving() == "served"
        assert webhook.calls() > 0, "up succeeded without the ingress controller's webhooks ever answering"
        for path in paths:
            assert cluster.request("GET", path)[0] == 200, f"{path} was not created"
        remove(s)
    finally:
        webhook.stop()


@pytest.mark.timeout(600)
def test_example_admission_runs(cluster, env):
    for ns in ["hello-world", "nodejs-demo", "storage-validator", "apps"]:
        namespace(cluster, ns)
    # The sidecar injector the example's second gate proves by its mutation: failurePolicy Ignore,
    # Pods in apps. It plays an istiod that comes up late: it serves 3 s after the gate began (the
    # engine's event for it), once a dry-run showed that a Pod created then would run without the
    # sidecar, silently.
    injector = harness.FakeWebhook()
    webhook = harness.FakeWebhook()
    mwc = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
    try:
        assert injector.send("mode inject:istio-proxy") == "ok"
        status, body = cluster.request("POST", mwc, {
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration", "metadata": {"name": "examples-istio-injector"},
            "webhooks": [{"name": "sidecar-injector.istio.io", "admissionReviewVersions": ["v1"], "sideEffects": "None", "failurePolicy": "Ignore",
                          "clientConfig": {"url": injector.url, "caBundle": injector.ca_bundle},
                          "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "apps"}},
                          "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]}],
        })
        assert status == 201, f"registering the injector: {body}"
        s = harness.stack(env, cluster, "readiness-example-admission-py", "dev", example("admission"))
        s.set_config("chartPath", auto.ConfigValue(value=harness.local_chart("external-secrets", webhook)))
        done = threading.Event()
        serving = harness.serve_when_available(cluster, webhook, "external-secrets", "external-secrets-webhook", 8, done)
        order: list[str] = []
        injector_serving: list[Callable[[], object]] = []
        gate = "::web-injected"

        def serve_injector() -> None:
            time.sleep(3)
            try:
                assert pod_containers(cluster, "apps") == ["web"], "a Pod was injected before the injector served"
            finally:
                injector.send("start")  # so that `up` ends whatever the check found
                order.append("injector serves")

        def on_event(e: auto.EngineEvent) -> None:
            if e.resource_pre_event and e.resource_pre_event.metadata.urn.endswith(gate) and not injector_serving:
                order.append("gate began")
                injector_serving.append(in_thread(serve_injector))
            if e.res_outputs_event and e.res_outputs_event.metadata.urn.endswith(gate):
                order.append("gate passed")

        try:
            res = s.up(on_event=on_event)
        finally:
            done.set()
            serving["thread"].join()
        for join in injector_serving:
            join()
        assert order == ["gate began", "injector serves", "gate passed"], "the gate did not wait for the injector"
        assert res.outputs["injected"].value == ["Pod/apps/web"]
        assert res.outputs.get("webhooksThatWereDown") and len(res.outputs["webhooksThatWereDown"].value) > 0, \
            "the gate never met External Secrets' webhook down, so it proved nothing here"
        remove(s)
    finally:
        cluster.request("DELETE", f"{mwc}/examples-istio-injector")
        webhook.stop()
        injector.stop()


@pytest.mark.timeout(300)
def test_example_image_runs(cluster, env):
    registry = harness.start_registry("-user", "ci:examples-py-pass")
    try:
        namespace(cluster, "apps")
        dockerconfig = {"auths": {registry.host: {"auth": base64.b64encode(b"ci:examples-py-pass").decode()}}}
        status, body = cluster.request("POST", "/api/v1/namespaces/apps/secrets", {
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "ghcr-pull-secret"}, "type": "kubernetes.io/dockerconfigjson",
            "data": {".dockerconfigjson": base64.b64encode(json.dumps(dockerconfig).encode()).decode()},
        })
        assert status == 201, f"creating the pull Secret: {body}"
        s = harness.stack(env, cluster, "readiness-example-image-py", "dev", example("image"))
        s.set_config("imageTag", auto.ConfigValue(value="3f2a9c1"))
        s.set_config("imageRepository", auto.ConfigValue(value=f"{registry.host}/acme/api"))

        # CI pushes the image while `pulumi up` runs.
        def push() -> str:
            time.sleep(3)
            return registry.push("index acme/api:3f2a9c1 linux/amd64 linux/arm64")

        pushed = in_thread(push)
        res = s.up()
        digest = pushed()
        assert res.outputs["digest"].value == digest
        image = cluster.get("/apis/apps/v1/namespaces/apps/deployments/api")["spec"]["template"]["spec"]["containers"][0]["image"]
        assert image.startswith(f"{registry.host}/acme/api@sha256:"), f"the Deployment runs {image}, not the pinned image"
        remove(s)
    finally:
        registry.stop()
