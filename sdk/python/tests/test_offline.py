"""What the client decides without a server: request bodies (exact
decimals, required upstream IDs), error classes per problem code, reading
answers into Decimal."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any, Dict

import pytest

import tally
from tally import _calls, _json
from tally.errors import BY_CODE, error_from_answer
from tally.intents import ClaimWait, OnceOptions, failure_of, lease_of, step_answer
from tally.requests import decimal_text


def test_amounts_are_sent_as_exact_decimal_strings() -> None:
    assert decimal_text(Decimal("0.0125"), "amount") == "0.0125"
    assert decimal_text(Decimal("1.50"), "amount") == "1.50"
    assert decimal_text(Decimal("1E+2"), "amount") == "100"
    assert decimal_text(Decimal("1E-20"), "amount") == "0.00000000000000000001"
    assert decimal_text(42, "amount") == "42"
    big = Decimal("9999999999999999999999999999")
    assert decimal_text(big, "amount") == "9999999999999999999999999999"


@pytest.mark.parametrize("bad", [0.1, 1.0, True, "1.50", None])
def test_floats_and_other_types_are_refused_as_money(bad: object) -> None:
    with pytest.raises(TypeError, match="amount"):
        tally.UsageDebit("ur_1", "cust", bad, "USD")  # type: ignore[arg-type]


def test_non_finite_decimals_are_refused() -> None:
    with pytest.raises(ValueError):
        tally.Payment("p1", "cust", Decimal("NaN"), "USD")
    with pytest.raises(ValueError):
        tally.Payment("p1", "cust", Decimal("Infinity"), "USD")


@pytest.mark.parametrize("missing", ["", None])
def test_the_upstream_id_is_required(missing: object) -> None:
    with pytest.raises(ValueError, match="usage_record_id is required"):
        tally.UsageDebit(missing, "cust", Decimal("1"), "USD")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="refund_id is required"):
        tally.Refund(missing, "p1", Decimal("1"))  # type: ignore[arg-type]


def test_a_body_is_the_same_bytes_every_time() -> None:
    debit = tally.UsageDebit(
        "ur_1", "cust_42", Decimal("0.0125"), "USD", meter="llm", quantity=Decimal("1250"),
        occurred_at=datetime(2026, 11, 29, 10, 0, tzinfo=timezone.utc), metadata={"model": "m1"},
    )  # fmt: skip
    call = _calls.post_usage_debit(debit)
    assert call.body == _calls.post_usage_debit(debit).body
    assert json.loads(call.body or b"") == {
        "usage_record_id": "ur_1",
        "account": "cust_42",
        "amount": "0.0125",
        "unit": "USD",
        "meter": "llm",
        "quantity": "1250",
        "occurred_at": "2026-11-29T10:00:00+00:00",
        "metadata": {"model": "m1"},
    }


def test_naive_datetimes_are_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        tally.UsageDebit("ur_1", "c", Decimal("1"), "USD", occurred_at=datetime(2026, 1, 1))


def test_a_hold_needs_exactly_one_expiry() -> None:
    with pytest.raises(ValueError):
        tally.Hold("h1", "c", Decimal("1"), "USD")
    with pytest.raises(ValueError):
        tally.Hold("h1", "c", Decimal("1"), "USD", ttl_seconds=5, expires_at="2030-01-01T00:00:00Z")


def test_names_are_percent_encoded_in_paths_and_queries() -> None:
    assert _calls.get_balance("@revenue", unit="USD", as_of_seq=None, as_of=None).target == (
        "/v1/accounts/%40revenue/balance?unit=USD"
    )
    assert _calls.get_entry("a b/c+é").target == "/v1/entries/a%20b%2Fc%2B%C3%A9"
    page = _calls.list_entries(
        account="cust 1", kind=None, after_seq=0, limit=10, from_=None, to=None
    )
    assert page.target == "/v1/entries?account=cust%201&after_seq=0&limit=10"


def problem(code: str, status: int, **extra: object) -> bytes:
    body = {
        "type": f"/problems/{code}",
        "title": "t",
        "status": status,
        "detail": "d",
        "code": code,
    }
    body.update(extra)
    return json.dumps(body).encode()


ENTRY = {
    "id": "ent_1", "seq": 3, "kind": "usage_debit", "upstream_id": "ur_9", "status": "rejected",
    "rejection": {"code": "insufficient_funds", "message": "m"}, "account": "c",
    "debit_account": "c", "credit_account": "@revenue", "amount": "50", "unit": "USD",
    "meter": None, "quantity": None, "processor": None, "occurred_at": None,
    "recorded_at": "2026-01-01T00:00:00.000001Z", "metadata": None, "fingerprint": "sha256:x",
    "prev_hash": "0" * 64, "hash": "1" * 64, "balance_after": "-0.1",
}  # fmt: skip


def test_every_problem_code_has_its_class() -> None:
    expected = {
        "malformed_json": (tally.MalformedJson, 400),
        "invalid_signature": (tally.InvalidSignature, 400),
        "unauthenticated": (tally.Unauthenticated, 401),
        "forbidden": (tally.Forbidden, 403),
        "not_found": (tally.NotFound, 404),
        "method_not_allowed": (tally.MethodNotAllowed, 405),
        "idempotency_conflict": (tally.IdempotencyConflict, 409),
        "intent_in_progress": (tally.IntentInProgress, 409),
        "lease_lost": (tally.LeaseLost, 409),
        "payload_too_large": (tally.PayloadTooLarge, 413),
        "unsupported_media_type": (tally.UnsupportedMediaType, 415),
        "invalid_request": (tally.InvalidRequest, 422),
        "unit_mismatch": (tally.UnitMismatch, 422),
        "insufficient_funds": (tally.InsufficientFunds, 422),
        "hold_not_open": (tally.HoldNotOpen, 422),
        "hold_expired": (tally.HoldExpired, 422),
        "refund_exceeds_payment": (tally.RefundExceedsPayment, 422),
        "already_reversed": (tally.AlreadyReversed, 422),
        "total_out_of_range": (tally.TotalOutOfRange, 422),
        "rejected": (tally.Rejected, 422),
        "rate_limited": (tally.RateLimited, 429),
        "internal": (tally.Internal, 500),
        "unavailable": (tally.Unavailable, 503),
    }
    assert set(BY_CODE) == set(expected)
    for code, (cls, status) in expected.items():
        error = error_from_answer(status, problem(code, status))
        assert type(error) is cls, code
        assert isinstance(error, tally.TallyError)
        assert (error.status, error.code, error.detail) == (status, code, "d")
        assert error.problem["code"] == code
        assert error.retryable == (status in (429, 500, 503))


def test_conflict_carries_the_entry_and_the_differing_fields() -> None:
    error = error_from_answer(
        409,
        problem(
            "idempotency_conflict", 409, entry_id="ent_7", differing_fields=["amount", "meter"]
        ),
    )
    assert isinstance(error, tally.IdempotencyConflict)
    assert error.entry_id == "ent_7" and error.differing_fields == ["amount", "meter"]


def test_a_stored_rejection_carries_its_entry_with_decimals() -> None:
    error = error_from_answer(422, problem("insufficient_funds", 422, entry=ENTRY), replayed=True)
    assert isinstance(error, tally.InsufficientFunds) and isinstance(error, tally.Rejected)
    assert error.entry is not None and error.entry.status == "rejected"
    assert error.entry.amount == Decimal("50") and error.entry.balance_after == Decimal("-0.1")
    assert error.replayed
    unknown = error_from_answer(422, problem("some_new_rule", 422, entry=ENTRY))
    assert type(unknown) is tally.Rejected and unknown.code == "some_new_rule"


def test_unknown_codes_and_bare_statuses() -> None:
    assert type(error_from_answer(502, b"<html>bad gateway</html>")) is tally.ServerError
    assert error_from_answer(502, b"").retryable
    assert type(error_from_answer(429, b"")) is tally.RateLimited
    teapot = error_from_answer(418, problem("teapot", 418))
    assert type(teapot) is tally.TallyError and not teapot.retryable and teapot.code == "teapot"


def test_invalid_request_lists_the_fields() -> None:
    error = error_from_answer(
        422, problem("invalid_request", 422, errors=[{"field": "unit", "message": "bad"}])
    )
    assert isinstance(error, tally.InvalidRequest)
    assert error.errors == [tally.FieldError("unit", "bad")] and error.fields == ["unit"]


def test_json_numbers_in_answers_never_become_floats() -> None:
    from tally import _json

    parsed = _json.loads(b'{"a": 0.1, "b": 1e-20}')
    assert parsed == {"a": Decimal("0.1"), "b": Decimal("1e-20")}
    assert all(isinstance(v, Decimal) for v in parsed.values())


def test_timestamps_parse_with_nanoseconds_and_offsets() -> None:
    t = tally.parse_timestamp("2026-11-29T11:00:00.123456789+01:00")
    assert t == datetime(2026, 11, 29, 10, 0, 0, 123456, tzinfo=timezone.utc)
    assert tally.parse_timestamp("2026-11-29T10:00:00Z").tzinfo is not None


def test_webhook_requests() -> None:
    create = _calls.post_webhook_endpoint("https://hooks.example.com/x", ("entry.posted",), None)
    assert (create.method, create.target) == ("POST", "/v1/webhook-endpoints")
    assert json.loads(create.body or b"") == {
        "url": "https://hooks.example.com/x",
        "event_types": ["entry.posted"],
    }
    with pytest.raises(TypeError, match="event_types"):
        _calls.post_webhook_endpoint("https://hooks.example.com/x", "entry.posted", None)
    with pytest.raises(ValueError, match="event_types"):
        _calls.post_webhook_endpoint("https://hooks.example.com/x", [], None)

    def patch(**changes: object) -> object:
        fields = {"url": None, "event_types": None, "description": tally.UNSET, "enabled": None}
        fields.update(changes)
        call = _calls.patch_webhook_endpoint("we 1", **fields)  # type: ignore[arg-type]
        assert (call.method, call.target) == ("PATCH", "/v1/webhook-endpoints/we%201")
        return json.loads(call.body or b"")

    assert patch(enabled=False) == {"enabled": False}
    assert patch(description=None) == {"description": None}, "None clears: it is sent"
    assert patch(description="d", url="https://h.example.com/") == {
        "description": "d",
        "url": "https://h.example.com/",
    }
    with pytest.raises(ValueError, match="nothing to change"):
        patch()

    delete = _calls.delete_webhook_endpoint("we_1")
    assert (delete.method, delete.target, delete.body) == (
        "DELETE", "/v1/webhook-endpoints/we_1", None,
    )  # fmt: skip
    rotate = _calls.rotate_webhook_secret("we_1")
    assert (rotate.method, rotate.target, rotate.body) == (
        "POST", "/v1/webhook-endpoints/we_1/rotate-secret", None,
    )  # fmt: skip
    page = _calls.list_webhook_deliveries("we_1", status="failed", after="wd_9", limit=5)
    assert page.target == "/v1/webhook-endpoints/we_1/deliveries?status=failed&after=wd_9&limit=5"
    retry = _calls.retry_webhook_delivery("wd_1")
    assert (retry.method, retry.target) == ("POST", "/v1/webhook-deliveries/wd_1/retry")
    replay = _calls.replay_webhook_events("we_1", 7)
    assert json.loads(replay.body or b"") == {"from_seq": 7}
    with pytest.raises(TypeError):
        _calls.replay_webhook_events("we_1", "7")  # type: ignore[arg-type]


def test_stripe_integration_requests() -> None:
    put = _calls.put_stripe_integration(["whsec_1", "whsec_2"], "tally_account")
    assert (put.method, put.target) == ("PUT", "/v1/integrations/stripe")
    assert json.loads(put.body or b"") == {
        "signing_secrets": ["whsec_1", "whsec_2"],
        "account_metadata_key": "tally_account",
    }
    with pytest.raises(TypeError, match="signing_secrets"):
        _calls.put_stripe_integration("whsec_1", "tally_account")
    get = _calls.get_stripe_integration()
    assert (get.method, get.target, get.body) == ("GET", "/v1/integrations/stripe", None)
    delete = _calls.delete_stripe_integration()
    assert (delete.method, delete.target, delete.body) == (
        "DELETE", "/v1/integrations/stripe", None,
    )  # fmt: skip
    page = _calls.list_stripe_events(status="unmapped", after="evt 0", limit=5)
    assert page.target == "/v1/integrations/stripe/events?status=unmapped&after=evt%200&limit=5"
    assert _calls.list_stripe_events(status=None, after=None, limit=None).target == (
        "/v1/integrations/stripe/events"
    )
    reapply = _calls.reapply_stripe_event("evt/1 x")
    assert (reapply.method, reapply.target, reapply.body) == (
        "POST", "/v1/integrations/stripe/events/evt%2F1%20x/reapply", None,
    )  # fmt: skip


def test_a_stripe_event_page_is_read() -> None:
    page = tally.StripeEventPage.from_json(
        {
            "events": [
                {
                    "event_id": "evt_1", "type": "charge.refunded", "status": "unmapped",
                    "reason": "the payment pi_1 is not recorded yet", "waiting_for": "pi_1",
                    "received_at": "2026-12-07T10:00:00.000000Z",
                    "updated_at": "2026-12-07T10:00:00.000000Z",
                }
            ],
            "next_after": None,
        }
    )  # fmt: skip
    [event] = page.events
    assert (event.type, event.status, event.waiting_for) == ("charge.refunded", "unmapped", "pi_1")
    assert page.next_after is None
    integration = tally.StripeIntegration.from_json(
        {
            "endpoint_path": "/v1/ingest/stripe/sie_1", "account_metadata_key": "k",
            "signing_secrets_count": 2, "created_at": "2026-12-07T10:00:00Z",
            "updated_at": "2026-12-07T10:00:00Z",
        }
    )  # fmt: skip
    assert integration.signing_secrets_count == 2


def test_a_webhook_secret_stays_out_of_repr() -> None:
    endpoint = {
        "id": "we_1", "url": "https://h.example.com/", "event_types": ["entry.posted"],
        "description": None, "enabled": True, "disabled_reason": None, "after_seq": 3,
        "created_at": "2026-12-05T10:00:00Z", "updated_at": "2026-12-05T10:00:00Z",
    }  # fmt: skip
    made = tally.WebhookEndpointWithSecret.from_json(
        {**endpoint, "secret": "whsec_c2VjcmV0", "previous_secret_expires_at": None}
    )
    assert made.id == "we_1" and made.secret == "whsec_c2VjcmV0"
    assert "whsec_" not in repr(made)


# --- intents ----------------------------------------------------------------------


def test_intent_requests() -> None:
    claim = _calls.claim_intent(
        "inv 1/2", "invoice.charge", {"amount": Decimal("49.00"), "n": 1},
        lease_seconds=None, max_attempts=None,
    )  # fmt: skip
    assert (claim.method, claim.target) == ("POST", "/v1/intents")
    assert claim.body == (
        b'{"intent_id":"inv 1/2","action":"invoice.charge","params":{"amount":49.00,"n":1}}'
    ), "a Decimal is sent as the exact number it is; unset options are left out"
    with_options = _calls.claim_intent("i", "a", {}, lease_seconds=5, max_attempts=1)
    assert json.loads(with_options.body or b"") == {
        "intent_id": "i", "action": "a", "params": {}, "lease_seconds": 5, "max_attempts": 1,
    }  # fmt: skip

    debit = tally.UsageDebit("ur_1", "cust", Decimal("0.0125"), "USD")
    complete = _calls.complete_intent("inv 1/2", "tok", {"charge": "ch_1"}, [debit])
    assert (complete.method, complete.target) == ("POST", "/v1/intents/inv%201%2F2/complete")
    assert json.loads(complete.body or b"") == {
        "token": "tok",
        "result": {"charge": "ch_1"},
        "entries": [{"type": "usage_debit", **debit.to_json()}],
    }
    assert json.loads(_calls.complete_intent("i", "tok", None, None).body or b"") == {
        "token": "tok", "result": None,
    }  # fmt: skip

    fail = _calls.fail_intent("i", "tok", "card_declined", "no funds", retryable=False)
    assert (fail.method, fail.target) == ("POST", "/v1/intents/i/fail")
    assert json.loads(fail.body or b"") == {
        "token": "tok", "error": {"code": "card_declined", "message": "no funds"},
        "retryable": False,
    }  # fmt: skip
    beat = _calls.heartbeat_intent("i", "tok", lease_seconds=30)
    assert (beat.target, json.loads(beat.body or b"")) == (
        "/v1/intents/i/heartbeat", {"token": "tok", "lease_seconds": 30},
    )  # fmt: skip
    assert _calls.get_intent("a b").target == "/v1/intents/a%20b"
    page = _calls.list_intents(status="released", action="invoice.charge", after="i 1", limit=5)
    assert page.target == "/v1/intents?status=released&action=invoice.charge&after=i%201&limit=5"
    assert _calls.list_intents(status=None, action=None, after=None, limit=None).target == (
        "/v1/intents"
    )


def test_intent_requests_refuse_bad_arguments() -> None:
    with pytest.raises(ValueError, match="intent_id"):
        _calls.claim_intent("", "a", {}, lease_seconds=None, max_attempts=None)
    with pytest.raises(TypeError, match="params"):
        bad: Any = ["x"]
        _calls.claim_intent("i", "a", bad, lease_seconds=None, max_attempts=None)
    with pytest.raises(TypeError, match="lease_seconds"):
        _calls.claim_intent("i", "a", {}, lease_seconds=True, max_attempts=None)
    with pytest.raises(ValueError):
        _calls.claim_intent("i", "a", {"x": Decimal("NaN")}, lease_seconds=None, max_attempts=None)
    with pytest.raises(ValueError):
        _calls.complete_intent("i", "tok", {"x": float("inf")}, None)
    with pytest.raises(TypeError):
        _calls.complete_intent("i", "tok", {"when": datetime.now(timezone.utc)}, None)
    with pytest.raises(TypeError, match="batch holds"):
        capture: Any = tally.Capture("c", Decimal(1))
        _calls.complete_intent("i", "tok", None, [capture])
    with pytest.raises(ValueError, match="token"):
        _calls.fail_intent("i", "", "code", "m", retryable=False)
    with pytest.raises(TypeError, match="retryable"):
        _calls.fail_intent("i", "tok", "code", "m", retryable="yes")  # type: ignore[arg-type]


def test_json_bodies_send_decimals_exactly() -> None:
    value = {"a": [Decimal("0.0125"), Decimal("1E+2"), Decimal("-0"), 0.5, 7, None, True]}
    assert _json.dumps(value) == b'{"a":[0.0125,100,-0,0.5,7,null,true]}'
    assert _json.loads(_json.dumps(value))["a"][0] == Decimal("0.0125")
    text = {"s": 'é "q" \u2028', "nested": {"k": []}}
    assert _json.dumps(text) == json.dumps(text, ensure_ascii=False, separators=(",", ":")).encode()
    with pytest.raises(TypeError, match="keys"):
        _json.dumps({1: "x"})


def intent_json(**extra: object) -> Dict[str, Any]:
    body: Dict[str, Any] = {
        "intent_id": "inv_1", "action": "invoice.charge", "params": {"amount": 49.00},
        "status": "claimed", "attempt": 2, "max_attempts": 5, "fence": 3,
        "lease_expires_at": "2026-12-05T10:01:00.000000Z",
        "created_at": "2026-12-05T10:00:00.000000Z", "updated_at": "2026-12-05T10:00:00.000000Z",
    }  # fmt: skip
    body.update(extra)
    return body


def test_an_intent_is_read_with_its_lease_history_and_outcome() -> None:
    claimed = tally.Intent.from_json(
        intent_json(lease={"token": "lease_s3cr3t", "fence": 3, "expires_at": "2026-12-05T10:01Z"}),
        replayed=False,
    )
    assert claimed.lease == tally.IntentLease("lease_s3cr3t", 3, "2026-12-05T10:01Z")
    assert claimed.params == {"amount": Decimal("49.00")} and not claimed.finished
    assert "lease_s3cr3t" not in repr(claimed), "the token stays out of logs"
    lease = lease_of(claimed)
    assert lease is not None and (lease.attempt, lease.fence, lease.token) == (2, 3, "lease_s3cr3t")
    assert "lease_s3cr3t" not in repr(lease)

    failed = tally.Intent.from_json(
        intent_json(
            status="failed", lease_expires_at=None,
            error={"code": "lease_expired", "message": "the last lease ran out"},
            history=[{"type": "claimed", "fence": 3, "attempt": 2, "at": "t", "seq": 9,
                      "entry_id": "ent_9"}],
        ),
        replayed=True,
    )  # fmt: skip
    assert failed.finished and failed.replayed and lease_of(failed) is None
    assert failed.error == tally.IntentFailure("lease_expired", "the last lease ran out")
    assert failed.history == [tally.IntentChange("claimed", 3, 2, "t", 9, "ent_9")]
    with pytest.raises(tally.DecodeError):
        lease_of(tally.Intent.from_json(intent_json(status="released")))


def test_intent_problems() -> None:
    busy = error_from_answer(
        409,
        problem("intent_in_progress", 409, intent_id="inv_1", retry_after_seconds=27, fence=1),
        retry_after=27.0,
    )
    assert isinstance(busy, tally.IntentInProgress) and not busy.retryable
    assert (busy.intent_id, busy.fence, busy.retry_after) == ("inv_1", 1, 27.0)
    no_header = error_from_answer(
        409, problem("intent_in_progress", 409, retry_after_seconds=4, fence=2)
    )
    assert isinstance(no_header, tally.IntentInProgress) and no_header.retry_after == 4.0
    lost = error_from_answer(409, problem("lease_lost", 409, intent_id="inv_1"))
    assert isinstance(lost, tally.LeaseLost) and lost.intent_id == "inv_1"
    conflict = error_from_answer(
        409,
        problem("idempotency_conflict", 409, intent_id="inv_1", differing_fields=["params.amount"]),
    )
    assert isinstance(conflict, tally.IdempotencyConflict)
    assert (conflict.intent_id, conflict.entry_id, conflict.differing_fields) == (
        "inv_1", "", ["params.amount"],
    )  # fmt: skip


def test_what_a_step_fails_with() -> None:
    assert failure_of(ValueError("card declined")) == ("ValueError", "card declined", False)
    assert failure_of(tally.StepError("no funds", code="card_declined")) == (
        "card_declined", "no funds", False,
    )  # fmt: skip
    assert failure_of(tally.RetryableStepError("429")) == ("RetryableStepError", "429", True)
    assert failure_of(tally.RetryableStepError("x", code="overloaded"))[::2] == (
        "overloaded", True,
    )  # fmt: skip
    code, message, _ = failure_of(RuntimeError("é" * 3000))  # 6,000 bytes of UTF-8
    assert code == "RuntimeError" and message == "é" * 2048, "cut to 4 KiB between characters"
    assert failure_of(tally.StepError("m", code="c" * 200))[0] == "c" * 128


def test_what_a_step_returns() -> None:
    assert step_answer({"a": 1}) == ({"a": 1}, None)
    assert step_answer(None) == (None, None)
    debit = tally.UsageDebit("ur_1", "cust", Decimal("1"), "USD")
    assert step_answer(tally.StepResult("r", entries=(debit,))) == ("r", [debit])
    assert step_answer(tally.StepResult({"r": 1})) == ({"r": 1}, None)


def test_once_options_and_the_wait_budget() -> None:
    options = OnceOptions.of(60, 5, None)
    assert (options.wait_budget, options.heartbeat_interval) == (120.0, 20.0)
    assert OnceOptions.of(2, 1, 0).wait_budget == 0.0
    beat = OnceOptions.of(6, 5, None).heartbeat_policy(tally.RetryPolicy(max_attempts=4))
    assert beat == tally.RetryPolicy(max_attempts=4, total_budget=2.0, request_timeout=2.0), (
        "a heartbeat's retries end before the next one is due"
    )
    long = OnceOptions.of(3600, 5, None).heartbeat_policy(tally.RetryPolicy())
    assert (long.total_budget, long.request_timeout) == (30.0, 10.0)
    with pytest.raises(ValueError):
        OnceOptions.of(0, 5, None)
    with pytest.raises(TypeError):
        OnceOptions.of(True, 5, None)
    with pytest.raises(ValueError):
        OnceOptions.of(60, 5, -1)

    now = [100.0]
    wait = ClaimWait(10.0, clock=lambda: now[0])
    busy = error_from_answer(409, problem("intent_in_progress", 409), retry_after=4.0)
    assert isinstance(busy, tally.IntentInProgress)
    assert wait.delay_after(busy) == 4.0
    now[0] += 4.0
    assert wait.delay_after(busy) == 4.0  # claims again at 8 s: within 10 s
    now[0] += 4.0
    with pytest.raises(tally.IntentInProgress):
        wait.delay_after(busy)  # the next claim would start at 12 s
