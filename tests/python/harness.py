"""Test harness of the Python stacks (the TypeScript one, tests/nodejs/src/harness.ts, in Python):
starts the local control plane (the same Go harness the Go tests use), builds the provider
binaries, sets up a local Pulumi backend, and talks to the API server directly for what a test
plays itself. Every address it dials is on 127.0.0.1."""

from __future__ import annotations

import atexit
import base64
import calendar
import hashlib
import json
import os
import shutil
import signal
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import yaml
from pulumi import automation as auto


def _repo_root() -> Path:
    for d in [Path(__file__).resolve(), *Path(__file__).resolve().parents]:
        if (d / "internal" / "k8splugin" / "VERSION").exists():
            return d
    raise RuntimeError(f"no repository root above {__file__}")


REPO_ROOT = _repo_root()


def temp_dir(prefix: str) -> str:
    """A folder removed when the test process exits (stack tests leave hundreds of MB)."""
    d = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, d, True)
    return d


def _checkout_bin() -> Path:
    # The same folder the TypeScript harness and internal/stack build into, one per checkout.
    key = hashlib.sha256(str(REPO_ROOT).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"readiness-provider-bin-{key}"


_built: dict[str, str] = {}
_build_lock = threading.Lock()


def go_binary(pkg: str) -> str:
    """Builds one of the repository's commands (once per process) and returns its path. A build
    landing while another test process runs the binary swaps the file by a rename."""
    with _build_lock:
        if pkg not in _built:
            out = _checkout_bin() / Path(pkg).name
            subprocess.run(["go", "build", "-o", str(out), pkg], cwd=REPO_ROOT, check=True)
            _built[pkg] = str(out)
        return _built[pkg]


def _go_run(*args: str) -> str:
    return subprocess.run(["go", "run", *args], cwd=REPO_ROOT, check=True, stdout=subprocess.PIPE, text=True).stdout.strip()


@dataclass
class Cluster:
    kubeconfig: str
    server: str
    token: str
    ca: bytes
    _proc: subprocess.Popen
    _ssl: ssl.SSLContext = field(init=False)

    def __post_init__(self) -> None:
        self._ssl = ssl.create_default_context(cadata=self.ca.decode())

    def stop(self) -> None:
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            self._proc.wait(timeout=60)

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """One API request to the control plane: (status, decoded body)."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.server + path, data=data, method=method, headers={
            "Authorization": f"Bearer {self.token}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, context=self._ssl, timeout=30) as r:
                raw = r.read()
                return r.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                return e.code, json.loads(raw) if raw else None
            except ValueError:  # "404 page not found" of a group not served yet: text, not a Status
                return e.code, raw.decode(errors="replace")

    def get(self, path: str) -> Any:
        status, body = self.request("GET", path)
        assert status == 200, f"GET {path}: {status} {body}"
        return body

    def exists(self, path: str) -> bool:
        return self.request("GET", path)[0] == 200

    def created_at(self, path: str) -> float:
        """An object's creationTimestamp, in seconds since the epoch (whole seconds)."""
        ts = self.get(path)["metadata"]["creationTimestamp"]
        return float(calendar.timegm(time.strptime(ts, "%Y-%m-%dT%H:%M:%SZ")))

    def caches_ready(self, group: str) -> None:
        """Returns once the API server lists every CRD of group's objects from its watch cache
        (resourceVersion=0), which the CRD finalizer needs when the CRD is deleted."""
        for c in self.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions")["items"]:
            if c["spec"]["group"] != group:
                continue
            version = next(v["name"] for v in c["spec"]["versions"] if v.get("storage"))
            deadline = time.time() + 60
            while self.request("GET", f"/apis/{group}/{version}/{c['spec']['names']['plural']}?resourceVersion=0&limit=1")[0] != 200:
                assert time.time() < deadline, f"{c['metadata']['name']}: objects not listed from the cache after a minute"
                time.sleep(0.1)


def start_cluster() -> Cluster:
    """Runs `localcluster up` and returns once it printed its kubeconfig path."""
    proc = subprocess.Popen([go_binary("./internal/localcluster"), "up"], cwd=REPO_ROOT,
                            stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().strip()
    if not line:
        raise RuntimeError(f"localcluster exited with {proc.wait()}")
    kubeconfig = Path(line).read_text()
    doc = yaml.safe_load(kubeconfig)
    return Cluster(kubeconfig=kubeconfig, server=doc["clusters"][0]["cluster"]["server"],
                   token=doc["users"][0]["user"]["token"],
                   ca=base64.b64decode(doc["clusters"][0]["cluster"]["certificate-authority-data"]), _proc=proc)


def crd(group: str, kind: str, plural: str) -> dict:
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group, "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": f"{kind}List"},
            "versions": [{"name": "v1", "served": True, "storage": True,
                          "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}],
        },
    }


@dataclass
class PulumiEnv:
    dir: str
    env_vars: dict[str, str]
    command: auto.PulumiCommand


def prepare_pulumi() -> PulumiEnv:
    """Builds the provider and sets up a local backend whose plugins are the pinned ones: a plugin
    missing here fails the test, never is fetched from the internet."""
    d = temp_dir("readiness-py-")
    provider_bin = str(Path(go_binary("./provider/cmd/pulumi-resource-readiness")).parent)
    tools_bin = _go_run("./internal/localcluster", "tools")
    for sub in ("state", "home", "tmp"):
        os.makedirs(os.path.join(d, sub), exist_ok=True)
    plugin_dir = _go_run("./internal/k8splugin/cmd/k8splugin")
    os.symlink(os.path.dirname(plugin_dir), os.path.join(d, "home", "plugins"))
    return PulumiEnv(dir=d, command=auto.PulumiCommand(root=os.path.dirname(tools_bin), skip_version_check=True), env_vars={
        "PATH": f"{provider_bin}:{tools_bin}:{os.environ['PATH']}",
        "PULUMI_BACKEND_URL": f"file://{os.path.join(d, 'state')}",
        "PULUMI_CONFIG_PASSPHRASE": "readiness-local-only",
        "PULUMI_HOME": os.path.join(d, "home"),
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DIY_BACKEND_NO_LEGACY_WARNING": "true",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        # pulumi-kubernetes writes the kubeconfig it is given to a new temporary file at each
        # configure: the Pulumi processes' temporary files stay in this environment's folder.
        "TMPDIR": os.path.join(d, "tmp"),
    })


def stack(env: PulumiEnv, c: Cluster, project: str, name: str, program: Callable[[], None]) -> auto.Stack:
    """An Automation API inline stack on the cluster (the readiness and kubernetes providers'
    kubeconfig set as secrets, as a user's stack configuration would)."""
    work = os.path.join(env.dir, f"work-{project}-{name}")
    os.makedirs(work, exist_ok=True)
    s = auto.create_or_select_stack(stack_name=name, project_name=project, program=program,
                                    opts=auto.LocalWorkspaceOptions(work_dir=work, env_vars=env.env_vars,
                                                                    pulumi_command=env.command))
    s.set_config("readiness:kubeconfig", auto.ConfigValue(value=c.kubeconfig, secret=True))
    s.set_config("kubernetes:kubeconfig", auto.ConfigValue(value=c.kubeconfig, secret=True))
    return s


def remove(s: auto.Stack) -> None:
    """Destroys the stack and removes it."""
    s.destroy()
    s.workspace.remove_stack(s.name)


def local_chart(fixture: str, webhook: "FakeWebhook") -> str:
    """A real chart rendered by the Helm CLI, as a local chart whose webhooks go to the test's
    webhook server (internal/charts says what else changes); its path, for Release or Chart."""
    return _go_run("./internal/charts/cmd/localchart", fixture, temp_dir("readiness-chart-"), webhook.url, webhook.ca_bundle)


class _Lines:
    """The lines a child process prints, one at a time (a reader thread, so a wait can time out)."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self._cond = threading.Condition()
        self._lines: list[str] = []
        self._eof = False
        threading.Thread(target=self._read, args=(proc,), daemon=True).start()

    def _read(self, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            with self._cond:
                self._lines.append(line.rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def next(self, timeout: float = 120) -> str:
        with self._cond:
            if not self._cond.wait_for(lambda: self._lines or self._eof, timeout):
                raise TimeoutError("no line from the child process")
            if not self._lines:
                raise EOFError("the child process exited")
            return self._lines.pop(0)

    def all(self) -> list[str]:
        with self._cond:
            return list(self._lines)


class FakeWebhook:
    """internal/fakes/cmd/fakewebhook: a TLS webhook on 127.0.0.1 that serves only once started;
    it also answers ConversionReviews at convert_url."""

    def __init__(self) -> None:
        self._proc = subprocess.Popen([go_binary("./internal/fakes/cmd/fakewebhook")], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True)
        self._lines = _Lines(self._proc)
        hello = json.loads(self._lines.next())
        self.url, self.convert_url, self.ca_bundle = hello["url"], hello["convertUrl"], hello["caBundle"]
        self.serving = False
        self._lock = threading.Lock()

    def send(self, cmd: str) -> str:
        with self._lock:
            self._proc.stdin.write(cmd + "\n")
            self._proc.stdin.flush()
            answer = self._lines.next()
        if cmd in ("start", "stop"):
            assert answer == "ok", f"fakewebhook {cmd}: {answer}"
            self.serving = cmd == "start"
        return answer

    def set_serving(self, on: bool) -> None:
        if on != self.serving:
            self.send("start" if on else "stop")

    def calls(self) -> int:
        """The admission requests the server has answered so far."""
        return int(self.send("calls"))

    def configuration(self, name: str, group: str) -> dict:
        """A ValidatingWebhookConfiguration named name sending CREATE and UPDATE of group's widgets
        to this server, failurePolicy Fail (as fakes.Webhook.Configuration)."""
        return {
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [{
                "name": f"validating.{name}.{group}", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                "failurePolicy": "Fail", "timeoutSeconds": 3,
                "clientConfig": {"url": self.url, "caBundle": self.ca_bundle},
                "rules": [{"apiGroups": [group], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"], "resources": ["widgets"]}],
            }],
        }

    def stop(self) -> None:
        if self._proc.poll() is None:
            self._proc.stdin.close()
            self._proc.wait(timeout=30)


class Player:
    """One of internal/fakes' controller players (internal/fakes/cmd/player: "issue ...",
    "sync-externalsecrets ...", "kubelet <namespace> <selector>") against the cluster."""

    _kubeconfig: Optional[str] = None

    def __init__(self, c: Cluster, *args: str) -> None:
        if Player._kubeconfig is None:
            Player._kubeconfig = os.path.join(temp_dir("readiness-kubeconfig-"), "kubeconfig")
            Path(Player._kubeconfig).write_text(c.kubeconfig)
        self._proc = subprocess.Popen([go_binary("./internal/fakes/cmd/player"), Player._kubeconfig, *args],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self._lines = _Lines(self._proc)

    def stop(self) -> None:
        if self._proc.poll() is None and self._proc.stdin and not self._proc.stdin.closed:
            self._proc.stdin.close()

    def done(self, timeout: float = 120) -> list[str]:
        """The lines it printed once it exited ("done" last)."""
        self._proc.wait(timeout=timeout)
        time.sleep(0.05)  # the reader thread takes the last lines
        return self._lines.all()


def serve_when_available(c: Cluster, webhook: FakeWebhook, ns: str, name: str, delay: float,
                         cancelled: threading.Event) -> dict:
    """Plays a chart's webhook pod in a thread: the webhook starts serving `delay` seconds after the
    Deployment ns/name first has an available replica (pod Ready is not webhook serving). The
    returned dict gets "started" (time.time()) once it serves; join it with ["thread"].join()."""
    out: dict = {}

    def run() -> None:
        while not cancelled.is_set():
            status, d = c.request("GET", f"/apis/apps/v1/namespaces/{ns}/deployments/{name}")
            if status == 200 and (d.get("status", {}).get("availableReplicas") or 0) > 0 and not d["metadata"].get("deletionTimestamp"):
                break
            cancelled.wait(0.2)
        if cancelled.wait(delay):
            return
        out["started"] = time.time()
        webhook.send("start")

    t = threading.Thread(target=run, daemon=True)
    out["thread"] = t
    t.start()
    return out


def to_next_second(seconds: float) -> float:
    """A delay of at least `seconds` that ends just after a whole second: an event then can be
    compared with the API server's whole-second creationTimestamp with no second of slack."""
    end = time.time() + seconds
    return seconds + (1 - end % 1)


def created_before(created: float, t: float) -> bool:
    """An object created at `created` (whole seconds) was created before t, an instant just after
    a whole second (to_next_second)."""
    return created < int(t)


class Registry:
    """internal/testregistry/cmd/testregistry: a real OCI registry on 127.0.0.1 (as startRegistry in
    tests/nodejs/src/harness.ts); push() pushes random images to it and returns the digest."""

    def __init__(self, *args: str) -> None:
        self._proc = subprocess.Popen([go_binary("./internal/testregistry/cmd/testregistry"), *args],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self._lines = _Lines(self._proc)
        hello = json.loads(self._lines.next())
        self.host, self.ca = hello["host"], hello.get("ca", "")
        self._lock = threading.Lock()

    def push(self, command: str) -> str:
        """One command ("image <repo:tag> <os/arch>" or "index <repo:tag> <os/arch>..."): the digest pushed."""
        with self._lock:
            self._proc.stdin.write(command + "\n")
            self._proc.stdin.flush()
            answer = json.loads(self._lines.next())
        if answer.get("error"):
            raise RuntimeError(f"testregistry {command}: {answer['error']}")
        return answer["digest"]

    def stop(self) -> None:
        if self._proc.poll() is None:
            self._proc.stdin.close()
            self._proc.wait(timeout=30)


def start_registry(*args: str) -> Registry:
    """Runs a real OCI registry on 127.0.0.1 (args: testregistry's flags, e.g. "-user", "ci:pass")."""
    return Registry(*args)
