"""Checks hookline's webhook signatures with verifiers that share no code with it: the
official `standardwebhooks` package for the symmetric `v1` signatures, and Python's
`cryptography` Ed25519 (OpenSSL) for the asymmetric `v1a` one.

It drives the real `hookline` binary (HOOKLINE_BIN, default target/debug/hookline) on its own
topics: an endpoint with two `whsec_` secrets (a rotation; one given as `${env:NAME}`, one in a
file, so neither shows in the process list) and a key made by `--generate-signing-key`, whose
`whpk_` public key is read from the command's output. `hookline dispatch` delivers a
published event to a receiver on 127.0.0.1:0; the request is then verified, and tampered with.
"""

import base64
import json
import os
import re
import signal
import subprocess
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from test_dlq_registry import DEADLINE_S, Hookline, config_toml, read_records, unique_name


class Receiver:
    """An HTTP receiver on 127.0.0.1:0 that answers 200 and keeps each request's headers and
    body by webhook-id."""

    def __init__(self):
        self.requests = {}
        arrived = self.arrived = threading.Condition()
        requests = self.requests

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                with arrived:
                    requests[self.headers.get("webhook-id")] = (dict(self.headers.items()), body)
                    arrived.notify_all()
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_for(self, event_id: str, log) -> tuple:
        with self.arrived:
            got = self.arrived.wait_for(lambda: event_id in self.requests, timeout=DEADLINE_S)
            assert got, f"no delivery of {event_id}; dispatcher log:\n" + log.read_text(errors="replace")[-4000:]
            return self.requests[event_id]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def whsec() -> str:
    return "whsec_" + base64.b64encode(os.urandom(32)).decode()


def v1a_verifies(whpk: str, headers: dict, body: bytes) -> bool:
    """The Standard Webhooks v1a check, written here: any `v1a,<base64>` in webhook-signature
    that is an Ed25519 signature of `{id}.{timestamp}.{body}` under the `whpk_` key."""
    assert whpk.startswith("whpk_")
    public = Ed25519PublicKey.from_public_bytes(base64.b64decode(whpk[len("whpk_"):]))
    signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
    for part in headers["webhook-signature"].split(" "):
        version, _, signature = part.partition(",")
        if version != "v1a":
            continue
        try:
            public.verify(base64.b64decode(signature), signed)
            return True
        except (InvalidSignature, ValueError):
            continue
    return False


def v1_verifies(secret: str, headers: dict, body: bytes) -> bool:
    try:
        Webhook(secret).verify(body, headers, json_parse=False)
        return True
    except WebhookVerificationError:
        return False


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


def test_v1_and_v1a_signatures_verify_with_independent_libraries(tmp_path, receiver):
    h = Hookline(unique_name("py-sig"))
    h.run("topics", "create", "--tiers", "200ms")

    old_secret, new_secret = whsec(), whsec()
    secret_file = tmp_path / "new-secret"
    secret_file.write_text(new_secret + "\n")
    env_name = "HOOKLINE_PY_OLD_SECRET"
    args = h.args(
        "endpoints", "put", "ep", "--url", receiver.url,
        "--secret", f"${{env:{env_name}}}",
        "--secret-file", str(secret_file),
        "--generate-signing-key",
    )
    assert not any(s in a for a in args for s in (old_secret, new_secret)), "no secret in argv"
    put = subprocess.run(
        args, capture_output=True, text=True, timeout=DEADLINE_S,
        env={**os.environ, env_name: old_secret},
    )
    assert put.returncode == 0, put.stderr
    assert "(2 secrets, 1 signing key)" in put.stdout, put.stdout
    assert "whsk_" not in put.stdout + put.stderr
    found = re.search(r"^generated signing key; public key (whpk_[A-Za-z0-9+/=]+) ", put.stdout, re.M)
    assert found, put.stdout
    whpk = found.group(1)

    # The stored key is Svix's form: base64 of the seed and then its public key.
    stored = json.loads(read_records(h.endpoints, 1)[0].value())
    assert stored["secrets"] == [old_secret, new_secret]
    (whsk,) = stored["signing_keys"]
    key_bytes = base64.b64decode(whsk[len("whsk_"):])
    assert len(key_bytes) == 64
    derived = Ed25519PrivateKey.from_private_bytes(key_bytes[:32]).public_key()
    raw_public = derived.public_bytes(Encoding.Raw, PublicFormat.Raw)
    assert raw_public == key_bytes[32:] == base64.b64decode(whpk[len("whpk_"):])
    listed = h.run("endpoints", "list", "--output", "json")
    assert whsk not in listed and whpk in listed

    config = tmp_path / "dispatcher.toml"
    config.write_text(config_toml(h))
    log = tmp_path / "dispatcher.log"
    with open(log, "wb") as stderr:
        dispatcher = subprocess.Popen(
            h.args("dispatch", "--config", str(config)),
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env={**os.environ, "RUST_LOG": "info"},
        )
    try:
        event_id, _, _ = h.publish("ep", json.dumps({"invoice": "in_1", "amount": 4200}))
        headers, body = receiver.wait_for(event_id, log)
        headers = {k.lower(): v for k, v in headers.items()}
        versions = [part.split(",", 1)[0] for part in headers["webhook-signature"].split(" ")]
        assert sorted(versions) == ["v1", "v1", "v1a"], headers["webhook-signature"]

        # Each secret of the rotation verifies with the official package, the public key with
        # OpenSSL's Ed25519; an unrelated secret or key does not.
        assert v1_verifies(old_secret, headers, body)
        assert v1_verifies(new_secret, headers, body)
        assert not v1_verifies(whsec(), headers, body)
        assert v1a_verifies(whpk, headers, body)
        stranger = Ed25519PrivateKey.generate().public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        assert not v1a_verifies("whpk_" + base64.b64encode(stranger).decode(), headers, body)

        # A tampered body, id or timestamp fails both schemes.
        tampered_body = body.replace(b"4200", b"4201")
        assert tampered_body != body
        assert not v1_verifies(old_secret, headers, tampered_body)
        assert not v1_verifies(new_secret, headers, tampered_body)
        assert not v1a_verifies(whpk, headers, tampered_body)
        for name, value in [
            ("webhook-id", headers["webhook-id"] + "x"),
            ("webhook-timestamp", str(int(headers["webhook-timestamp"]) - 1)),
        ]:
            changed = {**headers, name: value}
            assert not v1_verifies(old_secret, changed, body), name
            assert not v1a_verifies(whpk, changed, body), name
    finally:
        if dispatcher.poll() is None:
            dispatcher.send_signal(signal.SIGTERM)
        try:
            code = dispatcher.wait(timeout=30)
        except subprocess.TimeoutExpired:
            dispatcher.kill()
            raise
    assert code == 0, f"dispatcher exited {code}:\n" + log.read_text(errors="replace")[-4000:]
    text = log.read_text(errors="replace")
    assert whsk[len("whsk_"):] not in text and old_secret[6:] not in text, "no key in the log"
