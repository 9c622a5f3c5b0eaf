"""The webhook operations end to end, with both clients on every engine: a
server started with ``--webhook-allow-insecure`` delivers to a local
receiver, which verifies each delivery with ``tally.verify_webhook`` and
the secret ``post_webhook_endpoint`` and ``rotate_webhook_secret`` returned;
the deliveries API shows the attempts; a disabled endpoint's pending
delivery waits until it is enabled."""

from __future__ import annotations

import base64
import threading
import time
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict, Iterator, List, Tuple

import pytest

import tally

from .conftest import new_tenant, uid

Received = Tuple[str, Dict[str, str], bytes]


class Receiver:
    """A local webhook receiver that answers 204 and keeps what it got."""

    def __init__(self) -> None:
        self.received: List[Received] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                headers = {k.lower(): v for k, v in self.headers.items()}
                receiver.received.append((self.path, headers, body))
                self.send_response(204)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}/hooks"
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)
        self.thread.start()

    def wait_for(self, count: int, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.received) < count:
            assert time.monotonic() < deadline, f"{len(self.received)} of {count} deliveries"
            time.sleep(0.02)

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def wait_for_delivery(
    client: Any, endpoint_id: str, matches: Callable[[tally.WebhookDelivery], bool]
) -> tally.WebhookDelivery:
    deadline = time.monotonic() + 15.0
    while True:
        page: tally.WebhookDeliveryPage = client.list_webhook_deliveries(endpoint_id)
        for delivery in page.deliveries:
            if matches(delivery):
                return delivery
        assert time.monotonic() < deadline, f"no matching delivery in {page.deliveries}"
        time.sleep(0.05)


def test_deliveries_are_signed_with_the_endpoint_secret(
    start_server: Callable[..., Any], make_client: Callable[..., Any], receiver: Receiver
) -> None:
    server = start_server("--webhook-allow-insecure", "--webhook-poll-ms", "50")
    client = make_client(server.base_url, server.create_key(new_tenant()))
    acct = uid("cust")

    endpoint = client.post_webhook_endpoint(receiver.url, ["entry.posted"])
    payment = client.post_payment(uid("pay"), acct, Decimal("12.50"), "USD")
    receiver.wait_for(1)
    path, headers, body = receiver.received[0]
    assert path == "/hooks"
    event = tally.verify_webhook(body, headers, endpoint.secret)
    assert event["type"] == "entry.posted" and event["seq"] == payment.entry.seq
    assert event["data"]["entry"]["id"] == payment.entry.id
    assert Decimal(event["data"]["entry"]["amount"]) == Decimal("12.5")

    delivered = wait_for_delivery(client, endpoint.id, lambda d: d.status == "delivered")
    assert delivered.event_id == headers["webhook-id"] == event["id"]
    assert [(a.attempt, a.outcome, a.http_status) for a in delivered.attempts] == [
        (1, "delivered", 204)
    ]
    assert delivered.event == event, "the event exactly as sent"

    # After a rotation a retried delivery carries a signature by each secret.
    rotated = client.rotate_webhook_secret(endpoint.id)
    assert client.retry_webhook_delivery(delivered.id).status == "pending"
    receiver.wait_for(2)
    _, headers2, body2 = receiver.received[1]
    assert headers2["webhook-id"] == event["id"], "a retry keeps the event id"
    assert tally.verify_webhook(body2, headers2, rotated.secret)["id"] == event["id"]
    assert tally.verify_webhook(body2, headers2, endpoint.secret)["id"] == event["id"]
    other = "whsec_" + base64.b64encode(bytes(range(32))).decode()
    with pytest.raises(tally.WebhookVerificationError):
        tally.verify_webhook(body2, headers2, other)
    twice = wait_for_delivery(
        client, endpoint.id, lambda d: d.id == delivered.id and len(d.attempts) == 2
    )
    assert twice.status == "delivered" and twice.attempts[1].outcome == "delivered"

    # Disabled, a delivery made pending again waits until the endpoint is enabled.
    assert client.patch_webhook_endpoint(endpoint.id, enabled=False).disabled_reason == "disabled"
    client.retry_webhook_delivery(delivered.id)
    time.sleep(0.5)
    assert len(receiver.received) == 2, "nothing is sent while disabled"
    assert client.patch_webhook_endpoint(endpoint.id, enabled=True).disabled_reason is None
    receiver.wait_for(3)
    assert receiver.received[2][1]["webhook-id"] == event["id"]
    client.delete_webhook_endpoint(endpoint.id)


def test_only_https_to_public_addresses_without_the_insecure_setting(
    client: Any, receiver: Receiver
) -> None:
    with pytest.raises(tally.InvalidRequest) as refused:
        client.post_webhook_endpoint(receiver.url, ["entry.posted"])
    assert refused.value.status == 422
    assert client.list_webhook_endpoints() == []


def test_webhook_operations_need_the_admin_scope(
    server: Any, make_client: Callable[..., Any]
) -> None:
    reader = make_client(server.base_url, server.create_key(new_tenant(), scopes="post,read"))
    with pytest.raises(tally.Forbidden):
        reader.post_webhook_endpoint("https://hooks.example.com/x", ["entry.posted"])
    with pytest.raises(tally.Forbidden):
        reader.list_webhook_endpoints()
