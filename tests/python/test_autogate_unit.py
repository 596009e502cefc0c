# auto_gate's transport in the Python SDK, against Pulumi's mock monitor (no engine, no cluster):
# every decision is the provider's (readiness:index:autoGateDecide, its rules tested in
# provider/pkg/planner and provider/pkg/autogate); these tests check what the SDK sends (program
# order, each place and each cluster's facts once, the registration's facts) and what it does with
# an answer (warnings, one gate per key at the top level, the readiness provider it names, argsFrom,
# AdmissionReady's objects secret), and that a failed or silent call fails the registration,
# naming the object. Then Python's own: plain() of props, the URN helpers and the executor headroom.
import asyncio
import functools
import json
import signal
import sys
from typing import Any, Callable, Dict, List, Optional

import pytest

import pulumi
from pulumi.output import Unknown
from pulumi.resource import DependencyProviderResource, DependencyResource
from pulumi.runtime import rpc
from pulumi.runtime.mocks import MockMonitor

from pulumi_readiness import AutoGateError, auto_gate, child_urn, is_component_child, plain, plain_now, type_of_urn

auto_gate_module = sys.modules["pulumi_readiness.auto_gate"]  # (the package's auto_gate is the function)

PREFIX = "urn:pulumi:dev::proj::"
STACK_URN = f"{PREFIX}pulumi:pulumi:Stack::proj-dev"
CM_TYPE = "kubernetes:core/v1:ConfigMap"
CRD_TYPE = "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"
DECIDE = "readiness:index:autoGateDecide"


def async_test(fn):
    @functools.wraps(fn)
    def run(*args, **kwargs):
        return asyncio.run(asyncio.wait_for(fn(*args, **kwargs), 20))

    return run


class Mocks(pulumi.runtime.Mocks):
    """Records registrations and decide calls; answer(registration) is the provider's answer."""

    def __init__(self, answer: Callable[[Dict[str, Any]], Dict[str, Any]]) -> None:
        self.answer = answer
        self.registered: Dict[str, Any] = {}
        self.calls: List[Dict[str, Any]] = []

    def new_resource(self, args):
        self.registered[args.name] = args
        state = dict(args.inputs)
        if args.typ == CRD_TYPE:
            state["metadata"] = {**state.get("metadata", {}), "name": "widgets.example.com"}  # autonamed: in the outputs only
        return f"{args.name}_id", state

    def call(self, args):
        if args.token == "kubernetes:yaml:decode":  # a ConfigGroup v1's parse
            import yaml
            return {"result": list(yaml.safe_load_all(args.args["text"]))}
        if args.token != DECIDE:
            return {}
        self.calls.append(json.loads(json.dumps(args.args)))
        return {"gates": [], "warnings": [], "provider": "", **self.answer(args.args["registration"])}


class Monitor(MockMonitor):
    """The engine's URNs (the root stack is no parent in them), and each registration's dependencies."""

    def __init__(self, mocks: Mocks) -> None:
        super().__init__(mocks)
        self.dependencies: Dict[str, List[str]] = {}

    def make_urn(self, parent: str, type_: str, name: str) -> str:
        if parent.split("::")[2:3] == ["pulumi:pulumi:Stack"]:
            parent = ""
        return super().make_urn(parent, type_, name)

    def RegisterResource(self, request):
        self.dependencies[request.name] = list(request.dependencies)
        return super().RegisterResource(request)


LAST: List[Mocks] = []  # the last program's mocks (run_program raises when an RPC failed)


def only_the_retry_hook(r: Any) -> bool:
    """A transform's result that adds no gate, only the one error hook (docs/retry.md)."""
    if r is None:
        return False
    hooks = r.opts.hooks.on_error if r.opts.hooks else []
    return not (r.opts.depends_on or []) and [h.name for h in hooks] == ["readiness-retry"]


def run_program(answer: Callable[[Dict[str, Any]], Dict[str, Any]], build: Callable[[], Any],
                engine: Callable[[Mocks, "Transform"], Any], preview: bool = False, config: Optional[Dict[str, str]] = None) -> Mocks:
    """Runs build() as a program with auto_gate, then engine(mocks, transform) once every resource
    it made registered: the mock monitor never calls the resource transform, the test does, as the engine would."""
    def too_long(*_):
        raise TimeoutError("the program did not finish within 60 s")

    signal.signal(signal.SIGALRM, too_long)
    signal.alarm(60)
    asyncio.set_event_loop(asyncio.new_event_loop())
    mocks = Mocks(answer)
    LAST[:] = [mocks]
    monitor = Monitor(mocks)
    pulumi.runtime.set_mocks(mocks, project="proj", stack="dev", preview=preview, monitor=monitor)
    pulumi.runtime.set_all_config(config or {})

    @pulumi.runtime.test
    def program():
        resources = build()
        return pulumi.Output.all(*[r.urn for r in resources]).apply(
            lambda _: asyncio.ensure_future(engine(mocks, Transform(monitor, mocks))))

    try:
        program()
    finally:
        signal.alarm(0)
        auto_gate_module._PLAN_TIMEOUT = 120.0
        mocks.monitor = monitor
    return mocks


class Transform:
    """The engine's call of the resource transform for a registered resource, with its props as registered."""

    def __init__(self, monitor: Monitor, mocks: Mocks) -> None:
        [self.transform] = monitor.get_registered_transforms()
        self.mocks, self.monitor = mocks, monitor

    async def __call__(self, name: str, parent: str = STACK_URN, depends_on: List[str] = (), provider: Optional[str] = None):
        r = self.mocks.registered[name]
        opts = pulumi.ResourceOptions(parent=DependencyResource(parent), depends_on=[DependencyResource(u) for u in depends_on],
                                      provider=DependencyProviderResource(provider) if provider else None)
        return await self.transform(pulumi.ResourceTransformArgs(custom=r.custom, type_=r.typ, name=name, props=r.inputs, opts=opts))


async def dep_urns(r: Optional[pulumi.ResourceTransformResult]) -> List[str]:
    return [] if r is None else [await d.urn.future() for d in r.opts.depends_on]


def widget_crd(k8s):
    return k8s.apiextensions.v1.CustomResourceDefinition(
        "widgets", spec=k8s.apiextensions.v1.CustomResourceDefinitionSpecArgs(
            group="example.com", scope="Namespaced",
            names=k8s.apiextensions.v1.CustomResourceDefinitionNamesArgs(kind="Widget", plural="widgets", list_kind="WidgetList"),
            versions=[{"name": "v1", "served": True, "storage": True, "schema": {"open_apiv3_schema": {"type": "object"}}}]))


CRD_URN = f"{PREFIX}{CRD_TYPE}::widgets"
WIDGET_TYPE = "kubernetes:example.com/v1:Widget"


def crd_gates(reg: Dict[str, Any]) -> Dict[str, Any]:
    """A Widget waits for the CRD (its name from the CRD's outputs), then is dry-run (AdmissionReady, one per namespace)."""
    if reg["type"] != WIDGET_TYPE:
        return {}
    ns = reg["object"]["metadata"]["namespace"]
    return {"warnings": [f"about {reg['name']}"], "gates": [
        {"key": "crd", "name": "auto-crd-widgets", "type": "readiness:index:CrdReady", "args": {}, "after": [CRD_URN],
         "argsFrom": [{"arg": "name", "installer": CRD_URN, "output": "metadata.name"}], "reason": "waits for the CRD"},
        {"key": f"admission-{ns}", "name": f"auto-admission-{ns}", "type": "readiness:index:AdmissionReady",
         "args": {"objects": [reg["object"]]}, "after": [CRD_URN], "afterGates": ["crd"]}]}


def test_facts_program_order_and_wiring():
    """Each place in program order and the default cluster's facts go once, with the first call; each
    registration carries its own facts; the answer's gates are made once per key and wired in."""
    import pulumi_kubernetes as k8s
    seen: Dict[str, Any] = {}

    def build():
        auto_gate(settle=0.05, exclude=lambda _t, name: name == "skipped")
        crd = widget_crd(k8s)
        w = k8s.apiextensions.CustomResource("w", api_version="example.com/v1", kind="Widget",
                                             metadata={"name": "w", "namespace": "default"}, spec={"sizeOf": 1})
        w2 = k8s.apiextensions.CustomResource("w2", api_version="example.com/v1", kind="Widget",
                                              metadata={"name": "w2", "namespace": "default"})
        app = pulumi.ComponentResource("my:index:App", "app")
        inner = k8s.core.v1.ConfigMap("inner", metadata={"name": "inner"}, data={"some_key": "v"}, opts=pulumi.ResourceOptions(parent=app))
        skipped = k8s.core.v1.ConfigMap("skipped")
        return [crd, w, w2, inner, skipped]

    async def engine(mocks: Mocks, transform: Transform):
        # Registered in another order than written.
        seen["crd"] = await transform("widgets")
        seen["w2"] = await transform("w2", depends_on=[CRD_URN])
        seen["w"] = await transform("w")
        seen["inner"] = await transform("inner", parent=f"{PREFIX}my:index:App::app")
        seen["skipped"] = await transform("skipped")
        seen["w_deps"] = await dep_urns(seen["w"])
        seen["w2_deps"] = await dep_urns(seen["w2"])
        n = len(mocks.calls)
        gate = pulumi.ResourceTransformArgs(custom=True, type_="readiness:index:CrdReady", name="x", props={}, opts=pulumi.ResourceOptions())
        seen["not_kubernetes"] = await transform.transform(gate)
        seen["calls_after"] = len(mocks.calls) - n

    mocks = run_program(crd_gates, build, engine, config={"kubernetes:namespace": "apps", "kubernetes:context": "kind"})
    calls = mocks.calls
    assert [c["registration"]["name"] for c in calls] == ["widgets", "w2", "w", "inner", "skipped"]
    assert seen["not_kubernetes"] is None and seen["calls_after"] == 0, "only kubernetes registrations are decided"
    assert len({c["session"] for c in calls}) == 1 and calls[0]["session"].startswith("dev-")
    assert all(c["options"] == {"settle": "50000us", "retried": True} for c in calls), "the hook is wired: retried"
    # Each place once, in program order (the App component itself is no place; its ConfigMap is).
    places = [e for c in calls for e in c.get("entries") or []]
    assert places == [{"order": 0, "type": CRD_TYPE, "name": "widgets"}, {"order": 1, "type": WIDGET_TYPE, "name": "w"},
                      {"order": 2, "type": WIDGET_TYPE, "name": "w2"}, {"order": 3, "type": CM_TYPE, "name": "inner"},
                      {"order": 4, "type": CM_TYPE, "name": "skipped"}]
    assert calls[0]["clusters"] == [{"id": "", "namespace": "apps", "context": "kind"}]
    assert not any(c.get("clusters") for c in calls[1:]), "the cluster's facts go once"
    regs = {c["registration"]["name"]: c["registration"] for c in calls}
    assert regs["w2"] == {"id": f"{PREFIX}{WIDGET_TYPE}::w2", "type": WIDGET_TYPE, "name": "w2", "order": 2, "dependsOn": [CRD_URN], "awaits": [],
                          "object": {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w2", "namespace": "default"}}}
    assert regs["widgets"]["object"]["spec"]["names"] == {"kind": "Widget", "plural": "widgets", "listKind": "WidgetList"}
    assert regs["inner"]["id"] == f"{PREFIX}my:index:App${CM_TYPE}::inner"
    assert (regs["inner"]["parent"], regs["inner"]["parentType"], regs["inner"]["order"]) == (f"{PREFIX}my:index:App::app", "my:index:App", 3)
    assert regs["inner"]["object"]["data"] == {"some_key": "v"}, "a map's keys are the user's"
    assert regs["skipped"].get("excluded") is True and "excluded" not in regs["w"]
    # The gates: once per key, at the top level, in depends_on after the program's own.
    crd_gate, admission = f"{PREFIX}readiness:index:CrdReady::auto-crd-widgets", f"{PREFIX}readiness:index:AdmissionReady::auto-admission-default"
    assert seen["w_deps"] == [crd_gate, admission]
    assert seen["w2_deps"] == [CRD_URN, crd_gate, admission]
    assert only_the_retry_hook(seen["crd"]) and only_the_retry_hook(seen["inner"]), "no gate: only the error hook is added"
    gates = [r for r in mocks.registered.values() if r.typ.startswith("readiness:")]
    assert sorted(g.name for g in gates) == ["auto-admission-default", "auto-crd-widgets"]
    assert mocks.registered["auto-crd-widgets"].inputs == {"name": "widgets.example.com"}, "argsFrom reads the installer's outputs"
    objects = mocks.registered["auto-admission-default"].inputs["objects"]
    assert rpc.is_rpc_secret(objects) and rpc.unwrap_rpc_secret(objects)[0]["metadata"]["name"] == "w2"
    assert mocks.monitor.dependencies["auto-crd-widgets"] == [CRD_URN]
    assert sorted(mocks.monitor.dependencies["auto-admission-default"]) == sorted([crd_gate, CRD_URN])
    # The no-op transform rides on the program's kubernetes custom resources, not on the gates.
    assert [t.__name__ for t in mocks.registered["w"].transforms] == ["_keep_as_is"]
    assert [t.__name__ for t in mocks.registered["inner"].transforms] == ["_keep_as_is"]
    assert mocks.registered["auto-crd-widgets"].transforms == []


APPS_URN = f"{PREFIX}pulumi:providers:kubernetes::apps"


def test_explicit_provider_facts_and_gate_provider():
    """An explicit kubernetes provider: its places name it, its facts (its state as the engine has it)
    go once, and the gates are made with the readiness provider the answer names, once, configured as it."""
    import pulumi_kubernetes as k8s
    seen: Dict[str, Any] = {}

    def answer(reg):
        return {"provider": "autogate-apps", "gates": [{"key": "k", "name": "auto-ready", "type": "readiness:index:ResourceReady",
                                                        "args": {"kind": "ConfigMap"}, "after": []}]}

    def build():
        auto_gate()
        apps = k8s.Provider("apps", kubeconfig="KUBECONFIG", context="ctx", namespace="team")
        a = k8s.core.v1.ConfigMap("a", opts=pulumi.ResourceOptions(provider=apps))
        b = k8s.core.v1.ConfigMap("b", opts=pulumi.ResourceOptions(provider=apps))
        return [a, b]

    async def engine(mocks: Mocks, transform: Transform):
        for n in ("b", "a"):
            seen[n] = await dep_urns(await transform(n, provider=f"{APPS_URN}::apps_id"))

    mocks = run_program(answer, build, engine)
    calls = mocks.calls
    assert calls[0]["entries"] == [{"order": 0, "type": CM_TYPE, "name": "a", "cluster": APPS_URN},
                                   {"order": 1, "type": CM_TYPE, "name": "b", "cluster": APPS_URN}]
    assert calls[0]["clusters"] == [{"id": APPS_URN, "name": "apps", "kubeconfig": "KUBECONFIG", "context": "ctx", "namespace": "team"}]
    assert not calls[1].get("clusters") and not calls[1].get("entries")
    assert [c["registration"]["cluster"] for c in calls] == [APPS_URN, APPS_URN]
    assert seen["a"] == seen["b"] == [f"{PREFIX}readiness:index:ResourceReady::auto-ready"]
    provider = mocks.registered["autogate-apps"]
    assert provider.typ == "pulumi:providers:readiness"
    assert rpc.unwrap_rpc_secret(provider.inputs["kubeconfig"]) == "KUBECONFIG"
    assert (provider.inputs["context"], provider.inputs["namespace"]) == ("ctx", "team")
    assert mocks.registered["auto-ready"].provider.startswith(f"{PREFIX}pulumi:providers:readiness::autogate-apps::")
    assert len([r for r in mocks.registered.values() if r.typ == "pulumi:providers:readiness"]) == 1


def test_preview_with_an_unknown_kubeconfig():
    """In a preview, an explicit provider whose kubeconfig is not known yet is sent as unknown; the
    default cluster is autoGate's own readiness provider's when one is given."""
    import pulumi_kubernetes as k8s
    from pulumi_readiness import Provider

    async def none():
        return None

    async def false():
        return False

    def build():
        mine = Provider("mine")
        auto_gate(provider=mine)
        apps = k8s.Provider("apps", kubeconfig=pulumi.Output(resources=set(), future=none(), is_known=false()))
        return [k8s.core.v1.ConfigMap("a", opts=pulumi.ResourceOptions(provider=apps)), k8s.core.v1.ConfigMap("b")]

    async def engine(mocks: Mocks, transform: Transform):
        await transform("a", provider=f"{APPS_URN}::apps_id")
        await transform("b")

    mocks = run_program(lambda reg: {}, build, engine, preview=True)
    assert mocks.calls[0]["clusters"] == [{"id": APPS_URN, "name": "apps", "unknown": True}]
    assert mocks.calls[1]["clusters"] == [{"id": "", "planner": True}]


def test_awaits_the_children_of_in_process_components():
    """A registration that depends on a component the SDK renders in the program's process (ConfigGroup
    v1) carries its children's URNs: the provider waits for them."""
    import pulumi_kubernetes as k8s

    def build():
        auto_gate()
        group = k8s.yaml.ConfigGroup("g", yaml=["apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: default}\n---\n"
                                                "apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: default}\n"])
        cm = k8s.core.v1.ConfigMap("after", opts=pulumi.ResourceOptions(depends_on=[group]))
        return [group, cm]

    async def engine(mocks: Mocks, transform: Transform):
        await transform("after")

    mocks = run_program(lambda reg: {}, build, engine)
    children = sorted(u for u in mocks.monitor.resources if "kubernetes:yaml:ConfigGroup$kubernetes:core/v1:" in u)
    assert len(children) == 2, list(mocks.monitor.resources)
    [call] = mocks.calls
    assert sorted(call["registration"]["awaits"]) == children
    assert call["registration"]["order"] == 0, "the group's children are no places: the ConfigMap after it is the first"


def test_a_child_of_an_in_process_component_awaits_its_family(tmp_path):
    """A child of a ConfigGroup v1 carries the URNs of every child of the group, itself among them, its
    ConfigFiles' too: the provider decides them once all arrived, not after a pause. A Chart v4's child
    (rendered by the plugin) carries none: its family settles in the provider."""
    import pulumi_kubernetes as k8s
    f = tmp_path / "f.yaml"
    f.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: in-file, namespace: default}\n")
    made: List[Any] = []

    def build():
        auto_gate()
        made.append(k8s.yaml.ConfigGroup("g", files=[str(f)], yaml=["apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: default}\n---\n"
                                                                    "apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: default}\n"]))
        return made

    group_urn = f"{PREFIX}kubernetes:yaml:ConfigGroup::g"
    file_urn = f"{PREFIX}kubernetes:yaml:ConfigGroup$kubernetes:yaml:ConfigFile::{f}"
    # The engine's URNs (the mock monitor qualifies a child's type by its parent's own type only).
    family = sorted([f"{PREFIX}kubernetes:yaml:ConfigGroup${CM_TYPE}::default/a", f"{PREFIX}kubernetes:yaml:ConfigGroup$kubernetes:core/v1:Secret::default/s",
                     child_urn(PREFIX, file_urn, CM_TYPE, "default/in-file")])

    async def engine(mocks: Mocks, transform: Transform):
        for r in (await made[0].resources.future()).values():
            await r.urn.future()  # every child registered
        await transform("default/a", parent=group_urn)
        await transform("default/s", parent=group_urn)
        await transform("default/in-file", parent=file_urn)
        await transform("default/a", parent=f"{PREFIX}kubernetes:helm.sh/v4:Chart::c")  # as a Chart v4's child is asked

    mocks = run_program(lambda reg: {}, build, engine)
    assert file_urn in mocks.monitor.resources, list(mocks.monitor.resources)
    *children, remote = mocks.calls
    assert len(children) == 3
    for call in children:
        assert sorted(call["registration"]["awaits"]) == family, call["registration"]
        assert call["registration"]["id"] in family
    assert remote["registration"]["awaits"] == [], "a child the plugin renders settles: it awaits nothing"


def test_a_failed_or_silent_call_fails_the_registration():
    """A call that fails, or does not answer in time, fails its registration naming the object (never
    ungated); the next registration is decided as usual."""
    import threading
    import pulumi_kubernetes as k8s
    seen: Dict[str, Any] = {}
    release = threading.Event()

    def answer(reg):
        if reg["name"] == "boom":
            raise Exception("decide exploded")
        if reg["name"] == "silent":
            release.wait(2)
        return {}

    def build():
        auto_gate()
        return [k8s.core.v1.ConfigMap(n) for n in ("boom", "silent", "fine")]

    async def engine(mocks: Mocks, transform: Transform):
        for n in ("boom", "silent"):
            try:
                await transform(n)
            except AutoGateError as e:
                seen[n] = str(e)
        release.set()
        auto_gate_module._PLAN_TIMEOUT = 120.0
        seen["fine"] = await transform("fine")

    auto_gate_module._PLAN_TIMEOUT = 0.05
    with pytest.raises(Exception, match="decide exploded"):  # the SDK fails the program with a failed invoke too
        run_program(answer, build, engine)
    mocks = LAST[0]
    # What a failed call carried goes again with the next one (the provider takes each once).
    assert [len(c.get("entries") or []) for c in mocks.calls] == [3, 3, 3]
    assert [len(c.get("clusters") or []) for c in mocks.calls] == [1, 1, 1]
    assert all(c["options"] == {"planTimeout": "50000us", "retried": True} for c in mocks.calls[:2])
    assert seen["boom"].startswith(f"autoGate could not decide the gates of {CM_TYPE} boom, so it is not registered ungated: ")
    assert "decide exploded" in seen["boom"]
    assert seen["silent"] == (f"autoGate could not decide the gates of {CM_TYPE} silent, so it is not registered ungated: "
                              f"the decide call for {CM_TYPE} silent did not answer within 0.2 s")
    assert only_the_retry_hook(seen["fine"])


# ---------------------------------------------------------------------------------------------
# Python's own.


def test_urn_helpers():
    chart = f"{PREFIX}kubernetes:helm.sh/v4:Chart::eso"
    assert type_of_urn(f"{PREFIX}my:index:App$kubernetes:core/v1:ConfigMap::cm") == "kubernetes:core/v1:ConfigMap"
    assert type_of_urn("not a urn") == ""
    assert is_component_child(chart)
    assert not is_component_child(STACK_URN)
    assert not is_component_child(f"{PREFIX}my:index:App::app")
    assert child_urn(PREFIX, None, CM_TYPE, "cm") == f"{PREFIX}{CM_TYPE}::cm"
    assert child_urn(PREFIX, STACK_URN, CM_TYPE, "cm") == f"{PREFIX}{CM_TYPE}::cm", "the root stack is no parent in a URN"
    assert child_urn(PREFIX, chart, CM_TYPE, "eso:cm") == f"{PREFIX}kubernetes:helm.sh/v4:Chart${CM_TYPE}::eso:cm"
    nested = f"{PREFIX}kubernetes:yaml:ConfigGroup$kubernetes:yaml:ConfigFile::f.yaml"
    assert child_urn(PREFIX, nested, CM_TYPE, "cm") == f"{PREFIX}kubernetes:yaml:ConfigGroup$kubernetes:yaml:ConfigFile${CM_TYPE}::cm"


def unknown_output() -> pulumi.Output:
    async def none():
        return None

    async def false():
        return False

    return pulumi.Output(resources=set(), future=none(), is_known=false())


@async_test
async def test_plain_python_values():
    """plain as a transform's props come in Python: Unknown (preview), secrets pushed up to their parent, assets, unknown Outputs, floats."""
    secret = {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", "value": {"password": "s"}}
    v = await plain({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "s", "labels": {"a": Unknown()}, "annotations": unknown_output()},
        "stringData": secret,
        "list": [Unknown(), 1.0, {"x": pulumi.Output.secret("y"), "z": pulumi.Output.from_input([1, pulumi.Output.from_input("w")])}],
        "asset": pulumi.StringAsset("text"), "archive": pulumi.AssetArchive({}),
        "future": asyncio.ensure_future(asyncio.sleep(0, result={"k": "v"})),
    })
    assert v == {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "labels": {}}, "list": [None, 1.0, {"z": [1, "w"]}],
                 "future": {"k": "v"}}


@async_test
async def test_plain_now_waits_for_nothing():
    out = pulumi.Output.from_input("x")
    assert plain_now({"a": out, "b": Unknown(), "c": [out, 2], "d": {"e": True}}) == {"c": [None, 2], "d": {"e": True}}


@async_test
async def test_plain():
    """plain: unknowns, secrets and resources become None (omitted), outputs their values."""
    v = await plain({
        "a": pulumi.Output.from_input("x"), "b": pulumi.Output.secret("s"), "c": [1, pulumi.Output.from_input({"d": True})],
        "e": {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", "value": "s"},
        "f": DependencyResource(f"{PREFIX}x:y:z::n"), "g": None,
    })
    assert v == {"a": "x", "c": [1, {"d": True}]}


def test_headroom_lets_queued_calls_run():
    """A registration held in the transform keeps its executor thread: the call it waits for, queued behind it, gets a thread of its own."""
    import threading
    from concurrent.futures import ThreadPoolExecutor
    from pulumi_readiness.auto_gate import _HEADROOM

    async def main():
        loop = asyncio.get_running_loop()
        ex = ThreadPoolExecutor(max_workers=1)
        loop.set_default_executor(ex)
        answered = threading.Event()
        held = loop.run_in_executor(None, answered.wait, 5)  # the registration, waiting for its transform
        invoke = loop.run_in_executor(None, answered.set)  # the invoke the transform waits for
        await asyncio.sleep(0.05)
        assert not answered.is_set(), "the pool had a thread to spare"
        token = _HEADROOM.grow()
        assert await asyncio.wait_for(held, 2) is True
        await invoke
        _HEADROOM.shrink(token)
        assert ex._max_workers == 1

    asyncio.run(main())
