"""Reads hookline's DLQ with Python's confluent-kafka (SchemaRegistryClient + AvroDeserializer)
against the local stack, as the README's "Inspecting the DLQ" example does, and checks the
decoded fields against what was published.

It drives the real `hookline` binary (HOOKLINE_BIN, default target/debug/hookline): creates
its own topics, registers an endpoint served by a receiver that always answers 500, runs
`hookline dispatch` as a subprocess, publishes, then reads `<events>.dlq`.
"""

import datetime
import json
import os
import re
import signal
import subprocess
import threading
import time
import uuid
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext


def unique_name(prefix):
    """A topic name of this test's own; under deploy/test it carries the run's id
    (HOOKLINE_TEST_RUN), so that the run deletes it when it ends."""
    run = os.environ.get("HOOKLINE_TEST_RUN")
    middle = f"{run}-" if run else ""
    return f"t-{middle}{prefix}-{uuid.uuid4().hex}"


ROOT = Path(__file__).resolve().parents[2]
BOOTSTRAP = os.environ.get("HOOKLINE_TEST_BOOTSTRAP", "127.0.0.1:9092")
REGISTRY = os.environ.get("HOOKLINE_TEST_REGISTRY", "http://127.0.0.1:8081/apis/ccompat/v7")
DEADLINE_S = 60.0
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"


def hookline_bin() -> Path:
    path = Path(os.environ.get("HOOKLINE_BIN", "target/debug/hookline"))
    path = path if path.is_absolute() else ROOT / path
    if not path.is_file():
        pytest.fail(f"{path} not found: build it with `cargo build -p hookline` or set HOOKLINE_BIN")
    return path


class Receiver:
    """An HTTP receiver on 127.0.0.1:0 that answers every POST with 500 and counts them by
    webhook-id."""

    def __init__(self):
        calls = self.calls = Counter()
        lock = self.lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("content-length", 0)))
                with lock:
                    calls[self.headers.get("webhook-id")] += 1
                self.send_response(500)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def count(self, event_id: str) -> int:
        with self.lock:
            return self.calls[event_id]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class Hookline:
    """The hookline binary, on this test's own topics."""

    def __init__(self, events: str):
        self.bin = hookline_bin()
        self.events = events
        self.endpoints = f"{events}-endpoints"
        self.dlq = f"{events}.dlq"

    def args(self, *args: str) -> list:
        return [
            str(self.bin),
            "--bootstrap-servers", BOOTSTRAP,
            "--registry-url", REGISTRY,
            "--events-topic", self.events,
            "--endpoints-topic", self.endpoints,
            *args,
        ]

    def run(self, *args: str) -> str:
        done = subprocess.run(self.args(*args), capture_output=True, text=True, timeout=DEADLINE_S)
        assert done.returncode == 0, f"hookline {' '.join(args)}: {done.stderr}"
        return done.stdout

    def publish(self, endpoint: str, data: str) -> tuple:
        """Publishes one event; returns (event_id, partition, offset)."""
        out = self.run("publish", "--endpoint", endpoint, "--type", "invoice.paid", "--data", data)
        found = re.search(r"published (\S+) partition=(\d+) offset=(\d+)", out)
        assert found, f"unexpected publish output: {out!r}"
        return found.group(1), int(found.group(2)), int(found.group(3))


def config_toml(h: Hookline) -> str:
    return f"""
group_id = "{h.events}-dispatchers"
shutdown_grace_ms = 5000

[kafka]
bootstrap_servers = "{BOOTSTRAP}"

[registry]
url = "{REGISTRY}"

[topics]
events = "{h.events}"
endpoints = "{h.endpoints}"
retry_tiers = ["200ms"]

[retry]
strategy = "fixed"
base_ms = 100
cap_ms = 100
max_attempts = 2

[outbound]
allow_loopback = true

[admin]
listen = "127.0.0.1:0"
"""


def read_records(topic: str, count: int) -> list:
    """Reads `topic` from the beginning (every partition) until it holds `count` records."""
    consumer = Consumer({
        "bootstrap.servers": BOOTSTRAP,
        "group.id": f"py-reader-{uuid.uuid4().hex}",
        "enable.auto.commit": False,
    })
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        records = []
        give_up = time.monotonic() + DEADLINE_S
        while len(records) < count:
            assert time.monotonic() < give_up, f"{len(records)} of {count} records in {topic}"
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            records.append(msg)
        return records
    finally:
        consumer.close()


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


def test_confluent_kafka_reads_the_dlq_through_the_registry(tmp_path, receiver):
    h = Hookline(unique_name("py-dlq"))
    h.run("topics", "create", "--tiers", "200ms")
    h.run("endpoints", "put", "ep", "--url", receiver.url, "--generate-secret")

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
        failing = [h.publish("ep", json.dumps({"invoice": n})) for n in range(2)]
        unknown = h.publish("nobody", json.dumps({"invoice": 99}))
        # Any Kafka client may publish (JSON form); the traceparent header becomes trace_id.
        traced_id = f"evt-traced-{uuid.uuid4().hex}"
        producer = Producer({"bootstrap.servers": BOOTSTRAP})
        traced = {}

        def delivered(err, msg):
            assert err is None, err
            traced["at"] = (msg.partition(), msg.offset())

        producer.produce(
            h.events,
            key=b"ep",
            value=json.dumps({
                "event_id": traced_id,
                "event_type": "invoice.paid",
                "endpoint_id": "ep",
                "payload": {"invoice": 7},
            }).encode(),
            headers=[("traceparent", TRACEPARENT.encode())],
            on_delivery=delivered,
        )
        assert producer.flush(10) == 0
        published = {e: (p, o) for e, p, o in [*failing, unknown]}
        published[traced_id] = traced["at"]

        # What the events topic holds: the DLQ must carry these values byte for byte.
        originals = {
            (m.partition(), m.offset()): m.value() for m in read_records(h.events, len(published))
        }

        # The README's example, with a deadline.
        # A request timeout, so that a registry that never answers one request is asked again
        # (the client retries transport errors) instead of hanging the test.
        registry = SchemaRegistryClient({"url": REGISTRY, "timeout": 10})
        deserialize = AvroDeserializer(registry)
        consumer = Consumer({
            "bootstrap.servers": BOOTSTRAP,
            "group.id": f"py-dlq-reader-{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest",
        })
        consumer.subscribe([h.dlq])
        envelopes = {}
        frames = set()
        give_up = time.monotonic() + DEADLINE_S
        try:
            while len(envelopes) < len(published):
                assert time.monotonic() < give_up, (
                    f"{len(envelopes)} of {len(published)} DLQ records; dispatcher log:\n"
                    + log.read_text(errors="replace")[-4000:]
                )
                msg = consumer.poll(1.0)
                if msg is None:
                    continue
                assert msg.error() is None, msg.error()
                frames.add(int.from_bytes(msg.value()[1:5], "big"))
                envelope = deserialize(msg.value(), SerializationContext(msg.topic(), MessageField.VALUE))
                envelopes[envelope["event_id"]] = envelope
        finally:
            consumer.close()

        assert set(envelopes) == set(published)
        latest = registry.get_latest_version(f"{h.dlq}-value")
        assert frames == {latest.schema_id}, "framed with the id hookline registered"
        assert '"trace_id"' in latest.schema.schema_str, "the v2 field"
        assert '"original_payload_truncated"' in latest.schema.schema_str, "the v3 field"
        assert '"tenant_id"' in latest.schema.schema_str, "the v4 field"
        assert '"CANCELLED"' in latest.schema.schema_str, "the v5 reasons"

        for event_id, envelope in envelopes.items():
            partition, offset = published[event_id]
            assert envelope["envelope_version"] == 5
            assert envelope["original_topic"] == h.events
            assert type(envelope["original_partition"]) is int
            assert type(envelope["original_offset"]) is int
            assert (envelope["original_partition"], envelope["original_offset"]) == (partition, offset)
            assert envelope["original_payload_bytes"] == originals[(partition, offset)]
            assert envelope["original_payload_truncated"] is False, "small events are kept whole"
            assert envelope["original_payload_size"] is None
            assert envelope["tenant_id"] is None, "direct deliveries have no tenant"
            assert isinstance(envelope["error_timestamp"], datetime.datetime)
            assert isinstance(envelope["error_message"], str) and envelope["error_message"]
            assert envelope["dispatcher_id"]

        for event_id in [e for e, _, _ in failing] + [traced_id]:
            envelope = envelopes[event_id]
            assert envelope["error_reason"] == "RETRIES_EXHAUSTED", envelope["error_message"]
            assert envelope["endpoint_id"] == "ep"
            assert envelope["original_key"] == b"ep"
            assert envelope["attempts"] == 2
            assert envelope["last_status_code"] == 500
            assert isinstance(envelope["first_attempt_at"], datetime.datetime)
            assert receiver.count(event_id) == 2, "two attempts, then the DLQ"

        envelope = envelopes[unknown[0]]
        assert envelope["error_reason"] == "UNKNOWN_ENDPOINT"
        assert envelope["endpoint_id"] == "nobody"
        assert envelope["attempts"] == 0
        assert envelope["last_status_code"] is None

        assert envelopes[traced_id]["trace_id"] == TRACE_ID
        assert envelopes[traced_id]["original_payload_bytes"].startswith(b"{")
        for e, _, _ in [*failing, unknown]:
            assert envelopes[e]["trace_id"] is None, "published without a traceparent"
            assert envelopes[e]["original_payload_bytes"][0] == 0, "Avro framed by hookline publish"
    finally:
        if dispatcher.poll() is None:
            dispatcher.send_signal(signal.SIGTERM)
        try:
            code = dispatcher.wait(timeout=30)
        except subprocess.TimeoutExpired:
            dispatcher.kill()
            raise
    assert code == 0, f"dispatcher exited {code}:\n" + log.read_text(errors="replace")[-4000:]
