"""Drives the example receiver of `hookline-receiver` (crates/hookline-receiver/examples/
receiver.rs) with requests signed by the official `standardwebhooks` package, the way a
sender other than hookline signs them: valid ones are processed (200), tampered ones and
stale timestamps are refused (401), and a duplicate gets 200 without being processed again.

It runs once with Redis (its own `redis-server` on a free loopback port) and once with the
PostgreSQL store (the local stack's PostgreSQL, HOOKLINE_TEST_POSTGRES or the stack's port
5433 and password file; a schema of its own, dropped with `psql` at the end), and the
receiver binary
(HOOKLINE_RECEIVER_BIN, default `$CARGO_TARGET_DIR/debug/examples/receiver`, built with
`cargo build -p hookline-receiver --example receiver` when missing).
"""

import json
import os
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from standardwebhooks.webhooks import Webhook

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
DEADLINE_S = 30.0
ROOT = Path(__file__).resolve().parents[2]


def receiver_bin() -> Path:
    if "HOOKLINE_RECEIVER_BIN" in os.environ:
        return Path(os.environ["HOOKLINE_RECEIVER_BIN"])
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    path = target / "debug" / "examples" / "receiver"
    subprocess.run(
        ["cargo", "build", "--locked", "-q", "-p", "hookline-receiver", "--example", "receiver"],
        cwd=ROOT,
        check=True,
    )
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def redis_url():
    port = free_port()
    try:
        server = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    except FileNotFoundError:
        pytest.fail("redis-server is not on PATH: run deploy/setup")
    give_up = time.monotonic() + DEADLINE_S
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as conn:
                conn.sendall(b"PING\r\n")
                if conn.recv(16).startswith(b"+PONG"):
                    break
        except OSError:
            pass
        assert time.monotonic() < give_up, "redis-server did not answer PING"
        time.sleep(0.05)
    yield f"redis://127.0.0.1:{port}"
    server.kill()
    server.wait()


def postgres_url() -> str:
    if "HOOKLINE_TEST_POSTGRES" in os.environ:
        return os.environ["HOOKLINE_TEST_POSTGRES"]
    data = Path(os.environ.get("HOOKLINE_HOME", Path.home() / ".cache" / "hookline")) / "data"
    password = (data / "postgres.password").read_text().strip()
    port = os.environ.get("HOOKLINE_POSTGRES_PORT", "5433")
    return f"postgres://hookline:{password}@127.0.0.1:{port}/hookline"


@pytest.fixture
def postgres_store():
    url = postgres_url()
    schema = f"t_py_receiver_{uuid.uuid4().hex[:12]}"
    yield {"HOOKLINE_RECEIVER_POSTGRES_URL": url}, ["--postgres-schema", schema]
    subprocess.run(
        ["psql", "-q", "-v", "ON_ERROR_STOP=1", url, "-c", f"DROP SCHEMA IF EXISTS {schema} CASCADE"],
        check=True,
        stdout=subprocess.DEVNULL,
    )


@pytest.fixture(params=["redis", "postgres"])
def store(request):
    """Environment and flags of the receiver's store."""
    if request.param == "redis":
        url = request.getfixturevalue("redis_url")
        return {"HOOKLINE_RECEIVER_REDIS_URL": url}, ["--key-prefix", f"test:{uuid.uuid4().hex}:"]
    return request.getfixturevalue("postgres_store")


class Receiver:
    """The example receiver, its stdout collected line by line."""

    def __init__(self, store_env: dict, store_args: list):
        env = dict(os.environ, HOOKLINE_RECEIVER_SECRETS=SECRET, **store_env)
        self.proc = subprocess.Popen(
            [str(receiver_bin()), "--listen", "127.0.0.1:0", *store_args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.lines = []
        self.changed = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()
        with self.changed:
            ok = self.changed.wait_for(lambda: any(l.startswith("listening on ") for l in self.lines), DEADLINE_S)
        assert ok, f"the receiver did not start: {self.lines}"
        addr = next(l for l in self.lines if l.startswith("listening on ")).split()[-1]
        self.url = f"http://{addr}/webhook"

    def _read(self):
        for line in self.proc.stdout:
            with self.changed:
                self.lines.append(line.rstrip("\n"))
                self.changed.notify_all()

    def processed(self, msg_id: str) -> int:
        with self.changed:
            return sum(1 for l in self.lines if l.startswith(f"processed {msg_id} "))

    def close(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)


@pytest.fixture
def receiver(store):
    r = Receiver(*store)
    yield r
    r.close()


def post(url: str, msg_id: str, timestamp: datetime, body: str, signature: str) -> tuple:
    request = urllib.request.Request(
        url,
        data=body.encode(),
        method="POST",
        headers={
            "content-type": "application/json",
            "webhook-id": msg_id,
            "webhook-timestamp": str(int(timestamp.timestamp())),
            "webhook-signature": signature,
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_standardwebhooks_signatures_are_verified_and_duplicates_processed_once(receiver):
    wh = Webhook(SECRET)
    now = datetime.now(tz=timezone.utc)
    msg_id = f"msg_{uuid.uuid4().hex}"
    body = json.dumps({"type": "invoice.paid", "invoice": 7})
    signature = wh.sign(msg_id, now, body)

    assert post(receiver.url, msg_id, now, body, signature)[0] == 200
    with receiver.changed:
        assert receiver.changed.wait_for(lambda: receiver.processed(msg_id) >= 1, DEADLINE_S)

    # A duplicate (the sender's retry after a lost answer): 200, not processed again.
    assert post(receiver.url, msg_id, now, body, signature)[0] == 200

    # Tampered body, tampered id, and a signature by another secret: 401, with a short reason.
    status, reason = post(receiver.url, msg_id, now, body.replace("7", "8"), signature)
    assert (status, reason) == (401, "no valid signature")
    other_id = f"msg_{uuid.uuid4().hex}"
    assert post(receiver.url, other_id, now, body, signature)[0] == 401
    other_secret = Webhook("whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=")
    assert post(receiver.url, other_id, now, body, other_secret.sign(other_id, now, body))[0] == 401

    # A stale timestamp, validly signed: 401 (outside the 5-minute tolerance).
    stale = now - timedelta(minutes=6)
    status, reason = post(receiver.url, other_id, stale, body, wh.sign(other_id, stale, body))
    assert (status, reason) == (401, "timestamp outside the tolerance")
    assert "whsec" not in reason

    # A second valid event is processed; then the first still counts one processing.
    second = f"msg_{uuid.uuid4().hex}"
    assert post(receiver.url, second, now, body, wh.sign(second, now, body))[0] == 200
    with receiver.changed:
        assert receiver.changed.wait_for(lambda: receiver.processed(second) == 1, DEADLINE_S)
    assert receiver.processed(msg_id) == 1, receiver.lines
    assert receiver.processed(other_id) == 0, receiver.lines
