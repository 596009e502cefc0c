"""A measurement, not a test (not named test_*.py: pytest does not run it): the Python auto_gate
against the hand-placed gate at N ExternalSecrets, the shape of the Go bench's `-sections autogate`
(bench/autogate.go) and of tests/nodejs/src/autogate.bench.ts: External Secrets by a helm.sh/v3
Release (the rendered real chart, its webhook a test server on 127.0.0.1 that serves 5 s after the
webhook Deployment is available), then N ExternalSecrets in one namespace that depend on the release.

    cd tests/python && ../../.cache/python/bin/python autogate_bench.py [N] [hand,auto,none]

Prints each run's `up` wall time, the gates in the stack and the load.
"""

import os
import sys
import threading
import time

import pulumi
import pulumi_kubernetes as k8s

import harness
import pulumi_readiness as readiness


def serve_when_available(c: harness.Cluster, webhook: harness.FakeWebhook, done: threading.Event) -> threading.Thread:
    def run() -> None:
        while not done.is_set():
            status, body = c.request("GET", "/apis/apps/v1/namespaces/external-secrets/deployments/external-secrets-webhook")
            if status == 200 and (body.get("status", {}).get("availableReplicas") or 0) > 0:
                break
            time.sleep(0.2)
        if done.wait(5):
            return
        webhook.set_serving(True)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def program(label: str, n: int, chart: str):
    def run() -> None:
        if label == "auto":
            readiness.auto_gate(timeout="5m")
        release = k8s.helm.v3.Release("external-secrets", chart=chart, name="external-secrets", namespace="external-secrets",
                                      create_namespace=True, timeout=300)
        deps = [release]
        if label == "hand":
            deps = [readiness.HelmReleaseReady("external-secrets-ready", name="external-secrets", namespace="external-secrets",
                                               timeout="5m", triggers=[release.status.revision],
                                               opts=pulumi.ResourceOptions(depends_on=[release]))]
        for i in range(n):
            k8s.apiextensions.CustomResource(
                f"es-{i}", api_version="external-secrets.io/v1", kind="ExternalSecret",
                metadata={"name": f"es-{i}", "namespace": "bench-es"},
                spec={"refreshInterval": "1h", "secretStoreRef": {"kind": "ClusterSecretStore", "name": "vault"},
                      "target": {"name": f"es-{i}"}, "dataFrom": [{"extract": {"key": "ghcr"}}]},
                opts=pulumi.ResourceOptions(depends_on=deps))
    return run


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    labels = (sys.argv[2] if len(sys.argv) > 2 else "hand,auto").split(",")
    cluster = harness.start_cluster()
    hook = harness.FakeWebhook()
    try:
        env = harness.prepare_pulumi()
        chart = harness.local_chart("external-secrets", hook)
        cluster.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench-es"}})
        for label in labels:
            s = harness.stack(env, cluster, "benchautogate-py", label, program(label, n, chart))
            done = threading.Event()
            serving = serve_when_available(cluster, hook, done)
            start = time.time()
            err = ""
            try:
                s.up()
            except Exception as e:  # the run without gates fails on the webhook: its time counts
                err = str(e)[:300]
            wall = time.time() - start
            done.set()
            serving.join()
            gates = sum(1 for r in s.export_stack().deployment["resources"] if r["type"].startswith("readiness:"))
            print(f"RESULT {label} n={n}: up {wall:.1f} s, {gates} gates{' ERROR ' + err if err else ''} (load {os.getloadavg()[0]:.1f})",
                  flush=True)
            hook.set_serving(True)  # the chart's webhook intercepts deletes too
            s.destroy()
            s.workspace.remove_stack(label)
            hook.set_serving(False)
    finally:
        hook.stop()
        cluster.stop()


if __name__ == "__main__":
    main()
