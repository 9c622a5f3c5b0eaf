"""What the server answers, as typed, immutable values.

Money and quantities are ``decimal.Decimal`` (parsed from the exact decimal
strings the server sends, never through a float). Timestamps are kept as
the RFC 3339 text the server sent (they are part of the hashed record and
may carry nanoseconds); ``parse_timestamp`` turns one into a ``datetime``.
Every model keeps the JSON object it was read from in ``raw``.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Union

from . import _json as j

if TYPE_CHECKING:
    from .errors import TallyError

__all__ = [
    "Account",
    "AccountPage",
    "AccountSummary",
    "Alerts",
    "AuditExport",
    "AuditHead",
    "AuditVerification",
    "Balance",
    "BalanceFigures",
    "BatchResult",
    "BatchResults",
    "Entry",
    "EntryPage",
    "FieldError",
    "HeadSummary",
    "Health",
    "Hold",
    "Intent",
    "IntentChange",
    "IntentFailure",
    "IntentLease",
    "IntentPage",
    "Movements",
    "OverdraftLimit",
    "Posted",
    "Rejection",
    "Signature",
    "Statement",
    "StripeEvent",
    "StripeEventPage",
    "StripeIntegration",
    "Usage",
    "UsagePeriod",
    "VerificationProblem",
    "WebhookAttempt",
    "WebhookDelivery",
    "WebhookDeliveryPage",
    "WebhookEndpoint",
    "WebhookEndpointWithSecret",
    "WebhookReplay",
    "parse_timestamp",
]

_FRACTION = re.compile(r"\.(\d+)")


def parse_timestamp(text: str) -> datetime:
    """An RFC 3339 timestamp as an aware ``datetime`` (fractions beyond
    microseconds are truncated: ``datetime`` holds no more)."""
    value = text.strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    value = _FRACTION.sub(lambda m: "." + (m.group(1) + "000000")[:6], value, count=1)
    parsed = datetime.fromisoformat(value.replace("t", "T").replace(" ", "T", 1))
    if parsed.tzinfo is None:
        raise ValueError(f"timestamp without an offset: {text!r}")
    return parsed.astimezone(timezone.utc)


@dataclass(frozen=True)
class FieldError:
    """One field at fault in a 422 (``errors[]``)."""

    field: str
    message: str

    @classmethod
    def from_json(cls, o: j.JsonObject) -> FieldError:
        return cls(field=j.string(o, "field"), message=j.string(o, "message"))


@dataclass(frozen=True)
class Rejection:
    """Why a stored entry was rejected (``insufficient_funds``, ...)."""

    code: str
    message: str


@dataclass(frozen=True)
class OverdraftLimit:
    """An overdraft floor of ``-limit``: ``{"limit": "50"}``."""

    limit: Decimal


Overdraft = Union[str, OverdraftLimit]
"""``"allow"``, ``"forbid"`` or an ``OverdraftLimit``."""


def _overdraft(value: Any) -> Overdraft:
    if isinstance(value, str):
        return value
    return OverdraftLimit(limit=j.decimal(j.obj(value, "overdraft"), "limit"))


@dataclass(frozen=True)
class Alerts:
    """An account's alerts: ``balance.low`` fires when ``available`` crosses
    below ``low_balance`` (any sign). ``Alerts()``: none set (``{}``)."""

    low_balance: Optional[Decimal] = None

    @classmethod
    def from_json(cls, value: Any) -> Alerts:
        return cls(low_balance=j.opt_decimal(j.obj(value, "alerts"), "low_balance"))


@dataclass(frozen=True)
class Entry:
    """One entry of the log, posted or rejected."""

    id: str
    seq: int
    kind: str
    upstream_id: str
    status: str
    rejection: Optional[Rejection]
    account: str
    debit_account: str
    credit_account: str
    amount: Decimal
    unit: str
    balance_after: Decimal
    recorded_at: str
    fingerprint: str
    prev_hash: str
    hash: str
    meter: Optional[str] = None
    quantity: Optional[Decimal] = None
    processor: Optional[str] = None
    occurred_at: Optional[str] = None
    metadata: Optional[Dict[str, str]] = None
    hold_id: Optional[str] = None
    expires_at: Optional[str] = None
    ttl_seconds: Optional[int] = None
    counter_account: Optional[str] = None
    payment_id: Optional[str] = None
    entry_id: Optional[str] = None
    reason: Optional[str] = None
    direction: Optional[str] = None
    overdraft: Optional[Overdraft] = None
    alerts: Optional[Alerts] = None
    """``account_settings`` that set an alert."""
    reversed_by: Optional[str] = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def posted(self) -> bool:
        return self.status == "posted"

    @classmethod
    def from_json(cls, value: Any) -> Entry:
        o = j.obj(value, "entry")
        rejection = o.get("rejection")
        overdraft = o.get("overdraft")
        alerts = o.get("alerts")
        return cls(
            id=j.string(o, "id"),
            seq=j.integer(o, "seq"),
            kind=j.string(o, "kind"),
            upstream_id=j.string(o, "upstream_id"),
            status=j.string(o, "status"),
            rejection=None
            if rejection is None
            else Rejection(
                code=j.string(j.obj(rejection), "code"),
                message=j.string(j.obj(rejection), "message"),
            ),
            account=j.string(o, "account"),
            debit_account=j.string(o, "debit_account"),
            credit_account=j.string(o, "credit_account"),
            amount=j.decimal(o, "amount"),
            unit=j.string(o, "unit"),
            balance_after=j.decimal(o, "balance_after"),
            recorded_at=j.string(o, "recorded_at"),
            fingerprint=j.string(o, "fingerprint"),
            prev_hash=j.string(o, "prev_hash"),
            hash=j.string(o, "hash"),
            meter=j.opt_string(o, "meter"),
            quantity=j.opt_decimal(o, "quantity"),
            processor=j.opt_string(o, "processor"),
            occurred_at=j.opt_string(o, "occurred_at"),
            metadata=j.string_map(o, "metadata"),
            hold_id=j.opt_string(o, "hold_id"),
            expires_at=j.opt_string(o, "expires_at"),
            ttl_seconds=j.opt_integer(o, "ttl_seconds"),
            counter_account=j.opt_string(o, "counter_account"),
            payment_id=j.opt_string(o, "payment_id"),
            entry_id=j.opt_string(o, "entry_id"),
            reason=j.opt_string(o, "reason"),
            direction=j.opt_string(o, "direction"),
            overdraft=None if overdraft is None else _overdraft(overdraft),
            alerts=None if alerts is None else Alerts.from_json(alerts),
            reversed_by=j.opt_string(o, "reversed_by"),
            raw=o,
        )


@dataclass(frozen=True)
class Posted:
    """The answer to a mutating call: the entry, and how it was obtained.

    ``created`` is true when this call recorded the entry (201), ``replayed``
    when the server found it already recorded under the same upstream ID
    (200 with ``Idempotent-Replayed: true``), which is normal after a lost
    answer. ``body`` is the exact bytes the server sent: a replay's body is
    byte-for-byte the first answer's.
    """

    entry: Entry
    status: int
    created: bool
    replayed: bool
    attempts: int
    body: bytes = field(repr=False)
    request_id: Optional[str] = None

    @property
    def id(self) -> str:
        return self.entry.id


@dataclass(frozen=True)
class EntryPage:
    """One page of ``GET /v1/entries``; pass ``next_after_seq`` as
    ``after_seq`` until it is ``None``."""

    entries: List[Entry]
    next_after_seq: Optional[int]

    @classmethod
    def from_json(cls, value: Any) -> EntryPage:
        o = j.obj(value, "entry page")
        return cls(
            entries=[Entry.from_json(e) for e in j.objects(o, "entries")],
            next_after_seq=j.opt_integer(o, "next_after_seq"),
        )


@dataclass(frozen=True)
class Balance:
    account: str
    unit: str
    debits: Decimal
    credits: Decimal
    posted: Decimal
    held: Decimal
    available: Decimal
    as_of_seq: int

    @classmethod
    def from_json(cls, value: Any) -> Balance:
        o = j.obj(value, "balance")
        return cls(
            account=j.string(o, "account"),
            unit=j.string(o, "unit"),
            debits=j.decimal(o, "debits"),
            credits=j.decimal(o, "credits"),
            posted=j.decimal(o, "posted"),
            held=j.decimal(o, "held"),
            available=j.decimal(o, "available"),
            as_of_seq=j.integer(o, "as_of_seq"),
        )


@dataclass(frozen=True)
class AccountSummary:
    """One account of ``GET /v1/accounts``: its balance now."""

    account: str
    unit: str
    debits: Decimal
    credits: Decimal
    posted: Decimal
    """``credits - debits``."""
    held: Decimal
    """Reserved by open holds."""
    available: Decimal
    """``posted - held``."""

    @classmethod
    def from_json(cls, value: Any) -> AccountSummary:
        o = j.obj(value, "account summary")
        return cls(
            account=j.string(o, "account"),
            unit=j.string(o, "unit"),
            debits=j.decimal(o, "debits"),
            credits=j.decimal(o, "credits"),
            posted=j.decimal(o, "posted"),
            held=j.decimal(o, "held"),
            available=j.decimal(o, "available"),
        )


@dataclass(frozen=True)
class AccountPage:
    """One page of ``GET /v1/accounts`` (customer accounts in byte order);
    pass ``next_after`` as ``after`` until it is ``None``."""

    accounts: List[AccountSummary]
    next_after: Optional[str]

    @classmethod
    def from_json(cls, value: Any) -> AccountPage:
        o = j.obj(value, "account page")
        return cls(
            accounts=[AccountSummary.from_json(a) for a in j.objects(o, "accounts")],
            next_after=j.opt_string(o, "next_after"),
        )


@dataclass(frozen=True)
class Account:
    """An account's settings and balance (``GET``/``PUT /v1/accounts/{account}``)."""

    account: str
    unit: str
    overdraft: Overdraft
    metadata: Optional[Dict[str, str]]
    alerts: Alerts
    """``Alerts(low_balance=Decimal(...))``, or ``Alerts()`` when none is set."""
    settings_version: int
    settings_entry_id: Optional[str]
    balance: Balance

    @classmethod
    def from_json(cls, value: Any) -> Account:
        o = j.obj(value, "account")
        return cls(
            account=j.string(o, "account"),
            unit=j.string(o, "unit"),
            overdraft=_overdraft(o.get("overdraft")),
            metadata=j.string_map(o, "metadata"),
            alerts=Alerts.from_json(o.get("alerts") or {}),
            settings_version=j.integer(o, "settings_version"),
            settings_entry_id=j.opt_string(o, "settings_entry_id"),
            balance=Balance.from_json(o.get("balance")),
        )


@dataclass(frozen=True)
class Hold:
    """A hold and what became of it; ``status`` is ``open``, ``captured``,
    ``released``, ``expired`` or ``rejected``."""

    hold_id: str
    account: str
    unit: str
    amount: Decimal
    counter_account: str
    expires_at: str
    status: str
    entry_id: str
    closed_by: Optional[str]

    @classmethod
    def from_json(cls, value: Any) -> Hold:
        o = j.obj(value, "hold")
        return cls(
            hold_id=j.string(o, "hold_id"),
            account=j.string(o, "account"),
            unit=j.string(o, "unit"),
            amount=j.decimal(o, "amount"),
            counter_account=j.string(o, "counter_account"),
            expires_at=j.string(o, "expires_at"),
            status=j.string(o, "status"),
            entry_id=j.string(o, "entry_id"),
            closed_by=j.opt_string(o, "closed_by"),
        )


@dataclass(frozen=True)
class BatchResult:
    """One operation's answer in a batch, exactly as its single endpoint
    would give it: ``entry`` for 200/201, ``error`` (the exception the single
    endpoint would raise, not raised here) otherwise."""

    status: int
    replayed: bool
    entry: Optional[Entry]
    error: Optional[TallyError]
    problem: Optional[Mapping[str, Any]] = field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        return self.entry is not None and self.status < 400


@dataclass(frozen=True)
class BatchResults:
    """The results of ``POST /v1/batch``, one per operation, in order."""

    results: List[BatchResult]
    attempts: int

    def __len__(self) -> int:
        return len(self.results)

    def __getitem__(self, index: int) -> BatchResult:
        return self.results[index]


@dataclass(frozen=True)
class IntentLease:
    """A claim's lease (``POST /v1/intents`` answered 201): the ``token``
    names this claim in ``complete``, ``fail`` and ``heartbeat`` and is shown
    only this once (kept out of ``repr``, like an API key); ``fence`` grows
    by one with every claim of the intent."""

    token: str = field(repr=False)
    fence: int
    expires_at: str

    @classmethod
    def from_json(cls, value: Any) -> IntentLease:
        o = j.obj(value, "lease")
        return cls(
            token=j.string(o, "token"),
            fence=j.integer(o, "fence"),
            expires_at=j.string(o, "expires_at"),
        )


@dataclass(frozen=True)
class IntentFailure:
    """An intent's ``error``: why it failed (or why its last attempt was
    released); ``code`` ``lease_expired`` when its last lease ran out."""

    code: str
    message: str

    @classmethod
    def from_json(cls, value: Any) -> IntentFailure:
        o = j.obj(value, "intent error")
        return cls(code=j.string(o, "code"), message=j.string(o, "message"))

    def to_json(self) -> Dict[str, str]:
        return {"code": self.code, "message": self.message}


@dataclass(frozen=True)
class IntentChange:
    """One change of an intent's state, its entry in the log: ``type`` is
    ``claimed``, ``released``, ``succeeded`` or ``failed``."""

    type: str
    fence: Optional[int]
    attempt: Optional[int]
    at: str
    seq: int
    entry_id: str

    @classmethod
    def from_json(cls, value: Any) -> IntentChange:
        o = j.obj(value, "intent change")
        return cls(
            type=j.string(o, "type"),
            fence=j.opt_integer(o, "fence"),
            attempt=j.opt_integer(o, "attempt"),
            at=j.string(o, "at"),
            seq=j.integer(o, "seq"),
            entry_id=j.string(o, "entry_id"),
        )


@dataclass(frozen=True)
class Intent:
    """An intent (docs/intents.md): a costly action done once, its
    ``status`` ``claimed``, ``released``, ``succeeded`` or ``failed``.

    ``lease`` is set only in the answer to a claim that got it (201);
    ``lease_expires_at`` while a lease is live. ``result`` (any JSON,
    numbers with a fraction as ``Decimal``) is a succeeded intent's outcome,
    ``error`` a failed one's. ``history`` comes with ``get_intent`` only,
    ``entries`` (one ``BatchResult`` per entry sent, in order) with
    ``complete_intent`` only. ``replayed`` is true when the answer is a
    stored outcome answered again (``Idempotent-Replayed: true``): a claim
    of a finished intent, or the same complete or fail sent again."""

    intent_id: str
    action: str
    params: Dict[str, Any]
    status: str
    attempt: int
    """The attempt of the current or last claim (1 for the first)."""
    max_attempts: int
    fence: int
    """The current or last claim's fence."""
    lease_expires_at: Optional[str]
    created_at: str
    updated_at: str
    lease: Optional[IntentLease] = None
    result: Any = None
    error: Optional[IntentFailure] = None
    history: Optional[List[IntentChange]] = None
    entries: Optional[List[BatchResult]] = None
    replayed: bool = False
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def finished(self) -> bool:
        """Whether the outcome is stored (``succeeded`` or ``failed``), for ever."""
        return self.status in ("succeeded", "failed")

    @classmethod
    def from_json(
        cls, value: Any, *, replayed: bool = False, entries: Optional[List[BatchResult]] = None
    ) -> Intent:
        o = j.obj(value, "intent")
        lease, error, history = o.get("lease"), o.get("error"), o.get("history")
        return cls(
            intent_id=j.string(o, "intent_id"),
            action=j.string(o, "action"),
            params=dict(j.obj(o.get("params"), "params")),
            status=j.string(o, "status"),
            attempt=j.integer(o, "attempt"),
            max_attempts=j.integer(o, "max_attempts"),
            fence=j.integer(o, "fence"),
            lease_expires_at=j.opt_string(o, "lease_expires_at"),
            created_at=j.string(o, "created_at"),
            updated_at=j.string(o, "updated_at"),
            lease=None if lease is None else IntentLease.from_json(lease),
            result=o.get("result"),
            error=None if error is None else IntentFailure.from_json(error),
            history=None
            if history is None
            else [IntentChange.from_json(c) for c in j.objects(o, "history")],
            entries=entries,
            replayed=replayed,
            raw=o,
        )


@dataclass(frozen=True)
class IntentPage:
    """One page of ``GET /v1/intents`` in ``intent_id`` order; pass
    ``next_after`` as ``after`` until it is ``None`` (a page may hold fewer
    than ``limit`` when the filters skip intents)."""

    intents: List[Intent]
    next_after: Optional[str]

    @classmethod
    def from_json(cls, value: Any) -> IntentPage:
        o = j.obj(value, "intent page")
        return cls(
            intents=[Intent.from_json(i) for i in j.objects(o, "intents")],
            next_after=j.opt_string(o, "next_after"),
        )


@dataclass(frozen=True)
class UsagePeriod:
    period: str
    meter: Optional[str]
    unit: str
    quantity: Decimal
    amount: Decimal
    entries: int

    @classmethod
    def from_json(cls, value: Any) -> UsagePeriod:
        o = j.obj(value, "usage period")
        return cls(
            period=j.string(o, "period"),
            meter=j.opt_string(o, "meter"),
            unit=j.string(o, "unit"),
            quantity=j.decimal(o, "quantity"),
            amount=j.decimal(o, "amount"),
            entries=j.integer(o, "entries"),
        )


@dataclass(frozen=True)
class Usage:
    """Usage per period and meter. The summaries are complete up to
    ``current_as_of_seq``; they are complete when it equals ``head_seq``."""

    account: str
    granularity: str
    current_as_of_seq: int
    head_seq: int
    usage: List[UsagePeriod]

    @property
    def complete(self) -> bool:
        return self.current_as_of_seq == self.head_seq

    @classmethod
    def from_json(cls, value: Any) -> Usage:
        o = j.obj(value, "usage")
        return cls(
            account=j.string(o, "account"),
            granularity=j.string(o, "granularity"),
            current_as_of_seq=j.integer(o, "current_as_of_seq"),
            head_seq=j.integer(o, "head_seq"),
            usage=[UsagePeriod.from_json(p) for p in j.objects(o, "usage")],
        )


@dataclass(frozen=True)
class BalanceFigures:
    debits: Decimal
    credits: Decimal
    posted: Decimal
    held: Decimal
    available: Decimal

    @classmethod
    def from_json(cls, value: Any) -> BalanceFigures:
        o = j.obj(value, "balance figures")
        return cls(
            debits=j.decimal(o, "debits"),
            credits=j.decimal(o, "credits"),
            posted=j.decimal(o, "posted"),
            held=j.decimal(o, "held"),
            available=j.decimal(o, "available"),
        )


@dataclass(frozen=True)
class Movements:
    debits: Decimal
    credits: Decimal
    net: Decimal
    held: Decimal
    entries: int

    @classmethod
    def from_json(cls, value: Any) -> Movements:
        o = j.obj(value, "movements")
        return cls(
            debits=j.decimal(o, "debits"),
            credits=j.decimal(o, "credits"),
            net=j.decimal(o, "net"),
            held=j.decimal(o, "held"),
            entries=j.integer(o, "entries"),
        )


@dataclass(frozen=True)
class Statement:
    """An account over ``[from_, to)`` on the ledger's clock: opening
    balance + movements = closing balance, and every entry of the period."""

    account: str
    unit: str
    from_: str
    to: str
    opening_balance: BalanceFigures
    movements: Movements
    closing_balance: BalanceFigures
    entries: List[Entry]
    as_of_seq: int

    @classmethod
    def from_json(cls, value: Any) -> Statement:
        o = j.obj(value, "statement")
        return cls(
            account=j.string(o, "account"),
            unit=j.string(o, "unit"),
            from_=j.string(o, "from"),
            to=j.string(o, "to"),
            opening_balance=BalanceFigures.from_json(o.get("opening_balance")),
            movements=Movements.from_json(o.get("movements")),
            closing_balance=BalanceFigures.from_json(o.get("closing_balance")),
            entries=[Entry.from_json(e) for e in j.objects(o, "entries")],
            as_of_seq=j.integer(o, "as_of_seq"),
        )


@dataclass(frozen=True)
class Signature:
    """An Ed25519 signature of a checkpoint (docs/audit.md)."""

    algorithm: str
    public_key: str
    signed_at: str
    message: str
    value: str

    @classmethod
    def from_json(cls, value: Any) -> Signature:
        o = j.obj(value, "signature")
        return cls(
            algorithm=j.string(o, "algorithm"),
            public_key=j.string(o, "public_key"),
            signed_at=j.string(o, "signed_at"),
            message=j.string(o, "message"),
            value=j.string(o, "value"),
        )


@dataclass(frozen=True)
class AuditHead:
    """The head of the caller's log; ``signature`` is ``None`` when the
    server has no signing key (``signing == "off"``)."""

    tenant: str
    seq: int
    hash: str
    checked_at: str
    signing: str
    signature: Optional[Signature]
    notice: Optional[str]

    @classmethod
    def from_json(cls, value: Any) -> AuditHead:
        o = j.obj(value, "audit head")
        signature = o.get("signature")
        return cls(
            tenant=j.string(o, "tenant"),
            seq=j.integer(o, "seq"),
            hash=j.string(o, "hash"),
            checked_at=j.string(o, "checked_at"),
            signing=j.string(o, "signing"),
            signature=None if signature is None else Signature.from_json(signature),
            notice=j.opt_string(o, "notice"),
        )


@dataclass(frozen=True)
class HeadSummary:
    """A log position and its chain hash (hex)."""

    seq: int
    hash: str

    @classmethod
    def from_json(cls, value: Any) -> HeadSummary:
        o = j.obj(value, "head")
        return cls(seq=j.integer(o, "seq"), hash=j.string(o, "hash"))


@dataclass(frozen=True)
class VerificationProblem:
    """One thing ``POST /v1/audit/verify`` found wrong; ``seq`` is the first
    entry found broken when the problem is in the log."""

    seq: Optional[int]
    problem: str

    @classmethod
    def from_json(cls, value: Any) -> VerificationProblem:
        o = j.obj(value, "verification problem")
        return cls(seq=j.opt_integer(o, "seq"), problem=j.string(o, "problem"))


@dataclass(frozen=True)
class AuditVerification:
    """``POST /v1/audit/verify``: what was checked and what was found.
    ``status`` is ``"verified"`` (every check held), ``"broken"``
    (``problems`` lists what was found) or ``"incomplete"`` (the time budget
    ran out after ``checked_entries``; run ``tally verify``)."""

    tenant: str
    status: str
    checked_entries: int
    head: Optional[HeadSummary]
    """The verified head (``None`` unless the log held together)."""
    balances: int
    records: int
    usage_rows: int
    problems: List[VerificationProblem]
    elapsed_ms: int
    budget_ms: int

    @property
    def verified(self) -> bool:
        return self.status == "verified"

    @classmethod
    def from_json(cls, value: Any) -> AuditVerification:
        o = j.obj(value, "audit verification")
        head = o.get("head")
        return cls(
            tenant=j.string(o, "tenant"),
            status=j.string(o, "status"),
            checked_entries=j.integer(o, "checked_entries"),
            head=None if head is None else HeadSummary.from_json(head),
            balances=j.integer(o, "balances"),
            records=j.integer(o, "records"),
            usage_rows=j.integer(o, "usage_rows"),
            problems=[VerificationProblem.from_json(p) for p in j.objects(o, "problems")],
            elapsed_ms=j.integer(o, "elapsed_ms"),
            budget_ms=j.integer(o, "budget_ms"),
        )


_FILENAME = re.compile(r'filename="([^"]*)"')


@dataclass(frozen=True)
class AuditExport:
    """An export of the log (``GET /v1/audit/export``): the exact bytes, as
    ``tally verify --export`` wants them."""

    format: str
    content: bytes = field(repr=False)
    filename: Optional[str]
    content_type: str

    @staticmethod
    def filename_of(content_disposition: Optional[str]) -> Optional[str]:
        if not content_disposition:
            return None
        match = _FILENAME.search(content_disposition)
        return match.group(1) if match else None

    @property
    def text(self) -> str:
        return self.content.decode("utf-8")

    def records(self) -> List[Dict[str, Any]]:
        """The JSONL records (header, entries, trailer); amounts stay the
        exact decimal strings of the file."""
        if self.format != "jsonl":
            raise ValueError("records() reads a JSONL export; use rows() for CSV")
        return [
            dict(j.obj(j.loads(line.encode("utf-8")))) for line in self.text.splitlines() if line
        ]

    def rows(self) -> List[Dict[str, str]]:
        """The CSV rows, keyed by the header row."""
        if self.format != "csv":
            raise ValueError("rows() reads a CSV export; use records() for JSONL")
        return list(csv.DictReader(io.StringIO(self.text, newline="")))


@dataclass(frozen=True)
class Health:
    """``GET /healthz`` (``status`` ``ok``) or ``GET /readyz`` (``ready``)."""

    status: str
    engine: str
    schema_version: Optional[int]

    @classmethod
    def from_json(cls, value: Any) -> Health:
        o = j.obj(value, "health")
        return cls(
            status=j.string(o, "status"),
            engine=j.string(o, "engine"),
            schema_version=j.opt_integer(o, "schema_version"),
        )


@dataclass(frozen=True)
class WebhookEndpoint:
    """A webhook endpoint (scope ``admin``), without its secret.
    ``disabled_reason`` is ``"gone"`` (the receiver answered 410) or
    ``"disabled"`` (a PATCH), ``None`` while enabled; events of entries after
    ``after_seq`` (the tenant's head when it was made) are sent."""

    id: str
    url: str
    event_types: List[str]
    description: Optional[str]
    enabled: bool
    disabled_reason: Optional[str]
    after_seq: int
    created_at: str
    updated_at: str
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, value: Any) -> WebhookEndpoint:
        o = j.obj(value, "webhook endpoint")
        return cls(
            id=j.string(o, "id"),
            url=j.string(o, "url"),
            event_types=j.strings(o, "event_types"),
            description=j.opt_string(o, "description"),
            enabled=j.boolean(o, "enabled"),
            disabled_reason=j.opt_string(o, "disabled_reason"),
            after_seq=j.integer(o, "after_seq"),
            created_at=j.string(o, "created_at"),
            updated_at=j.string(o, "updated_at"),
            raw=o,
        )


@dataclass(frozen=True)
class WebhookEndpointWithSecret:
    """An endpoint with its signing ``secret`` (``whsec_…``), which the
    server shows only when the endpoint is made or its secret rotated.
    After a rotation the previous secret also signs until
    ``previous_secret_expires_at``. The secret is left out of ``repr``."""

    endpoint: WebhookEndpoint
    secret: str = field(repr=False)
    previous_secret_expires_at: Optional[str]

    @property
    def id(self) -> str:
        return self.endpoint.id

    @classmethod
    def from_json(cls, value: Any) -> WebhookEndpointWithSecret:
        o = j.obj(value, "webhook endpoint")
        return cls(
            endpoint=WebhookEndpoint.from_json(o),
            secret=j.string(o, "secret"),
            previous_secret_expires_at=j.opt_string(o, "previous_secret_expires_at"),
        )


@dataclass(frozen=True)
class WebhookAttempt:
    """One attempt of a delivery: ``outcome`` is ``delivered`` (2xx),
    ``http_status`` (another answer), ``timeout``, ``connection`` (no
    answer) or ``gone`` (410: the endpoint was disabled)."""

    attempt: int
    attempted_at: str
    outcome: str
    http_status: Optional[int]
    error: Optional[str]
    duration_ms: int

    @classmethod
    def from_json(cls, value: Any) -> WebhookAttempt:
        o = j.obj(value, "webhook attempt")
        return cls(
            attempt=j.integer(o, "attempt"),
            attempted_at=j.string(o, "attempted_at"),
            outcome=j.string(o, "outcome"),
            http_status=j.opt_integer(o, "http_status"),
            error=j.opt_string(o, "error"),
            duration_ms=j.integer(o, "duration_ms"),
        )


@dataclass(frozen=True)
class WebhookDelivery:
    """One event for one endpoint, with every attempt so far; ``status`` is
    ``pending``, ``delivered`` or ``failed``. ``event`` is the event exactly
    as sent (its JSON body, numbers with a fraction as ``Decimal``, amounts
    as the decimal strings of the body); ``event_id`` is its
    ``webhook-id``, the same on every attempt, retry and replay."""

    id: str
    endpoint_id: str
    event_id: str
    event_type: str
    seq: int
    status: str
    next_attempt_at: Optional[str]
    scheduled_at: str
    attempts: List[WebhookAttempt]
    event: Dict[str, Any] = field(repr=False)
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, value: Any) -> WebhookDelivery:
        o = j.obj(value, "webhook delivery")
        return cls(
            id=j.string(o, "id"),
            endpoint_id=j.string(o, "endpoint_id"),
            event_id=j.string(o, "event_id"),
            event_type=j.string(o, "event_type"),
            seq=j.integer(o, "seq"),
            status=j.string(o, "status"),
            next_attempt_at=j.opt_string(o, "next_attempt_at"),
            scheduled_at=j.string(o, "scheduled_at"),
            attempts=[WebhookAttempt.from_json(a) for a in j.objects(o, "attempts")],
            event=dict(j.obj(o.get("event"), "event")),
            raw=o,
        )


@dataclass(frozen=True)
class WebhookDeliveryPage:
    """One page of an endpoint's deliveries, newest first; pass
    ``next_after`` as ``after`` until it is ``None``."""

    deliveries: List[WebhookDelivery]
    next_after: Optional[str]

    @classmethod
    def from_json(cls, value: Any) -> WebhookDeliveryPage:
        o = j.obj(value, "webhook delivery page")
        return cls(
            deliveries=[WebhookDelivery.from_json(d) for d in j.objects(o, "deliveries")],
            next_after=j.opt_string(o, "next_after"),
        )


@dataclass(frozen=True)
class WebhookReplay:
    """What ``POST /v1/webhook-endpoints/{id}/replay`` scheduled: the
    entries ``from_seq`` to ``to_seq`` were read (at most 10,000); go on from
    ``next_from_seq`` until it is ``None`` (the head was reached)."""

    scheduled: int
    from_seq: int
    to_seq: int
    next_from_seq: Optional[int]

    @classmethod
    def from_json(cls, value: Any) -> WebhookReplay:
        o = j.obj(value, "webhook replay")
        return cls(
            scheduled=j.integer(o, "scheduled"),
            from_seq=j.integer(o, "from_seq"),
            to_seq=j.integer(o, "to_seq"),
            next_from_seq=j.opt_integer(o, "next_from_seq"),
        )


@dataclass(frozen=True)
class StripeIntegration:
    """A tenant's Stripe integration (scope ``admin``), without its
    secrets: the server never answers them. ``endpoint_path`` is the path
    to give Stripe (after the server's origin); it stays the same when the
    settings are replaced."""

    endpoint_path: str
    account_metadata_key: str
    signing_secrets_count: int
    created_at: str
    updated_at: str
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, value: Any) -> StripeIntegration:
        o = j.obj(value, "Stripe integration")
        return cls(
            endpoint_path=j.string(o, "endpoint_path"),
            account_metadata_key=j.string(o, "account_metadata_key"),
            signing_secrets_count=j.integer(o, "signing_secrets_count"),
            created_at=j.string(o, "created_at"),
            updated_at=j.string(o, "updated_at"),
            raw=o,
        )


@dataclass(frozen=True)
class StripeEvent:
    """A Stripe event as recorded: ``status`` is ``applied`` (its entries
    were decided), ``ignored`` (a type tally does not map) or ``unmapped``
    (``reason`` says why; a refund that came before its payment names the
    payment in ``waiting_for`` and is applied when it arrives). ``type`` is
    Stripe's event type, e.g. ``payment_intent.succeeded``."""

    event_id: str
    type: str
    status: str
    reason: Optional[str]
    waiting_for: Optional[str]
    received_at: str
    updated_at: str
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, value: Any) -> StripeEvent:
        o = j.obj(value, "Stripe event")
        return cls(
            event_id=j.string(o, "event_id"),
            type=j.string(o, "type"),
            status=j.string(o, "status"),
            reason=j.opt_string(o, "reason"),
            waiting_for=j.opt_string(o, "waiting_for"),
            received_at=j.string(o, "received_at"),
            updated_at=j.string(o, "updated_at"),
            raw=o,
        )


@dataclass(frozen=True)
class StripeEventPage:
    """One page of ``GET /v1/integrations/stripe/events`` in ``event_id``
    order; pass ``next_after`` as ``after`` until it is ``None``."""

    events: List[StripeEvent]
    next_after: Optional[str]

    @classmethod
    def from_json(cls, value: Any) -> StripeEventPage:
        o = j.obj(value, "Stripe event page")
        return cls(
            events=[StripeEvent.from_json(e) for e in j.objects(o, "events")],
            next_after=j.opt_string(o, "next_after"),
        )
