"""Every error the client raises: one class per problem ``code`` of the
server (api/src/problem.rs, docs/ledger-rules.md), plus transport failures
and the terminal ``RetriesExhausted``.

``retryable`` follows the status, exactly as the Rust client classifies:
429 and every 5xx, and failures without an answer (connection refused or
reset, timeouts). Everything else is final and raised at once.
"""

from __future__ import annotations

from typing import Any, ClassVar, Dict, List, Mapping, Optional, Type

from . import _json as j
from .models import Entry, FieldError
from .retry import is_retryable_status

__all__ = [
    "AlreadyReversed",
    "DecodeError",
    "Forbidden",
    "HoldExpired",
    "HoldNotOpen",
    "IdempotencyConflict",
    "InsufficientFunds",
    "IntentInProgress",
    "Internal",
    "InvalidRequest",
    "InvalidSignature",
    "LeaseLost",
    "MalformedJson",
    "MethodNotAllowed",
    "NotFound",
    "PayloadTooLarge",
    "RateLimited",
    "RefundExceedsPayment",
    "Rejected",
    "RetriesExhausted",
    "ServerError",
    "TallyError",
    "TotalOutOfRange",
    "TransportError",
    "Unauthenticated",
    "UnitMismatch",
    "Unavailable",
    "UnsupportedMediaType",
    "error_from_answer",
]


class TallyError(Exception):
    """Base of every error of the client.

    For an answer of the server: ``status``, the problem ``code``, its
    ``detail`` and the whole problem+json body as ``problem``. ``status`` and
    ``code`` are ``None`` when there was no answer (``TransportError``).
    """

    code_name: ClassVar[Optional[str]] = None
    """The problem code this class stands for."""

    def __init__(
        self,
        message: str,
        *,
        status: Optional[int] = None,
        code: Optional[str] = None,
        detail: str = "",
        problem: Optional[Mapping[str, Any]] = None,
        retryable: bool = False,
        retry_after: Optional[float] = None,
        replayed: bool = False,
        request_id: Optional[str] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.detail = detail
        self.problem: Mapping[str, Any] = problem if problem is not None else {}
        self.retryable = retryable
        self.retry_after = retry_after
        """Seconds the server asked to wait (``Retry-After``), if any."""
        self.replayed = replayed
        """Whether this answer is a replay (a stored rejection answered again)."""
        self.request_id = request_id
        """The ``X-Request-Id`` of the call, to find it in the server's log."""

    def __str__(self) -> str:
        return self.message


def _opt_str(problem: Mapping[str, Any], key: str) -> Optional[str]:
    value = problem.get(key)
    return value if isinstance(value, str) else None


def _opt_int(problem: Mapping[str, Any], key: str) -> Optional[int]:
    value = problem.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# --- final answers (4xx) -------------------------------------------------


class MalformedJson(TallyError):
    """400: the body is not JSON (or not ``application/json``)."""

    code_name = "malformed_json"


class InvalidSignature(TallyError):
    """400: a Stripe delivery (``POST /v1/ingest/stripe/…``) whose
    ``Stripe-Signature`` is missing, malformed, stale or made with no
    configured secret; nothing was written. Only Stripe calls that
    endpoint: no method of this client gets it."""

    code_name = "invalid_signature"


class Unauthenticated(TallyError):
    """401: missing or unknown API key."""

    code_name = "unauthenticated"


class Forbidden(TallyError):
    """403: the API key lacks the scope the operation needs."""

    code_name = "forbidden"


class NotFound(TallyError):
    """404: the object (or, with ``field``, the object a request names:
    ``payment_id``, ``entry_id``, ``hold_id``) does not exist."""

    code_name = "not_found"

    def __init__(self, message: str, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        field = self.problem.get("field")
        self.field: Optional[str] = field if isinstance(field, str) else None


class MethodNotAllowed(TallyError):
    code_name = "method_not_allowed"


class IdempotencyConflict(TallyError):
    """409: the upstream ID already names ``entry_id`` with other parameters
    (``differing_fields``), or the intent ``intent_id`` was claimed with
    another ``action`` or other ``params`` (``differing_fields`` names
    ``action`` or ``params.<key>``). Nothing was written; a new request
    needs a new ID."""

    code_name = "idempotency_conflict"

    def __init__(self, message: str, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        entry_id = self.problem.get("entry_id")
        self.entry_id: str = entry_id if isinstance(entry_id, str) else ""
        """The entry the upstream ID names (``""`` for an intent's conflict)."""
        self.intent_id: Optional[str] = _opt_str(self.problem, "intent_id")
        """The intent claimed with other parameters (``None`` for an entry's conflict)."""
        fields = self.problem.get("differing_fields")
        self.differing_fields: List[str] = (
            [f for f in fields if isinstance(f, str)] if isinstance(fields, list) else []
        )


class IntentInProgress(TallyError):
    """409: another claim of intent ``intent_id`` holds a live lease (its
    ``fence``) for ``retry_after`` more seconds (``Retry-After``, at least
    1). Nothing was written. Claim again after that: the claim then gets the
    outcome that claim stored, or the next attempt if its lease ran out.
    Not retried by the client's policy (``once()`` waits within its budget)."""

    code_name = "intent_in_progress"

    def __init__(self, message: str, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.intent_id: Optional[str] = _opt_str(self.problem, "intent_id")
        self.fence: Optional[int] = _opt_int(self.problem, "fence")
        """The fence of the claim that holds the lease."""
        if self.retry_after is None:
            seconds = _opt_int(self.problem, "retry_after_seconds")
            self.retry_after = None if seconds is None else float(seconds)


class LeaseLost(TallyError):
    """409: the token is not intent ``intent_id``'s current claim's (its
    lease ran out and another claim took the intent), or the intent's
    outcome was stored by another call. Nothing changed: this worker's
    complete, fail or heartbeat no longer counts."""

    code_name = "lease_lost"

    def __init__(self, message: str, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.intent_id: Optional[str] = _opt_str(self.problem, "intent_id")


class PayloadTooLarge(TallyError):
    """413: the body is over 1 MiB (8 MiB for a batch)."""

    code_name = "payload_too_large"


class UnsupportedMediaType(TallyError):
    """415: a JSON body declared in a charset other than UTF-8."""

    code_name = "unsupported_media_type"


def _field_errors(problem: Mapping[str, Any]) -> List[FieldError]:
    errors = problem.get("errors")
    if not isinstance(errors, list):
        return []
    out = []
    for item in errors:
        try:
            out.append(FieldError.from_json(j.obj(item)))
        except ValueError:
            continue
    return out


class InvalidRequest(TallyError):
    """422: validation failed (``errors`` names every field at fault), or the
    request cannot apply to what it names. Nothing was stored and the
    upstream ID is not claimed: fix the request and send it with the same ID."""

    code_name = "invalid_request"

    def __init__(self, message: str, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.errors: List[FieldError] = _field_errors(self.problem)

    @property
    def fields(self) -> List[str]:
        return [e.field for e in self.errors]


class UnitMismatch(TallyError):
    """422: ``account`` is in ``unit``, not the request's. Nothing stored,
    the upstream ID not claimed."""

    code_name = "unit_mismatch"

    def __init__(self, message: str, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.errors: List[FieldError] = _field_errors(self.problem)
        account = self.problem.get("account")
        unit = self.problem.get("unit")
        self.account: Optional[str] = account if isinstance(account, str) else None
        self.unit: Optional[str] = unit if isinstance(unit, str) else None


class Rejected(TallyError):
    """422: a stored rejection. The request was decided against the ledger's
    state and recorded as a rejected ``entry`` (status ``rejected``), which
    every retry of the same upstream ID gets back. A new attempt needs a new
    upstream ID. ``entry`` is ``None`` only for a ``HoldNotOpen`` refused
    before anything was stored."""

    code_name = "rejected"

    def __init__(self, message: str, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        entry: Optional[Entry] = None
        if "entry" in self.problem:
            try:
                entry = Entry.from_json(self.problem["entry"])
            except ValueError:
                entry = None
        self.entry: Optional[Entry] = entry


class InsufficientFunds(Rejected):
    """The debited account's ``available`` would go below its floor."""

    code_name = "insufficient_funds"


class HoldNotOpen(Rejected):
    """Capture or release of a hold already captured, released or expired."""

    code_name = "hold_not_open"


class HoldExpired(Rejected):
    """Capture of an open hold whose ``expires_at`` has passed."""

    code_name = "hold_expired"


class RefundExceedsPayment(Rejected):
    """Refunds of a payment would total more than the payment."""

    code_name = "refund_exceeds_payment"


class AlreadyReversed(Rejected):
    """The entry already has a reversal."""

    code_name = "already_reversed"


class TotalOutOfRange(Rejected):
    """The replay of an entry an earlier server version rejected because a
    total would have passed 28 digits; totals no longer have a limit."""

    code_name = "total_out_of_range"


# --- answers that may change (429, 5xx) ------------------------------------


class RateLimited(TallyError):
    """429: the API key is over its rate limit, or the tenant's queue is
    full. Retried after at least ``retry_after`` seconds."""

    code_name = "rate_limited"


class ServerError(TallyError):
    """A 5xx answer; retried."""


class Internal(ServerError):
    """500: an internal error (logged by the server under ``request_id``)."""

    code_name = "internal"


class Unavailable(ServerError):
    """503: the database is unavailable, the server is at a limit, or the
    request timed out on the server. Nothing was done, or a mutation was
    committed and its retry is a replay."""

    code_name = "unavailable"


# --- no answer, or not one the client understands ---------------------------


class TransportError(TallyError):
    """No answer: the connection failed or was lost, or the attempt timed
    out. The server may or may not have committed; a retry with the same
    upstream ID is safe."""

    def __init__(
        self, message: str, *, timeout: bool, retryable: bool = True, **kwargs: Any
    ) -> None:
        super().__init__(message, retryable=retryable, **kwargs)
        self.timeout = timeout


class DecodeError(TallyError):
    """A successful answer whose body is not what the API documents."""


class RetriesExhausted(TallyError):
    """The retry policy gave up: ``attempts`` attempts in ``elapsed``
    seconds, the last one failing with ``last`` (also ``__cause__``).
    ``status``, ``code``, ``detail`` and ``problem`` are the last answer's."""

    def __init__(self, *, attempts: int, elapsed: float, last: TallyError) -> None:
        super().__init__(
            f"gave up after {attempts} attempt(s) in {elapsed:.1f} s; last error: {last}",
            status=last.status,
            code=last.code,
            detail=last.detail,
            problem=last.problem,
            retryable=False,
            retry_after=last.retry_after,
            request_id=last.request_id,
        )
        self.attempts = attempts
        self.elapsed = elapsed
        self.last = last
        self.__cause__ = last


_PROBLEM_CLASSES: List[Type[TallyError]] = [
    MalformedJson,
    InvalidSignature,
    Unauthenticated,
    Forbidden,
    NotFound,
    MethodNotAllowed,
    IdempotencyConflict,
    IntentInProgress,
    LeaseLost,
    PayloadTooLarge,
    UnsupportedMediaType,
    InvalidRequest,
    UnitMismatch,
    Rejected,
    InsufficientFunds,
    HoldNotOpen,
    HoldExpired,
    RefundExceedsPayment,
    AlreadyReversed,
    TotalOutOfRange,
    RateLimited,
    Internal,
    Unavailable,
]

BY_CODE: Dict[str, Type[TallyError]] = {
    cls.code_name: cls for cls in _PROBLEM_CLASSES if cls.code_name is not None
}
"""The exception class of each problem code the server emits."""

_BY_STATUS: Dict[int, Type[TallyError]] = {
    400: MalformedJson,
    401: Unauthenticated,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    409: IdempotencyConflict,
    413: PayloadTooLarge,
    415: UnsupportedMediaType,
    429: RateLimited,
    500: Internal,
    503: Unavailable,
}


def _class_for(status: int, code: Optional[str], problem: Mapping[str, Any]) -> Type[TallyError]:
    if code is not None and code in BY_CODE:
        return BY_CODE[code]
    if status == 422 and "entry" in problem:
        return Rejected  # a stored rejection with a code this client does not know
    if status in _BY_STATUS and code is None:
        return _BY_STATUS[status]
    if status == 429:
        return RateLimited
    if 500 <= status <= 599:
        return ServerError
    return TallyError


def error_from_answer(
    status: int,
    content: bytes,
    *,
    retry_after: Optional[float] = None,
    replayed: bool = False,
    request_id: Optional[str] = None,
) -> TallyError:
    """The error an HTTP answer of 400 or more stands for."""
    problem: Mapping[str, Any] = {}
    try:
        parsed = j.loads(content) if content else None
        if isinstance(parsed, dict):
            problem = parsed
    except ValueError:
        pass
    code = problem.get("code") if isinstance(problem.get("code"), str) else None
    detail = problem.get("detail") if isinstance(problem.get("detail"), str) else ""
    cls = _class_for(status, code, problem)
    shown = code or "(no problem code)"
    message = (
        f"tally answered {status} {shown}: {detail}"
        if detail
        else f"tally answered {status} {shown}"
    )
    if retry_after is not None and is_retryable_status(status):
        message += f" (Retry-After {retry_after:g} s)"
    return cls(
        message,
        status=status,
        code=code,
        detail=str(detail),
        problem=problem,
        retryable=is_retryable_status(status),
        retry_after=retry_after,
        replayed=replayed,
        request_id=request_id,
    )
