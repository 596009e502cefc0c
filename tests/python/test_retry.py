"""The error hook of auto_gate and auto_retry (issue 50) from Python programs on the real
pulumi-kubernetes plugin, as tests/e2e/autogate/retry_test.go does from Go: a webhook that answered
the gate in front of a custom resource goes away right after the gate passed, before the create (a
webhook pod killed), and is back a second later; the create fails calling it and, through the
program's error hook, is tried again once the object's admission is proven again. The same for a
program that places its gate by hand and calls auto_retry. Near miss: the webhook denies the object
after its gate passed: never retried, the denial fails `up`."""

import asyncio
import re
import threading
import time

import pulumi
import pulumi_kubernetes as k8s
import pulumi_readiness as readiness
import pytest
from pulumi import automation as auto

import harness

pytestmark = pytest.mark.timeout(900)

LABEL = f"re{int(time.time() * 1000) % 1_000_000}"
NS = f"retry-{LABEL}"


def snake(v):
    """A Kubernetes document's keys as pulumi-kubernetes' Python arguments name them."""
    if isinstance(v, dict):
        return {re.sub(r"(?<!^)([A-Z])", r"_\1", k).lower(): snake(x) for k, x in v.items()}
    return [snake(x) for x in v] if isinstance(v, list) else v


def after_gates(name: str, fault, problems: list):
    """A resource transform registered after auto_gate (so it sees the gates auto_gate added): the
    registration of name waits until every readiness gate it depends on passed (the engine answers
    getResource for it once its step finished), then fault runs, and only then the engine goes on
    to create it: the fault lands after the gate's proof, before the create."""

    async def transform(a: pulumi.ResourceTransformArgs):
        if a.name != name:
            return None
        urns = [await d.urn.future() for d in (a.opts.depends_on or [])]
        gates = [u for u in urns if u and readiness.type_of_urn(u).startswith("readiness:")]
        if not gates:
            problems.append(f"{name} depends on no readiness gate ({urns}): the fault would not land after one")
            return None
        for u in gates:
            deadline = time.monotonic() + 120
            while True:
                try:
                    await pulumi.runtime.invoke_async("pulumi:pulumi:getResource", {"urn": u}, pulumi.InvokeOptions())
                    break
                except Exception as e:  # noqa: BLE001 only "unknown resource" is waited out
                    if "unknown resource" not in str(e) or time.monotonic() > deadline:
                        problems.append(f"waiting for gate {u}: {e}")
                        return None
                await asyncio.sleep(0.02)
        fault()
        return None

    return transform


@pytest.fixture(scope="module")
def namespace(cluster):
    assert cluster.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})[0] == 201
    return NS


@pytest.mark.parametrize("case,hand,deny", [("autogate", False, False), ("hand-gate", True, False), ("denial", False, True)])
def test_retry_after_a_webhook_went_away_after_its_gate(cluster, env, namespace, case, hand, deny):
    group = f"{case}.{LABEL}.readiness.test"  # one group per case: a case that failed leaves no webhook in another's way
    assert cluster.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", harness.crd(group, "Widget", "widgets"))[0] == 201
    deadline = time.time() + 60
    while not cluster.exists(f"/apis/{group}/v1"):
        assert time.time() < deadline, f"{group} not served after a minute"
        time.sleep(0.1)
    cluster.caches_ready(group)
    hook = harness.FakeWebhook()
    hook.set_serving(True)
    gizmo = {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": case, "namespace": namespace}, "spec": {"size": 1}}
    restarted: list = []  # when the webhook came back
    problems: list = []

    def fault() -> None:
        if deny:
            hook.send("mode deny")
            return
        hook.set_serving(False)

        def back() -> None:
            time.sleep(1)
            hook.set_serving(True)
            restarted.append(time.time())

        threading.Thread(target=back, daemon=True).start()

    def program():
        if hand:
            readiness.auto_retry()
        else:
            readiness.auto_gate(timeout="60s")
        pulumi.runtime.register_resource_transform(after_gates("gizmo", fault, problems))
        cfg = snake(hook.configuration(f"retry-{case}-{LABEL}", group))
        deps = [k8s.admissionregistration.v1.ValidatingWebhookConfiguration("vwc", metadata=cfg["metadata"], webhooks=cfg["webhooks"])]
        if hand:
            deps = [readiness.AdmissionReady("gizmo-admission", objects=[gizmo], timeout="60s", opts=pulumi.ResourceOptions(depends_on=deps))]
        k8s.apiextensions.CustomResource("gizmo", api_version=gizmo["apiVersion"], kind="Widget", metadata=gizmo["metadata"],
                                         spec=gizmo["spec"], opts=pulumi.ResourceOptions(depends_on=deps))

    s = harness.stack(env, cluster, "retry-py", case, program)
    out: list = []
    try:
        if deny:
            with pytest.raises(auto.CommandError) as e:
                s.up(on_output=out.append)
            text = str(e.value) + "".join(out)
            assert "spec.secretStoreRef is required" in text, f"up did not fail with the denial:\n{text}"
            assert "retrying create" not in text, f"a denial was retried:\n{text}"
            assert "not retried: a webhook denied it" in text, f"the error hook did not say why it did not retry:\n{text}"
            assert not problems, problems
            hook.send("mode allow")
        else:
            try:
                s.up(on_output=out.append)
            except auto.CommandError as e:
                pytest.fail(f"up failed though the webhook came back:\n{e}\n{''.join(out)}")
            assert not problems, problems
            text = "".join(out)
            assert restarted, "the fault never ran: the object did not wait for its gate"
            path = f"/apis/{group}/v1/namespaces/{namespace}/widgets/{case}"
            assert cluster.exists(path), "the Widget was not created"
            assert "retrying create due to on-error hook request" in text, f"the Widget's create was not retried:\n{text}"
            created = cluster.created_at(path)
            assert created >= int(restarted[0]), f"the Widget was created at {created}, before its webhook came back ({restarted[0]})"
            print(f"up ({case}):\n{text}")
        harness.remove(s)
    finally:
        hook.stop()


def test_error_hook_once_per_program(cluster, env):
    """auto_gate and auto_retry both, or either twice, in one program is an error, not two hooks."""
    for name, calls in (("both", (readiness.auto_gate, readiness.auto_retry)), ("twice", (readiness.auto_retry, readiness.auto_retry))):
        def program(calls=calls):
            for c in calls:
                c()

        s = harness.stack(env, cluster, "retry-once-py", name, program)
        with pytest.raises(auto.CommandError, match="the error hook is registered already"):
            s.up()
        s.workspace.remove_stack(s.name)

    def without_retry():  # retry=False registers no hook: auto_retry may follow
        readiness.auto_gate(retry=False)
        readiness.auto_retry()

    s = harness.stack(env, cluster, "retry-once-py", "off", without_retry)
    s.up()
    harness.remove(s)
