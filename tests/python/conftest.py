"""Fixtures of the Python stack tests: one control plane, one Pulumi environment and one webhook
server per test file (as each TypeScript test file has its own)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import harness  # noqa: E402


@pytest.fixture(scope="module")
def cluster():
    c = harness.start_cluster()
    yield c
    c.stop()


@pytest.fixture(scope="module")
def env():
    return harness.prepare_pulumi()


@pytest.fixture(scope="module")
def webhook():
    w = harness.FakeWebhook()
    yield w
    w.stop()
