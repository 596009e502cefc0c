"""auto_gate decides from what pulumi-kubernetes and the cluster will really do (issue 47), the same
in every language as the Go and TypeScript stacks: a webhook installed outside this stack (by a
platform stack) validates Widgets in one namespace only; this stack picks that namespace with
`kubernetes:namespace` and creates an autonamed Widget without metadata.namespace while the
webhook's server is down. The Widget waits for the webhook, in the namespace pulumi-kubernetes
really uses, through a readiness provider configured as the stack's kubernetes configuration.
Near miss: a ConfigMap nothing intercepts is not gated."""

import re
import time

import pulumi_kubernetes as k8s
import pulumi_readiness as readiness
import pytest
from pulumi import automation as auto

import harness

pytestmark = pytest.mark.timeout(600)


def test_webhook_outside_the_stack_in_the_configured_namespace(cluster, env):
    label = f"out{int(time.time() * 1000) % 1_000_000}"
    group = f"{label}.readiness.test"
    apps, cfg = f"apps-{label}", f"platform-{label}"
    hook = harness.FakeWebhook()
    try:
        assert cluster.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                               harness.crd(group, "Widget", "widgets"))[0] == 201
        assert cluster.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": apps}})[0] == 201
        doc = hook.configuration(cfg, group)
        doc["webhooks"][0]["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": apps}}
        assert cluster.request("POST", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations", doc)[0] == 201
        while not cluster.exists(f"/apis/{group}/v1"):
            time.sleep(0.1)

        def program():
            readiness.auto_gate(timeout="90s")
            k8s.apiextensions.CustomResource("widget", api_version=f"{group}/v1", kind="Widget", spec={"size": 1})
            k8s.core.v1.ConfigMap("settings", data={"a": "b"})

        s = harness.stack(env, cluster, "autogate-outside-py", "dev", program)
        s.set_config("kubernetes:namespace", auto.ConfigValue(value=apps))
        # The webhook's server starts once the gate's step begins (the plan-time dry run was
        # refused), at the next whole second: the Widget's creationTimestamp is then comparable.
        started: list[float] = []
        lines: list[str] = []

        def on_output(line: str) -> None:
            lines.append(line)
            if not started and re.search(r"readiness:index:AdmissionReady\s+\S+\s+creating", line):
                time.sleep(1 - time.time() % 1)
                started.append(time.time())
                hook.set_serving(True)

        s.up(on_output=on_output)
        assert started, "no AdmissionReady began: the Widget was not gated while the webhook's server was down"
        widgets = cluster.get(f"/apis/{group}/v1/namespaces/{apps}/widgets")["items"]
        assert len(widgets) == 1, "the autonamed Widget, in the namespace kubernetes:namespace names"
        created = cluster.created_at(f"/apis/{group}/v1/namespaces/{apps}/widgets/{widgets[0]['metadata']['name']}")
        assert created >= int(started[0]), f"the Widget was created at {created}, before the webhook served ({started[0]})"

        gates = [r for r in s.export_stack().deployment["resources"] if r["type"].startswith("readiness:index:")]
        want = f"auto-admission-widgets.{group}-{apps}-{cfg}"
        assert [(g["type"], g["urn"].split("::")[-1]) for g in gates] == [("readiness:index:AdmissionReady", want)], \
            "one gate, for the Widget (the ConfigMap, which nothing intercepts, has none)"
        assert "::autogate-default::" in gates[0].get("provider", ""), "the gate runs through the readiness provider configured as the stack's kubernetes configuration"
        assert "autogate-default" in "".join(lines)
        harness.remove(s)
    finally:
        hook.stop()
