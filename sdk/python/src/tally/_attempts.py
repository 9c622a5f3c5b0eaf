"""The retry loop's bookkeeping, shared by the sync and async clients:
counting attempts, the time budget, the backoff, and turning an HTTP answer
or a transport failure into a result or an error."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Mapping, Optional, TypeVar

import httpx

from ._version import __version__
from ._wire import Answer, Call
from .errors import DecodeError, RetriesExhausted, TallyError, TransportError, error_from_answer
from .retry import RetryPolicy, jitter, parse_retry_after

T = TypeVar("T")


@dataclass(frozen=True)
class RetryEvent:
    """Passed to ``on_retry`` before the client sleeps and retries."""

    method: str
    target: str
    attempt: int
    """The attempt that failed (1-based)."""
    error: TallyError
    """Why it failed (``RateLimited``, ``Unavailable``, ``TransportError``, ...)."""
    delay: float
    """Seconds the client waits before the next attempt."""
    elapsed: float
    """Seconds since the first attempt started."""


OnRetry = Callable[[RetryEvent], None]


class Attempts:
    """One call's attempts under a ``RetryPolicy``."""

    def __init__(
        self,
        policy: RetryPolicy,
        call: Call[T],
        on_retry: Optional[OnRetry] = None,
        clock: Callable[[], float] = time.monotonic,
        random: Callable[[], float] = jitter,
    ) -> None:
        self.policy = policy
        self.call = call
        self.on_retry = on_retry
        self.clock = clock
        self.random = random
        self.started = clock()
        self.count = 0

    def begin(self) -> int:
        self.count += 1
        return self.count

    def elapsed(self) -> float:
        return self.clock() - self.started

    def delay_after(self, error: TallyError) -> float:
        """The wait before the next attempt, or raises: ``error`` itself when
        it is final, ``RetriesExhausted`` when the policy gives up."""
        if not error.retryable:
            raise error
        if self.count >= self.policy.max_attempts:
            raise RetriesExhausted(attempts=self.count, elapsed=self.elapsed(), last=error)
        delay = self.policy.delay(self.count, self.random(), error.retry_after)
        if self.elapsed() + delay > self.policy.total_budget:
            raise RetriesExhausted(attempts=self.count, elapsed=self.elapsed(), last=error)
        if self.on_retry is not None:
            self.on_retry(
                RetryEvent(
                    method=self.call.method,
                    target=self.call.target,
                    attempt=self.count,
                    error=error,
                    delay=delay,
                    elapsed=self.elapsed(),
                )
            )
        return delay


def outcome(call: Call[T], answer: Answer) -> T:
    """The result of a successful answer; raises the error of any other."""
    if answer.status >= 400:
        raise error_from_answer(
            answer.status,
            answer.content,
            retry_after=parse_retry_after(answer.headers.get("retry-after")),
            replayed=answer.replayed,
            request_id=answer.request_id,
        )
    try:
        return call.decode(answer)
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
        raise DecodeError(
            f"unexpected body in the {answer.status} answer to {call.method} {call.target}: {e}",
            status=answer.status,
            request_id=answer.request_id,
        ) from e


def answer_of(response: httpx.Response, content: bytes, attempts: int, request_id: str) -> Answer:
    headers: Mapping[str, str] = {k.lower(): v for k, v in response.headers.items()}
    return Answer(
        status=response.status_code,
        headers=headers,
        content=content,
        attempts=attempts,
        request_id=headers.get("x-request-id", request_id),
    )


def transport_error(e: Exception, request_id: str) -> TallyError:
    """A failure without an answer. Connection failures, lost connections
    (the server may have committed) and timeouts are retried; a request the
    client itself cannot send (a bad URL) is not."""
    if isinstance(e, httpx.TimeoutException):
        return TransportError(
            f"no answer from tally (timed out): {e!r}", timeout=True, request_id=request_id
        )
    retryable = isinstance(e, (httpx.NetworkError, httpx.RemoteProtocolError, httpx.ProxyError))
    return TransportError(
        f"no answer from tally (connection failed): {e!r}",
        timeout=False,
        retryable=retryable,
        request_id=request_id,
    )


def attempt_timed_out(timeout: float, request_id: str) -> TransportError:
    """The attempt took longer than the policy's ``request_timeout``."""
    return TransportError(
        f"no answer from tally (timed out): the attempt took longer than {timeout:g} s",
        timeout=True,
        request_id=request_id,
    )


def request_headers(api_key: Optional[str], call: Call[Any], request_id: str) -> Dict[str, str]:
    """The headers of every attempt of ``call``: the same ``X-Request-Id`` on
    each, so the server's log shows the attempts as one call."""
    headers = {
        "Accept": call.accept,
        "User-Agent": f"tally-client-python/{__version__}",
        "X-Request-Id": request_id,
    }
    if api_key is not None:
        headers["Authorization"] = f"Bearer {api_key}"
    if call.body is not None:
        headers["Content-Type"] = "application/json"
    return headers
