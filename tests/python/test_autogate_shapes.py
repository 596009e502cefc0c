"""autoGate's corpus (tests/corpus/autogate.json, issue 47) run as Python programs: each shape becomes
a program written as Python users write it (typed classes with snake_case arguments for Kubernetes'
own kinds, CustomResource for the others, Outputs for references, a ComponentResource, an explicit
Provider, a yaml v1 ConfigGroup), previewed on the real plugin and a real API server. The gates
auto_gate registers must be exactly the shape's: the Go and TypeScript drivers check the same."""

import json
import re
import time
from functools import reduce
from typing import Any, Dict

import pulumi
import pulumi_kubernetes as k8s
import pytest
import yaml
from pulumi import automation as auto

import harness
import pulumi_readiness as readiness

CORPUS = json.loads((harness.REPO_ROOT / "tests" / "corpus" / "autogate.json").read_text())


@pytest.fixture(scope="module")
def webhooks():
    up, down = harness.FakeWebhook(), harness.FakeWebhook()  # down never serves: its port refuses
    up.set_serving(True)
    yield up, down
    up.stop()
    down.stop()


@pytest.fixture(scope="module")
def corpus_cluster(cluster, webhooks):
    for o in CORPUS["setup"]:
        _apply(cluster, _expand(o, webhooks, {}))
    return cluster


_CHARTS: Dict[str, str] = {}
_OTHER: list = []  # a second cluster, while a shape needs it ("$other-cluster")


def _expand(v: Any, webhooks, handles: Dict[str, Any]) -> Any:
    """The corpus' placeholders: {"$crd": [group, kind, plural]}, "$webhook-up" and "$webhook-down"
    (a clientConfig), {"$ref": name, "path": "a.b"} (an Output of the program's resource name),
    "$chart:NAME" (a local chart of fixture NAME, its webhooks the down server's)."""
    up, down = webhooks
    if isinstance(v, str) and v.startswith("$chart:"):
        name = v[len("$chart:"):]
        if name not in _CHARTS:
            _CHARTS[name] = harness.local_chart(name, down)
        return _CHARTS[name]
    if v == "$webhook-up":
        return {"url": up.url, "caBundle": up.ca_bundle}
    if v == "$webhook-down":
        return {"url": down.url, "caBundle": down.ca_bundle}
    if isinstance(v, list):
        return [_expand(e, webhooks, handles) for e in v]
    if isinstance(v, dict):
        if "$crd" in v:
            return harness.crd(*v["$crd"])
        if "$ref" in v:
            head, *rest = v["path"].split(".")
            first = getattr(handles[v["$ref"]], head)
            return reduce(lambda o, k: o.apply(lambda x, k=k: _get(x, k)), rest, first)
        return {k: _expand(e, webhooks, handles) for k, e in v.items()}
    return v


def _get(x: Any, k: str) -> Any:
    if isinstance(x, dict):
        return x.get(k)
    return getattr(x, k, None)


def _path(o: Dict[str, Any]) -> str:
    group, _, version = o["apiVersion"].rpartition("/")
    plural = "customresourcedefinitions" if o["kind"] == "CustomResourceDefinition" else o["kind"].lower() + "s"
    return (f"/apis/{group}/{version}" if group else f"/api/{version}") + "/" + plural


def _apply(c: harness.Cluster, o: Dict[str, Any]) -> None:
    """Creates an object as another stack would have (a CRD: until it is served)."""
    status, body = c.request("POST", _path(o), o)
    assert status in (201, 409), f"creating {o['kind']} {o['metadata']['name']}: {status} {body}"
    if o["kind"] == "CustomResourceDefinition":
        # Established: the API server serves its kind (a 404 of the kind's own path is not JSON).
        def established() -> bool:
            _, crd = c.request("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{o['metadata']['name']}")
            return any(x["type"] == "Established" and x["status"] == "True" for x in ((crd or {}).get("status") or {}).get("conditions") or [])
        deadline = time.time() + 30
        while not established():
            assert time.time() < deadline, f"{o['metadata']['name']} is not served"
            time.sleep(0.1)


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _typed_class(api_version: str, kind: str) -> Any:
    """Kubernetes' own groups have typed classes (k8s.apps.v1.Deployment); the others are custom resources."""
    group, _, version = api_version.rpartition("/")
    if group and not group.endswith(".k8s.io") and group not in ("apps", "batch", "policy", "autoscaling"):
        return None
    module = getattr(k8s, "core" if not group else group.split(".")[0], None)
    return getattr(getattr(module, version, None), kind, None)


class Component(pulumi.ComponentResource):
    def __init__(self, type_: str, name: str) -> None:
        super().__init__(type_, name, None, None)
        self.register_outputs({})


def _program(shape: Dict[str, Any], cluster: harness.Cluster, webhooks):
    def program() -> None:
        readiness.auto_gate(timeout="2m")
        handles: Dict[str, Any] = {}
        for item in shape["program"]:
            opts = pulumi.ResourceOptions(
                depends_on=[handles[n] for n in item.get("dependsOn", [])] or None,
                provider=handles.get(item["provider"]) if "provider" in item else None,
                parent=handles.get(item["parent"]) if "parent" in item else None)
            name = item["name"]
            if "kubernetesProvider" in item:
                args = {"kubeconfig": cluster.kubeconfig, **{_snake(k): v for k, v in item["kubernetesProvider"].items()}}
                if args["kubeconfig"] == "$other-cluster":
                    args["kubeconfig"] = _OTHER[0].kubeconfig
                handles[name] = k8s.Provider(name, **args)
            elif "component" in item:
                handles[name] = Component(item["component"], name)
            elif "chartV4" in item:
                c = item["chartV4"]
                handles[name] = k8s.helm.v4.Chart(name, chart=_expand(c["chart"], webhooks, handles), namespace=c["namespace"], opts=opts)
            elif "release" in item:
                c = item["release"]
                handles[name] = k8s.helm.v3.Release(name, chart=_expand(c["chart"], webhooks, handles), namespace=c["namespace"], opts=opts)
            elif "resourceReady" in item:
                handles[name] = readiness.ResourceReady(name, opts=opts, **{_snake(k): v for k, v in item["resourceReady"].items()})
            elif "configGroupV1" in item:
                handles[name] = k8s.yaml.ConfigGroup(name, yaml=[yaml.safe_dump(o) for o in _expand(item["configGroupV1"], webhooks, handles)], opts=opts)
            else:
                obj = _expand(item["object"], webhooks, handles)
                cls = _typed_class(obj["apiVersion"], obj["kind"])
                if cls:
                    args = {_snake(k): v for k, v in obj.items() if k not in ("apiVersion", "kind")}
                    handles[name] = cls(name, **args, opts=opts)
                else:
                    rest = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
                    handles[name] = k8s.apiextensions.CustomResource(
                        name, api_version=obj["apiVersion"], kind=obj["kind"], metadata=obj.get("metadata"), opts=opts, **rest)
    return program


@pytest.mark.parametrize("shape", CORPUS["shapes"], ids=[s["name"] for s in CORPUS["shapes"]])
def test_corpus_shape(shape, corpus_cluster, env, webhooks):
    objects = [_expand(o, webhooks, {}) for o in shape.get("cluster", [])]
    for o in objects:
        _apply(corpus_cluster, o)
    if shape.get("otherCluster"):
        _OTHER.append(harness.start_cluster())
        for o in shape["otherCluster"]:
            _apply(_OTHER[0], _expand(o, webhooks, {}))
    try:
        s = harness.stack(env, corpus_cluster, "corpus-py", shape["name"], _program(shape, corpus_cluster, webhooks))
        for k, v in shape.get("config", {}).items():
            s.set_config(k, auto.ConfigValue(value=v))
        gates = set()
        out = []

        def on_event(e) -> None:
            m = e.resource_pre_event.metadata if e.resource_pre_event else None
            if m and m.type.startswith("readiness:index:"):
                gates.add(f"{m.type.split(':')[-1]} {m.urn.split('::')[-1]}")

        failed = None
        try:
            s.preview(on_output=out.append, on_event=on_event)
        except auto.CommandError as e:
            failed = e
        text = "\n".join(out)
        if "previewError" in shape:
            assert failed and shape["previewError"] in text, f"{shape['name']}: the preview did not fail with {shape['previewError']}\n{text}"
        else:
            assert not failed, f"{shape['name']}: {failed}\n{text}"
        assert sorted(gates) == sorted(shape["gates"]), f"{shape['name']}: {shape['why']}\n{text}"
        for w in shape.get("warnings", []):
            assert w in text, f"{shape['name']}: no warning {w!r}\n{text}"
        s.workspace.remove_stack(shape["name"])
    finally:
        for o in reversed(objects):
            corpus_cluster.request("DELETE", f"{_path(o)}/{o['metadata']['name']}")
        while _OTHER:
            _OTHER.pop().stop()
