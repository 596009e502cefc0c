# Hand-written (sdk/overlay/python, copied here by `make sdk`): edit the overlay, not the copy.
#
# auto_gate: one call at the top of a program puts the right readiness gate in front of every
# Kubernetes object that something else in the stack can block. Every decision is the provider's
# (`readiness:index:autoGateDecide`): this file sends it the facts of each registration and wires
# the gates it answers (the protocol: sdk/overlay/README.md; the Go overlay is the reference).
# auto_gate (unless retry=False) and auto_retry also give every Kubernetes custom resource the
# program's one error hook, which asks the provider (`readiness:index:autoGateRetry`) whether a
# failed create or update is tried again (issue 50, docs/retry.md).
#
# Async: the engine calls the resource transform back on the program's event loop; it awaits
# URNs, the decide invoke (a blocking gRPC call in the loop's executor, see _Headroom) and gates.
from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import dataclasses
import inspect
import secrets
import time
import weakref
from collections import abc
from typing import Any, Callable, Dict, List, Optional

import pulumi
import pulumi.runtime
from pulumi.asset import Archive, Asset
from pulumi.output import Unknown
from pulumi.resource import DependencyResource

from . import _utilities
from .provider import Provider

__all__ = [
    "AUTO_GATE_OPT_OUT_ANNOTATION",
    "AutoGateError",
    "AutoGateOptions",
    "auto_gate",
    "auto_retry",
    "child_urn",
    "is_component_child",
    "plain",
    "plain_now",
    "type_of_urn",
]


@dataclasses.dataclass
class AutoGateOptions:
    """Options of :func:`auto_gate`; all optional."""

    provider: Optional[pulumi.ProviderResource] = None
    """A readiness Provider for the decisions and for the gates of the default kubernetes provider's objects."""
    timeout: Optional[str] = None
    """Passed to every gate it makes, as a Go duration (``10m``)."""
    stable_for: Optional[str] = None
    """Passed to every gate it makes, as a Go duration (``10s``)."""
    failure_grace: Optional[str] = None
    """Passed to every gate it makes, as a Go duration (``30s``)."""
    namespaces: Optional[List[str]] = None
    """Only objects in these namespaces are gated."""
    installers: Optional[List[str]] = None
    """Only installers with these Pulumi resource names count (a CRD, a webhook configuration, a Release, ...)."""
    exclude: Optional[Callable[[str, str], bool]] = None
    """True: never gate this resource (type token, Pulumi name)."""
    settle: Optional[float] = None
    """Seconds a component's children (Chart v4, ConfigGroup) settle after the last one arrived. Default 0.2."""
    retry: bool = True
    """False keeps auto_gate's error hook off: a create or update the API server could not admit because it could not
    call a webhook, or could not be reached, then fails the ``up`` (see docs/retry.md)."""


AUTO_GATE_OPT_OUT_ANNOTATION = "readiness.io/auto-gate"
"""The annotation that opts one object out: ``readiness.io/auto-gate: "false"``."""


class AutoGateError(Exception):
    """The error that fails a registration auto_gate could not decide (it is never let through ungated)."""


def auto_gate(
    opts: Optional[AutoGateOptions] = None,
    *,
    provider: Optional[pulumi.ProviderResource] = None,
    timeout: Optional[str] = None,
    stable_for: Optional[str] = None,
    failure_grace: Optional[str] = None,
    namespaces: Optional[List[str]] = None,
    installers: Optional[List[str]] = None,
    exclude: Optional[Callable[[str, str], bool]] = None,
    settle: Optional[float] = None,
    retry: Optional[bool] = None,
) -> None:
    """
    auto_gate gates every later ``kubernetes:`` registration on what it needs (a CRD the stack
    installs, a webhook that intercepts it, the Secret a Certificate or ExternalSecret produces, a
    Helm release): it only adds ``depends_on`` entries, never changes props. Call it once, before
    the resources it should see. Options come as an :class:`AutoGateOptions` or as keyword
    arguments (which win). Unless ``retry=False``, every ``kubernetes:`` custom resource also gets the
    error hook :func:`auto_retry` gives. See docs/autogate.md.
    """
    o = dataclasses.replace(opts) if opts is not None else AutoGateOptions()
    for k, v in (("provider", provider), ("timeout", timeout), ("stable_for", stable_for), ("failure_grace", failure_grace),
                 ("namespaces", namespaces), ("installers", installers), ("exclude", exclude), ("settle", settle),
                 ("retry", retry)):
        if v is not None:
            setattr(o, k, v)
    g = _AutoGate(o)
    if o.retry:
        missing = _error_hooks_missing()
        if missing:
            pulumi.log.warn(f"auto_gate: {missing}: a create that fails after its gate passed is not retried (docs/retry.md); "
                            "pass retry=False to silence this")
        else:
            g.register_retry_hook()
    pulumi.runtime.register_stack_transformation(g.record_order)
    pulumi.runtime.register_resource_transform(g.transform)


def auto_retry(provider: Optional[pulumi.ProviderResource] = None, timeout: Optional[str] = None) -> None:
    """
    auto_retry, for a program that places its gates by hand (no :func:`auto_gate`), gives every
    ``kubernetes:`` custom resource registered after it the error hook auto_gate gives: a create or
    update the API server could not admit because it could not call a webhook (connection refused,
    no endpoints, timeout, TLS) or could not be reached is tried again once the object's own
    admission is proven again; never a denial, an invalid object, a quota or RBAC refusal. Every
    decision is the provider's (``readiness:index:autoGateRetry``), through ``provider`` (a readiness
    Provider, else the default one); ``timeout`` bounds each wait for an admission (a Go duration,
    default 5m). Needs a Pulumi CLI with error hooks (3.217 or later). See docs/retry.md.
    """
    g = _AutoGate(AutoGateOptions(provider=provider, timeout=timeout))
    g.retry_only = True
    missing = _error_hooks_missing()
    if missing:
        raise AutoGateError(f"readiness: auto_retry needs error hooks: {missing} (docs/retry.md)")
    g.register_retry_hook()
    pulumi.runtime.register_resource_transform(g.transform)


def _error_hooks_missing() -> str:
    """What lacks error hooks ("" when they work): this pulumi SDK, or the Pulumi CLI (3.217 or later),
    as the SDK's settings record the engine's features."""
    if getattr(pulumi, "ErrorHook", None) is None:
        return "this pulumi Python SDK has no error hooks"
    try:
        from pulumi.runtime.proto import resource_pb2  # pylint: disable=import-outside-toplevel
        features = getattr(pulumi.runtime.settings.SETTINGS, "monitor_features", None)
        if isinstance(features, (set, frozenset)) and features and resource_pb2.RESOURCE_MONITOR_FEATURE_ERROR_HOOKS not in features:
            return "this Pulumi CLI has no error hooks (3.217 or later has)"
    except Exception:  # pylint: disable=broad-except
        pass  # an SDK that keeps them elsewhere: the hook's registration says it if the CLI lacks them
    return ""


# The one error hook a program registers (auto_gate or auto_retry).
_RETRY_HOOK_NAME = "readiness-retry"

# The programs (their resource monitors) whose error hook is registered: one per program.
_RETRY_PROGRAMS: "weakref.WeakSet[Any]" = weakref.WeakSet()


# The component types pulumi_kubernetes renders in the program's process: their children register
# after them, once rendered, so a dependency on one is sent as the children it has so far.
_IN_PROCESS = {"kubernetes:helm.sh/v3:Chart", "kubernetes:yaml:ConfigFile", "kubernetes:yaml:ConfigGroup"}

# Bounds each wait of a decision (as in Go and TypeScript); tests shorten it.
_PLAN_TIMEOUT = 120.0


def _keep_as_is(_args: pulumi.ResourceTransformArgs) -> None:
    # A transform of its own that changes nothing: the engine records in the state the depends_on
    # a stack transform adds only for a registration that carries transforms of its own (destroy needs it).
    return None


class _AutoGate:
    def __init__(self, o: AutoGateOptions) -> None:
        self.o = o
        self.session = f"{pulumi.get_stack()}-{secrets.token_hex(8)}"
        self.places: List[Dict[str, Any]] = []  # program order: {order, type, name} and "provider" (a handle)
        self.sent_up_to = 0
        self.resend: List[Dict[str, Any]] = []  # places a failed call carried: sent again (the provider takes each once)
        self.facts_sent: set = set()  # cluster ids whose facts a call carried
        self.order_of: Dict[str, int] = {}  # by _key
        self.components: Dict[str, List[pulumi.ComponentResource]] = {}  # in-process components a registration depends on
        self.in_process: List[pulumi.ComponentResource] = []  # every in-process component the program made
        self.handles: Dict[str, pulumi.Resource] = {}  # the program's resources, by _key
        self.parent_of: "weakref.WeakKeyDictionary[pulumi.Resource, pulumi.Resource]" = weakref.WeakKeyDictionary()
        self.known: Dict[str, pulumi.Resource] = {}  # the program's resources, by URN
        self.facts: Dict[str, asyncio.Future] = {}  # cluster facts by cluster id, each fetched (and sent) once
        self.providers: Dict[str, Provider] = {}  # readiness providers for other clusters, by name
        self.gates: Dict[str, asyncio.Future] = {}  # by key
        self.retry_hook: Optional[Any] = None  # the program's error hook (None: retry off)
        self.retry_only = False  # auto_retry: no gates, only the hook
        self.cluster_of: Dict[str, str] = {}  # a registration's cluster id by its URN, for the error hook

    def register_retry_hook(self) -> None:
        # The program's one error hook: auto_gate and auto_retry both called (or either twice) is
        # an error, not two hooks of one name.
        monitor = pulumi.runtime.settings.get_monitor()
        if monitor is not None and monitor in _RETRY_PROGRAMS:
            raise AutoGateError("readiness: the error hook is registered already: call auto_gate or auto_retry once per program")
        self.retry_hook = pulumi.ErrorHook(_RETRY_HOOK_NAME, self.on_error)
        if monitor is not None:
            _RETRY_PROGRAMS.add(monitor)

    async def on_error(self, a: Any) -> bool:
        # Asks the provider whether the failed step may be tried again; it waits until the object
        # is admitted again before it says yes. A preview is never retried: it proves nothing.
        if pulumi.runtime.is_dry_run():
            return False
        cluster = self.cluster_of.get(a.urn)
        if cluster is None:
            pulumi.log.warn(f"readiness: {a.type} {a.name} failed to {a.failed_operation} and is not retried: "
                            "its cluster is not known to the error hook")
            return False
        held = _HEADROOM.grow()  # the failed registration holds its executor thread meanwhile
        try:
            obj = await _revealed(a.new_inputs)
            call: Dict[str, Any] = {"type": a.type, "name": a.name, "failedOperation": a.failed_operation,
                                    "errors": list(a.errors or []), "cluster": await self._facts_of(cluster)}
            if isinstance(obj, dict):
                call["object"] = obj
            if self.o.timeout:
                call["timeout"] = self.o.timeout
            opts = pulumi.InvokeOptions.merge(_utilities.get_invoke_opts_defaults(),
                                              pulumi.InvokeOptions(provider=self.o.provider) if self.o.provider is not None else None)
            r = await pulumi.runtime.invoke_async("readiness:index:autoGateRetry", call, opts)
        finally:
            _HEADROOM.shrink(held)
        if not isinstance(r, dict):
            raise Exception(f"readiness: the retry call for {a.type} {a.name} answered {r!r}")
        retry, why = bool(r.get("retry")), r.get("why") or ""
        msg = f"readiness: {a.failed_operation} of {a.type} {a.name}: {why}"
        if retry:
            pulumi.log.info(msg)
        else:
            pulumi.log.warn(msg)
        return retry

    def _with_retry_hook(self, opts: pulumi.ResourceOptions) -> pulumi.ResourceOptions:
        # The registration's options with the program's error hook added.
        opts = copy.copy(opts)
        b = copy.copy(opts.hooks) if opts.hooks is not None else pulumi.ResourceHookBinding()
        b.on_error = [*(b.on_error or []), self.retry_hook]
        opts.hooks = b
        return opts

    async def _note_cluster(self, a: pulumi.ResourceTransformArgs) -> None:
        # auto_retry: the registration's cluster, for the error hook (no decision).
        parent_urn = await _urn_of(a.opts.parent)
        cluster = _cluster_id(await _urn_of(a.opts.provider))
        self.cluster_of[child_urn(_prefix(), parent_urn, a.type_, a.name)] = cluster

    # record_order notes the program's Kubernetes resources in the order it makes them (the legacy
    # transformation runs in the constructor): Python registers each once its inputs resolve, so
    # the engine's order is not the program's.
    def record_order(self, a: pulumi.ResourceTransformationArgs) -> Optional[pulumi.ResourceTransformationResult]:
        if a.type_ in _IN_PROCESS and isinstance(a.resource, pulumi.ComponentResource):
            # Its children's registrations name it by URN only: found again by it (see _family).
            self.in_process.append(a.resource)
            if a.opts is not None and a.opts.parent is not None:
                self.parent_of[a.resource] = a.opts.parent
            return None
        if not a.type_.startswith("kubernetes:") or not isinstance(a.resource, pulumi.CustomResource):
            return None
        opts = a.opts or pulumi.ResourceOptions()
        parent = opts.parent
        parent_type = _resource_type(parent)
        key = _key(a.type_, a.name, "" if parent_type in ("", "pulumi:pulumi:Stack") else getattr(parent, "_name", ""))
        if parent is not None:
            self.parent_of[a.resource] = parent
        self.handles[key] = a.resource
        if key not in self.order_of and not parent_type.startswith("kubernetes:"):  # a component's child settles instead
            self.order_of[key] = len(self.places)
            self.places.append({"order": len(self.places), "type": a.type_, "name": a.name, "provider": opts.provider})
        comps = [d for d in _to_list(opts.depends_on) if isinstance(d, pulumi.ComponentResource) and _resource_type(d) in _IN_PROCESS]
        if comps:
            self.components[key] = comps
        ropts = copy.copy(opts)
        ropts.transforms = list(opts.transforms or []) + [_keep_as_is]
        return pulumi.ResourceTransformationResult(props=a.props, opts=ropts)

    async def transform(self, a: pulumi.ResourceTransformArgs) -> Optional[pulumi.ResourceTransformResult]:
        if not a.custom or not a.type_.startswith("kubernetes:"):
            return None
        held = _HEADROOM.grow()  # this registration keeps its executor thread until we answer
        gates: List[pulumi.Resource] = []
        try:
            if self.retry_only:
                await self._note_cluster(a)
            else:
                gates = await self._decide(a)
            # Held until the gates are registered, so that their threads count here too.
            for g in gates:
                await g.urn.future()
        except Exception as e:  # noqa: BLE001 every cause fails the registration: ungated would be a false ready
            if self.retry_only:
                pulumi.log.warn(f"readiness: {a.type_} {a.name} gets no error hook: {_error_text(e)}")
                return None
            err = AutoGateError(f"autoGate could not decide the gates of {a.type_} {a.name}, so it is not registered ungated: {_error_text(e)}")
            pulumi.log.error(str(err))
            raise err from e
        finally:
            _HEADROOM.shrink(held)
        if not gates and self.retry_hook is None:
            return None
        opts = copy.copy(a.opts)
        if gates:
            opts.depends_on = [*_to_list(a.opts.depends_on), *gates]
        if self.retry_hook is not None:
            opts = self._with_retry_hook(opts)
        return pulumi.ResourceTransformResult(props=a.props, opts=opts)

    async def _decide(self, a: pulumi.ResourceTransformArgs) -> List[pulumi.Resource]:
        parent_urn = await _urn_of(a.opts.parent)
        at_top = not parent_urn or type_of_urn(parent_urn) == "pulumi:pulumi:Stack"
        urn = child_urn(_prefix(), parent_urn, a.type_, a.name)
        key = _key(a.type_, a.name, "" if at_top else (parent_urn or "").split("::")[-1])
        if key in self.handles:
            self.known[urn] = self.handles[key]
        obj = await plain(a.props)
        reg: Dict[str, Any] = {"id": urn, "type": a.type_, "name": a.name, "object": obj if isinstance(obj, dict) else {}}
        if not at_top:
            reg["parent"], reg["parentType"] = parent_urn, type_of_urn(parent_urn or "")
        reg["dependsOn"] = [u for u in [await _urn_of(d) for d in _to_list(a.opts.depends_on)] if u]
        cluster = _cluster_id(await _urn_of(a.opts.provider))
        if cluster:
            reg["cluster"] = cluster
        self.cluster_of[urn] = cluster
        if key in self.order_of:
            reg["order"] = self.order_of[key]
        reg["awaits"] = [u for c in self.components.get(key, []) for u in await self._child_urns(c)]
        if not at_top:
            reg["awaits"] += await self._family(parent_urn or "")
        if self.o.exclude is not None and self.o.exclude(a.type_, a.name):
            reg["excluded"] = True
        call: Dict[str, Any] = {"session": self.session, "options": self._options(), "registration": reg}
        clusters = await self._facts_once(cluster)
        if clusters:
            call["clusters"] = clusters
        call["entries"] = await self._unsent_places()
        try:
            answer = await self._ask(call, a)
        except Exception:
            self.resend.extend(call["entries"])  # a place or a cluster a failed call carried goes again with the next one
            if clusters:
                self.facts_sent.discard(cluster)
            raise
        for w in answer.get("warnings") or []:
            pulumi.log.warn(f"autoGate: {w}")
        specs = answer.get("gates") or []
        if not specs:
            return []
        prov = await self._gate_provider(answer.get("provider") or "", cluster)
        pending = [self._gate(s, prov) for s in specs]  # in order: afterGates name earlier ones
        return [await asyncio.shield(p) for p in pending]

    def _options(self) -> Dict[str, Any]:
        o = self.o
        out = {"timeout": o.timeout, "stableFor": o.stable_for, "failureGrace": o.failure_grace,
               "namespaces": o.namespaces, "installers": o.installers}
        if self.retry_hook is not None:
            out["retried"] = True  # every Kubernetes registration gets the hook: the provider may count on its retry
        if o.settle is not None and o.settle > 0:
            out["settle"] = f"{max(1, round(o.settle * 1e6))}us"
        if _PLAN_TIMEOUT != 120.0:
            out["planTimeout"] = f"{max(1, round(_PLAN_TIMEOUT * 1e6))}us"
        return {k: v for k, v in out.items() if v is not None}

    async def _unsent_places(self) -> List[Dict[str, Any]]:
        # Each place goes once, with whichever call is next; an explicit provider not registered
        # within a second is another cluster than any registered one ("?").
        places, self.sent_up_to = self.places[self.sent_up_to:], len(self.places)
        out, self.resend = self.resend, []
        for p in places:
            e = {k: p[k] for k in ("order", "type", "name")}
            if p["provider"] is not None:
                try:
                    c = _cluster_id(await asyncio.wait_for(asyncio.shield(_urn_of(p["provider"])), 1))
                except asyncio.TimeoutError:
                    c = "?"
                if c:
                    e["cluster"] = c
            out.append(e)
        return out

    async def _facts_once(self, cluster: str) -> List[Dict[str, Any]]:
        # The cluster's facts the first time a call names it (fetched once; a failed fetch is tried again).
        if cluster in self.facts_sent:
            return []
        self.facts_sent.add(cluster)
        try:
            return [await self._facts_of(cluster)]
        except Exception:
            self.facts_sent.discard(cluster)
            raise

    async def _facts_of(self, cluster: str) -> Dict[str, Any]:
        # The cluster's facts as the decisions got them (fetched once; a failed fetch is tried again).
        if cluster not in self.facts:
            self.facts[cluster] = asyncio.ensure_future(self._facts(cluster))
            self.facts[cluster].add_done_callback(_consume)
        f = self.facts[cluster]
        try:
            return await asyncio.shield(f)
        except Exception:
            if self.facts.get(cluster) is f:
                del self.facts[cluster]
            raise

    async def _facts(self, cluster: str) -> Dict[str, Any]:
        if cluster == "" and self.o.provider is not None:
            return {"id": "", "planner": True}
        if cluster == "":
            cfg: Callable[[str], Any] = lambda k: pulumi.runtime.get_config(f"kubernetes:{k}")
            f: Dict[str, Any] = {"id": ""}
        else:
            state = await _registered_state(cluster)
            cfg = lambda k: state.get(k) if isinstance(state, dict) else None
            f = {"id": cluster, "name": cluster.split("::")[-1]}
            if pulumi.runtime.is_dry_run() and _is_unknown(cfg("kubeconfig")):
                f["unknown"] = True
        for k in ("kubeconfig", "context", "namespace", "cluster", "renderYamlToDirectory"):
            v = cfg(k)
            if isinstance(v, str) and v and not _is_unknown(v):
                f[k] = v
        return f

    async def _gate_provider(self, name: str, cluster: str) -> Optional[pulumi.ProviderResource]:
        # "" is auto_gate's own; else one made once per name, configured as the cluster's kubernetes provider.
        if name == "":
            return self.o.provider
        if name not in self.providers:
            f = await asyncio.shield(self.facts[cluster])
            if name not in self.providers:
                kubeconfig = f.get("kubeconfig")
                self.providers[name] = Provider(name, kubeconfig=pulumi.Output.secret(kubeconfig) if kubeconfig else None,
                                                context=f.get("context"), namespace=f.get("namespace"))
                pulumi.log.info(f"autoGate: objects of {cluster or 'the stack kubernetes provider'} are gated by readiness provider {name}, "
                                "configured as their kubernetes provider")
        return self.providers[name]

    async def _ask(self, call: Dict[str, Any], a: pulumi.ResourceTransformArgs) -> Dict[str, Any]:
        # One call, bounded: the provider's own waits (cluster facts, in-process children, places
        # above) are bounded by the plan timeout each. Its gRPC call holds an executor thread.
        opts = pulumi.InvokeOptions.merge(_utilities.get_invoke_opts_defaults(),
                                          pulumi.InvokeOptions(provider=self.o.provider) if self.o.provider is not None else None)
        bound = 3 * _PLAN_TIMEOUT + min(_PLAN_TIMEOUT, 30.0)

        async def invoke() -> Any:
            token = _HEADROOM.grow()
            try:
                return await pulumi.runtime.invoke_async("readiness:index:autoGateDecide", call, opts)
            finally:
                _HEADROOM.shrink(token)

        task = asyncio.ensure_future(invoke())
        done, _ = await asyncio.wait({task}, timeout=bound)
        if task not in done:
            task.add_done_callback(_consume)  # left running: cancelling an invoke fails the program's RPCs at its end
            raise TimeoutError(f"the decide call for {a.type_} {a.name} did not answer within {bound:g} s")
        answer = task.result()
        if not isinstance(answer, dict):
            raise Exception(f"the decide call for {a.type_} {a.name} answered {answer!r}")
        return answer

    def _gate(self, spec: Dict[str, Any], prov: Optional[pulumi.ProviderResource]) -> asyncio.Future:
        # The one gate of a key; after-gates are looked up now (an answer lists them first).
        key = spec["key"]
        f = self.gates.get(key)
        if f is None:
            before = []
            for k in spec.get("afterGates") or []:
                if k not in self.gates:
                    raise Exception(f"the decision answered gate {key} after an unknown gate {k}")
                before.append(self.gates[k])
            f = self.gates[key] = asyncio.ensure_future(self._make_gate(spec, before, prov))

            def forget(t: asyncio.Future) -> None:
                if (t.cancelled() or t.exception() is not None) and self.gates.get(key) is t:
                    del self.gates[key]  # a later registration tries again

            f.add_done_callback(forget)
        return f

    async def _make_gate(self, spec: Dict[str, Any], before: List[asyncio.Future], prov: Optional[pulumi.ProviderResource]) -> pulumi.Resource:
        deps: List[pulumi.Resource] = [await asyncio.shield(b) for b in before]
        for u in spec.get("after") or []:
            h = self.known.get(u)
            if h is None:
                # A component's child, known by URN only: the gate starts once the engine registered it
                # (on an update, its new state: ResourceReady must not pass on the old one).
                await _registered_state(u)
                h = DependencyResource(u)
            deps.append(h)
        args = dict(spec.get("args") or {})
        for f in spec.get("argsFrom") or []:
            args[f["arg"]] = _output_of(f["installer"], f["output"])  # an autonamed installer's name is in its outputs only
        if args.get("objects") is not None:
            args["objects"] = pulumi.Output.secret(args["objects"])  # AdmissionReady's objects may be Secrets
        opts = pulumi.ResourceOptions.merge(_utilities.get_resource_opts_defaults(), pulumi.ResourceOptions(depends_on=deps, provider=prov))
        token = _HEADROOM.grow()  # its registration holds a thread until the gate is ready
        gate = _Gate(spec["type"], spec["name"], args, opts)
        registered = asyncio.ensure_future(gate.urn.future())
        registered.add_done_callback(lambda t: (_consume(t), _HEADROOM.shrink(token)))
        if spec.get("reason"):
            pulumi.log.info(f"autoGate: {spec['name']}: {spec['reason']}")
        return gate

    async def _family(self, parent_urn: str) -> List[str]:
        # A child of an in-process component: every child of the outermost one it is in (a
        # ConfigGroup v1 for its ConfigFiles' children), itself among them. The provider decides
        # them once all arrived, not after a pause a loaded machine exceeds. [] for a child of a
        # component the plugin renders (Chart v4, ConfigGroup v2): its family settles instead.
        name = parent_urn.split("::")[-1]
        root = None
        for c in self.in_process:
            if getattr(c, "_name", None) == name and await _urn_of(c) == parent_urn:
                root = c
                break
        if root is None:
            return []
        while _resource_type(self.parent_of.get(root)) in _IN_PROCESS:
            root = self.parent_of[root]
        return await self._child_urns(root)

    async def _child_urns(self, comp: pulumi.ComponentResource) -> List[str]:
        # The URNs of an in-process component's Kubernetes children, once it rendered them.
        resources = getattr(comp, "resources", None)
        children = await resources.future() if isinstance(resources, pulumi.Output) else None
        out = []
        for r in (children or {}).values():
            t = _resource_type(r)
            if isinstance(r, pulumi.CustomResource) and t.startswith("kubernetes:") and r in self.parent_of:
                out.append(child_urn(_prefix(), await _urn_of(self.parent_of[r]), t, getattr(r, "_name", "")))
        return out


class _Headroom:
    """
    The Python SDK makes every blocking gRPC call to the engine (a registration, an invoke) in the
    event loop's default executor, a bounded pool of threads. A registration held in the transform
    keeps its thread, and the decide invoke it waits for (held by the provider until the earlier
    registrations arrive) needs one more: with many at once, every thread waits and the program
    hangs. Node and Go have no such pool. So the pool grows by one thread for each held
    registration, each decide call in flight and each gate registering, for that long.
    """

    def grow(self) -> Optional[Any]:
        try:
            loop = asyncio.get_running_loop()
            ex = getattr(loop, "_default_executor", None)
            if ex is None:
                loop.run_in_executor(None, _noop)  # the pool the SDK's first call would make
                ex = getattr(loop, "_default_executor", None)
            if isinstance(ex, concurrent.futures.ThreadPoolExecutor) and isinstance(getattr(ex, "_max_workers", None), int):
                ex._max_workers += 1
                with ex._shutdown_lock:  # type: ignore[attr-defined]
                    ex._adjust_thread_count()  # type: ignore[attr-defined] # calls queued already get the new thread now
                return ex
        except Exception:  # noqa: BLE001 another executor: left as it is
            pass
        return None

    def shrink(self, ex: Optional[Any]) -> None:
        if ex is not None:
            ex._max_workers -= 1


_HEADROOM = _Headroom()


def _noop() -> None:
    return None


class _Gate(pulumi.CustomResource):
    # A readiness gate registered by token (the decision names its type and inputs).
    def __init__(self, t: str, name: str, props: Dict[str, Any], opts: pulumi.ResourceOptions) -> None:
        super().__init__(t, name, props, opts)


async def _registered_state(urn: str) -> Any:
    # The engine's built-in getResource answers once the resource's step finished in this
    # deployment: asked until it does (only "unknown resource" is waited out).
    deadline = time.monotonic() + 30 * 60
    delay = 0.05
    while True:
        try:
            got = await pulumi.runtime.invoke_async("pulumi:pulumi:getResource", {"urn": urn}, pulumi.InvokeOptions())
            state = got.get("state") if isinstance(got, dict) else None
            return state if state is not None else {}
        except Exception as e:  # noqa: BLE001 see above
            if "unknown resource" not in _error_text(e) or time.monotonic() > deadline:
                raise
        await asyncio.sleep(delay)
        delay = min(delay * 2, 1.0)


def _output_of(urn: str, path: str) -> pulumi.Output:
    # An installer's output at a dotted path, once the engine created it; unknown in a preview.
    if pulumi.runtime.is_dry_run():
        async def none() -> None:
            return None

        async def false() -> bool:
            return False

        return pulumi.Output(resources=set(), future=none(), is_known=false())

    async def read() -> str:
        v: Any = await _registered_state(urn)
        for k in path.split("."):
            v = v.get(k) if isinstance(v, dict) else None
        if not isinstance(v, str) or v == "":
            raise Exception(f"autoGate: {urn} has no output {path} to name its gate with")
        return v

    return pulumi.Output.from_input(asyncio.ensure_future(read()))


# ---------------------------------------------------------------------------------------------
# Helpers.

_SIG_KEY = "4dabf18193072939515e22adb298388d"
_UNKNOWN_STRING = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"


def _key(type_: str, name: str, parent_name: str) -> str:
    # A registration in both transforms: the program's (handles) and the engine's (URNs).
    return f"{type_}::{name}::{parent_name}"


def _prefix() -> str:
    return f"urn:pulumi:{pulumi.get_stack()}::{pulumi.get_project()}::"


def _cluster_id(urn: Optional[str]) -> str:
    # A kubernetes provider's URN as the decision names its cluster: "" for the default provider.
    name = (urn or "").split("::")[-1]
    return "" if not urn or name == "default" or name.startswith("default_") else urn


def _is_unknown(v: Any) -> bool:
    return isinstance(v, Unknown) or (isinstance(v, str) and v == _UNKNOWN_STRING)


def type_of_urn(urn: str) -> str:
    """type_of_urn is the resource's own type token in a URN (the last of its qualified type)."""
    parts = urn.split("::")
    return (parts[2] if len(parts) > 2 else "").split("$")[-1]


def is_component_child(parent_urn: str) -> bool:
    """is_component_child: the parent is a pulumi-kubernetes component (Chart v4, ConfigGroup, ...)."""
    return type_of_urn(parent_urn).startswith("kubernetes:")


def child_urn(prefix: str, parent_urn: Optional[str], type_: str, name: str) -> str:
    """child_urn is the URN the engine gives a registration (the root stack is no parent in it)."""
    parts = parent_urn.split("::") if parent_urn else []
    parent_type = parts[2] if len(parts) > 2 else ""
    qualified = f"{parent_type}${type_}" if parent_type and parent_type != "pulumi:pulumi:Stack" else type_
    return f"{prefix}{qualified}::{name}"


async def _urn_of(r: Any) -> Optional[str]:
    if isinstance(r, pulumi.Output):
        r = await r.future()
    elif r is not None and not isinstance(r, pulumi.Resource) and inspect.isawaitable(r):
        r = await r
    urn = r.__dict__.get("urn") if isinstance(r, pulumi.Resource) else None
    return await urn.future() if urn is not None else None


def _to_list(v: Any) -> List[Any]:
    return [] if v is None else list(v) if isinstance(v, (list, tuple)) else [v]


def _resource_type(r: Any) -> str:
    # A constructed resource's type token ("" for none, or a DependencyResource).
    t = r.__dict__.get("_type") if isinstance(r, pulumi.Resource) else None
    return t if isinstance(t, str) else ""


def _has_awaitables(v: Any) -> bool:
    if isinstance(v, pulumi.Output) or inspect.isawaitable(v):
        return True
    if isinstance(v, abc.Mapping):
        return _SIG_KEY not in v and any(_has_awaitables(v[k]) for k in v)
    return isinstance(v, (list, tuple)) and any(_has_awaitables(x) for x in v)


async def plain(v: Any) -> Any:
    """
    plain turns props as a transform sees them into JSON for the decision: unknown values
    (preview), secrets, resources and assets become None (left out of a mapping). Only an Output
    or an awaitable is waited for: a chart's CRD is a large object walked once, synchronously.
    """
    if not _has_awaitables(v):
        return plain_now(v)
    if isinstance(v, pulumi.Output):
        if not await v.is_known() or await v.is_secret():
            return None
        return await plain(await v.future())
    if inspect.isawaitable(v):
        return await plain(await v)
    if isinstance(v, abc.Mapping):
        out = {}
        for k in v:
            p = await plain(v[k])
            if p is not None:
                out[k] = p
        return out
    return [await plain(x) for x in v]


async def _revealed(v: Any) -> Any:
    # An error hook's inputs as plain JSON for the retry decision: secrets revealed (the object is
    # dry-run as it was sent; the provider keeps it secret), unknown values left out.
    if isinstance(v, pulumi.Output):
        return await _revealed(await v.future()) if await v.is_known() else None
    if inspect.isawaitable(v):
        return await _revealed(await v)
    if isinstance(v, abc.Mapping) and _SIG_KEY not in v:
        out = {}
        for k in v:
            p = await _revealed(v[k])
            if p is not None:
                out[k] = p
        return out
    if isinstance(v, (list, tuple)):
        return [await _revealed(x) for x in v]
    return plain_now(v)


def plain_now(v: Any) -> Any:
    """plain_now is :func:`plain` for values known now, without waiting: any Output or awaitable is None."""
    if v is None or isinstance(v, pulumi.Output) or inspect.isawaitable(v) or _is_unknown(v):
        return None
    if isinstance(v, (str, int, float, bool)):
        return v
    if isinstance(v, (pulumi.Resource, Asset, Archive)):
        return None
    if isinstance(v, abc.Mapping):
        if _SIG_KEY in v:
            return None  # a secret (or another special value): the decision needs none
        return {k: p for k, p in ((k, plain_now(x)) for k, x in v.items()) if p is not None}
    if isinstance(v, abc.Sequence) and not isinstance(v, (bytes, bytearray)):
        return [plain_now(x) for x in v]
    return None


def _consume(t: asyncio.Future) -> None:
    # A background future's error is reported where it matters, not as "never retrieved".
    if not t.cancelled():
        t.exception()


def _error_text(e: BaseException) -> str:
    if isinstance(e, asyncio.TimeoutError) and not str(e):
        return "timed out"
    return str(e)
