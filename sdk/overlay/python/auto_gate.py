# Hand-written (sdk/overlay/python, copied here by `make sdk`): edit the overlay, not the copy.
#
# auto_gate: one call at the top of a program puts the right readiness gate in front of every
# Kubernetes object that something else in the stack can block (issue #24). A port of the
# TypeScript overlay (sdk/overlay/nodejs/autoGate.ts), kept in its structure so the two can be
# read side by side: every rule lives in the provider's function `readiness:index:autoGatePlan`;
# this file only carries registrations to it and wires the gates it answers with into
# `depends_on`. See docs/autogate.md.
#
# Async: the engine calls the stack transform back through the SDK's callback server, a grpc.aio
# server on the program's own event loop. A transform is a coroutine there: it may await other
# registrations' URNs, invokes (which run the blocking gRPC call in the loop's executor) and the
# registration of the gates it creates, without blocking the loop. Unlike JavaScript, calling a
# coroutine runs none of it: where the TypeScript relies on the part of an async function before
# its first await running at once (a decision's place in order), that part is a plain method here.
from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import copy
import dataclasses
import inspect
import json
import sys
import time
import typing
import weakref
from collections import abc
from typing import Any, Awaitable, Callable, Deque, Dict, List, Optional, Sequence, Set, Tuple

import pulumi
import pulumi.runtime
from pulumi import _types
from pulumi.asset import Archive, Asset
from pulumi.output import Unknown
from pulumi.resource import DependencyResource

from . import _utilities
from .provider import Provider

__all__ = [
    "AUTO_GATE_OPT_OUT_ANNOTATION",
    "AutoGateDeps",
    "AutoGateError",
    "AutoGateOptions",
    "AutoGater",
    "auto_gate",
    "child_urn",
    "is_component_child",
    "plain",
    "plain_now",
    "plan_batcher",
    "type_of_urn",
]


@dataclasses.dataclass
class AutoGateOptions:
    """Options of :func:`auto_gate`; all optional."""

    provider: Optional[pulumi.ProviderResource] = None
    """A readiness Provider for the gates and for the plan invoke."""
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
    """
    Children of a component (a Chart v4, a ConfigGroup) are registered concurrently, in no
    guaranteed order: each child's decision waits until no new child of the same component
    arrived for this many seconds. Default 0.2.
    """


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
) -> None:
    """
    auto_gate registers a stack transform that gates every later ``kubernetes:`` registration on
    what it needs (a CRD the stack installs, a webhook that intercepts it, the Secret a
    Certificate or ExternalSecret produces, a Helm release): it only adds ``depends_on`` entries,
    never changes props. Call it once, before the resources it should see. Options come as an
    :class:`AutoGateOptions` or as keyword arguments (which win).
    """
    o = dataclasses.replace(opts) if opts is not None else AutoGateOptions()
    for k, v in (("provider", provider), ("timeout", timeout), ("stable_for", stable_for), ("failure_grace", failure_grace),
                 ("namespaces", namespaces), ("installers", installers), ("exclude", exclude), ("settle", settle)):
        if v is not None:
            setattr(o, k, v)
    gater = AutoGater(o, _pulumi_deps(o))

    # The legacy (in-process) transformation sees the program's own resources as they are
    # constructed, in program order and as objects: a gate then depends on an installer the
    # program created by its real handle.
    def transformation(a: pulumi.ResourceTransformationArgs) -> Optional[pulumi.ResourceTransformationResult]:
        try:
            gater.track(a.type_, a.name, a.resource, a.props, a.opts)
        except Exception as e:  # noqa: BLE001 a warning: its registration decides it
            pulumi.log.warn(f"autoGate: {a.type_} {a.name} is decided when it registers: {e}")
        # Its props are never changed. A resource transform of its own that changes nothing makes
        # the engine record in the state the depends_on the stack transform below adds (it does so
        # only for a registration that carries transforms of its own): `destroy` then deletes a
        # custom resource before its gate, and the gate before what it waited for.
        if not a.type_.startswith("kubernetes:") or isinstance(a.resource, pulumi.ComponentResource):
            return None
        ropts = copy.copy(a.opts)
        ropts.transforms = list(a.opts.transforms or []) + [_keep_as_is]
        return pulumi.ResourceTransformationResult(props=a.props, opts=ropts)

    pulumi.runtime.register_stack_transformation(transformation)

    # (No context to re-enter, unlike Node's AsyncLocalStorage: the callback server's tasks are
    # started from the program's context, and the SDK's settings fall back to the first value set.)
    async def transform(a: pulumi.ResourceTransformArgs) -> Optional[pulumi.ResourceTransformResult]:
        if not a.custom or not a.type_.startswith("kubernetes:"):
            return None
        # The registration this transform holds keeps one of the executor's threads (see _Headroom)
        # until the SDK answers the engine, which it does once the gates are registered.
        token = _HEADROOM.grow()
        try:
            r = await gater.transform(a)
            for d in (r.opts.depends_on if r is not None else None) or []:
                await d.urn.future()
            return r
        finally:
            _HEADROOM.shrink(token)

    pulumi.runtime.register_resource_transform(transform)


# _keep_as_is is a resource transform that changes nothing (see auto_gate).
def _keep_as_is(_args: pulumi.ResourceTransformArgs) -> None:
    return None


# ---------------------------------------------------------------------------------------------
# The contract with `readiness:index:autoGatePlan` (provider/pkg/autogate), as JSON-shaped dicts:
#
#   plan args:   {resource: {type, name, parentType?, parent?, object, cluster?},
#                 installers: [{id, type, name, object, cluster?, parent?}], dependsOn: [id],
#                 options: {timeout?, stableFor?, failureGrace?, namespaces?}}
#   plan result: {remember?, installer?, gates?: [gate], warnings?: [str]}
#   gate:        {key, name, type, args, after?: [installer id], afterGates?: [key], reason?,
#                 argsFrom?: [{arg, installer, output}]}
#   batch args:  {installers: [installer], plans: [plan args with installers as indexes]}
#   batch result:{gates?: [gate], results: [plan result with gates as indexes]}

PlanArgs = Dict[str, Any]
PlanResult = Dict[str, Any]
PlannedGate = Dict[str, Any]


@dataclasses.dataclass
class AutoGateDeps:
    """What the gater needs from Pulumi; tests give fakes."""

    plan: Callable[[PlanArgs, Optional[pulumi.ProviderResource]], Awaitable[PlanResult]]
    """Asks the plan, through the readiness provider of the registration's cluster (None: auto_gate's own)."""
    create_gate: Callable[[PlannedGate, List[pulumi.Resource], Optional[pulumi.ProviderResource]], pulumi.Resource]
    """Registers a gate (top level, never a component's child) after the given resources."""
    wait_registered: Callable[[str], Awaitable[None]]
    """Resolves once the resource with this URN was registered and its step finished."""
    urn_prefix: Callable[[], str]
    """ "urn:pulumi:<stack>::<project>::" """
    info: Callable[[str], None]
    warn: Callable[[str], None]
    output_of: Optional[Callable[[str, str], Any]] = None
    """A registered resource's outputs at a dotted path (unknown in a preview)."""
    cluster_provider: Optional[Callable[[str], Awaitable[Dict[str, Any]]]] = None
    """
    The readiness provider for the cluster of an explicit kubernetes provider (by its URN),
    configured as it is ({"provider": ...}); or why its objects cannot be gated ({"skip": ...}).
    """
    default_provider: Optional[Callable[[], Awaitable[Dict[str, Any]]]] = None
    """
    The readiness provider for the objects of the default kubernetes provider ({"provider": None}:
    the default readiness provider), configured as the stack's kubernetes configuration; or why
    its objects cannot be gated ({"skip": ...}).
    """
    error: Optional[Callable[[str], None]] = None
    """Logs an error (the registration it names fails)."""
    plan_timeout: Optional[float] = None
    """How long one plan call may take, in seconds, before the registration fails (default 120)."""


# An installer: a resource the plan answered `remember: true` for; its id is its URN (as in Go).
@dataclasses.dataclass(eq=False)
class _Installer:
    id: str
    type: str
    name: str
    object: Any
    urn: str
    seq: int  # the order it was registered (or constructed) in: installers are sent in that order
    order: int  # where the program wrote it (a component's child: where the component is written)
    handle: Optional[pulumi.Resource] = None  # the program's own object, when it constructed it
    cluster: Optional[str] = None
    parent: Optional[str] = None


@dataclasses.dataclass(eq=False)
class _Dep:
    type: str
    urn: Optional[str] = None
    handle: Optional[pulumi.Resource] = None


# A registration as decide needs it.
@dataclasses.dataclass(eq=False)
class _Reg:
    type: str
    name: str
    urn: str
    object: Any
    deps: List[_Dep]
    parent_type: Optional[str] = None
    handle: Optional[pulumi.Resource] = None
    order: Optional[int] = None  # where the program wrote it: only installers written above it count (a cycle otherwise)
    parent_urn: Optional[str] = None
    # The outermost kubernetes component it is a child of (a ConfigGroup v1 for its ConfigFiles'
    # children): its siblings are that component's children.
    component: Optional[str] = None
    cluster: Optional[str] = None  # the URN of its explicit kubernetes provider; None for the default one
    provider: Optional[pulumi.ProviderResource] = None
    values_known: Optional[Callable[[], None]] = None


@dataclasses.dataclass
class _Decided:
    gates: List[PlannedGate]
    sent: Set[str]
    seq: int = -1


@dataclasses.dataclass
class _TrackDecision:
    gates: List[PlannedGate]
    object_key: str
    late: int


# A resource the program constructed at the top level, decided in program order: Python sends a
# registration only once its inputs and depends_on resolved, so the engine's order is not the
# program's (a Deployment without depends_on registers before the Certificate written above it).
@dataclasses.dataclass(eq=False)
class _Constructed:
    resource: pulumi.Resource
    decision: "asyncio.Future[_TrackDecision]"
    order: int
    values_known: Optional[Callable[[], None]]
    components: List[pulumi.ComponentResource]  # in-process kubernetes components (Chart v3, ConfigFile/ConfigGroup v1) it depends on


@dataclasses.dataclass(eq=False)
class _Pending:
    args: pulumi.ResourceTransformArgs
    parent_urn: str
    future: "asyncio.Future[Optional[pulumi.ResourceTransformResult]]"


@dataclasses.dataclass(eq=False)
class _Group:
    items: List[_Pending] = dataclasses.field(default_factory=list)
    timer: Optional[asyncio.TimerHandle] = None
    waiting: bool = False  # an in-process component's group: settled once every child it constructed arrived
    arrival: Optional["asyncio.Future[None]"] = None


@dataclasses.dataclass(eq=False)
class _Children:
    count: int = 0
    waiters: List[Tuple[int, "asyncio.Future[None]"]] = dataclasses.field(default_factory=list)


class AutoGater:
    """AutoGater is auto_gate's bookkeeping (exported for its tests; not a stable API)."""

    def __init__(self, opts: AutoGateOptions, deps: AutoGateDeps) -> None:
        self._opts = opts
        self._deps = deps
        self._installers: List[_Installer] = []
        self._by_urn: Dict[str, _Installer] = {}
        self._late = 0  # installers remembered at registration time rather than in program order
        self._gates: Dict[str, asyncio.Future] = {}
        self._constructed: Dict[str, _Constructed] = {}  # by URN
        # Objects of explicit kubernetes providers, by URN: where the program wrote them, their
        # provider, and a future set once their registration was decided (_in_order_of).
        self._explicit_order: Dict[str, Tuple[int, Any, asyncio.Future]] = {}
        self._groups: Dict[str, _Group] = {}
        self._seq = 0
        self._unanswered: Dict[int, _Reg] = {}  # by seq: registrations whose first answer has not come yet
        # Every decision asked so far knows whether it is an installer (TS: allRemembered): the
        # decisions whose first answer has not come, and who waits for those before them.
        self._unremembered: Set[int] = set()
        self._remembered_waiters: List[Tuple[int, asyncio.Future]] = []
        self._in_flight = 0
        self._finals: Dict[str, _Reg] = {}  # registrations whose decision is final, by URN
        self._slots: Deque[asyncio.Future] = collections.deque()
        self._settle = opts.settle if opts.settle is not None else 0.2
        self._component_order: Dict[str, int] = {}  # kubernetes components the program constructed, by URN
        self._pending_values: Dict[str, asyncio.Future] = {}  # installers constructed with unknown values, until registered
        self._clusters: Dict[str, asyncio.Future] = {}
        self._decided_at_registration: Set[str] = set()  # URNs whose registration's decision is made
        self._decided_children: Dict[str, _Children] = {}  # by parent URN
        # Python has no parent pointer on a resource: the qualified type and URN of every resource
        # the program constructed, for its children's URNs.
        self._seen: "weakref.WeakKeyDictionary[pulumi.Resource, Tuple[str, str]]" = weakref.WeakKeyDictionary()
        # A kubernetes component inside another (a ConfigGroup v1's ConfigFile), by URN: its
        # children count as the outer one's too.
        self._component_parent: Dict[str, str] = {}
        # The kubernetes components the program constructed (their children, when the SDK renders
        # them in-process, as a ConfigGroup v1 does), by URN; and, by outermost component, how many
        # children the SDK constructed and how many reached the transform so far.
        self._local_components: Dict[str, pulumi.ComponentResource] = {}
        self._local_children: Dict[str, int] = {}
        self._local_arrived: Dict[str, int] = {}
        self._tasks: Set[asyncio.Future] = set()  # background work, kept alive until done

    # -----------------------------------------------------------------------------------------

    def track(self, type_: str, name: str, resource: pulumi.Resource, props: Any, opts: Optional[pulumi.ResourceOptions]) -> None:
        """
        track is called as the program constructs a resource (a legacy stack transformation, in
        program order): a kubernetes resource the program writes (at the top level or in a
        component of its own) is decided now, from the values known now.
        """
        opts = opts if opts is not None else pulumi.ResourceOptions()
        qualified = self._qualified_type(opts.parent, type_)
        urn = self._deps.urn_prefix() + qualified + "::" + name
        try:
            self._seen[resource] = (qualified, urn)
        except TypeError:
            pass
        if not type_.startswith("kubernetes:"):
            return
        # A kubernetes component's children arrive concurrently and settle together (hold).
        parent_type = _resource_type(opts.parent)
        if parent_type.startswith("kubernetes:"):
            parent_urn = self._urn_of_constructed(opts.parent)
            if isinstance(resource, pulumi.ComponentResource) and parent_urn:
                # (Python-only: a ConfigGroup v1's files are ConfigFiles inside it. Their children
                # count as written where the group is, and as its children.)
                self._component_parent[urn] = parent_urn
                if parent_urn in self._component_order:
                    self._component_order[urn] = self._component_order[parent_urn]
            elif parent_urn and not isinstance(resource, pulumi.ComponentResource):
                # A child the SDK renders in-process: counted, so that its component's children
                # settle once they all arrived, not after a pause a loaded machine can exceed.
                root = self._root(parent_urn)
                self._local_children[root] = self._local_children.get(root, 0) + 1
            return
        if isinstance(resource, pulumi.ComponentResource):
            # Its children register later, concurrently: they count as written here.
            self._component_order[urn] = self._next_seq()
            self._local_components[urn] = resource
            return
        # An object of an explicit kubernetes provider is decided when it registers, once its
        # provider (its cluster) is known, but in program order among that cluster's (_in_order_of).
        if opts.provider is not None:
            self._explicit_order[urn] = (self._next_seq(), opts.provider, _loop().create_future())
            return
        obj = plain_now(props, _args_type(resource))
        deps = [_Dep(type=_resource_type(d), handle=d) for d in _to_list(opts.depends_on) if isinstance(d, pulumi.Resource)]
        # A component the SDK renders in-process (Chart v3, ConfigFile/ConfigGroup v1) registers its
        # children after its own URN is known: a resource that depends on it is decided once they are.
        components = [d for d in _to_list(opts.depends_on)
                      if isinstance(d, pulumi.ComponentResource) and isinstance(getattr(d, "resources", None), pulumi.Output)]
        reg = _Reg(type=type_, name=name, urn=urn, object=obj, deps=deps, handle=resource, order=self._seq)
        if has_unknowns(props):
            # Its values (a namespace from another resource's outputs) are known at registration:
            # decisions that may need them as an installer's wait for them there.
            known = _loop().create_future()
            self._pending_values[urn] = known
            reg.values_known = lambda: None if known.done() else known.set_result(None)
        key = stable_key(obj)
        rest = self._decide_in_order(reg, False)

        async def decision() -> _TrackDecision:
            d = await rest
            self._finals[reg.urn] = reg
            return _TrackDecision(d.gates, key, self._late)

        task = asyncio.ensure_future(decision())
        task.add_done_callback(_consume)
        self._constructed[urn] = _Constructed(resource, task, self._seq - 1, reg.values_known, components)

    async def transform(self, a: pulumi.ResourceTransformArgs) -> Optional[pulumi.ResourceTransformResult]:
        """
        transform is the stack transform. When it cannot decide an object's gates (a failed or
        timed-out plan call, a gate it cannot create) it raises an error naming the object and the
        cause, so that registration fails: an object let through ungated would be a false ready.
        It never hangs on an error.
        """
        if not a.custom or not a.type_.startswith("kubernetes:"):
            return None
        explicit: Optional[asyncio.Future] = None  # set once decided: objects written below it may go on
        try:
            parent_urn = await _urn_of(a.opts.parent)
            if parent_urn and is_component_child(parent_urn):
                # Children of a Chart v4 / ConfigGroup: wait until the component's registrations settle.
                held: asyncio.Future = _loop().create_future()
                self._hold(_Pending(a, parent_urn, held))
                return await held
            c = self._constructed.get(child_urn(self._deps.urn_prefix(), parent_urn, a.type_, a.name))
            reg = await self._reg(a, parent_urn, c.resource if c else None)
            in_order = self._explicit_order.get(reg.urn)
            explicit = in_order[2] if in_order else None
            skip = await self._cluster(reg, a)
            if skip:
                if c and c.values_known:
                    c.values_known()
                self._deps.warn(f"autoGate: {a.type_} {a.name} is not gated: {skip}")
                return None
            if c:
                # Decided in program order; again only when its values were not all known then, or
                # an installer appeared since that program order did not show (a component's child).
                reg.order = c.order
                reg.values_known = c.values_known
                # Outside the ordered decisions: a decision waiting here holds no later one.
                await self._children_of(c.components, reg)
                await self._values_of_installers(reg, self._seq)
                try:
                    try:
                        d: Optional[_TrackDecision] = await asyncio.shield(c.decision)
                    except Exception:  # noqa: BLE001 decided again below
                        d = None
                    # (Program order assumed the default cluster: another one's is decided again.)
                    if d is not None and d.object_key == stable_key(reg.object) and d.late == self._late and not reg.cluster:
                        self._decided_at_registration.add(reg.urn)
                        return await self._wire(a, d.gates, reg)
                    again = (await self._decide_in_order(reg, True, True)).gates
                    self._finals[reg.urn] = reg
                    self._decided_at_registration.add(reg.urn)
                    return await self._wire(a, again, reg)
                finally:
                    if c.values_known:
                        c.values_known()
            if in_order:
                reg.order = in_order[0]
                await self._in_order_of(reg, in_order[0])
            await self._values_of_installers(reg, self._seq)
            gates = (await self._decide_in_order(reg, True)).gates
            self._finals[reg.urn] = reg
            self._decided_at_registration.add(reg.urn)
            if explicit is not None and not explicit.done():
                explicit.set_result(None)
            return await self._wire(a, gates, reg)
        except AutoGateError:
            raise  # a held child's failure, logged already
        except Exception as e:  # noqa: BLE001 every cause fails the registration
            raise self._failure(a, e) from e
        finally:
            if explicit is not None and not explicit.done():
                explicit.set_result(None)  # every way out: nothing written below waits for it in vain

    async def _in_order_of(self, r: _Reg, order: int) -> None:
        """Waits (at most the plan timeout) until every object the program wrote above r for r's
        explicit kubernetes provider was decided: they register in no guaranteed order, and an
        installer among them (a Certificate above the Deployment that mounts its Secret) must
        count. A provider still unregistered is another cluster's (r's own is registered)."""
        waits = []
        for urn, (o, provider, decided) in list(self._explicit_order.items()):
            if urn == r.urn or o >= order or decided.done():
                continue
            try:
                provider_urn = await asyncio.wait_for(asyncio.shield(_urn_of(provider)), 1)
            except asyncio.TimeoutError:
                continue
            if provider_urn == r.cluster:
                waits.append(decided)
        if not waits:
            return
        try:
            await _with_timeout(self._plan_timeout(), f"the objects written above {r.type} {r.name}", lambda: asyncio.gather(*waits))
        except TimeoutError as e:
            self._deps.warn(f"autoGate: {r.type} {r.name} is decided without every object written above it: {e}")

    # failure is the error that fails a registration auto_gate could not decide, logged as one.
    def _failure(self, a: pulumi.ResourceTransformArgs, e: BaseException) -> AutoGateError:
        err = AutoGateError(f"autoGate could not decide the gates of {a.type_} {a.name}, so it is not registered ungated: {_error_text(e)}")
        (self._deps.error or self._deps.warn)(str(err))
        return err

    # default_cluster is the readiness provider for the default kubernetes provider's objects:
    # auto_gate's own when given, else as the stack's kubernetes configuration says (once).
    async def _default_cluster(self) -> Dict[str, Any]:
        if self._opts.provider is not None or self._deps.default_provider is None:
            return {"provider": self._opts.provider}
        d = self._clusters.get("")
        if d is None:
            d = asyncio.ensure_future(self._deps.default_provider())
            d.add_done_callback(_consume)
            self._clusters[""] = d
        return await asyncio.shield(d)

    # provider_of is the readiness provider a registration is planned and gated through: its
    # cluster's, or (decided in program order, before its registration said) the default's.
    async def _provider_of(self, r: _Reg) -> Optional[pulumi.ProviderResource]:
        if r.cluster or r.provider is not None:
            return r.provider
        return (await self._default_cluster()).get("provider")

    # cluster sets the registration's cluster from its explicit kubernetes provider, and says
    # why it cannot be gated when its cluster cannot be told ("" when it can).
    async def _cluster(self, r: _Reg, a: pulumi.ResourceTransformArgs) -> str:
        urn = await _urn_of(a.opts.provider) if a.opts.provider is not None else None
        name = urn.split("::")[-1] if urn else ""
        if not urn or name == "default" or name.startswith("default_"):
            c = await self._default_cluster()
            if c.get("skip"):
                return str(c["skip"])
            r.provider = c.get("provider")
            return ""
        if self._deps.cluster_provider is None:
            return f"its kubernetes provider {name} talks to a cluster autoGate cannot configure a readiness provider for"
        p = self._clusters.get(urn)
        if p is None:
            p = asyncio.ensure_future(self._deps.cluster_provider(urn))
            p.add_done_callback(_consume)
            self._clusters[urn] = p
        c = await asyncio.shield(p)
        if c.get("skip"):
            return str(c["skip"])
        r.cluster = urn
        r.provider = c.get("provider")
        return ""

    async def _reg(self, a: pulumi.ResourceTransformArgs, parent_urn: Optional[str], handle: Optional[pulumi.Resource] = None) -> _Reg:
        dep_urns = [await _urn_of(d) for d in _depends_on_of(a)]
        child = bool(parent_urn) and is_component_child(parent_urn or "")
        reg = _Reg(
            type=a.type_, name=a.name, urn=child_urn(self._deps.urn_prefix(), parent_urn, a.type_, a.name),
            object=await plain(a.props),
            deps=[_Dep(type=type_of_urn(u), urn=u) for u in dep_urns if u],
            handle=handle,
        )
        if child:
            reg.parent_urn = parent_urn
            reg.component = self._root(parent_urn or "")
            reg.order = self._component_order.get(parent_urn or "")
            reg.parent_type = type_of_urn(parent_urn or "")
        return reg

    # hold keeps a component's child until its siblings are there too. The children of a component
    # the SDK renders in-process (ConfigFile/ConfigGroup v1, Chart v3) are counted as the program
    # constructs them: they settle once all arrived. Those the plugin registers (Chart v4,
    # ConfigGroup v2) settle once none arrived for a pause (settle).
    def _hold(self, p: _Pending) -> None:
        key = self._root(p.parent_urn)
        g = self._groups.get(key)
        if g is None:
            g = self._groups[key] = _Group()
        g.items.append(p)
        local = self._local_components.get(key)
        # (A remote component, Chart v4, is marked so once constructed: by now.)
        if local is not None and not getattr(local, "_remote", False):
            self._local_arrived[key] = self._local_arrived.get(key, 0) + 1
            if not g.waiting:
                g.waiting = True
                self._spawn(self._settle_local(key, g, local))
            elif g.arrival is not None and not g.arrival.done():
                g.arrival.set_result(None)
            return
        if g.timer is not None:
            g.timer.cancel()

        def fire(group: _Group = g) -> None:
            if self._groups.get(key) is group:
                self._groups.pop(key)
            self._spawn(self._settle_group(group.items))

        g.timer = _loop().call_later(self._settle, fire)

    # settle_local settles an in-process component's group once its children are all constructed
    # (its resources resolved) and have all arrived; bounded, with a warning past the plan timeout.
    async def _settle_local(self, key: str, g: _Group, component: pulumi.ComponentResource) -> None:
        async def all_arrived() -> None:
            resources = getattr(component, "resources", None)
            if isinstance(resources, pulumi.Output):
                await resources.future()
            while self._local_arrived.get(key, 0) < self._local_children.get(key, 0):
                g.arrival = _loop().create_future()
                await g.arrival

        try:
            await _with_timeout(self._plan_timeout(), f"every child of {type_of_urn(key)} {key.split('::')[-1]} to register", all_arrived)
        except Exception as e:  # noqa: BLE001 a warning: decided with the children that came
            self._deps.warn(f"autoGate: the children of {type_of_urn(key)} {key.split('::')[-1]} are decided without every sibling: {_error_text(e)}")
        if self._groups.get(key) is g:
            self._groups.pop(key)
        await self._settle_group(g.items)

    # root is the outermost kubernetes component urn is in (itself when it is in none).
    def _root(self, urn: str) -> str:
        seen: Set[str] = set()
        while urn in self._component_parent and urn not in seen:
            seen.add(urn)
            urn = self._component_parent[urn]
        return urn

    # settle decides a component's children once they stopped arriving: in arrival order, then
    # once more for those decided before an installer of the same component was remembered.
    async def _settle_group(self, items: List[_Pending]) -> None:
        async def first(p: _Pending) -> Tuple[_Pending, Optional[_Reg], Optional[_Decided], Optional[BaseException]]:
            try:
                reg = await self._reg(p.args, p.parent_urn)
                skip = await self._cluster(reg, p.args)
                if skip:
                    raise Exception(skip)
                return p, reg, await self._decide_in_order(reg, True), None
            except Exception as e:  # noqa: BLE001 fails that child alone
                return p, None, None, e

        decided = await asyncio.gather(*[first(p) for p in items])
        for d in decided:
            self._spawn(self._finish_child(*d))

    async def _finish_child(self, p: _Pending, reg: Optional[_Reg], d: Optional[_Decided], err: Optional[BaseException]) -> None:
        try:
            if err is not None or reg is None or d is None:
                raise err or Exception("undecided")
            gates = d.gates
            # An installer of the same component arrived after this child (itself aside): ask again with all of them.
            if self._missing(d.sent, reg):
                gates = (await self._decide(reg, True, True, d.seq)).gates
            self._finals[reg.urn] = reg
            self._decided_at_registration.add(reg.urn)
            self._child_decided(reg.parent_urn)
            result = await self._wire(p.args, gates, reg)
            if not p.future.done():
                p.future.set_result(result)
        except Exception as e:  # noqa: BLE001 fails that child's registration
            if not p.future.done():
                p.future.set_exception(self._failure(p.args, e))

    # decide_in_order asks the plan at once (calls run concurrently), then, once every decision
    # asked before it knows whether it is an installer, asks again if one of those was not in
    # its question: the answer is the one for everything registered before it, in order. Its
    # place in that order is taken now, when it is called; the asking is the coroutine it returns.
    def _decide_in_order(self, r: _Reg, registered: bool, again: bool = False) -> Awaitable[_Decided]:
        seq = self._next_seq()
        self._unremembered.add(seq)
        self._unanswered[seq] = r
        return self._decide_in_order_rest(r, registered, again, seq)

    async def _decide_in_order_rest(self, r: _Reg, registered: bool, again: bool, seq: int) -> _Decided:
        try:
            first = await self._decide(r, again, registered, seq)
        finally:
            self._unanswered.pop(seq, None)
            self._remembered(seq)
        await self._all_remembered_before(seq)
        if not self._missing(first.sent, r, seq):
            return _Decided(first.gates, first.sent, seq)
        d = await self._decide(r, True, registered, seq)
        return _Decided(d.gates, d.sent, seq)

    def _next_seq(self) -> int:
        s = self._seq
        self._seq += 1
        return s

    def _remembered(self, seq: int) -> None:
        self._unremembered.discard(seq)
        lowest = min(self._unremembered) if self._unremembered else None
        waiting = []
        for s, f in self._remembered_waiters:
            if lowest is None or lowest >= s:
                if not f.done():
                    f.set_result(None)
            else:
                waiting.append((s, f))
        self._remembered_waiters = waiting

    async def _all_remembered_before(self, seq: int) -> None:
        if not any(s < seq for s in self._unremembered):
            return
        f = _loop().create_future()
        self._remembered_waiters.append((seq, f))
        await f

    # missing: an installer (registered before seq, when given) that counts for r and that a
    # question did not include.
    def _missing(self, sent: Set[str], r: _Reg, seq: Optional[int] = None) -> bool:
        at = seq if seq is not None else self._seq
        return any(i.urn != r.urn and i.id not in sent and (seq is None or i.seq < seq) and self._counts(i.order, i.parent, i.cluster, r, at)
                   for i in self._installers)

    # counts: whether an installer may gate r. Only what the program wrote above r counts (an
    # installer written below it may depend on it: a cycle), and, for a component's child, its
    # siblings, which the plugin registers in no guaranteed order; and only one of r's cluster.
    @staticmethod
    def _counts(order: int, parent: Optional[str], cluster: Optional[str], r: _Reg, seq: int) -> bool:
        if (cluster or "") != (r.cluster or ""):
            return False
        if r.component and parent == r.component:
            return True
        return order < (r.order if r.order is not None else seq)

    # slot bounds the plan calls in flight: the calls made together go as one batch invoke
    # (plan_batcher), so this bounds a batch's size.
    async def _slot(self, f: Callable[[], Awaitable[Any]]) -> Any:
        if self._in_flight >= _MAX_PLANS_IN_FLIGHT:
            w = _loop().create_future()
            self._slots.append(w)
            await w
        self._in_flight += 1
        try:
            return await f()
        finally:
            self._in_flight -= 1
            while self._slots:
                w = self._slots.popleft()
                if not w.done():
                    w.set_result(None)
                    break

    def _plan_timeout(self) -> float:
        return self._deps.plan_timeout if self._deps.plan_timeout is not None else 120.0

    def _resource_of(self, r: _Reg) -> Dict[str, Any]:
        res: Dict[str, Any] = {"type": r.type, "name": r.name}
        if r.parent_type:
            res["parentType"] = r.parent_type
            res["parent"] = r.component
        res["object"] = r.object
        if r.cluster:
            res["cluster"] = r.cluster
        return res

    # decide asks the plan about one registration, remembers it when it is an installer and
    # returns the gates it must wait for (none when the user opted it out or gated it by hand).
    async def _decide(self, r: _Reg, again: bool, registered: bool, seq: int) -> _Decided:
        sent: Set[str] = set()
        provider = await self._provider_of(r)

        # The question is taken once a slot is free: fewer earlier answers are missing from it then.
        def ask() -> Awaitable[PlanResult]:
            installers = self._question(r, seq, sent)
            options = {k: v for k, v in (("timeout", self._opts.timeout), ("stableFor", self._opts.stable_for),
                                         ("failureGrace", self._opts.failure_grace), ("namespaces", self._opts.namespaces)) if v is not None}
            return _with_timeout(self._plan_timeout(), f"the plan call for {r.type} {r.name}", lambda: self._deps.plan({
                "resource": self._resource_of(r),
                "installers": installers,
                "dependsOn": self._depends_on_ids(r, sent),
                "options": options,
            }, provider))

        result: PlanResult = (await self._slot(ask)) or {}
        if not again:
            for w in result.get("warnings") or []:
                self._deps.warn(f"autoGate: {w}")
        # Its values as registered are remembered below: decisions waiting for them may go on.
        if registered and r.values_known:
            r.values_known()
        # What later decisions need of an installer, as the plan trimmed it (an older provider: the props).
        remembered = result.get("installer") if result.get("installer") is not None else r.object
        known = self._by_urn.get(r.urn)
        if known is not None:
            # The values as registered: more of them are known than at construction (a decision
            # made with the old ones is made again when its own registration comes).
            if stable_key(known.object) != stable_key(remembered):
                self._late += 1
            known.object = remembered
        elif result.get("remember") and (self._opts.installers is None or r.name in self._opts.installers):
            inst = _Installer(id=r.urn, seq=seq, order=r.order if r.order is not None else seq, type=r.type, name=r.name,
                              object=remembered, urn=r.urn, handle=r.handle, parent=r.component, cluster=r.cluster)
            at = next((n for n, i in enumerate(self._installers) if i.seq > seq), len(self._installers))
            self._installers.insert(at, inst)
            self._by_urn[r.urn] = inst
            if registered:
                self._late += 1
            if r.type.endswith("WebhookConfiguration"):
                before = list(self._finals.values())
                if registered:
                    # Within its registration (TypeScript fires and forgets): a plan call still in
                    # flight once the program's last registration is done meets a resource monitor
                    # that has shut down, and Python's SDK fails the update for it.
                    await self._warn_intercepted(inst, before)
                else:
                    self._spawn(self._warn_intercepted(inst, before))
        hand_gated = any(d.type.startswith("readiness:") for d in r.deps)
        annotations = _get(r.object, "metadata", "annotations")
        opt = annotations.get(AUTO_GATE_OPT_OUT_ANNOTATION) if isinstance(annotations, dict) else None
        opted_out = _js_string(opt).lower() == "false"
        if hand_gated or opted_out or (self._opts.exclude is not None and self._opts.exclude(r.type, r.name)):
            return _Decided([], sent)
        return _Decided(list(result.get("gates") or []), sent)

    # children_of waits (bounded) until every child of the in-process components r depends on was
    # decided (an installer among them, a Chart v3's webhook configuration, is then remembered).
    async def _children_of(self, components: List[pulumi.ComponentResource], r: _Reg) -> None:
        if not components:
            return

        async def one(comp: pulumi.ComponentResource) -> None:
            urn = await comp.urn.future()
            children = await getattr(comp, "resources").future()
            n = len(children or {})
            e = self._decided_children.setdefault(urn or "", _Children())
            if e.count < n:
                w = _loop().create_future()
                e.waiters.append((n, w))
                await w

        try:
            await _with_timeout(self._plan_timeout(), f"the children of the components {r.type} {r.name} depends on",
                                lambda: asyncio.gather(*[one(c) for c in components]))
        except Exception as e:  # noqa: BLE001 a warning: decided without them
            self._deps.warn(f"autoGate: {r.type} {r.name} is decided without every child of what it depends on: {_error_text(e)}")

    def _child_decided(self, parent_urn: Optional[str]) -> None:
        # (A ConfigGroup v1's files are ConfigFiles inside it: their children count for both.)
        seen: Set[str] = set()
        while parent_urn and parent_urn not in seen:
            seen.add(parent_urn)
            e = self._decided_children.setdefault(parent_urn, _Children())
            e.count += 1
            waiting = []
            for n, w in e.waiters:
                if n <= e.count:
                    if not w.done():
                        w.set_result(None)
                else:
                    waiting.append((n, w))
            e.waiters = waiting
            parent_urn = self._component_parent.get(parent_urn)

    # values_of_installers waits (bounded) until the installers that count for r and were
    # constructed with unknown values (a Certificate whose namespace is another resource's
    # output) have registered with them: decided before, r would see them in the wrong place.
    async def _values_of_installers(self, r: _Reg, seq: int) -> None:
        waits = [self._pending_values[i.urn] for i in self._installers
                 if i.urn != r.urn and self._counts(i.order, i.parent, i.cluster, r, seq) and i.urn in self._pending_values]
        if not waits:
            return
        try:
            await _with_timeout(self._plan_timeout(), f"the values of the installers before {r.type} {r.name}",
                                lambda: asyncio.gather(*[asyncio.shield(w) for w in waits]))
        except Exception as e:  # noqa: BLE001 a warning: decided without them
            self._deps.warn(f"autoGate: {r.type} {r.name} is decided without every installer's values: {_error_text(e)}")

    # warn_intercepted warns about registrations decided before a webhook configuration installer
    # that it intercepts (top-level ones before it, or a component's children whose group had
    # settled before it arrived): nothing held them for it.
    async def _warn_intercepted(self, hook: _Installer, before: List[_Reg]) -> None:
        for r in before:
            if r.urn == hook.urn or (r.cluster or "") != (hook.cluster or ""):
                continue
            # Decided in program order but not registered yet: its registration decides again,
            # with this installer when it counts for it (a Chart v3 child, above it).
            if r.urn not in self._decided_at_registration and self._counts(hook.order, hook.parent, hook.cluster, r, self._seq):
                continue
            inst = _installer_entry(hook)
            try:
                provider = await self._provider_of(r)
                result = await self._slot(lambda r=r, inst=inst, provider=provider: _with_timeout(
                    self._plan_timeout(), f"the plan call for {r.type} {r.name}",
                    lambda: self._deps.plan({"resource": self._resource_of(r), "installers": [inst], "dependsOn": [], "options": {}}, provider)))
                if any(g.get("type") == "readiness:index:AdmissionReady" and hook.id in (g.get("after") or []) for g in (result or {}).get("gates") or []):
                    self._deps.warn(
                        f"autoGate: {r.type} {r.name} was registered before {hook.type} {hook.name}, which intercepts it: it was not held for that webhook. "
                        "Register the webhook configuration (or what installs it) first, or give it a dependsOn on a readiness.AdmissionReady of it by hand")
            except Exception:  # noqa: BLE001 a warning only: the registration itself was decided already
                pass

    # question is the installers a decision is asked with (their ids added to sent): every
    # installer but the registration itself and, in registration order among them, every earlier
    # registration whose answer has not come yet, as it is. The plan ignores those that are no
    # installer; without them, decisions asked concurrently would each miss the one before and
    # all be asked twice (200 ExternalSecrets, each an installer: 401 calls).
    def _question(self, r: _Reg, seq: int, sent: Set[str]) -> List[Dict[str, Any]]:
        earlier: List[Tuple[int, Dict[str, Any]]] = [
            (i.seq, _installer_entry(i)) for i in self._installers if i.urn != r.urn and self._counts(i.order, i.parent, i.cluster, r, seq)]
        have = {e["id"] for _, e in earlier}
        for s, u in list(self._unanswered.items()):
            if s >= seq or u.urn == r.urn or u.urn in have or (self._opts.installers is not None and u.name not in self._opts.installers):
                continue
            if not self._counts(u.order if u.order is not None else s, u.component, u.cluster, r, seq):
                continue
            have.add(u.urn)
            entry: Dict[str, Any] = {"id": u.urn, "type": u.type, "name": u.name, "object": u.object}
            if u.cluster:
                entry["cluster"] = u.cluster
            if u.component:
                entry["parent"] = u.component
            earlier.append((s, entry))
        earlier.sort(key=lambda e: e[0])
        for _, e in earlier:
            sent.add(e["id"])
        return [e for _, e in earlier]

    # depends_on_ids: the ids, among those sent, of what the registration's depends_on names (its
    # handle when the program constructed it, else its URN).
    def _depends_on_ids(self, r: _Reg, sent: Set[str]) -> List[str]:
        everything: List[Any] = [*self._installers, *self._unanswered.values()]
        out = []
        for d in r.deps:
            if d.urn is not None:
                i = next((x for x in everything if x.urn == d.urn), None)
            else:
                i = next((x for x in everything if x.handle is not None and x.handle is d.handle), None)
            if i is not None and i.urn in sent:
                out.append(i.urn)
        return out

    # wire creates (or reuses, by batch key) the gates and adds them to the resource's depends_on.
    async def _wire(self, a: pulumi.ResourceTransformArgs, planned: List[PlannedGate], r: _Reg) -> Optional[pulumi.ResourceTransformResult]:
        if not planned:
            return None
        pending = []
        left: Set[str] = set()
        provider = await self._provider_of(r)
        for g in planned:  # in order: afterGates name earlier ones
            why = self._cycle(g, r, left)
            if why:
                # The gate would wait for what it guards: left out, never a deadlock.
                left.add(g.get("key"))
                self._deps.warn(f"autoGate: {r.type} {r.name} is not held by {g.get('name')}: {why}")
                continue
            pending.append(self._gate(g, provider))
        gates = [await asyncio.shield(p) for p in pending]
        if not gates:
            return None
        opts = copy.copy(a.opts)
        opts.depends_on = [*_depends_on_of(a), *gates]
        return pulumi.ResourceTransformResult(props=a.props, opts=opts)

    # cycle says why gate g would wait for r, the registration it guards ("" when it would not): an
    # installer it comes after depends on r (through the depends_on and parents the program wrote),
    # or a gate it comes after was left out for that reason.
    def _cycle(self, g: PlannedGate, r: _Reg, left: Set[str]) -> str:
        if any(k in left for k in g.get("afterGates") or []):
            return "the gate it comes after was left out"
        targets = [x for x in (r.urn, r.handle) if x is not None]
        for id_ in g.get("after") or []:
            inst = self._by_urn.get(id_)
            if inst is not None and self._depends_on_any(inst.urn, targets, set()):
                return f"{inst.type} {inst.name} depends on it"
        return ""

    # depends_on_any: whether the registration urn depends (depends_on, parent) on one of targets (URNs or handles).
    def _depends_on_any(self, urn: str, targets: List[Any], seen: Set[str]) -> bool:
        if urn in seen:
            return False
        seen.add(urn)
        reg = self._finals.get(urn) or next((u for u in self._unanswered.values() if u.urn == urn), None)
        if reg is None:
            return False
        following: List[Any] = [x for d in reg.deps for x in (d.urn, d.handle)] + [reg.parent_urn]
        if any(n is not None and _among(n, targets) for n in following):
            return True
        return any(d.urn is not None and self._depends_on_any(d.urn, targets, seen) for d in reg.deps)

    # gate is the one gate of a batch key, created once every installer it comes after exists.
    def _gate(self, g: PlannedGate, provider: Optional[pulumi.ProviderResource]) -> asyncio.Future:
        key = g.get("key")
        p = self._gates.get(key)
        if p is None:
            after = []
            for id_ in g.get("after") or []:
                i = next((x for x in self._installers if x.id == id_), None)
                if i is None:
                    raise Exception(f"the plan answered an unknown installer id {id_}")
                after.append(i)
            after_gates = []
            for k in g.get("afterGates") or []:
                gp = self._gates.get(k)
                if gp is None:
                    raise Exception(f"the plan answered gate {key} after an unknown gate {k}")
                after_gates.append(gp)
            p = asyncio.ensure_future(self._make_gate(g, after, after_gates, provider))
            self._gates[key] = p

            def forget(t: asyncio.Future) -> None:
                if (t.cancelled() or t.exception() is not None) and self._gates.get(key) is t:
                    del self._gates[key]

            p.add_done_callback(forget)
        return p

    async def _make_gate(self, g: PlannedGate, after: List[_Installer], after_gates: List[asyncio.Future],
                         provider: Optional[pulumi.ProviderResource]) -> pulumi.Resource:
        # A gate must never start before the installer it is about exists: the program's own
        # objects by their handle, a component's children once the engine has them.
        for i in after:
            if i.handle is not None:
                await i.handle.urn.future()
            else:
                await self._deps.wait_registered(i.urn)
        before = [await asyncio.shield(gp) for gp in after_gates]
        if g.get("reason"):
            self._deps.info(f"autoGate: {g.get('name')}: {g.get('reason')}")
        spec = g
        if g.get("argsFrom"):
            # An autonamed installer's name is in its outputs only.
            if self._deps.output_of is None:
                raise Exception(f"gate {g.get('name')} needs an installer's outputs")
            args = dict(g.get("args") or {})
            for f in g["argsFrom"]:
                args[f["arg"]] = self._deps.output_of(f["installer"], f["output"])
            spec = {**g, "args": args}
        return self._deps.create_gate(spec, [*(i.handle if i.handle is not None else DependencyResource(i.urn) for i in after), *before], provider)

    # -----------------------------------------------------------------------------------------
    # Python's own: URNs of what the program constructed, background tasks.

    def _qualified_type(self, parent: Optional[pulumi.Resource], type_: str) -> str:
        # A resource's type as its URN carries it: its ancestors' types (the stack aside) and its own, joined by "$".
        if parent is None or _resource_type(parent) == "pulumi:pulumi:Stack":
            return type_
        parent_urn = self._urn_of_constructed(parent)
        if parent_urn:
            q = parent_urn.split("::")[2] if len(parent_urn.split("::")) > 2 else ""
            return type_ if not q or q == "pulumi:pulumi:Stack" else f"{q}${type_}"
        # A parent constructed before auto_gate and not registered yet: assumed at the top level.
        return f"{_resource_type(parent)}${type_}"

    def _urn_of_constructed(self, r: Optional[pulumi.Resource]) -> Optional[str]:
        # The URN of a resource, known now: one the program constructed since auto_gate, or one
        # whose URN has resolved (a DependencyResource, a resource registered already).
        if r is None:
            return None
        try:
            seen = self._seen.get(r)
        except TypeError:
            seen = None
        if seen is not None:
            return seen[1]
        try:
            data = r.urn._data  # type: ignore[attr-defined]
            if data.done() and not data.cancelled() and data.exception() is None:
                v = data.result().value
                return v if isinstance(v, str) and v else None
        except Exception:  # noqa: BLE001 not known now
            pass
        return None

    def _spawn(self, coro: Awaitable[Any]) -> None:
        t = asyncio.ensure_future(coro)
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)
        t.add_done_callback(_consume)
        _hold_program_end(t)


def _hold_program_end(t: "asyncio.Future[Any]") -> None:
    """
    _hold_program_end makes the program's end wait for t, a task autoGate runs in the background
    (a component's children settling, a late webhook's warning: each may call the plan). Before
    it tells the engine the program is done, the SDK waits for its RPCs and for the tasks in its
    settings' ``outputs`` set (where every Output's computation is tracked); a plan call made
    after that meets a resource monitor that has shut down, and the update fails ("Resource
    monitor has terminated": seen under load on a ConfigGroup whose custom resource comes before
    its webhook). t's own errors stay its own (a warning's failure is not the program's): the
    tracked task swallows them. The set is SDK internals; where it is missing, nothing is held.
    """
    async def quietly() -> None:
        try:
            await t
        except BaseException:  # noqa: BLE001 see above
            pass

    try:
        from pulumi.runtime.settings import SETTINGS  # pylint: disable=import-outside-toplevel
        outputs = getattr(SETTINGS, "outputs", None)
        lock = getattr(SETTINGS, "lock", None)
        if outputs is None or lock is None:
            return
        w = asyncio.ensure_future(quietly())
        with lock:
            outputs.add(w)
    except Exception:  # noqa: BLE001 an SDK without the set: nothing to hold
        return


# _MAX_PLANS_IN_FLIGHT: 200 top-level ExternalSecrets a program's loop makes are decided in one batch.
_MAX_PLANS_IN_FLIGHT = 256


# ---------------------------------------------------------------------------------------------
# Pulumi glue.

def _pulumi_deps(o: AutoGateOptions) -> AutoGateDeps:
    # One batcher per readiness provider: a batch is one invoke, through one provider.
    batchers: Dict[int, Tuple[Optional[pulumi.ProviderResource], Callable[[PlanArgs], Awaitable[PlanResult]]]] = {}

    def batcher(provider: Optional[pulumi.ProviderResource]) -> Callable[[PlanArgs], Awaitable[PlanResult]]:
        key = id(provider) if provider is not None else 0
        b = batchers.get(key)
        if b is None:
            async def invoke(batch: Dict[str, Any]) -> Dict[str, Any]:
                opts = pulumi.InvokeOptions.merge(_utilities.get_invoke_opts_defaults(),
                                                  pulumi.InvokeOptions(provider=provider) if provider is not None else None)
                return await pulumi.runtime.invoke_async("readiness:index:autoGatePlanBatch", batch, opts)

            b = (provider, plan_batcher(invoke))  # (the provider kept alive beside its id)
            batchers[key] = b
        return b[1]

    def create_gate(g: PlannedGate, after: List[pulumi.Resource], provider: Optional[pulumi.ProviderResource]) -> pulumi.Resource:
        # AdmissionReady's objects may be Secrets: secret from the start, as the provider stores them (as in Go).
        args = dict(g.get("args") or {})
        if args.get("objects") is not None:
            args["objects"] = pulumi.Output.secret(args["objects"])
        p = provider if provider is not None else o.provider
        opts = pulumi.ResourceOptions.merge(_utilities.get_resource_opts_defaults(), pulumi.ResourceOptions(depends_on=after, provider=p))
        # Its registration keeps a thread of the executor until the gate is ready (see _Headroom).
        token = _HEADROOM.grow()
        gate = _Gate(g["type"], g["name"], args, opts)
        registered = asyncio.ensure_future(gate.urn.future())
        registered.add_done_callback(lambda t: (_consume(t), _HEADROOM.shrink(token)))
        return gate

    def output_of(urn: str, path: str) -> Any:
        if pulumi.runtime.is_dry_run():
            return _unknown_output()

        async def read() -> str:
            v: Any = await _registered_state(urn)
            for k in path.split("."):
                v = v.get(k) if isinstance(v, dict) else None
            if not isinstance(v, str) or v == "":
                raise Exception(f"autoGate: {urn} has no output {path} to name its gate with")
            return v

        return pulumi.Output.from_input(asyncio.ensure_future(read()))

    return AutoGateDeps(
        plan=lambda args, provider: batcher(provider if provider is not None else o.provider)(args),
        create_gate=create_gate,
        wait_registered=_wait_registered,
        output_of=output_of,
        cluster_provider=_cluster_provider,
        default_provider=lambda: default_provider(lambda k: pulumi.runtime.get_config(k) or None),
        urn_prefix=lambda: f"urn:pulumi:{pulumi.get_stack()}::{pulumi.get_project()}::",
        info=lambda m: pulumi.log.info(m),
        warn=lambda m: pulumi.log.warn(m),
        error=lambda m: pulumi.log.error(m),
    )


def plan_batcher(invoke: Callable[[Dict[str, Any]], Awaitable[Dict[str, Any]]]) -> Callable[[PlanArgs], Awaitable[PlanResult]]:
    """
    plan_batcher turns plan calls into batch invokes (``readiness:index:autoGatePlanBatch``): the
    calls made together (the decisions a program's loop or a settled component starts at once, and
    those a batch's answer lets start) go as one invoke, each distinct installer in it once. The
    engine converts an invoke's arguments several times on their way to the provider; 200
    separate calls, each with every installer seen so far, cost it more CPU than the rest of the
    stack's `up`. "Together" is what TypeScript calls one turn of the event loop; asyncio has no
    microtask queue to drain, so a batch goes once a whole pass of the loop added no call to it.
    (Exported for its tests; not a stable API.)
    """
    queue: List[Tuple[PlanArgs, asyncio.Future]] = []
    tasks: Set[asyncio.Future] = set()

    def flush() -> None:
        calls = list(queue)
        queue.clear()
        # An installer is the same entry when its id and its object are: an installer's object may
        # be replaced between two questions (its values as registered), so the id alone is not enough.
        installers: List[Dict[str, Any]] = []
        index: Dict[str, List[Tuple[Any, int]]] = {}

        def index_of(i: Dict[str, Any]) -> int:
            seen = index.setdefault(i["id"], [])
            for obj, at in seen:
                if obj is i.get("object"):
                    return at
            installers.append(i)
            seen.append((i.get("object"), len(installers) - 1))
            return len(installers) - 1

        plans = [{**args, "installers": [index_of(i) for i in args.get("installers") or []]} for args, _ in calls]

        async def run() -> None:
            try:
                r = await invoke({"installers": installers, "plans": plans})
            except BaseException as e:  # noqa: BLE001 every call in the batch fails with it
                for _, f in calls:
                    if not f.done():
                        f.set_exception(e)
                if not isinstance(e, Exception):
                    raise
                return
            results = (r or {}).get("results") or []
            gates = (r or {}).get("gates") or []
            for n, (args, f) in enumerate(calls):
                if f.done():
                    continue
                if n >= len(results):
                    f.set_exception(Exception(f"the batch plan answered {len(results)} of {len(calls)} calls"))
                    continue
                res = dict(results[n] or {})
                named = [_at(gates, i) for i in res.get("gates") or []]
                if any(g is None for g in named):
                    resource = args.get("resource") or {}
                    f.set_exception(Exception(f"the batch plan answered an unknown gate index for {resource.get('type')} {resource.get('name')}"))
                    continue
                res["gates"] = named
                f.set_result(res)

        t = asyncio.ensure_future(run())
        tasks.add(t)
        t.add_done_callback(tasks.discard)

    def tick(seen: int) -> None:
        if len(queue) != seen:
            _loop().call_soon(tick, len(queue))
        else:
            flush()

    async def plan(args: PlanArgs) -> PlanResult:
        f = _loop().create_future()
        if not queue:
            _loop().call_soon(tick, 1)
        queue.append((args, f))
        return await f

    return plan


# wait_registered asks the engine for the resource (its built-in getResource answers once the
# resource's step finished) until it answers; any other error than "unknown resource" ends it.
# No event for "that registration finished" reaches an SDK from outside the registering code.
async def _wait_registered(urn: str) -> None:
    await _registered_state(urn)


# registered_state is wait_registered that also returns the resource's outputs as the engine has them.
async def _registered_state(urn: str) -> Any:
    deadline = time.monotonic() + 30 * 60
    delay = 0.05
    while True:
        try:
            got = await pulumi.runtime.invoke_async("pulumi:pulumi:getResource", {"urn": urn}, pulumi.InvokeOptions())
            state = got.get("state") if isinstance(got, dict) else None
            return state if state is not None else {}
        except Exception as e:  # noqa: BLE001 only "unknown resource" is waited out
            if "unknown resource" not in _error_text(e) or time.monotonic() > deadline:
                raise
        await asyncio.sleep(delay)
        delay = min(delay * 2, 1.0)


# configured_as is a readiness provider configured as a kubernetes provider's configuration (cfg:
# "kubeconfig", "context", "namespace"; the kubeconfig passed on as a secret).
def _configured_as(name: str, cfg: Callable[[str], Optional[str]]) -> Provider:
    kubeconfig = cfg("kubeconfig")
    return Provider(name, kubeconfig=pulumi.Output.secret(kubeconfig) if kubeconfig else None,
                    context=cfg("context"), namespace=cfg("namespace"))


# default_provider is the readiness provider for the objects of the default kubernetes provider,
# as pulumi-kubernetes reads the stack's kubernetes configuration (provider.go, Configure:
# kubernetes:kubeconfig, :context, and :namespace, which overrides the context's): None (the
# default readiness provider) when the readiness configuration names the same, else
# `autogate-default` configured so. As the Go SDK's defaultClusterProvider.
async def default_provider(cfg: Callable[[str], Optional[str]]) -> Dict[str, Any]:
    if cfg("kubernetes:renderYamlToDirectory"):
        return {"skip": "the stack's kubernetes provider renders YAML to a directory (kubernetes:renderYamlToDirectory) and talks to no cluster"}
    if cfg("kubernetes:cluster"):
        return {"skip": f"the stack's kubernetes provider selects kubeconfig cluster {cfg('kubernetes:cluster')} (kubernetes:cluster), "
                        "which a readiness provider cannot; gate its objects by hand with a readiness.Provider for that cluster"}
    if all((cfg(f"kubernetes:{k}") or "") == (cfg(f"readiness:{k}") or "") for k in ("kubeconfig", "context", "namespace")):
        return {"provider": None}
    provider = _configured_as("autogate-default", lambda k: cfg(f"kubernetes:{k}"))
    pulumi.log.info("autoGate: objects of the stack's kubernetes provider are gated by readiness provider autogate-default, "
                    "configured as the stack's kubernetes configuration (kubeconfig, context, namespace)")
    return {"provider": provider}


# cluster_provider makes the readiness provider for the cluster of an explicit kubernetes provider,
# configured from that provider's configuration as pulumi-kubernetes reads it (kubeconfig,
# context, namespace); a provider that renders YAML or selects a kubeconfig cluster is not
# guessed at.
async def _cluster_provider(urn: str) -> Dict[str, Any]:
    state = await _registered_state(urn)
    name = urn.split("::")[-1] or urn

    def cfg(k: str) -> Optional[str]:
        v = state.get(k) if isinstance(state, dict) else None
        return v if isinstance(v, str) and v != "" else None

    if cfg("renderYamlToDirectory"):
        return {"skip": f"its kubernetes provider {name} renders YAML to a directory and talks to no cluster"}
    if cfg("cluster"):
        return {"skip": f"its kubernetes provider {name} selects kubeconfig cluster {cfg('cluster')}, which a readiness provider cannot; "
                        "gate its objects by hand with a readiness.Provider for that cluster"}
    if pulumi.runtime.is_dry_run() and isinstance(state, dict) and _is_unknown(state.get("kubeconfig")):
        return {"skip": f"its kubernetes provider {name}'s kubeconfig is not known in a preview (decided at up)"}
    provider = _configured_as(f"autogate-{name}", cfg)
    pulumi.log.info(f"autoGate: objects of kubernetes provider {name} are gated by readiness provider autogate-{name}, configured as it is")
    return {"provider": provider}


class _Headroom:
    """
    The Python SDK makes every blocking gRPC call to the engine (a registration, an invoke) in the
    event loop's default executor, a pool of threads (4 x the engine's parallelism in an Automation
    API program: 32 at the CLI's default of 8). A registration the stack transform holds keeps its
    thread until the transform answers, and the transform waits for invokes and for gate
    registrations, which need threads of their own: 60 custom resources registered at once take
    every thread, the plan invoke their transforms wait for queues behind the rest of them, and
    the program hangs (seen). Node and Go have no such pool. So the pool grows by one thread for
    each registration held and each gate registering, for that long.
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
                # The pool starts a thread only as a call is queued: the calls queued already (an
                # invoke the held registrations wait for) get the new one now.
                with ex._shutdown_lock:  # type: ignore[attr-defined]
                    ex._adjust_thread_count()  # type: ignore[attr-defined]
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


# Gate is a readiness gate registered by token (the plan names its type and inputs).
class _Gate(pulumi.CustomResource):
    def __init__(self, t: str, name: str, props: Dict[str, Any], opts: pulumi.ResourceOptions) -> None:
        super().__init__(t, name, props, opts)


# ---------------------------------------------------------------------------------------------
# Pure helpers.

_SIG_KEY = "4dabf18193072939515e22adb298388d"
_UNKNOWN_STRING = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # the wire's unknown, should one reach a walk


def _is_unknown(v: Any) -> bool:
    return isinstance(v, Unknown) or (isinstance(v, str) and v == _UNKNOWN_STRING)


def _is_opaque(v: Any) -> bool:
    # Values the plan never reads: resources, assets, archives (and secrets, handled by the callers).
    return isinstance(v, (pulumi.Resource, Asset, Archive))


def has_unknowns(v: Any) -> bool:
    """Whether props hold a value not known yet (an Output, an awaitable, an unknown)."""
    if v is None:
        return False
    if isinstance(v, pulumi.Output) or inspect.isawaitable(v) or _is_unknown(v):
        return True
    if isinstance(v, (str, bytes, int, float, bool)) or _is_opaque(v):
        return False
    if _types.is_input_type(type(v)):
        return any(has_unknowns(x) for x in _types.input_type_to_dict(v).values())
    if isinstance(v, abc.Mapping):
        return any(has_unknowns(v[k]) for k in v)
    if isinstance(v, abc.Sequence):
        return any(has_unknowns(x) for x in v)
    return False


async def _with_timeout(seconds: float, what: str, f: Callable[[], Awaitable[Any]]) -> Any:
    # f's answer, or an error once seconds passed: one plan call that never returns must not hold
    # its registration (and every later decision waiting on it) forever. f is left running, not
    # cancelled: cancelling an invoke would fail the program's pending RPCs at its end.
    task = asyncio.ensure_future(f())
    done, _ = await asyncio.wait({task}, timeout=seconds)
    if task in done:
        return task.result()
    task.add_done_callback(_consume)
    raise TimeoutError(f"{what} did not answer within {round(seconds * 1000)} ms")


def type_of_urn(urn: str) -> str:
    """type_of_urn is the resource's own type token in a URN (the last of its qualified type)."""
    parts = urn.split("::")
    q = parts[2] if len(parts) > 2 else ""
    return q.split("$")[-1]


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
    if r is None:
        return None
    res = r
    if isinstance(res, pulumi.Output):
        res = await res.future()
    elif not isinstance(res, pulumi.Resource) and inspect.isawaitable(res):
        res = await res
    if not isinstance(res, pulumi.Resource):
        return None
    urn = res.__dict__.get("urn")
    return await urn.future() if urn is not None else None


def _to_list(v: Any) -> List[Any]:
    if v is None:
        return []
    if isinstance(v, (list, tuple)):
        return list(v)
    return [v]


# depends_on_of is a registration's depends_on as a list (a transform gets DependencyResources).
def _depends_on_of(a: pulumi.ResourceTransformArgs) -> List[Any]:
    return _to_list(a.opts.depends_on if a.opts is not None else None)


def _resource_type(r: Any) -> str:
    # A constructed resource's type token ("" for a DependencyResource, which has none).
    t = r.__dict__.get("_type") if isinstance(r, pulumi.Resource) else None
    return t if isinstance(t, str) else ""


def _args_type(resource: Any) -> Optional[type]:
    # The input type a generated resource class registers its props with (pulumi-kubernetes:
    # <Kind>InitArgs, others <Name>Args): the legacy transformation gets its props with their
    # Python names, which it translates as the SDK does when it serializes them.
    for cls in type(resource).__mro__:
        mod = sys.modules.get(cls.__module__)
        if mod is None:
            continue
        for n in (cls.__name__ + "InitArgs", cls.__name__ + "Args"):
            t = getattr(mod, n, None)
            if isinstance(t, type) and _types.is_input_type(t):
                return t
    return None


def _unwrap(typ: Any) -> Any:
    if typ is None or typ is Any:
        return None
    try:
        typ = _types.unwrap_type(typ)
    except Exception:  # noqa: BLE001 no type information then
        return None
    return None if typ is Any else typ


def _translation(typ: Any, value: abc.Mapping) -> Tuple[Callable[[str], str], Callable[[str], Any]]:
    # How serialize_property names a mapping's keys and types its values, from its type.
    same: Callable[[str], str] = lambda k: k
    none: Callable[[str], Any] = lambda k: None
    if typ is None:
        return same, none
    try:
        reduce = getattr(_types, "reduce_discriminated_union", None)
        if reduce is not None:
            case = reduce(typ, value, _types._py_name_for)
            if case is not None:
                typ = case
        if isinstance(typ, type) and _types.is_input_type(typ):
            names = _types.input_type_py_to_pulumi_names(typ)
            types = _types.input_type_types(typ)
            return (lambda k: names.get(k) or k), types.get
        origin = typing.get_origin(typ)
        if typ is dict or origin in (dict, typing.Dict, abc.Mapping, typing.Mapping):
            args = typing.get_args(typ)
            if len(args) == 2 and args[0] is str:
                return same, (lambda k: args[1])
    except Exception:  # noqa: BLE001 untranslated then
        pass
    return same, none


def _element_type(typ: Any) -> Any:
    if typ is None:
        return None
    try:
        origin = typing.get_origin(typ)
        if typ is list or origin in (list, typing.List, typing.Sequence, abc.Sequence):
            args = typing.get_args(typ)
            return args[0] if len(args) == 1 else None
    except Exception:  # noqa: BLE001 untyped then
        pass
    return None


def _has_awaitables(v: Any) -> bool:
    if v is None or isinstance(v, (str, bytes, int, float, bool)):
        return False
    if isinstance(v, pulumi.Output) or inspect.isawaitable(v):
        return True
    if isinstance(v, abc.Mapping):
        return _SIG_KEY not in v and any(_has_awaitables(v[k]) for k in v)
    if isinstance(v, (list, tuple)):
        return any(_has_awaitables(x) for x in v)
    return False


async def plain(v: Any) -> Any:
    """
    plain turns props as a transform sees them into JSON for the plan: unknown values (preview)
    and secrets become None (the plan needs no secret value), resources and assets too. Only an
    Output or an awaitable is waited for: a chart's CRD is a large object walked once, synchronously.
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


def plain_now(v: Any, typ: Any = None) -> Any:
    """
    plain_now is :func:`plain` for values known now, without waiting: any Output or awaitable is
    None. With typ (an input type), Python names are translated to the Pulumi names the engine
    gets, as the SDK does when it serializes a resource's props.
    """
    typ = _unwrap(typ)
    if v is None or isinstance(v, pulumi.Output) or inspect.isawaitable(v) or _is_unknown(v):
        return None
    if isinstance(v, (str, int, float, bool)):
        return v
    if _is_opaque(v):
        return None
    if _types.is_input_type(type(v)):
        types = _types.input_type_types(type(v))
        out = {}
        for k, e in _types.input_type_to_dict(v).items():
            p = plain_now(e, types.get(k))
            if p is not None:
                out[k] = p
        return out
    if isinstance(v, abc.Mapping):
        if _SIG_KEY in v:
            return None  # a secret (or another special value): the plan needs none
        translate, type_of = _translation(typ, v)
        out = {}
        for k in v:
            name = translate(k) if isinstance(k, str) else k
            p = plain_now(v[k], type_of(name))
            if p is not None:
                out[name] = p
        return out
    if isinstance(v, abc.Sequence) and not isinstance(v, (bytes, bytearray)):
        elem = _element_type(typ)
        return [plain_now(x, elem) for x in v]
    return None


def _normal(v: Any) -> Any:
    # The engine sends every number as a float: 1 and 1.0 are the same value.
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, dict):
        return {str(k): _normal(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_normal(x) for x in v]
    return v


def stable_key(v: Any) -> str:
    """stable_key is JSON with sorted keys: the same object whatever order its keys came in."""
    return json.dumps(_normal(v), sort_keys=True, separators=(",", ":"), default=str)


def _installer_entry(i: _Installer) -> Dict[str, Any]:
    e: Dict[str, Any] = {"id": i.id, "type": i.type, "name": i.name, "object": i.object}
    if i.cluster:
        e["cluster"] = i.cluster
    if i.parent:
        e["parent"] = i.parent
    return e


def _get(v: Any, *path: str) -> Any:
    for k in path:
        v = v.get(k) if isinstance(v, dict) else None
    return v


def _js_string(v: Any) -> str:
    # String(v) of the TypeScript: what an annotation's value reads as.
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _among(x: Any, targets: List[Any]) -> bool:
    return any((x == t) if isinstance(x, str) and isinstance(t, str) else (x is t) for t in targets)


def _at(gates: Sequence[Any], i: Any) -> Optional[Dict[str, Any]]:
    # The gate at index i of a batch answer (indexes arrive as floats), None when there is none.
    try:
        n = int(i)
    except (TypeError, ValueError):
        return None
    if n != i or n < 0 or n >= len(gates):
        return None
    g = gates[n]
    return g if isinstance(g, dict) else None


def _unknown_output() -> pulumi.Output:
    async def none() -> None:
        return None

    async def false() -> bool:
        return False

    return pulumi.Output(resources=set(), future=none(), is_known=false())


def _loop() -> asyncio.AbstractEventLoop:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.get_event_loop()


def _consume(t: asyncio.Future) -> None:
    # Marks a background future's error as seen: it is reported where it matters, not as "never retrieved".
    if not t.cancelled():
        t.exception()


def _error_text(e: BaseException) -> str:
    if isinstance(e, asyncio.TimeoutError) and not str(e):
        return "timed out"
    return str(e)
