"""When to retry and how long to wait: the policy of the Rust client
(client/src/retry.rs), copied exactly.

Only failures that may be transient are retried: connection errors,
timeouts, 429 and every 5xx. Every other answer (409, 422, 401, 403, 404,
413, ...) is final. The wait after failed attempt ``n`` (1-based) is full
jitter over ``min(max_delay, base_delay * 2**(n-1))``, never shorter than
the server's ``Retry-After``; the attempts are bounded by ``max_attempts``
and by ``total_budget`` (no retry starts after it), each attempt by
``request_timeout``.
"""

from __future__ import annotations

import email.utils
import random
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Optional

__all__ = ["RetryPolicy", "is_retryable_status", "jitter", "parse_retry_after"]

_RANDOM = random.SystemRandom()


def is_retryable_status(status: int) -> bool:
    """429 and every 5xx may succeed later; every other status is final."""
    return status == 429 or 500 <= status <= 599


@dataclass(frozen=True)
class RetryPolicy:
    """Bounds on retrying. Durations are in seconds."""

    max_attempts: int = 8
    """Most attempts, the first included."""
    base_delay: float = 0.1
    """First backoff cap; doubles per attempt."""
    max_delay: float = 5.0
    """Largest backoff cap."""
    total_budget: float = 30.0
    """No retry starts after this much time since the first attempt."""
    request_timeout: float = 10.0
    """Timeout of one attempt."""

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        for name in ("base_delay", "max_delay", "total_budget"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative")
        if self.request_timeout <= 0:
            raise ValueError("request_timeout must be positive")

    def cap(self, attempt: int) -> float:
        """The backoff cap after failed attempt ``attempt`` (1-based)."""
        exp = min(max(attempt - 1, 0), 30)
        return float(min(self.base_delay * (1 << exp), self.max_delay))

    def delay(self, attempt: int, jitter: float, retry_after: Optional[float] = None) -> float:
        """The wait after failed attempt ``attempt`` (1-based): the cap scaled
        by ``jitter`` (clamped to [0, 1]), never shorter than ``retry_after``."""
        jittered = self.cap(attempt) * min(max(jitter, 0.0), 1.0)
        if retry_after is not None:
            return max(jittered, retry_after)
        return jittered


def jitter() -> float:
    """A uniform number in [0, 1) from the operating system's randomness, so
    that many clients retrying together spread out."""
    return _RANDOM.random()


def parse_retry_after(value: Optional[str], now: Optional[datetime] = None) -> Optional[float]:
    """Seconds to wait from a ``Retry-After`` header: delta-seconds (what
    tally sends) or an HTTP date; ``None`` when absent or unreadable."""
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        return float(int(text))
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    current = now or datetime.now(timezone.utc)
    return max((when - current).total_seconds(), 0.0)
