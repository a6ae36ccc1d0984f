"""Shared fixtures for the evalcore tests.

The suite runs PyTorch on one intra-op thread. On a 2-core machine that is busy with anything
else (a second process, the demo subprocesses these tests start), the default of two OpenMP threads
makes every small op wait for a busy core: measured here, 100 forwards of a tiny model took 15 s
with 2 threads and 0.02 s with 1. Every comparison below is made inside one process, so the thread
count changes no expected value.
"""

import contextlib
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

os.environ.setdefault(
    "HF_HUB_OFFLINE", "1"
)  # lesson 11's tests load local folders only: never download

import pytest  # noqa: E402
import torch  # noqa: E402

import evalcore as ec  # noqa: E402  (importable through pyproject's pytest pythonpath)

ROOT = Path(__file__).resolve().parents[1]

torch.set_num_threads(1)

# A TinyGPT small enough that every test runs in milliseconds.
TINY = dict(d_model=32, n_layer=2, n_head=4, max_len=96)


@pytest.fixture(scope="session")
def root():
    return ROOT


@pytest.fixture(scope="session")
def tok():
    return ec.InstructionTokenizer()


def make_tiny(seed=0, **overrides):
    """A randomly initialised tiny TinyGPT, seeded, in eval mode."""
    torch.manual_seed(seed)
    return ec.TinyGPT(ec.InstructionTokenizer.vocab_size, **{**TINY, **overrides}).eval()


@pytest.fixture(scope="session")
def random_model():
    return make_tiny(seed=1)


@pytest.fixture(scope="session")
def trained_model():
    """A tiny TinyGPT trained for a few seconds: its predictions are far from uniform, so the
    wrong perplexity recipes give clearly different numbers."""
    return ec.train_tinygpt(
        steps=150, batch_size=16, progress=False, d_model=32, n_layer=2, n_head=2, max_len=128
    )


# The top-level keys of a report's JSON, schema 3 (the README lists them), written out rather than
# read from evalcore, so a key added or lost there fails the tests
REPORT_KEYS = {
    "schema_version",
    "aggregate",
    "aggregate_ci95",
    "aggregate_ci_method",
    "weights",
    "evals",
    "meta",
}


def strict_loads(text):
    """json.loads that fails on NaN, Infinity and -Infinity, as strict JSON parsers do."""

    def refuse(constant):
        raise AssertionError(f"non-standard JSON constant {constant}")

    return json.loads(text, parse_constant=refuse)


class JSONHandler(BaseHTTPRequestHandler):
    """A quiet request handler for the tests' own loopback servers, with send(status, body)."""

    def log_message(self, *args):
        pass

    def send(self, status, body, headers=()):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        try:
            self.send_response(status)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except ConnectionError:  # the client gave up (a timeout test): nothing to answer
            pass


@contextlib.contextmanager
def loopback_server(handler, **state):
    """A ThreadingHTTPServer with `handler` on 127.0.0.1 (a free port), `state` set on it, a
    `lock`, and its URL in `base`; shut down and closed on exit."""
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    srv.daemon_threads = True
    srv.lock = threading.Lock()
    for name, value in state.items():
        setattr(srv, name, value)
    thread = threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    srv.base = f"http://127.0.0.1:{srv.server_address[1]}"
    try:
        yield srv
    finally:
        srv.shutdown()
        thread.join(timeout=5)
        srv.server_close()
