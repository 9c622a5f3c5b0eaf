"""Request bodies. Each mutating operation's body is one of these, built
from the upstream system's own stable ID (a required field), so every
attempt of a call sends the same bytes and a retry is a replay.

Money and quantities are ``Decimal`` (or ``int``), sent as plain decimal
strings; a ``float`` is refused. Timestamps are aware ``datetime`` values
or RFC 3339 strings. The operations a batch can hold (``UsageDebit``,
``Payment``, ``Hold``, ``Refund``, ``Reversal``) are what
``post_batch`` takes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from enum import Enum
from typing import Any, ClassVar, Dict, Mapping, Optional, Union

from .models import OverdraftLimit

__all__ = [
    "AccountSettings",
    "Adjustment",
    "Amount",
    "BatchOperation",
    "Capture",
    "Hold",
    "Payment",
    "Refund",
    "Release",
    "Reversal",
    "Timestamp",
    "UNSET",
    "Unset",
    "UsageDebit",
    "decimal_text",
    "timestamp_text",
]

class Unset(Enum):
    """The type of ``UNSET``: an argument left out, where ``None`` means
    something (``patch_webhook_endpoint(description=None)`` clears it)."""

    UNSET = "UNSET"

    def __repr__(self) -> str:
        return "UNSET"


UNSET = Unset.UNSET
"""The default of arguments whose ``None`` is a value to send."""

Amount = Union[Decimal, int]
"""An exact amount or quantity: ``Decimal`` (or ``int``), never ``float``."""

Timestamp = Union[datetime, str]
"""An aware ``datetime`` or an RFC 3339 string."""


def decimal_text(value: Amount, name: str) -> str:
    """The plain decimal text of an amount (``Decimal("1.50")`` → ``"1.50"``,
    ``Decimal("1E+2")`` → ``"100"``). The server checks its range."""
    if isinstance(value, bool) or not isinstance(value, (Decimal, int)):
        raise TypeError(
            f"{name} must be a decimal.Decimal or an int, not {type(value).__name__} "
            "(money is never a float)"
        )
    exact = Decimal(value)
    if not exact.is_finite():
        raise ValueError(f"{name} must be a finite decimal, not {value}")
    return format(exact, "f")


def timestamp_text(value: Timestamp, name: str) -> str:
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"{name} must be timezone-aware (a naive datetime is ambiguous)")
        return value.isoformat()
    if isinstance(value, str):
        return value
    raise TypeError(f"{name} must be a datetime or an RFC 3339 string, not {type(value).__name__}")


def _required_id(value: str, name: str) -> str:
    if not isinstance(value, str) or value == "":
        raise ValueError(
            f"{name} is required: the upstream system's own stable ID, the same on every retry"
        )
    return value


def _name(value: str, name: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, not {type(value).__name__}")
    return value


def _metadata(value: Optional[Mapping[str, str]]) -> Optional[Dict[str, str]]:
    if value is None:
        return None
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise TypeError("metadata must map strings to strings")
    return dict(value)


class _Body:
    """A request body: its fields as JSON, ``None`` left out."""

    def to_json(self) -> Dict[str, Any]:
        raise NotImplementedError

    @staticmethod
    def _compact(fields: Dict[str, Any]) -> Dict[str, Any]:
        return {k: v for k, v in fields.items() if v is not None}

    def __post_init__(self) -> None:
        self.to_json()  # refuse a bad value when the body is built, not when sent


@dataclass(frozen=True)
class UsageDebit(_Body):
    """``POST /v1/usage-debits``: charge ``amount`` to ``account``."""

    batch_type: ClassVar[str] = "usage_debit"
    usage_record_id: str
    account: str
    amount: Amount
    unit: str
    meter: Optional[str] = None
    quantity: Optional[Amount] = None
    occurred_at: Optional[Timestamp] = None
    counter_account: Optional[str] = None
    metadata: Optional[Mapping[str, str]] = field(default=None, hash=False)

    def to_json(self) -> Dict[str, Any]:
        return self._compact(
            {
                "usage_record_id": _required_id(self.usage_record_id, "usage_record_id"),
                "account": _name(self.account, "account"),
                "amount": decimal_text(self.amount, "amount"),
                "unit": _name(self.unit, "unit"),
                "meter": self.meter,
                "quantity": None
                if self.quantity is None
                else decimal_text(self.quantity, "quantity"),
                "occurred_at": None
                if self.occurred_at is None
                else timestamp_text(self.occurred_at, "occurred_at"),
                "counter_account": self.counter_account,
                "metadata": _metadata(self.metadata),
            }
        )


@dataclass(frozen=True)
class Payment(_Body):
    """``POST /v1/payments``: credit ``amount`` to ``account``."""

    batch_type: ClassVar[str] = "payment"
    payment_id: str
    account: str
    amount: Amount
    unit: str
    processor: Optional[str] = None
    occurred_at: Optional[Timestamp] = None
    counter_account: Optional[str] = None
    metadata: Optional[Mapping[str, str]] = field(default=None, hash=False)

    def to_json(self) -> Dict[str, Any]:
        return self._compact(
            {
                "payment_id": _required_id(self.payment_id, "payment_id"),
                "account": _name(self.account, "account"),
                "amount": decimal_text(self.amount, "amount"),
                "unit": _name(self.unit, "unit"),
                "processor": self.processor,
                "occurred_at": None
                if self.occurred_at is None
                else timestamp_text(self.occurred_at, "occurred_at"),
                "counter_account": self.counter_account,
                "metadata": _metadata(self.metadata),
            }
        )


@dataclass(frozen=True)
class Hold(_Body):
    """``POST /v1/holds``: reserve ``amount`` until ``expires_at`` or for
    ``ttl_seconds`` (exactly one of them)."""

    batch_type: ClassVar[str] = "hold"
    hold_id: str
    account: str
    amount: Amount
    unit: str
    ttl_seconds: Optional[int] = None
    expires_at: Optional[Timestamp] = None
    counter_account: Optional[str] = None
    metadata: Optional[Mapping[str, str]] = field(default=None, hash=False)

    def to_json(self) -> Dict[str, Any]:
        if (self.ttl_seconds is None) == (self.expires_at is None):
            raise ValueError("a hold needs exactly one of ttl_seconds and expires_at")
        if self.ttl_seconds is not None and (
            isinstance(self.ttl_seconds, bool) or not isinstance(self.ttl_seconds, int)
        ):
            raise TypeError("ttl_seconds must be an int")
        return self._compact(
            {
                "hold_id": _required_id(self.hold_id, "hold_id"),
                "account": _name(self.account, "account"),
                "amount": decimal_text(self.amount, "amount"),
                "unit": _name(self.unit, "unit"),
                "ttl_seconds": self.ttl_seconds,
                "expires_at": None
                if self.expires_at is None
                else timestamp_text(self.expires_at, "expires_at"),
                "counter_account": self.counter_account,
                "metadata": _metadata(self.metadata),
            }
        )


@dataclass(frozen=True)
class Capture(_Body):
    """``POST /v1/holds/{hold_id}/capture``: post ``amount`` (at most the
    hold's) and release the rest."""

    capture_id: str
    amount: Amount
    metadata: Optional[Mapping[str, str]] = field(default=None, hash=False)

    def to_json(self) -> Dict[str, Any]:
        return self._compact(
            {
                "capture_id": _required_id(self.capture_id, "capture_id"),
                "amount": decimal_text(self.amount, "amount"),
                "metadata": _metadata(self.metadata),
            }
        )


@dataclass(frozen=True)
class Release(_Body):
    """``POST /v1/holds/{hold_id}/release``: release the whole hold."""

    release_id: str
    metadata: Optional[Mapping[str, str]] = field(default=None, hash=False)

    def to_json(self) -> Dict[str, Any]:
        return self._compact(
            {
                "release_id": _required_id(self.release_id, "release_id"),
                "metadata": _metadata(self.metadata),
            }
        )


@dataclass(frozen=True)
class Refund(_Body):
    """``POST /v1/refunds``: refund part or all of payment ``payment_id``."""

    batch_type: ClassVar[str] = "refund"
    refund_id: str
    payment_id: str
    amount: Amount
    reason: Optional[str] = None
    metadata: Optional[Mapping[str, str]] = field(default=None, hash=False)

    def to_json(self) -> Dict[str, Any]:
        return self._compact(
            {
                "refund_id": _required_id(self.refund_id, "refund_id"),
                "payment_id": _required_id(self.payment_id, "payment_id"),
                "amount": decimal_text(self.amount, "amount"),
                "reason": self.reason,
                "metadata": _metadata(self.metadata),
            }
        )


@dataclass(frozen=True)
class Reversal(_Body):
    """``POST /v1/reversals``: undo entry ``entry_id``."""

    batch_type: ClassVar[str] = "reversal"
    reversal_id: str
    entry_id: str
    reason: str
    metadata: Optional[Mapping[str, str]] = field(default=None, hash=False)

    def to_json(self) -> Dict[str, Any]:
        return self._compact(
            {
                "reversal_id": _required_id(self.reversal_id, "reversal_id"),
                "entry_id": _required_id(self.entry_id, "entry_id"),
                "reason": _name(self.reason, "reason"),
                "metadata": _metadata(self.metadata),
            }
        )


@dataclass(frozen=True)
class Adjustment(_Body):
    """``POST /v1/adjustments`` (scope ``admin``): a correction, ``credit``
    or ``debit``, not bound by the overdraft floor."""

    adjustment_id: str
    account: str
    amount: Amount
    direction: str
    reason: str
    unit: Optional[str] = None
    metadata: Optional[Mapping[str, str]] = field(default=None, hash=False)

    def to_json(self) -> Dict[str, Any]:
        if self.direction not in ("credit", "debit"):
            raise ValueError('direction must be "credit" or "debit"')
        return self._compact(
            {
                "adjustment_id": _required_id(self.adjustment_id, "adjustment_id"),
                "account": _name(self.account, "account"),
                "amount": decimal_text(self.amount, "amount"),
                "direction": self.direction,
                "reason": _name(self.reason, "reason"),
                "unit": self.unit,
                "metadata": _metadata(self.metadata),
            }
        )


Overdraft = Union[str, OverdraftLimit]


@dataclass(frozen=True)
class AccountSettings(_Body):
    """``PUT /v1/accounts/{account}`` (scope ``admin``): the settings, in
    full. ``overdraft`` is ``"allow"`` (the server's default), ``"forbid"``
    or ``OverdraftLimit(Decimal(...))``. ``low_balance`` (any sign) sets the
    account's alert, sent as ``"alerts": {"low_balance": "<amount>"}``;
    ``None`` sets none (the settings are in full: a set alert is cleared)."""

    unit: str
    overdraft: Optional[Overdraft] = None
    metadata: Optional[Mapping[str, str]] = field(default=None, hash=False)
    low_balance: Optional[Amount] = None

    def to_json(self) -> Dict[str, Any]:
        overdraft: Any = self.overdraft
        if isinstance(overdraft, OverdraftLimit):
            overdraft = {"limit": decimal_text(overdraft.limit, "overdraft.limit")}
        elif overdraft is not None and overdraft not in ("allow", "forbid"):
            raise ValueError('overdraft must be "allow", "forbid" or an OverdraftLimit')
        return self._compact(
            {
                "unit": _name(self.unit, "unit"),
                "overdraft": overdraft,
                "metadata": _metadata(self.metadata),
                "alerts": None
                if self.low_balance is None
                else {"low_balance": decimal_text(self.low_balance, "low_balance")},
            }
        )


BatchOperation = Union[UsageDebit, Payment, Hold, Refund, Reversal]
"""What ``POST /v1/batch`` can hold (adjustments, captures and releases are
single-endpoint only)."""


def batch_item(operation: BatchOperation) -> Dict[str, Any]:
    if not isinstance(operation, (UsageDebit, Payment, Hold, Refund, Reversal)):
        raise TypeError(
            "a batch holds UsageDebit, Payment, Hold, Refund and Reversal operations, "
            f"not {type(operation).__name__}"
        )
    return {"type": operation.batch_type, **operation.to_json()}
