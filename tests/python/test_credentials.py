"""Issue 51 from a Python stack: HttpReady gates whose url carries a password or a token and whose
headers carry a bearer token, pasted as plain strings, gate autonamed pulumi-kubernetes ConfigMaps.
The state as stored (`pulumi stack export` without --show-secrets) and the engine's output hold
none of them; a URL without credentials stays plain."""

import base64
import http.server
import os
import subprocess
import threading
import urllib.parse

import pulumi
import pulumi_kubernetes as k8s
import pulumi_readiness as readiness
import pytest

import harness

pytestmark = pytest.mark.timeout(600)

PASSWORD, TOKEN, BEARER = "Pw-py51-5e0a", "Tok-py51-c41f", "Bearer-py51-b7d3"


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        u = urllib.parse.urlparse(self.path)
        basic = "Basic " + base64.b64encode(f"admin:{PASSWORD}".encode()).decode()
        auth = self.headers.get("Authorization")
        ok = auth in (basic, f"Bearer {BEARER}") or urllib.parse.parse_qs(u.query).get("token") == [TOKEN] \
            or u.path == "/public"
        self.send_response(200 if ok else 401)
        self.end_headers()
        self.wfile.write(b"ok" if ok else b"no")

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


def test_http_ready_credentials_never_reach_the_state_in_plain_text(cluster, env, server):
    plain = f"{server}/public"

    def program():
        gates = {
            "userinfo": {"url": server.replace("http://", f"http://admin:{PASSWORD}@") + "/health"},
            "query": {"url": f"{server}/health?token={TOKEN}"},
            "header": {"url": f"{server}/health", "headers": {"Authorization": f"Bearer {BEARER}"}},
            "plain": {"url": plain},
        }
        for name, args in gates.items():
            gate = readiness.HttpReady(f"api-{name}", timeout="30s", **args)
            k8s.core.v1.ConfigMap(f"app-config-{name}", data={"ready": "yes"},
                                  opts=pulumi.ResourceOptions(depends_on=[gate]))

    s = harness.stack(env, cluster, "creds-py", "dev", program)
    lines: list[str] = []
    s.up(on_output=lines.append, diff=True)
    again = s.up(on_output=lines.append)
    changes = again.summary.resource_changes or {}
    assert changes.get("create", 0) + changes.get("replace", 0) == 0, f"a second up changed resources: {changes}"
    # `pulumi stack export` as a user runs it: the Automation API's export_stack decrypts secrets.
    exported = subprocess.run([env.command.command, "stack", "export", "--stack", "dev"], cwd=s.workspace.work_dir,
                              env={**os.environ, **env.env_vars}, check=True, capture_output=True, text=True).stdout
    for what, text in {"stack export": exported, "the engine's output": "".join(lines)}.items():
        for secret in (PASSWORD, TOKEN, BEARER):
            assert secret not in text, f"{what} holds {secret}"
    assert plain in exported, "a URL without credentials should stay plain in the state"
    assert "4dabf18193072939515e22adb298388d" in exported, "the credentials should be kept as secrets, not dropped"
    harness.remove(s)
