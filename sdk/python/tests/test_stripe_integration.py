"""The Stripe integration's operations end to end, with both clients on
every engine: the settings (admin; the secrets never come back), the events
Stripe delivered (read), a reapply (post), the removal; each refusal as its
exception. Events are delivered as Stripe delivers them, signed with
``Stripe-Signature`` (HMAC-SHA256 of ``"<t>.<body>"``), so that the list has
something in it."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from decimal import Decimal
from typing import Any, Callable, Dict, Tuple

import httpx
import pytest

import tally

from .conftest import new_tenant, uid
from .tallyserver import TallyServer

SECRET = "whsec_sdk_py_3f90ab"


def payment_event(event_id: str, pi: str, metadata: Dict[str, str]) -> str:
    """A ``payment_intent.succeeded`` event as Stripe sends it."""
    return json.dumps(
        {
            "id": event_id,
            "object": "event",
            "type": "payment_intent.succeeded",
            "created": 1733500000,
            "data": {
                "object": {
                    "id": pi,
                    "object": "payment_intent",
                    "amount_received": 1999,
                    "currency": "usd",
                    "created": 1733499990,
                    "metadata": metadata,
                    "status": "succeeded",
                }
            },
        }
    )


def deliver(base_url: str, endpoint_path: str, body: str) -> Tuple[int, Dict[str, Any]]:
    """POSTs ``body`` to the integration's path as Stripe does: signed, no
    API key."""
    t = int(time.time())
    v1 = hmac.new(SECRET.encode(), f"{t}.{body}".encode(), hashlib.sha256).hexdigest()
    r = httpx.post(
        base_url + endpoint_path,
        content=body.encode(),
        headers={"content-type": "application/json", "stripe-signature": f"t={t},v1={v1}"},
    )
    return r.status_code, r.json()


def test_configure_list_reapply_and_remove(
    make_client: Callable[..., Any], server: TallyServer
) -> None:
    key = server.create_key(new_tenant(), "post,read,admin")
    client = make_client(server.base_url, key)
    account = uid("cust")

    with pytest.raises(tally.NotFound):
        client.get_stripe_integration()
    made = client.put_stripe_integration([SECRET], "tally_account")
    assert isinstance(made, tally.StripeIntegration)
    assert made.endpoint_path.startswith("/v1/ingest/stripe/sie_")
    assert (made.account_metadata_key, made.signing_secrets_count) == ("tally_account", 1)
    assert "whsec_" not in json.dumps(dict(made.raw))
    assert client.get_stripe_integration() == made

    # Replaced with a second secret: the same path.
    rotated = client.put_stripe_integration((SECRET, "whsec_sdk_py_next"), "tally_account")
    assert rotated.endpoint_path == made.endpoint_path
    assert rotated.signing_secrets_count == 2

    empty = client.list_stripe_events()
    assert (empty.events, empty.next_after) == ([], None)

    # A payment Stripe delivered: applied.
    status, body = deliver(
        server.base_url,
        made.endpoint_path,
        payment_event("evt_py_1", "pi_py_1", {"tally_account": account}),
    )
    assert (status, body["status"]) == (200, "applied")
    page = client.list_stripe_events(status="applied")
    assert isinstance(page, tally.StripeEventPage)
    [event] = page.events
    assert (event.event_id, event.type, event.status) == (
        "evt_py_1",
        "payment_intent.succeeded",
        "applied",
    )
    assert (event.reason, event.waiting_for) == (None, None)
    assert tally.parse_timestamp(event.received_at).year >= 2024
    assert client.get_balance(account).posted == Decimal("19.99")

    # Its account under another metadata key: unmapped until the key is fixed.
    other = uid("cust")
    _, body = deliver(
        server.base_url,
        made.endpoint_path,
        payment_event("evt_py_2", "pi_py_2", {"customer_account": other}),
    )
    assert body["status"] == "unmapped"
    waiting = client.list_stripe_events(status="unmapped").events
    assert [e.event_id for e in waiting] == ["evt_py_2"]
    assert "tally_account" in (waiting[0].reason or "")
    assert client.reapply_stripe_event("evt_py_2").status == "unmapped"
    client.put_stripe_integration([SECRET], "customer_account")
    fixed = client.reapply_stripe_event("evt_py_2")
    assert (fixed.event_id, fixed.status, fixed.reason) == ("evt_py_2", "applied", None)
    assert client.reapply_stripe_event("evt_py_2").status == "applied", "a second reapply replays"
    assert client.get_balance(other).posted == Decimal("19.99")

    # Pages, and every page at once.
    first = client.list_stripe_events(limit=1)
    assert [e.event_id for e in first.events] == ["evt_py_1"]
    assert first.next_after == "evt_py_1"
    assert [e.event_id for e in client.iter_stripe_events(page_size=1)] == [
        "evt_py_1",
        "evt_py_2",
    ]

    with pytest.raises(tally.NotFound) as missing:
        client.reapply_stripe_event("evt_py_unknown")
    assert (missing.value.status, missing.value.code) == (404, "not_found")

    # Removed: reads NotFound, Stripe's deliveries are refused, the events stay.
    assert client.delete_stripe_integration() is None
    with pytest.raises(tally.NotFound):
        client.get_stripe_integration()
    with pytest.raises(tally.NotFound):
        client.delete_stripe_integration()
    status, _ = deliver(
        server.base_url,
        made.endpoint_path,
        payment_event("evt_py_3", "pi_py_3", {"tally_account": account}),
    )
    assert status == 404
    assert len(client.list_stripe_events().events) == 2
    with pytest.raises(tally.InvalidRequest):
        client.reapply_stripe_event("evt_py_2")


def test_invalid_settings_and_missing_scopes_are_typed(
    make_client: Callable[..., Any], server: TallyServer
) -> None:
    tenant = new_tenant()
    admin = make_client(server.base_url, server.create_key(tenant, "admin"))
    reader = make_client(server.base_url, server.create_key(tenant, "read"))

    with pytest.raises(tally.InvalidRequest) as bad:
        admin.put_stripe_integration(["not_a_secret"], "")
    fields = {e.field for e in bad.value.errors}
    assert {"signing_secrets", "account_metadata_key"} <= fields, fields
    assert "not_a_secret" not in str(bad.value)
    with pytest.raises(tally.NotFound):
        admin.get_stripe_integration()
    with pytest.raises(TypeError):
        admin.put_stripe_integration(SECRET, "tally_account")  # a str, not a list
    admin.put_stripe_integration([SECRET], "tally_account")

    for call in (
        lambda: reader.get_stripe_integration(),
        lambda: reader.put_stripe_integration([SECRET], "k"),
        lambda: reader.delete_stripe_integration(),
        lambda: reader.reapply_stripe_event("evt_1"),
        lambda: admin.list_stripe_events(),
    ):
        with pytest.raises(tally.Forbidden):
            call()
    assert reader.list_stripe_events().events == []
    with pytest.raises(tally.InvalidRequest):
        reader.list_stripe_events(limit=0)
    assert admin.get_stripe_integration().account_metadata_key == "tally_account"
