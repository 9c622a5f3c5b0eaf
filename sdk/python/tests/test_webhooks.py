"""Webhook signatures (Standard Webhooks): the reference libraries' test
vector, rotations on both sides, tampering, the timestamp window, header
names in any case, Decimal amounts. No server needed."""

from __future__ import annotations

import base64
import json
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Any, Dict, Mapping

import httpx
import pytest

import tally
from tally import WebhookVerificationError, sign_webhook, verify_webhook

# The test vector of the Standard Webhooks reference libraries.
VECTOR_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
VECTOR_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
VECTOR_TIMESTAMP = 1614265330
VECTOR_BODY = '{"test": 2432232314}'
VECTOR_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

SECRET = "whsec_" + base64.b64encode(bytes(range(32))).decode()
OTHER_SECRET = "whsec_" + base64.b64encode(bytes(range(100, 132))).decode()
NOW = 1_760_000_000
EVENT_ID = "evt_0123456789abcdef"
EVENT = {
    "id": EVENT_ID,
    "type": "entry.posted",
    "seq": 17,
    "created_at": "2025-10-09T08:53:20Z",
    "data": {"entry": {"id": "ent_1", "amount": "0.0125", "balance_after": "-0.0125"}, "rate": 0.1},
}
BODY = json.dumps(EVENT).encode()


def delivery(
    body: bytes = BODY, secret: Any = SECRET, ts: int = NOW, msg_id: str = EVENT_ID
) -> Dict[str, str]:
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(ts),
        "webhook-signature": sign_webhook(msg_id, ts, body, secret),
    }


def rejected(
    headers: Mapping[str, str], body: bytes = BODY, secret: Any = SECRET, **kw: Any
) -> str:
    with pytest.raises(WebhookVerificationError) as info:
        verify_webhook(body, headers, secret, now=kw.pop("now", NOW), **kw)
    return info.value.reason


def test_the_reference_vector_signs_and_verifies() -> None:
    assert sign_webhook(VECTOR_ID, VECTOR_TIMESTAMP, VECTOR_BODY, VECTOR_SECRET) == VECTOR_SIGNATURE
    headers = {
        "webhook-id": VECTOR_ID,
        "webhook-timestamp": str(VECTOR_TIMESTAMP),
        "webhook-signature": VECTOR_SIGNATURE,
    }
    assert verify_webhook(VECTOR_BODY, headers, VECTOR_SECRET, now=VECTOR_TIMESTAMP) == {
        "test": 2432232314
    }
    # The same bytes as bytes, a secret without its prefix, the time as a datetime.
    when = datetime.fromtimestamp(VECTOR_TIMESTAMP + 299, timezone.utc)
    bare = VECTOR_SECRET[len("whsec_") :]
    assert verify_webhook(VECTOR_BODY.encode(), headers, bare, now=when) == {"test": 2432232314}


def test_a_valid_delivery_returns_the_event() -> None:
    event = verify_webhook(BODY, delivery(), SECRET, now=NOW)
    assert event["id"] == EVENT_ID and event["type"] == "entry.posted" and event["seq"] == 17
    assert event["data"]["entry"]["amount"] == "0.0125"


def test_amounts_stay_exact_and_no_float_is_made() -> None:
    event = verify_webhook(BODY, delivery(), SECRET, now=NOW)
    assert Decimal(event["data"]["entry"]["balance_after"]) == Decimal("-0.0125")
    assert event["data"]["rate"] == Decimal("0.1")
    assert isinstance(event["data"]["rate"], Decimal)
    assert isinstance(event["seq"], int)

    def floats(value: Any) -> bool:
        if isinstance(value, dict):
            return any(floats(v) for v in value.values())
        if isinstance(value, list):
            return any(floats(v) for v in value)
        return isinstance(value, float)

    assert not floats(event)
    nan = b'{"id": "evt_1", "x": NaN}'
    assert rejected(delivery(nan), nan) == "invalid_payload"


def test_the_senders_rotation_two_signatures_either_matches() -> None:
    header = sign_webhook(EVENT_ID, NOW, BODY, [OTHER_SECRET, SECRET])
    assert len(header.split(" ")) == 2
    assert header.split(" ")[1] == sign_webhook(EVENT_ID, NOW, BODY, SECRET)
    headers = {**delivery(), "webhook-signature": header}
    assert verify_webhook(BODY, headers, SECRET, now=NOW)["id"] == EVENT_ID
    assert verify_webhook(BODY, headers, OTHER_SECRET, now=NOW)["id"] == EVENT_ID
    third = "whsec_" + base64.b64encode(b"x" * 32).decode()
    assert rejected(headers, secret=third) == "no_matching_signature"


def test_other_signature_versions_are_ignored() -> None:
    good = sign_webhook(EVENT_ID, NOW, BODY, SECRET)
    value = good.partition(",")[2]
    headers = {**delivery(), "webhook-signature": f"v1a,{value} v2,{value} {good}"}
    assert verify_webhook(BODY, headers, SECRET, now=NOW)["id"] == EVENT_ID
    # The right bytes under another version prefix are no v1 signature.
    headers["webhook-signature"] = f"v1a,{value} v0,{value} {value}"
    assert rejected(headers) == "no_matching_signature"


def test_the_receivers_rotation_a_list_of_secrets() -> None:
    headers = delivery(secret=SECRET)
    assert verify_webhook(BODY, headers, [OTHER_SECRET, SECRET], now=NOW)["id"] == EVENT_ID
    assert verify_webhook(BODY, headers, (SECRET,), now=NOW)["id"] == EVENT_ID
    assert rejected(headers, secret=[OTHER_SECRET]) == "no_matching_signature"
    with pytest.raises(ValueError, match="no webhook secret"):
        verify_webhook(BODY, headers, [], now=NOW)


def test_a_wrong_secret_is_rejected() -> None:
    assert rejected(delivery(), secret=OTHER_SECRET) == "no_matching_signature"


def test_a_tampered_body_is_rejected() -> None:
    tampered = BODY.replace(b'"0.0125"', b'"1000.0125"')
    assert tampered != BODY
    assert rejected(delivery(), tampered) == "no_matching_signature"
    # Re-serialised JSON is not the signed bytes either.
    reserialised = json.dumps(EVENT, separators=(",", ":")).encode()
    assert rejected(delivery(), reserialised) == "no_matching_signature"


def test_a_tampered_id_or_timestamp_is_rejected() -> None:
    assert rejected({**delivery(), "webhook-id": "evt_other"}) == "no_matching_signature"
    assert rejected({**delivery(), "webhook-timestamp": str(NOW + 1)}) == "no_matching_signature"


def test_a_tampered_signature_is_rejected() -> None:
    headers = delivery()
    flipped = (
        headers["webhook-signature"][:-2]
        + ("A" if headers["webhook-signature"][-2] != "A" else "B")
        + "="
    )
    assert rejected({**headers, "webhook-signature": flipped}) == "no_matching_signature"
    assert rejected({**headers, "webhook-signature": "v1,"}) == "no_matching_signature"
    assert rejected({**headers, "webhook-signature": "v1,ü"}) == "no_matching_signature"


def test_stale_and_future_timestamps_are_rejected() -> None:
    assert rejected(delivery(ts=NOW - 301)) == "timestamp_too_old"
    assert rejected(delivery(ts=NOW + 301)) == "timestamp_too_new"
    # The window is inclusive, 300 s each way by default.
    assert verify_webhook(BODY, delivery(ts=NOW - 300), SECRET, now=NOW)["seq"] == 17
    assert verify_webhook(BODY, delivery(ts=NOW + 300), SECRET, now=NOW)["seq"] == 17
    # A custom tolerance, as seconds or a timedelta.
    old = delivery(ts=NOW - 3600)
    assert verify_webhook(BODY, old, SECRET, now=NOW, tolerance=3600)["seq"] == 17
    assert verify_webhook(BODY, old, SECRET, now=NOW, tolerance=timedelta(hours=1))["seq"] == 17
    assert rejected(old, tolerance=timedelta(minutes=59)) == "timestamp_too_old"


def test_now_defaults_to_the_clock() -> None:
    fresh = int(datetime.now(timezone.utc).timestamp())
    assert verify_webhook(BODY, delivery(ts=fresh), SECRET)["seq"] == 17
    with pytest.raises(WebhookVerificationError):
        verify_webhook(BODY, delivery(ts=fresh - 3600), SECRET)


@pytest.mark.parametrize("value", ["", "abc", "1614265330.5", "-1614265330", "1e9", "١٢٣", "0x10"])
def test_a_malformed_timestamp_is_rejected(value: str) -> None:
    assert rejected({**delivery(), "webhook-timestamp": value}) in (
        "invalid_timestamp",
        "missing_header",
    )


@pytest.mark.parametrize("name", ["webhook-id", "webhook-timestamp", "webhook-signature"])
def test_a_missing_header_is_rejected(name: str) -> None:
    headers = delivery()
    del headers[name]
    assert rejected(headers) == "missing_header"
    assert rejected({**delivery(), name: ""}) == "missing_header"


def test_header_names_are_case_insensitive() -> None:
    headers = delivery()
    mixed = {
        "Webhook-Id": headers["webhook-id"],
        "WEBHOOK-TIMESTAMP": headers["webhook-timestamp"],
        "Webhook-Signature": headers["webhook-signature"],
        "Content-Type": "application/json",
    }
    assert verify_webhook(BODY, mixed, SECRET, now=NOW)["id"] == EVENT_ID
    # Case-insensitive mappings (httpx, Starlette, Werkzeug headers).
    assert verify_webhook(BODY, httpx.Headers(mixed), SECRET, now=NOW)["id"] == EVENT_ID


def test_the_error_is_a_value_error_not_an_api_error() -> None:
    assert issubclass(WebhookVerificationError, ValueError)
    assert not issubclass(WebhookVerificationError, tally.TallyError)
    assert tally.verify_webhook is verify_webhook and tally.sign_webhook is sign_webhook


def test_a_payload_that_is_not_a_json_object_is_rejected() -> None:
    for body in (b"[1, 2]", b"not json", b"\xff\xfe"):
        assert rejected(delivery(body), body) == "invalid_payload"


def test_a_malformed_secret_is_a_configuration_error() -> None:
    for secret in ("whsec_not base64!", "whsec_", "", "whsec_abc"):
        with pytest.raises(ValueError, match="secret") as info:
            verify_webhook(BODY, delivery(), secret, now=NOW)
        assert not isinstance(info.value, WebhookVerificationError)
        with pytest.raises(ValueError, match="secret"):
            sign_webhook(EVENT_ID, NOW, BODY, secret)


def test_sign_accepts_an_aware_datetime_only() -> None:
    when = datetime.fromtimestamp(NOW, timezone.utc)
    assert sign_webhook(EVENT_ID, when, BODY, SECRET) == sign_webhook(EVENT_ID, NOW, BODY, SECRET)
    with pytest.raises(ValueError, match="aware"):
        sign_webhook(EVENT_ID, datetime(2025, 1, 1), BODY, SECRET)
