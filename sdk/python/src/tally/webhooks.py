"""Verifying the server's outbound webhooks (Standard Webhooks,
https://www.standardwebhooks.com).

Each delivery carries ``webhook-id``, ``webhook-timestamp`` (unix seconds)
and ``webhook-signature``: space-separated ``v1,<base64 HMAC-SHA256>``
entries (two while the sender rotates its secret). The HMAC is over the
exact bytes ``{webhook-id}.{webhook-timestamp}.{raw body}``, keyed with the
decoded bytes of the secret (``whsec_`` + base64).

    event = tally.verify_webhook(raw_body, request.headers, secret)

Verify the raw body as received, before any JSON parsing: re-serialised
JSON is not the bytes that were signed.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
import time
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, Dict, List, Mapping, NoReturn, Optional, Sequence, Union

__all__ = [
    "DEFAULT_TOLERANCE",
    "WebhookVerificationError",
    "sign_webhook",
    "verify_webhook",
]

DEFAULT_TOLERANCE = timedelta(seconds=300)
"""How far ``webhook-timestamp`` may be from now, either way."""

SECRET_PREFIX = "whsec_"
_VERSION = "v1"
_TIMESTAMP = re.compile(r"[0-9]{1,15}", re.ASCII)

Secrets = Union[str, Sequence[str]]


class WebhookVerificationError(ValueError):
    """The delivery is not proven to come from the sender: a header is
    missing or malformed, the timestamp is outside the tolerance, no
    signature matches, or the signed payload is not a JSON object.

    ``reason`` is a stable machine code: ``missing_header``,
    ``invalid_timestamp``, ``timestamp_too_old``, ``timestamp_too_new``,
    ``no_matching_signature`` or ``invalid_payload``. Answer such a delivery
    with a 4xx (e.g. 400) and do not process it.
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def _fail(reason: str, message: str) -> NoReturn:
    raise WebhookVerificationError(reason, message)


def _secret_key(secret: str) -> bytes:
    """The HMAC key: the base64 after ``whsec_`` (the prefix is optional)."""
    if not isinstance(secret, str):
        raise TypeError(f"a webhook secret is a str, not {type(secret).__name__}")
    encoded = secret[len(SECRET_PREFIX) :] if secret.startswith(SECRET_PREFIX) else secret
    try:
        key = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("the webhook secret is not whsec_ followed by base64") from None
    if not key:
        raise ValueError("the webhook secret is empty")
    return key


def _secret_keys(secret: Secrets) -> List[bytes]:
    secrets = [secret] if isinstance(secret, str) else list(secret)
    if not secrets:
        raise ValueError("no webhook secret given")
    return [_secret_key(s) for s in secrets]


def _body_bytes(body: Union[bytes, bytearray, memoryview, str]) -> bytes:
    if isinstance(body, str):
        return body.encode("utf-8")
    if isinstance(body, (bytes, bytearray, memoryview)):
        return bytes(body)
    raise TypeError(f"the webhook body is bytes or str, not {type(body).__name__}")


def _signature(key: bytes, msg_id: str, timestamp: str, body: bytes) -> str:
    signed = f"{msg_id}.{timestamp}.".encode("utf-8") + body
    digest = hmac.new(key, signed, hashlib.sha256).digest()
    return base64.b64encode(digest).decode("ascii")


def _unix_seconds(value: Union[datetime, int, float], what: str) -> int:
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"{what} must be an aware datetime (with a timezone)")
        return int(value.timestamp())
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what} is a datetime or unix seconds, not {type(value).__name__}")
    return int(value)


def _header(headers: Mapping[str, str], name: str) -> str:
    """The header's value, whatever the case of its name in ``headers``."""
    value: Optional[str] = headers.get(name)  # case-insensitive mappings, lower-case keys
    if value is None:
        for key, candidate in headers.items():
            if isinstance(key, str) and key.lower() == name:
                value = candidate
                break
    if value is None or not isinstance(value, str) or not value.strip():
        _fail("missing_header", f"the {name} header is missing")
    return value.strip()


def sign_webhook(
    msg_id: str,
    timestamp: Union[datetime, int],
    body: Union[bytes, str],
    secret: Secrets,
) -> str:
    """The ``webhook-signature`` header value for a delivery: ``v1,<base64>``,
    one space-separated entry per secret (a list of two secrets makes the
    header of a rotation). For a receiver's own tests::

        ts = int(time.time())
        headers = {"webhook-id": "evt_1", "webhook-timestamp": str(ts),
                   "webhook-signature": sign_webhook("evt_1", ts, body, secret)}
    """
    ts = str(_unix_seconds(timestamp, "timestamp"))
    raw = _body_bytes(body)
    return " ".join(
        f"{_VERSION},{_signature(key, msg_id, ts, raw)}" for key in _secret_keys(secret)
    )


def _no_constants(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


def verify_webhook(
    body: Union[bytes, str],
    headers: Mapping[str, str],
    secret: Secrets,
    *,
    tolerance: Union[timedelta, int, float] = DEFAULT_TOLERANCE,
    now: Optional[Union[datetime, int, float]] = None,
) -> Dict[str, Any]:
    """Checks a delivery and returns its event (the parsed JSON body).

    ``body`` is the raw request body, exactly as received. ``headers`` is
    any ``Mapping[str, str]`` (a dict, httpx, Starlette or Werkzeug
    headers); names are matched case-insensitively. ``secret`` is the
    endpoint's ``whsec_…`` secret, or a list of them while you rotate your
    own: any one matching is enough. ``tolerance`` (a ``timedelta`` or
    seconds, default 300) bounds how old, or how far in the future,
    ``webhook-timestamp`` may be; ``now`` (an aware datetime or unix
    seconds) defaults to the current time.

    Numbers with a fraction are ``Decimal`` (amounts arrive as decimal
    strings anyway); no float is ever made.

    Raises ``WebhookVerificationError`` (a ``ValueError``) when the delivery
    is not proven authentic and fresh; a malformed ``secret`` raises a plain
    ``ValueError``.
    """
    keys = _secret_keys(secret)
    raw = _body_bytes(body)
    if isinstance(tolerance, timedelta):
        window = tolerance.total_seconds()
    elif isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)):
        raise TypeError(f"tolerance is a timedelta or seconds, not {type(tolerance).__name__}")
    else:
        window = float(tolerance)
    if not window >= 0:
        raise ValueError("tolerance must not be negative")

    msg_id = _header(headers, "webhook-id")
    timestamp = _header(headers, "webhook-timestamp")
    signatures = _header(headers, "webhook-signature")

    if not _TIMESTAMP.fullmatch(timestamp):
        _fail("invalid_timestamp", f"webhook-timestamp is not unix seconds: {timestamp!r}")
    sent = int(timestamp)
    current = time.time() if now is None else _unix_seconds(now, "now")
    if sent < current - window:
        _fail("timestamp_too_old", "webhook-timestamp is too old (a replay?)")
    if sent > current + window:
        _fail("timestamp_too_new", "webhook-timestamp is too far in the future")

    received: List[bytes] = []
    for entry in signatures.split():
        version, sep, value = entry.partition(",")
        if sep and version == _VERSION and value:
            received.append(value.encode("utf-8"))
    if not received:
        _fail("no_matching_signature", "webhook-signature has no v1 signature")

    matched = False
    for key in keys:
        expected = _signature(key, msg_id, timestamp, raw).encode("ascii")
        for candidate in received:
            if hmac.compare_digest(expected, candidate):
                matched = True
    if not matched:
        _fail("no_matching_signature", "no webhook signature matches the secret")

    try:
        event = json.loads(raw.decode("utf-8"), parse_float=Decimal, parse_constant=_no_constants)
    except (UnicodeDecodeError, ValueError):
        _fail("invalid_payload", "the signed payload is not JSON")
    if not isinstance(event, dict):
        _fail("invalid_payload", "the signed payload is not a JSON object")
    return event
