"""The exception each refusal of a real server raises, with its fields."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Any, Callable

import pytest

import tally
from tally._wire import Answer, Call

from .conftest import new_tenant, uid
from .tallyserver import TallyServer


def raw(answer: Answer) -> bytes:
    return answer.content


def test_validation_names_every_field_at_fault(client: Any) -> None:
    with pytest.raises(tally.InvalidRequest) as caught:
        client.post_usage_debit(uid("ur"), "", Decimal("-1"), "U S D")
    error = caught.value
    assert error.status == 422 and error.code == "invalid_request"
    assert {"account", "amount", "unit"} <= set(error.fields)
    # Not claimed: the same ID, corrected, is a new request.


def test_a_refused_request_does_not_claim_its_id(client: Any) -> None:
    record, acct = uid("ur"), uid("cust")
    with pytest.raises(tally.InvalidRequest):
        client.post_usage_debit(record, acct, Decimal("1"), "U S D")
    assert client.post_usage_debit(record, acct, Decimal("1"), "USD").created


def test_unit_mismatch(client: Any) -> None:
    acct = uid("cust")
    client.post_payment(uid("pay"), acct, Decimal("1"), "USD")
    with pytest.raises(tally.UnitMismatch) as caught:
        client.post_usage_debit(uid("ur"), acct, Decimal("1"), "EUR")
    assert caught.value.account == acct and caught.value.unit == "USD"
    assert caught.value.status == 422 and "unit" in [e.field for e in caught.value.errors]


def test_not_found(client: Any) -> None:
    with pytest.raises(tally.NotFound):
        client.get_entry("ent_00000000000000000000000000000000")
    with pytest.raises(tally.NotFound):
        client.get_balance(uid("nobody"))
    with pytest.raises(tally.NotFound) as caught:
        client.post_refund(uid("re"), uid("no_such_payment"), Decimal("1"))
    assert caught.value.field == "payment_id"


def test_rules_refunds_and_reversals(client: Any) -> None:
    acct, pay = uid("cust"), uid("pay")
    payment = client.post_payment(pay, acct, Decimal("5"), "USD")
    with pytest.raises(tally.RefundExceedsPayment) as too_much:
        client.post_refund(uid("re"), pay, Decimal("5.01"))
    assert too_much.value.entry is not None and too_much.value.entry.kind == "refund"
    client.post_reversal(uid("rev"), payment.entry.id, "charged back")
    with pytest.raises(tally.AlreadyReversed):
        client.post_reversal(uid("rev"), payment.entry.id, "charged back again")


def test_hold_expired_is_a_stored_rejection(client: Any) -> None:
    hold_id = uid("job")
    acct = uid("cust")
    expires = datetime.now(timezone.utc) + timedelta(seconds=1)
    client.post_hold(hold_id, acct, Decimal("1"), "USD", expires_at=expires)
    time.sleep(1.2)
    with pytest.raises((tally.HoldExpired, tally.HoldNotOpen)) as caught:
        client.post_capture(hold_id, uid("cap"), Decimal("1"))
    assert caught.value.status == 422
    assert isinstance(caught.value, tally.Rejected)


def test_unauthenticated_and_forbidden(
    make_client: Callable[..., Any], server: TallyServer
) -> None:
    stranger = make_client(server.base_url, "not-a-key")
    with pytest.raises(tally.Unauthenticated) as caught:
        stranger.get_audit_head()
    assert caught.value.status == 401
    reader = make_client(server.base_url, server.create_key(new_tenant(), "read"))
    with pytest.raises(tally.Forbidden) as denied:
        reader.post_usage_debit(uid("ur"), uid("cust"), Decimal("1"), "USD")
    assert denied.value.status == 403 and denied.value.code == "forbidden"


def test_malformed_json_wrong_method_and_too_large(client: Any) -> None:
    with pytest.raises(tally.MalformedJson):
        client.run(Call("POST", "/v1/usage-debits", raw, body=b'{"usage_record_id":'))
    with pytest.raises(tally.MethodNotAllowed):
        client.run(Call("DELETE", "/v1/payments", raw))
    with pytest.raises(tally.PayloadTooLarge):
        client.run(Call("POST", "/v1/payments", raw, body=b'{"a":"' + b"x" * (1 << 20) + b'"}'))


def test_errors_carry_the_request_id(client: Any) -> None:
    with pytest.raises(tally.NotFound) as caught:
        client.get_hold(uid("nohold"))
    assert caught.value.request_id
    assert caught.value.problem["status"] == 404
