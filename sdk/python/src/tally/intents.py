"""Intents: a costly action done once (docs/intents.md).

``Client.once`` and ``AsyncClient.once`` claim an intent, run the caller's
step under the lease (heartbeating while it runs), and store what came of
it: the step's result with ``complete``, its exception with ``fail``. A
claim of a finished intent gets the stored outcome back and runs nothing.
What both clients share is here: the ``Lease`` a step gets, ``StepResult``,
the step's errors, the ``IntentOutcome`` once returns, the wait for another
claim's lease, and the background heartbeats (a thread, or an asyncio task).
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, ClassVar, Dict, List, Optional, Sequence, Tuple

from .errors import DecodeError, IntentInProgress, LeaseLost, TallyError
from .models import BatchResult, Intent, IntentFailure
from .requests import BatchOperation
from .retry import RetryPolicy

__all__ = [
    "AsyncStep",
    "IntentOutcome",
    "Lease",
    "RetryableStepError",
    "Step",
    "StepError",
    "StepResult",
]

MAX_ERROR_CODE_BYTES = 128
MAX_ERROR_MESSAGE_BYTES = 4 * 1024


@dataclass(frozen=True)
class Lease:
    """What a step of ``once()`` gets: the claim it runs under. ``attempt``
    greater than 1 says an earlier attempt ran (and may have acted
    downstream: look before acting again). ``token`` names the claim (kept
    out of ``repr``); ``expires_at`` is when the claim's lease ends unless
    heartbeats move it on. Pass ``intent_id`` downstream as the idempotency
    key of the action."""

    intent_id: str
    action: str
    params: Dict[str, Any]
    attempt: int
    max_attempts: int
    fence: int
    token: str = field(repr=False)
    expires_at: str


@dataclass(frozen=True)
class StepResult:
    """What a step may return instead of a plain JSON value: the ``result``
    to store and the ledger ``entries`` (``UsageDebit``, ``Payment``,
    ``Hold``, ``Refund``, ``Reversal``, each keyed by its own upstream ID)
    committed in the same transaction as the outcome: both or neither."""

    result: Any = None
    entries: Sequence[BatchOperation] = ()


class StepError(Exception):
    """An error a step raises to fail its intent with ``code`` (default: the
    class name) and the message: final, the intent is stored ``failed``.
    Any other exception fails it the same way with its class name as code."""

    retryable: ClassVar[bool] = False

    def __init__(self, message: str = "", *, code: Optional[str] = None) -> None:
        super().__init__(message)
        self.code = code


class RetryableStepError(StepError):
    """An error a step raises when another attempt may succeed (the provider
    was overloaded, a timeout): the intent is released (``released``) and
    the next ``once()`` call runs the step again as the next attempt, until
    ``max_attempts``, where it is stored ``failed``."""

    retryable = True


@dataclass(frozen=True)
class IntentOutcome:
    """What ``once()`` returns: the intent's stored outcome.

    ``status`` is ``succeeded`` (``result``) or ``failed`` (``error``).
    ``replayed`` is true when the outcome was stored before this call (the
    claim answered it, the step did not run); ``entries`` holds the answers
    to the step's entries when it ran here (each a ``BatchResult``: check
    ``ok``), else ``[]``. ``intent`` is the server's last answer."""

    intent_id: str
    status: str
    result: Any
    error: Optional[IntentFailure]
    replayed: bool
    attempt: int
    fence: int
    entries: List[BatchResult]
    intent: Intent = field(repr=False)

    @property
    def succeeded(self) -> bool:
        return self.status == "succeeded"

    @property
    def failed(self) -> bool:
        return self.status == "failed"


Step = Callable[[Lease], Any]
"""A step of ``Client.once``: returns a JSON value (the result) or a ``StepResult``."""

AsyncStep = Callable[[Lease], Awaitable[Any]]
"""A step of ``AsyncClient.once``: awaited, returns what a ``Step`` returns."""


@dataclass(frozen=True)
class OnceOptions:
    """``once()``'s options, checked before anything is sent."""

    lease_seconds: int
    max_attempts: int
    wait_budget: float

    @classmethod
    def of(
        cls, lease_seconds: int, max_attempts: int, wait_budget_seconds: Optional[float]
    ) -> OnceOptions:
        for name, value in (("lease_seconds", lease_seconds), ("max_attempts", max_attempts)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an int, not {type(value).__name__}")
            if value < 1:
                raise ValueError(f"{name} must be at least 1")
        budget = 2.0 * lease_seconds if wait_budget_seconds is None else wait_budget_seconds
        if budget < 0:
            raise ValueError("wait_budget_seconds must not be negative")
        return cls(lease_seconds, max_attempts, float(budget))

    @property
    def heartbeat_interval(self) -> float:
        """A heartbeat every third of the lease."""
        return self.lease_seconds / 3

    def heartbeat_policy(self, policy: RetryPolicy) -> RetryPolicy:
        """``policy`` for one heartbeat: its retries end before the next one
        is due, so the end of a step never waits long for one in flight."""
        interval = self.heartbeat_interval
        return dataclasses.replace(
            policy,
            total_budget=min(policy.total_budget, interval),
            request_timeout=min(policy.request_timeout, interval),
        )


class ClaimWait:
    """The waits for another claim's lease within ``once()``'s budget."""

    def __init__(self, budget: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.budget = budget
        self.clock = clock
        self.started = clock()

    def delay_after(self, busy: IntentInProgress) -> float:
        """Seconds to sleep before claiming again (the ``Retry-After``), or
        raises ``busy`` when the claim after it would start past the budget."""
        delay = busy.retry_after if busy.retry_after is not None else 1.0
        if self.clock() - self.started + delay > self.budget:
            raise busy
        return delay


def lease_of(claimed: Intent) -> Optional[Lease]:
    """The lease a claim got, or ``None`` when it answered the stored outcome."""
    if claimed.lease is None:
        if not claimed.finished:
            raise DecodeError(
                f"the claim of intent {claimed.intent_id!r} answered neither a lease "
                f"nor an outcome (status {claimed.status!r})"
            )
        return None
    return Lease(
        intent_id=claimed.intent_id,
        action=claimed.action,
        params=claimed.params,
        attempt=claimed.attempt,
        max_attempts=claimed.max_attempts,
        fence=claimed.lease.fence,
        token=claimed.lease.token,
        expires_at=claimed.lease.expires_at,
    )


def outcome_of(intent: Intent, *, replayed: bool) -> IntentOutcome:
    return IntentOutcome(
        intent_id=intent.intent_id,
        status=intent.status,
        result=intent.result,
        error=intent.error,
        replayed=replayed,
        attempt=intent.attempt,
        fence=intent.fence,
        entries=list(intent.entries or []),
        intent=intent,
    )


def step_answer(value: Any) -> Tuple[Any, Optional[Sequence[BatchOperation]]]:
    """The ``result`` and ``entries`` to complete with, from what a step returned."""
    if isinstance(value, StepResult):
        return value.result, (list(value.entries) if value.entries else None)
    return value, None


def _cut(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` bytes of UTF-8, cut between characters."""
    return text.encode("utf-8")[:limit].decode("utf-8", errors="ignore")


def failure_of(error: Exception) -> Tuple[str, str, bool]:
    """The ``code``, ``message`` and ``retryable`` to fail with for a step's exception."""
    code = error.code if isinstance(error, StepError) and error.code else type(error).__name__
    retryable = isinstance(error, StepError) and error.retryable
    code = _cut(code, MAX_ERROR_CODE_BYTES) or "error"
    return code, _cut(str(error), MAX_ERROR_MESSAGE_BYTES), retryable


class ThreadHeartbeat:
    """Calls ``beat`` every ``interval`` seconds on a thread of its own until
    ``stop()``. A ``LeaseLost`` ends the beats (the claim no longer counts;
    the complete will say so); any other ``TallyError`` waits for the next."""

    def __init__(self, beat: Callable[[], object], interval: float) -> None:
        self._beat = beat
        self._interval = interval
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tally-heartbeat", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopped.wait(self._interval):
            try:
                self._beat()
            except LeaseLost:
                return
            except TallyError:
                continue

    def stop(self) -> None:
        """No beat starts after this returns (one in flight is waited for)."""
        self._stopped.set()
        self._thread.join()


class TaskHeartbeat:
    """The asyncio twin of ``ThreadHeartbeat``: a task that awaits ``beat``
    every ``interval`` seconds until ``stop()`` cancels it."""

    def __init__(self, beat: Callable[[], Awaitable[object]], interval: float) -> None:
        self._beat = beat
        self._interval = interval
        self._task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            try:
                await self._beat()
            except LeaseLost:
                return
            except TallyError:
                continue

    async def stop(self) -> None:
        """Cancels the beats (one in flight too) and waits until they ended;
        a cancellation of the caller meanwhile goes on to the caller."""
        self._task.cancel()
        await asyncio.wait({self._task})
