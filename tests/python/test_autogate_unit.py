# auto_gate's bookkeeping in the Python SDK, without a cluster or an engine (a port of
# tests/nodejs/src/autogate.unit.test.ts): the transform against a fake plan (the rules live in the
# provider; these tests only check what the SDK does with answers): one gate per batch key,
# installers in registration order, a gate created only after the installer it is about was
# registered, a component's children decided once they settle (a webhook configuration arriving
# after the custom resource it validates), the opt-outs, and a failing or silent plan that fails the
# registration (never lets it through ungated) without hanging. Then what is Python's own: plain()
# of props with Outputs, unknowns and secrets, constructor props translated to the engine's names,
# the batching, the URN helpers, and the glue (auto_gate itself) against Pulumi's mock monitor.
import asyncio
import functools
import inspect
import json
from typing import Any, Callable, Dict, List, Optional

import pytest

import pulumi
from pulumi.output import Unknown
from pulumi.resource import DependencyProviderResource, DependencyResource
from pulumi.runtime.mocks import MockMonitor

from pulumi_readiness import (
    AutoGateDeps,
    AutoGateOptions,
    AutoGater,
    child_urn,
    is_component_child,
    plain,
    plain_now,
    plan_batcher,
    type_of_urn,
)

PREFIX = "urn:pulumi:dev::proj::"
STACK_URN = f"{PREFIX}pulumi:pulumi:Stack::proj-dev"
VWC_TYPE = "kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration"
ES_TYPE = "kubernetes:external-secrets.io/v1:ExternalSecret"
REL_TYPE = "kubernetes:helm.sh/v3:Release"
CM_TYPE = "kubernetes:core/v1:ConfigMap"


def async_test(fn):
    @functools.wraps(fn)
    def run(*args, **kwargs):
        return asyncio.run(asyncio.wait_for(fn(*args, **kwargs), 20))

    return run


# fake_plan: webhook configurations and Releases are installers; an ExternalSecret waits for the
# webhook installer (key per namespace); anything depending on a Release waits for it.
def fake_plan(a: Dict[str, Any]) -> Dict[str, Any]:
    obj = a["resource"].get("object") or {}
    kind = obj.get("kind")
    if kind in ("ValidatingWebhookConfiguration", "Certificate", "CustomResourceDefinition") or a["resource"]["type"] == REL_TYPE:
        return {"remember": True}
    gates: List[Dict[str, Any]] = []
    if kind == "Deployment":
        volumes = (((obj.get("spec") or {}).get("template") or {}).get("spec") or {}).get("volumes") or []
        mounted = [(v.get("secret") or {}).get("secretName") for v in volumes]
        for c in a["installers"]:
            if (c.get("object") or {}).get("kind") == "Certificate" and c["object"]["spec"]["secretName"] in mounted:
                gates.append({"key": f"cert-{c['id']}", "name": f"auto-certificate-{c['name']}", "type": "readiness:index:CertificateReady",
                              "args": {}, "after": [c["id"]]})
    hook = next((i for i in a["installers"] if (i.get("object") or {}).get("kind") == "ValidatingWebhookConfiguration"), None)
    if kind == "ExternalSecret" and hook:
        ns = obj["metadata"].get("namespace")
        gates.append({"key": f"exists-{hook['id']}", "name": f"auto-exists-{hook['name']}", "type": "readiness:index:ResourceReady",
                      "args": {}, "after": [hook["id"]]})
        gates.append({"key": f"admission-{hook['id']}-{ns}", "name": f"auto-admission-{ns}", "type": "readiness:index:AdmissionReady",
                      "args": {"objects": [obj]}, "after": [hook["id"]], "afterGates": [f"exists-{hook['id']}"], "reason": f"waits for {hook['name']}"})
    for id_ in a["dependsOn"]:
        rel = next((i for i in a["installers"] if i["id"] == id_ and i["type"] == REL_TYPE), None)
        if rel:
            gates.append({"key": f"release-{rel['id']}", "name": f"auto-{rel['name']}", "type": "readiness:index:HelmReleaseReady",
                          "args": {"name": rel["name"]}, "after": [rel["id"]]})
    return {"gates": gates, "remember": kind == "ExternalSecret"}


class Fake:
    def __init__(self, plan: Callable[[Dict[str, Any]], Any] = fake_plan) -> None:
        self.calls: List[Dict[str, Any]] = []
        self.created: List[Dict[str, Any]] = []
        self.warnings: List[str] = []
        self._waits: Dict[str, asyncio.Future] = {}

        async def do_plan(a: Dict[str, Any], provider: Any = None) -> Dict[str, Any]:
            self.calls.append(json.loads(json.dumps(a)))
            r = plan(a)
            return await r if inspect.isawaitable(r) else r

        def create_gate(gate: Dict[str, Any], after: List[pulumi.Resource], provider: Any = None) -> pulumi.Resource:
            entry: Dict[str, Any] = {"gate": gate, "after": []}
            self.created.append(entry)

            async def fill() -> None:
                entry["after"] = [await r.urn.future() for r in after]

            asyncio.ensure_future(fill())
            return DependencyResource(f"{PREFIX}{gate['type']}::{gate['name']}")

        self.deps = AutoGateDeps(plan=do_plan, create_gate=create_gate, wait_registered=lambda urn: asyncio.shield(self._wait(urn)),
                                 urn_prefix=lambda: PREFIX, info=lambda m: None, warn=self.warnings.append)

    def _wait(self, urn: str) -> asyncio.Future:
        w = self._waits.get(urn)
        if w is None:
            w = self._waits[urn] = asyncio.get_running_loop().create_future()
        return w

    def register(self, urn: str) -> None:
        """The engine finished this registration: its wait_registered resolves."""
        w = self._wait(urn)
        if not w.done():
            w.set_result(None)


def reg(type_: str, name: str, obj: Any, parent: Optional[str] = None, depends_on: List[str] = ()) -> pulumi.ResourceTransformArgs:
    return pulumi.ResourceTransformArgs(
        custom=True, type_=type_, name=name, props=obj,
        opts=pulumi.ResourceOptions(parent=DependencyResource(parent or STACK_URN),
                                    depends_on=[DependencyResource(u) for u in depends_on]))


def es(name: str, ns: str, **extra: Any) -> Dict[str, Any]:
    return {"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret", "metadata": {"name": name, "namespace": ns, **extra},
            "spec": {"target": {"name": name}}}


VWC = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "eso-validate"}}


async def dep_urns(r: Optional[pulumi.ResourceTransformResult]) -> List[str]:
    if r is None:
        return []
    return [await d.urn.future() for d in r.opts.depends_on]


def gater(f: Fake, **o: Any) -> AutoGater:
    o.setdefault("settle", 0.02)
    return AutoGater(AutoGateOptions(**o), f.deps)


def start(coro: Any) -> asyncio.Future:
    # As a JavaScript async call does: the transform runs now, not when it is awaited.
    return asyncio.ensure_future(coro)


@async_test
async def test_one_gate_per_batch_key():
    """ExternalSecrets of one namespace behind one webhook share a gate."""
    f = Fake()
    g = gater(f)
    hook_urn = child_urn(PREFIX, STACK_URN, VWC_TYPE, "eso-validate")
    assert await g.transform(reg(VWC_TYPE, "eso-validate", VWC)) is None
    pending = [start(g.transform(reg(ES_TYPE, f"es-{n}", es(n, "team-a")))) for n in "abc"]
    other = start(g.transform(reg(ES_TYPE, "es-x", es("x", "team-b"))))
    await asyncio.sleep(0.01)
    assert f.created == [], "a gate was registered before the webhook configuration it is about"
    f.register(hook_urn)
    results = await asyncio.gather(*pending, other)
    exists = f"{PREFIX}readiness:index:ResourceReady::auto-exists-eso-validate"
    assert [c["gate"]["name"] for c in f.created] == ["auto-exists-eso-validate", "auto-admission-team-a", "auto-admission-team-b"]
    for r in results[:3]:
        assert await dep_urns(r) == [exists, f"{PREFIX}readiness:index:AdmissionReady::auto-admission-team-a"]
    assert await dep_urns(results[3]) == [exists, f"{PREFIX}readiness:index:AdmissionReady::auto-admission-team-b"]
    await asyncio.sleep(0)
    assert f.created[0]["after"] == [hook_urn], "the exists gate depends on the webhook configuration"
    assert f.created[1]["after"] == [hook_urn, exists], "the admission gate depends on the configuration and on the exists gate"
    # Installers in registration order, each ExternalSecret remembered once.
    assert [i["name"] for i in f.calls[-1]["installers"]] == ["eso-validate", "es-a", "es-b", "es-c"]


@async_test
async def test_release_dependency_is_gated_and_sent_as_installer_ids():
    """A resource that depends on a Release is gated on it; the plan sees the depends_on as installer ids."""
    f = Fake()
    g = gater(f)
    rel_urn = child_urn(PREFIX, STACK_URN, REL_TYPE, "eso")
    await g.transform(reg(REL_TYPE, "eso", {"chart": "external-secrets", "namespace": "eso"}))
    cm = start(g.transform(reg(CM_TYPE, "cm", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}}, depends_on=[rel_urn])))
    await asyncio.sleep(0.01)
    f.register(rel_urn)
    assert await dep_urns(await cm) == [rel_urn, f"{PREFIX}readiness:index:HelmReleaseReady::auto-eso"], "the user's depends_on is kept, the gate added"
    assert f.calls[1]["dependsOn"] == [rel_urn], "installer ids are their URNs, as in the Go SDK"


@async_test
async def test_near_misses_and_opt_outs():
    """Nothing gated gives no gate; opt-out annotation, exclude and a hand gate win, installers are still remembered."""
    f = Fake()
    g = gater(f, exclude=lambda _t, name: name == "es-excluded")
    hook_urn = child_urn(PREFIX, STACK_URN, VWC_TYPE, "eso-validate")
    await g.transform(reg(VWC_TYPE, "eso-validate", VWC))
    f.register(hook_urn)
    assert await g.transform(reg(CM_TYPE, "cm", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}})) is None
    assert await g.transform(reg(ES_TYPE, "es-out", es("out", "team-a", annotations={"readiness.io/auto-gate": "false"}))) is None
    assert await g.transform(reg(ES_TYPE, "es-excluded", es("excluded", "team-a"))) is None
    assert await g.transform(reg(ES_TYPE, "es-hand", es("hand", "team-a"), depends_on=[f"{PREFIX}readiness:index:AdmissionReady::by-hand"])) is None
    assert f.created == []
    assert [i["name"] for i in f.calls[-1]["installers"]] == ["eso-validate", "es-out", "es-excluded"]
    # Not a kubernetes registration, or a component: the plan is not asked.
    n = len(f.calls)
    assert await g.transform(reg("readiness:index:CrdReady", "x", {})) is None
    component = reg("kubernetes:helm.sh/v4:Chart", "c", {})
    component.custom = False
    assert await g.transform(component) is None
    assert len(f.calls) == n


@async_test
async def test_installers_option():
    """Only the named installers count."""
    f = Fake()
    g = gater(f, installers=["other"])
    await g.transform(reg(VWC_TYPE, "eso-validate", VWC))
    assert await g.transform(reg(ES_TYPE, "es-a", es("a", "team-a"))) is None
    assert f.calls[1]["installers"] == []


@async_test
async def test_component_children_settle():
    """A component's children are decided once they settle: a webhook configuration after the custom resource it validates."""
    f = Fake()
    g = gater(f)
    chart = f"{PREFIX}kubernetes:helm.sh/v4:Chart::eso"
    hook_urn = child_urn(PREFIX, chart, VWC_TYPE, "eso:eso-validate")
    assert hook_urn == f"{PREFIX}kubernetes:helm.sh/v4:Chart${VWC_TYPE}::eso:eso-validate"
    cr = start(g.transform(reg(ES_TYPE, "eso:team-a/a", es("a", "team-a"), parent=chart)))
    cm = start(g.transform(reg(CM_TYPE, "eso:cm", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}}, parent=chart)))
    hook = start(g.transform(reg(VWC_TYPE, "eso:eso-validate", VWC, parent=chart)))
    assert await hook is None
    assert await cm is None
    assert f.calls[0]["resource"]["parentType"] == "kubernetes:helm.sh/v4:Chart"
    assert f.calls[0]["resource"]["parent"] == chart
    f.register(hook_urn)
    assert await dep_urns(await cr) == [f"{PREFIX}readiness:index:ResourceReady::auto-exists-eso:eso-validate",
                                        f"{PREFIX}readiness:index:AdmissionReady::auto-admission-team-a"]
    assert f.created[0]["after"] == [hook_urn]


class _LocalComponent(pulumi.ComponentResource):
    """A component the SDK renders in-process (ConfigGroup v1), as auto_gate sees it: its type, its resources."""

    def __init__(self, type_: str, resources: Any) -> None:  # noqa: no engine: never registered
        self._type = type_
        self._remote = False
        self.resources = resources


@async_test
async def test_local_component_children_settle_once_all_arrived():
    """A ConfigGroup v1's children settle once every child the SDK constructed has arrived, however far
    apart they come (a loaded machine): its ExternalSecret waits for its sibling webhook configuration
    that arrives later than the settle pause. A Chart v4's children settle after the pause."""
    f = Fake()
    g = gater(f)  # settle: 20 ms
    group = _LocalComponent("kubernetes:yaml:ConfigGroup", pulumi.Output.from_input({}))
    group_urn = f"{PREFIX}kubernetes:yaml:ConfigGroup::widgets"
    g.track("kubernetes:yaml:ConfigGroup", "widgets", group, {}, pulumi.ResourceOptions())
    # The SDK constructs both children (in the component's own applies), then they register.
    g.track(ES_TYPE, "team-a/a", DependencyResource(child_urn(PREFIX, group_urn, ES_TYPE, "team-a/a")), es("a", "team-a"),
            pulumi.ResourceOptions(parent=group))
    g.track(VWC_TYPE, "eso-validate", DependencyResource(child_urn(PREFIX, group_urn, VWC_TYPE, "eso-validate")), VWC,
            pulumi.ResourceOptions(parent=group))
    cr = start(g.transform(reg(ES_TYPE, "team-a/a", es("a", "team-a"), parent=group_urn)))
    await asyncio.sleep(0.2)  # ten settle pauses
    assert not cr.done(), "decided before its sibling webhook configuration arrived"
    assert f.calls == []
    hook = start(g.transform(reg(VWC_TYPE, "eso-validate", VWC, parent=group_urn)))
    assert await hook is None
    f.register(child_urn(PREFIX, group_urn, VWC_TYPE, "eso-validate"))
    assert await dep_urns(await cr) == [f"{PREFIX}readiness:index:ResourceReady::auto-exists-eso-validate",
                                        f"{PREFIX}readiness:index:AdmissionReady::auto-admission-team-a"]
    es_call = next(c for c in f.calls if c["resource"]["name"] == "team-a/a")
    assert es_call["resource"]["parent"] == group_urn
    assert f.warnings == []

    # A remote component (Chart v4: the plugin registers its children) settles after the pause.
    f2 = Fake()
    g2 = gater(f2)
    chart = _LocalComponent("kubernetes:helm.sh/v4:Chart", pulumi.Output.from_input([]))
    chart_urn = f"{PREFIX}kubernetes:helm.sh/v4:Chart::eso"
    g2.track("kubernetes:helm.sh/v4:Chart", "eso", chart, {}, pulumi.ResourceOptions())
    chart._remote = True  # as the SDK marks it once constructed
    alone = start(g2.transform(reg(ES_TYPE, "eso:team-a/a", es("a", "team-a"), parent=chart_urn)))
    assert await alone is None, "a remote component's child is decided after the settle pause"


@async_test
async def test_local_component_child_that_never_arrives():
    """A child the SDK constructed that never reaches the transform holds its siblings no longer than the
    plan timeout, and the warning says they were decided without every sibling."""
    f = Fake()
    f.deps.plan_timeout = 0.2
    g = gater(f)
    group = _LocalComponent("kubernetes:yaml:ConfigFile", pulumi.Output.from_input({}))
    group_urn = f"{PREFIX}kubernetes:yaml:ConfigFile::app"
    g.track("kubernetes:yaml:ConfigFile", "app", group, {}, pulumi.ResourceOptions())
    for n in ("a", "b"):
        g.track(CM_TYPE, n, DependencyResource(child_urn(PREFIX, group_urn, CM_TYPE, n)), {"apiVersion": "v1", "kind": "ConfigMap"},
                pulumi.ResourceOptions(parent=group))
    assert await g.transform(reg(CM_TYPE, "a", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}, parent=group_urn)) is None
    assert len(f.warnings) == 1 and "kubernetes:yaml:ConfigFile app are decided without every sibling" in f.warnings[0], f.warnings


@async_test
async def test_failing_plan_fails_the_registration():
    """A failing plan fails the registration, naming the object and the cause (never ungated), and the next one still works."""
    fail = True

    def plan(a):
        if fail:
            raise Exception("plan exploded")
        return fake_plan(a)

    f = Fake(plan)
    errors: List[str] = []
    f.deps.error = errors.append
    g = gater(f)
    with pytest.raises(Exception, match=r"kubernetes:core/v1:ConfigMap cm, so it is not registered ungated: plan exploded"):
        await g.transform(reg(CM_TYPE, "cm", {"apiVersion": "v1", "kind": "ConfigMap"}))
    chart = f"{PREFIX}kubernetes:yaml/v2:ConfigGroup::g"
    with pytest.raises(Exception, match=r"ConfigMap g:cm, so it is not registered ungated: plan exploded$"):
        await g.transform(reg(CM_TYPE, "g:cm", {"apiVersion": "v1", "kind": "ConfigMap"}, parent=chart))
    assert len(errors) == 2, "each failure is logged once, as an error"
    fail = False
    assert await g.transform(reg(REL_TYPE, "eso", {"chart": "x"})) is None
    assert f.calls[-1]["resource"]["name"] == "eso"


@async_test
async def test_silent_plan_times_out():
    """A plan call that never answers fails its registration after the plan timeout, and does not stall later ones."""
    hang = True

    def plan(a):
        return asyncio.get_running_loop().create_future() if hang else fake_plan(a)

    f = Fake(plan)
    f.deps.plan_timeout = 0.03
    g = gater(f)
    with pytest.raises(Exception, match=r"ConfigMap cm, so it is not registered ungated: the plan call for kubernetes:core/v1:ConfigMap cm did not answer within 30 ms"):
        await g.transform(reg(CM_TYPE, "cm", {"apiVersion": "v1", "kind": "ConfigMap"}))
    hang = False
    assert await g.transform(reg(REL_TYPE, "eso", {"chart": "x"})) is None


@async_test
async def test_late_webhook_configuration_warns():
    """A webhook configuration registered after objects it intercepts warns, naming them (top level, and a component's late child)."""
    f = Fake()
    g = gater(f)
    assert await g.transform(reg(ES_TYPE, "es-early", es("early", "team-a"))) is None
    chart = f"{PREFIX}kubernetes:yaml/v2:ConfigGroup::g"
    assert await g.transform(reg(ES_TYPE, "g:team-a/child", es("child", "team-a"), parent=chart)) is None
    assert await g.transform(reg(CM_TYPE, "cm", {"apiVersion": "v1", "kind": "ConfigMap"})) is None
    assert f.warnings == []
    # The group above had settled when its sibling webhook configuration arrives.
    assert await g.transform(reg(VWC_TYPE, "g:eso-validate", VWC, parent=chart)) is None
    for _ in range(20):
        if len(f.warnings) >= 2:
            break
        await asyncio.sleep(0.01)
    assert len(f.warnings) == 2, "\n".join(f.warnings)
    assert "ExternalSecret es-early was registered before" in f.warnings[0]
    assert "ValidatingWebhookConfiguration g:eso-validate, which intercepts it" in f.warnings[0]
    assert "ExternalSecret g:team-a/child was registered before" in f.warnings[1]


@async_test
async def test_program_order():
    """Top-level resources are decided in program order, not in the order Python registers them."""
    f = Fake()
    g = gater(f)
    cert = {"apiVersion": "cert-manager.io/v1", "kind": "Certificate", "metadata": {"name": "agent", "namespace": "default"},
            "spec": {"secretName": "agent-tls"}}
    deploy = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "agent", "namespace": "default"},
              "spec": {"template": {"spec": {"volumes": [{"name": "tls", "secret": {"secretName": "agent-tls"}}]}}}}
    cert_urn = child_urn(PREFIX, None, "kubernetes:cert-manager.io/v1:Certificate", "agent-cert")
    cert_res = DependencyResource(cert_urn)
    deploy_res = DependencyResource(f"{PREFIX}kubernetes:apps/v1:Deployment::agent")
    # The program constructs the Certificate (it waits for a chart: registered later), then the Deployment.
    g.track("kubernetes:cert-manager.io/v1:Certificate", "agent-cert", cert_res, cert, pulumi.ResourceOptions(depends_on=[]))
    g.track("kubernetes:apps/v1:Deployment", "agent", deploy_res, {**deploy, "status": pulumi.Output.from_input(None)}, pulumi.ResourceOptions())
    d = await g.transform(reg("kubernetes:apps/v1:Deployment", "agent", deploy))
    assert await dep_urns(d) == [f"{PREFIX}readiness:index:CertificateReady::auto-certificate-agent-cert"]
    await asyncio.sleep(0)
    assert f.created[0]["after"] == [cert_urn], "the gate depends on the Certificate's own handle"
    assert await g.transform(reg("kubernetes:cert-manager.io/v1:Certificate", "agent-cert", cert)) is None
    assert len([c for c in f.calls if c["resource"]["name"] == "agent-cert"]) == 1, "decided at construction, its values all known then"
    assert [i["name"] for i in [c for c in f.calls if c["resource"]["name"] == "agent"][-1]["installers"]] == ["agent-cert"]


@async_test
async def test_program_order_of_an_explicit_provider():
    """Objects of an explicit kubernetes provider are decided in program order among that
    provider's, whatever order they register in."""
    f = Fake()

    async def cluster_provider(urn: str) -> Dict[str, Any]:
        return {}

    f.deps.cluster_provider = cluster_provider
    g = gater(f)
    apps = DependencyProviderResource(f"{PREFIX}pulumi:providers:kubernetes::apps::id-apps")
    cert = {"apiVersion": "cert-manager.io/v1", "kind": "Certificate", "metadata": {"name": "web"}, "spec": {"secretName": "web-tls"}}
    deploy = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
              "spec": {"template": {"spec": {"volumes": [{"name": "tls", "secret": {"secretName": "web-tls"}}]}}}}
    cert_urn = f"{PREFIX}kubernetes:cert-manager.io/v1:Certificate::web-cert"

    def on_apps(a: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformArgs:
        a.opts.provider = apps
        return a

    # The program writes the Certificate, then the Deployment; the Deployment registers first.
    g.track("kubernetes:cert-manager.io/v1:Certificate", "web-cert", DependencyResource(cert_urn), cert, pulumi.ResourceOptions(provider=apps))
    g.track("kubernetes:apps/v1:Deployment", "web", DependencyResource(f"{PREFIX}kubernetes:apps/v1:Deployment::web"), deploy,
            pulumi.ResourceOptions(provider=apps))
    d = start(g.transform(on_apps(reg("kubernetes:apps/v1:Deployment", "web", deploy))))
    await asyncio.sleep(0.1)
    assert not d.done(), "the Deployment was decided before the Certificate written above it"
    assert await g.transform(on_apps(reg("kubernetes:cert-manager.io/v1:Certificate", "web-cert", cert))) is None
    f.register(cert_urn)  # the engine registered it: its gate may be made
    assert await dep_urns(await d) == [f"{PREFIX}readiness:index:CertificateReady::auto-certificate-web-cert"]


@async_test
async def test_concurrent_plan_calls_count_every_earlier_installer():
    """Plan calls run concurrently and every answer still counts every installer registered before it."""
    in_flight = 0
    most = 0

    async def plan(a):
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        await asyncio.sleep(0.03 if a["resource"]["name"] == "eso-validate" else 0.005)  # the installer answers last
        in_flight -= 1
        return fake_plan(a)

    f = Fake(plan)
    g = gater(f)
    hook_urn = child_urn(PREFIX, None, VWC_TYPE, "eso-validate")
    f.register(hook_urn)

    def track(type_: str, name: str, obj: Any) -> None:
        g.track(type_, name, DependencyResource(child_urn(PREFIX, None, type_, name)), obj, pulumi.ResourceOptions())

    track(VWC_TYPE, "eso-validate", VWC)
    for n in "abcd":
        track(ES_TYPE, f"es-{n}", es(n, "team-a"))
    results = await asyncio.gather(*[g.transform(reg(ES_TYPE, f"es-{n}", es(n, "team-a"))) for n in "abcd"])
    assert most > 1, "the plan calls ran one at a time"
    for r in results:
        assert len(await dep_urns(r)) == 2, "an ExternalSecret asked before the webhook's answer was not asked again"


@async_test
async def test_installers_sent_as_trimmed():
    """Installers are sent to later calls as the plan trimmed them; whole when an older provider does not say."""
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "widgets.example.com"},
           "spec": {"group": "example.com", "names": {"kind": "Widget", "plural": "widgets"},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object"}}}}}]}}
    trimmed = {"apiVersion": crd["apiVersion"], "kind": crd["kind"], "metadata": crd["metadata"],
               "spec": {"group": "example.com", "names": crd["spec"]["names"], "versions": [{"name": "v1", "served": True}]}}
    for answer, want in (({"remember": True, "installer": trimmed}, trimmed), ({"remember": True}, crd)):
        f = Fake(lambda a, answer=answer: answer if (a["resource"].get("object") or {}).get("kind") == "CustomResourceDefinition" else {})
        g = gater(f)
        await g.transform(reg("kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition", "widgets", crd))
        await g.transform(reg(CM_TYPE, "cm", {"apiVersion": "v1", "kind": "ConfigMap"}))
        assert f.calls[0]["resource"]["object"] == crd, "the registration itself is sent whole"
        assert f.calls[1]["installers"][0]["object"] == want


@async_test
async def test_plain():
    """plain: unknowns, secrets and resources become None (omitted), outputs their values."""
    v = await plain({
        "a": pulumi.Output.from_input("x"), "b": pulumi.Output.secret("s"), "c": [1, pulumi.Output.from_input({"d": True})],
        "e": {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", "value": "s"},
        "f": DependencyResource(f"{PREFIX}x:y:z::n"), "g": None,
    })
    assert v == {"a": "x", "c": [1, {"d": True}]}


@async_test
async def test_concurrent_decisions_asked_once():
    """Concurrent decisions are asked once: earlier registrations not answered yet are sent as installers, a depends_on on one among them too."""
    held = asyncio.get_running_loop().create_future()

    async def plan(a):
        if a["resource"]["type"] == REL_TYPE:
            await held  # the release answers last
        return fake_plan(a)

    f = Fake(plan)
    g = gater(f)
    rel_urn = child_urn(PREFIX, None, REL_TYPE, "eso")
    rel_res = DependencyResource(rel_urn)
    g.track(REL_TYPE, "eso", rel_res, {"chart": "x", "name": "eso"}, pulumi.ResourceOptions())
    names = "abcd"
    for n in names:
        g.track(ES_TYPE, f"es-{n}", DependencyResource(child_urn(PREFIX, None, ES_TYPE, f"es-{n}")), es(n, "team-a"),
                pulumi.ResourceOptions(depends_on=[rel_res]))
    await asyncio.sleep(0.01)
    held.set_result(None)
    f.register(rel_urn)
    results = await asyncio.gather(*[g.transform(reg(ES_TYPE, f"es-{n}", es(n, "team-a"), depends_on=[rel_urn])) for n in names])
    for r in results:
        assert await dep_urns(r) == [rel_urn, f"{PREFIX}readiness:index:HelmReleaseReady::auto-eso"]
    assert len(f.calls) == 5, f"asked again: {[c['resource']['name'] for c in f.calls]}"
    last = next(c for c in f.calls if c["resource"]["name"] == "es-d")
    assert [i["name"] for i in last["installers"]] == ["eso", "es-a", "es-b", "es-c"]
    assert last["dependsOn"] == [rel_urn]


def answer_batch(b: Dict[str, Any]) -> Dict[str, Any]:
    # As the provider answers: each gate key once, as the first plan naming it answers it.
    gates: List[Dict[str, Any]] = []
    results = []
    for p in b["plans"]:
        r = fake_plan({**p, "installers": [b["installers"][i] for i in p["installers"]]})
        idx = []
        for gate in r.get("gates") or []:
            at = next((n for n, x in enumerate(gates) if x["key"] == gate["key"]), None)
            if at is None:
                gates.append(gate)
                at = len(gates) - 1
            idx.append(at)
        results.append({**r, "gates": idx})
    return {"gates": gates, "results": results}


@async_test
async def test_batching():
    """Plan calls made together go as one batch invoke, each installer once, each call answered by its own result."""
    batches: List[Dict[str, Any]] = []

    async def invoke(b):
        batches.append(json.loads(json.dumps(b)))
        return answer_batch(b)

    plan = plan_batcher(invoke)
    hook = {"id": "hook", "type": VWC_TYPE, "name": "eso-validate", "object": VWC}

    def ask(name: str, installers: List[Dict[str, Any]]):
        return plan({"resource": {"type": ES_TYPE, "name": name, "object": es(name, "team-a")}, "installers": installers, "dependsOn": [], "options": {}})

    a = {"id": "a", "type": ES_TYPE, "name": "a", "object": es("a", "team-a")}
    together = await asyncio.gather(ask("a", [hook]), ask("b", [hook, a]), ask("c", [hook, a, {**a, "object": es("a", "team-b")}]))
    assert len(batches) == 1, "calls made together went as separate invokes"
    assert [i["id"] for i in batches[0]["installers"]] == ["hook", "a", "a"], "the same installer sent twice, or one with new values merged into it"
    assert [p["installers"] for p in batches[0]["plans"]] == [[0], [0, 1], [0, 1, 2]]
    assert [r["remember"] for r in together] == [True, True, True]
    assert [[g["name"] for g in r["gates"]] for r in together] == [["auto-exists-eso-validate", "auto-admission-team-a"]] * 3, "an answer went to another call"
    assert [r["gates"][1]["args"]["objects"][0]["metadata"]["name"] for r in together] == ["a", "a", "a"], "a batch key's gate is not the first plan's"
    # A later call is a batch of its own.
    await ask("d", [hook])
    assert len(batches) == 2


@async_test
async def test_batching_of_calls_made_in_separate_steps():
    """Decisions that reach the plan a few loop passes apart (each after awaits of its own) still share one invoke."""
    batches: List[Dict[str, Any]] = []

    async def invoke(b):
        batches.append(b)
        return answer_batch(b)

    plan = plan_batcher(invoke)

    async def ask(name: str, hops: int):
        for _ in range(hops):
            await asyncio.sleep(0)
        return await plan({"resource": {"type": CM_TYPE, "name": name, "object": {}}, "installers": [], "dependsOn": [], "options": {}})

    await asyncio.gather(*[ask(str(n), n % 3) for n in range(9)])
    assert len(batches) == 1
    assert len(batches[0]["plans"]) == 9


@async_test
async def test_batch_failures():
    """A failing batch invoke fails every call in it; a short answer fails the calls it left out, an unknown gate index its call."""
    answer = "fail"

    async def invoke(b):
        if answer == "fail":
            raise Exception("invoke exploded")
        # Indexes come back from the engine as floats.
        return {"results": [{"gates": [0.0]} for _ in b["plans"][1:]], "gates": []}

    plan = plan_batcher(invoke)

    def ask(name: str):
        return plan({"resource": {"type": CM_TYPE, "name": name, "object": {}}, "installers": [], "dependsOn": [], "options": {}})

    failed = await asyncio.gather(ask("x"), ask("y"), return_exceptions=True)
    assert [str(r) for r in failed] == ["invoke exploded", "invoke exploded"]
    answer = "short"
    short = await asyncio.gather(ask("x"), ask("y"), return_exceptions=True)
    assert "unknown gate index for kubernetes:core/v1:ConfigMap x" in str(short[0])
    assert "answered 1 of 2 calls" in str(short[1])


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


def test_plain_now_translates_constructor_props():
    """The legacy transformation gets props with their Python names (and input types in them): plain_now gives the engine's."""
    from pulumi import _types
    from pulumi_kubernetes.apps.v1 import Deployment, DeploymentInitArgs
    from pulumi_kubernetes.apps.v1 import DeploymentSpecArgs
    from pulumi_kubernetes.core.v1 import PodSpecArgs, PodTemplateSpecArgs, SecretVolumeSourceArgs, VolumeArgs
    from pulumi_kubernetes.meta.v1 import ObjectMetaArgs
    from pulumi_readiness.auto_gate import _args_type

    assert _args_type(Deployment.__new__(Deployment)) is DeploymentInitArgs
    want = {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "agent", "namespace": "default", "annotations": {"readiness.io/auto-gate": "false", "some_key": "v"}},
            "spec": {"replicas": 1, "minReadySeconds": 5, "template": {"spec": {"containers": [],
                     "volumes": [{"name": "tls", "secret": {"secretName": "agent-tls", "defaultMode": 420}}]}}}}
    typed = DeploymentInitArgs(
        api_version="apps/v1", kind="Deployment",
        metadata=ObjectMetaArgs(name="agent", namespace="default", annotations={"readiness.io/auto-gate": "false", "some_key": "v"}),
        spec=DeploymentSpecArgs(replicas=1, min_ready_seconds=5, selector=None, template=PodTemplateSpecArgs(spec=PodSpecArgs(
            containers=[], volumes=[VolumeArgs(name="tls", secret=SecretVolumeSourceArgs(secret_name="agent-tls", default_mode=420))]))))
    assert plain_now(_types.input_type_to_untranslated_dict(typed), DeploymentInitArgs) == want
    # Dicts in place of the input types (Python names, or the engine's: both as the SDK sends them).
    dicts = DeploymentInitArgs(
        api_version="apps/v1", kind="Deployment",
        metadata={"name": "agent", "namespace": "default", "annotations": {"readiness.io/auto-gate": "false", "some_key": "v"}},
        spec={"replicas": 1, "minReadySeconds": 5, "selector": None, "template": {"spec": {
            "containers": [], "volumes": [{"name": "tls", "secret": {"secret_name": "agent-tls", "defaultMode": 420}}]}}})
    assert plain_now(_types.input_type_to_untranslated_dict(dicts), DeploymentInitArgs) == want


def test_stable_key():
    from pulumi_readiness.auto_gate import stable_key
    assert stable_key({"b": 1, "a": [1.0, {"d": 2, "c": True}]}) == stable_key({"a": [1, {"c": True, "d": 2.0}], "b": 1.0})
    assert stable_key({"a": 1.5}) != stable_key({"a": 1})
    assert stable_key({"a": True}) != stable_key({"a": 1})


# ---------------------------------------------------------------------------------------------
# The glue: auto_gate() in a program against Pulumi's mock monitor (no engine): the legacy
# transformation tracks real pulumi-kubernetes objects with the values the engine will get, the
# plan goes as batch invokes, the no-op transform rides on every kubernetes custom resource, and
# the stack transform (called here as the engine would, with the props as registered) creates the
# gates: by token, with the SDK's defaults, AdmissionReady's objects secret, names read from the
# installer's outputs.

def mock_plan_batch(b: Dict[str, Any]) -> Dict[str, Any]:
    # CRDs are installers; a custom resource of a kind one of them installs waits for it, and is
    # then dry-run (AdmissionReady of the object). The gate's name comes from the CRD's outputs.
    gates: List[Dict[str, Any]] = []
    results = []
    for p in b["plans"]:
        obj = p["resource"].get("object") or {}
        if obj.get("kind") == "CustomResourceDefinition":
            results.append({"remember": True, "installer": {"kind": obj["kind"], "spec": {"group": obj["spec"]["group"], "names": obj["spec"]["names"]}}})
            continue
        idx = []
        for n in p["installers"]:
            i = b["installers"][int(n)]
            spec = (i.get("object") or {}).get("spec") or {}
            if obj.get("apiVersion", "").split("/")[0] == spec.get("group") and obj.get("kind") == spec["names"]["kind"]:
                gates.append({"key": f"crd-{i['id']}", "name": f"auto-crd-{i['name']}", "type": "readiness:index:CrdReady", "args": {},
                              "after": [i["id"]], "argsFrom": [{"arg": "name", "installer": i["id"], "output": "metadata.name"}]})
                gates.append({"key": f"admission-{i['id']}", "name": f"auto-admission-{i['name']}", "type": "readiness:index:AdmissionReady",
                              "args": {"objects": [obj]}, "after": [i["id"]], "afterGates": [f"crd-{i['id']}"]})
                idx += [len(gates) - 2, len(gates) - 1]
        results.append({"gates": idx})
    return {"gates": gates, "results": results}


class GlueMocks(pulumi.runtime.Mocks):
    def __init__(self) -> None:
        self.registered: List[Any] = []
        self.batches: List[Dict[str, Any]] = []

    def new_resource(self, args):
        self.registered.append(args)
        state = dict(args.inputs)
        if args.typ == "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition":
            state["metadata"] = {**state.get("metadata", {}), "name": "widgets.example.com"}  # as if autonamed: known from the outputs only
        return f"{args.name}_id", state

    def call(self, args):
        if args.token == "readiness:index:autoGatePlanBatch":
            self.batches.append(json.loads(json.dumps(args.args)))
            return mock_plan_batch(args.args)
        return {}


class EngineURNs(MockMonitor):
    # The engine's URNs: the root stack is no parent in them (the mock monitor puts it in).
    def make_urn(self, parent: str, type_: str, name: str) -> str:
        if parent.split("::")[2:3] == ["pulumi:pulumi:Stack"]:
            parent = ""
        return super().make_urn(parent, type_, name)


def test_glue_against_the_mock_monitor():
    import signal

    import pulumi_kubernetes as k8s
    from pulumi.runtime import rpc
    from pulumi_readiness import auto_gate

    def too_long(*_):
        raise TimeoutError("the program did not finish within 60 s")

    signal.signal(signal.SIGALRM, too_long)
    signal.alarm(60)
    asyncio.set_event_loop(asyncio.new_event_loop())  # (asyncio.run above left none: the mocks' stack needs one)
    mocks = GlueMocks()
    monitor = EngineURNs(mocks)
    pulumi.runtime.set_mocks(mocks, project="proj", stack="dev", preview=False, monitor=monitor)
    seen: Dict[str, Any] = {}

    @pulumi.runtime.test
    def program():
        auto_gate(settle=0.02)
        crd = k8s.apiextensions.v1.CustomResourceDefinition(
            "widgets",
            spec=k8s.apiextensions.v1.CustomResourceDefinitionSpecArgs(
                group="example.com", scope="Namespaced",
                names=k8s.apiextensions.v1.CustomResourceDefinitionNamesArgs(kind="Widget", plural="widgets", list_kind="WidgetList"),
                versions=[{"name": "v1", "served": True, "storage": True, "schema": {"open_apiv3_schema": {"type": "object"}}}]))
        widget = k8s.apiextensions.CustomResource("w", api_version="example.com/v1", kind="Widget",
                                                  metadata={"name": "w", "namespace": "default"}, spec={"sizeOf": 1})
        # A kubernetes object in a component of the program's own: its URN is computed as the engine's.
        app = pulumi.ComponentResource("my:index:App", "app")
        k8s.core.v1.ConfigMap("inner", metadata={"name": "inner"}, data={"some_key": "v"}, opts=pulumi.ResourceOptions(parent=app))

        async def transform_widget(_):
            # The engine's call of the stack transform, with the widget's props as registered.
            [transform] = monitor.get_registered_transforms()
            [args] = [r for r in mocks.registered if r.name == "w"]
            result = await transform(pulumi.ResourceTransformArgs(
                custom=True, type_=args.typ, name="w", props=args.inputs,
                opts=pulumi.ResourceOptions(parent=DependencyResource("urn:pulumi:dev::proj::pulumi:pulumi:Stack::proj-dev"))))
            seen["depends_on"] = [await d.urn.future() for d in result.opts.depends_on]
            seen["props"] = result.props
            [inner] = [r for r in mocks.registered if r.name == "inner"]
            seen["inner"] = await transform(pulumi.ResourceTransformArgs(
                custom=True, type_=inner.typ, name="inner", props=inner.inputs,
                opts=pulumi.ResourceOptions(parent=DependencyResource("urn:pulumi:dev::proj::my:index:App::app"))))

        return pulumi.Output.all(crd.urn, widget.urn).apply(lambda _: asyncio.ensure_future(transform_widget(_)))

    try:
        program()
    finally:
        signal.alarm(0)
    assert seen["depends_on"] == ["urn:pulumi:dev::proj::readiness:index:CrdReady::auto-crd-widgets",
                                  "urn:pulumi:dev::proj::readiness:index:AdmissionReady::auto-admission-widgets"]
    # One plan call per object, in program order (the widget's values as constructed are those registered: not asked again).
    plans = [p for b in mocks.batches for p in b["plans"]]
    assert [p["resource"]["name"] for p in plans] == ["widgets", "w", "inner"], plans
    assert seen["inner"] is None
    assert plans[2]["resource"]["object"]["data"] == {"some_key": "v"}, "a map's keys are the user's, never translated"
    crd_object = plans[0]["resource"]["object"]
    assert crd_object["spec"]["names"] == {"kind": "Widget", "plural": "widgets", "listKind": "WidgetList"}
    assert crd_object["spec"]["versions"][0]["schema"] == {"openAPIV3Schema": {"type": "object"}}
    assert plans[1]["resource"]["object"] == {"apiVersion": "example.com/v1", "kind": "Widget",
                                              "metadata": {"name": "w", "namespace": "default"}, "spec": {"sizeOf": 1}}
    # The widget was asked with the CRD as an installer (as the plan trimmed it), by its URN.
    crd_urn = "urn:pulumi:dev::proj::kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition::widgets"
    [(batch, w_plan)] = [(b, p) for b in mocks.batches for p in b["plans"] if p["resource"]["name"] == "w"]
    assert [batch["installers"][int(n)]["id"] for n in w_plan["installers"]] == [crd_urn]
    by_name = {r.name: r for r in mocks.registered}
    # The no-op transform rides on every kubernetes custom resource the program registers, not on the gates.
    assert [t.__name__ for t in by_name["widgets"].transforms] == ["_keep_as_is"]
    assert [t.__name__ for t in by_name["w"].transforms] == ["_keep_as_is"]
    assert by_name["auto-crd-widgets"].transforms == []
    # The gates: by token, the name from the CRD's outputs, AdmissionReady's objects secret.
    assert by_name["auto-crd-widgets"].typ == "readiness:index:CrdReady"
    assert by_name["auto-crd-widgets"].inputs == {"name": "widgets.example.com"}
    objects = by_name["auto-admission-widgets"].inputs["objects"]
    assert rpc.is_rpc_secret(objects)
    assert rpc.unwrap_rpc_secret(objects)[0]["metadata"]["name"] == "w"


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
