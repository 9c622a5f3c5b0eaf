"""What one call sends and how its answer is read, independent of the
HTTP library and of sync or async: both clients run the same ``Call``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import Callable, Generic, List, Mapping, Optional, Sequence, Tuple, TypeVar, Union
from urllib.parse import quote

from .requests import Timestamp, timestamp_text

T = TypeVar("T")

QueryValue = Union[str, int, date, datetime, None]


@dataclass(frozen=True)
class Answer:
    """One HTTP answer (of the attempt that ended the call)."""

    status: int
    headers: Mapping[str, str]
    content: bytes
    attempts: int
    request_id: Optional[str]

    @property
    def replayed(self) -> bool:
        return self.headers.get("idempotent-replayed", "").strip().lower() == "true"


@dataclass(frozen=True)
class Call(Generic[T]):
    """An operation to perform: method, target (path and query, already
    encoded), the body bytes (the same on every attempt) and how to read a
    successful answer. ``wait`` is how long (seconds) the server may hold
    the answer on purpose (a long poll): each attempt's timeout is the
    policy's ``request_timeout`` plus ``wait``."""

    method: str
    target: str
    decode: Callable[[Answer], T]
    body: Optional[bytes] = None
    accept: str = "application/json"
    wait: float = 0.0
    min_timeout: float = 0.0
    """The least timeout of one attempt (seconds), for a call the server
    may work on longer than a usual request (``POST /v1/audit/verify``)."""

    def attempt_timeout(self, request_timeout: float) -> float:
        """The timeout of one attempt under ``request_timeout``."""
        return max(request_timeout + max(self.wait, 0.0), self.min_timeout)


def segment(value: str, name: str) -> str:
    """Percent-encodes everything but RFC 3986's unreserved characters, for
    a path segment (``@revenue`` → ``%40revenue``)."""
    if not isinstance(value, str) or value == "":
        raise ValueError(f"{name} must be a non-empty string")
    return quote(value, safe="")


def _query_text(value: Union[str, int, date, datetime], name: str) -> str:
    if isinstance(value, bool):
        raise TypeError(f"{name} must not be a bool")
    if isinstance(value, datetime):
        return timestamp_text(value, name)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return value
    raise TypeError(f"{name}: unsupported query value {value!r}")


def target(path: str, query: Sequence[Tuple[str, QueryValue]] = ()) -> str:
    """``path`` with the query parameters that are not ``None``."""
    parts: List[str] = []
    for name, value in query:
        if value is None:
            continue
        parts.append(f"{name}={quote(_query_text(value, name), safe='')}")
    return f"{path}?{'&'.join(parts)}" if parts else path


__all__ = ["Answer", "Call", "QueryValue", "Timestamp", "segment", "target"]
