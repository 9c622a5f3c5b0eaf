"""The backoff schedule and the classification, without a server: the
same cases as client/src/retry.rs."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from tally.retry import RetryPolicy, is_retryable_status, jitter, parse_retry_after

POLICY = RetryPolicy(
    max_attempts=10, base_delay=0.1, max_delay=2.0, total_budget=30.0, request_timeout=1.0
)


def test_defaults_are_the_rust_clients() -> None:
    p = RetryPolicy()
    assert (p.max_attempts, p.base_delay, p.max_delay, p.total_budget, p.request_timeout) == (
        8,
        0.1,
        5.0,
        30.0,
        10.0,
    )


def test_the_cap_doubles_then_stops_at_max_delay() -> None:
    caps = [round(POLICY.delay(a, 0.9999999), 4) for a in range(1, 8)]
    assert caps == [0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0]
    assert POLICY.delay(1000, 1.0) == 2.0  # no overflow for huge attempt numbers
    assert [POLICY.cap(a) for a in (1, 2, 3, 5, 6, 40)] == [0.1, 0.2, 0.4, 1.6, 2.0, 2.0]


def test_full_jitter_spans_zero_to_the_cap() -> None:
    assert POLICY.delay(3, 0.0) == 0.0
    assert POLICY.delay(3, 0.5) == pytest.approx(0.2)
    assert POLICY.delay(3, 1.7) == pytest.approx(0.4)  # clamped to [0, 1]
    assert POLICY.delay(3, -1.0) == 0.0


def test_jitter_is_uniform_over_zero_to_one() -> None:
    samples = [jitter() for _ in range(2000)]
    assert all(0.0 <= s < 1.0 for s in samples)
    assert any(s < 0.1 for s in samples) and any(s > 0.9 for s in samples)
    assert 0.4 < sum(samples) / len(samples) < 0.6


def test_real_delays_stay_within_the_cap() -> None:
    for attempt in range(1, 9):
        delays = [POLICY.delay(attempt, jitter()) for _ in range(300)]
        assert all(0.0 <= d < POLICY.cap(attempt) for d in delays)
        assert max(delays) > POLICY.cap(attempt) * 0.8  # the whole range is used


def test_retry_after_is_a_floor() -> None:
    assert POLICY.delay(1, 0.1, retry_after=1.0) == 1.0
    assert POLICY.delay(6, 1.0, retry_after=0.01) == 2.0  # a longer backoff wins
    assert POLICY.delay(2, 0.0, retry_after=0.0) == 0.0


def test_only_429_and_5xx_are_retried() -> None:
    for status in (429, 500, 502, 503, 504, 599):
        assert is_retryable_status(status), status
    for status in (200, 201, 400, 401, 403, 404, 405, 409, 413, 415, 422):
        assert not is_retryable_status(status), status


def test_retry_after_header_forms() -> None:
    assert parse_retry_after("1") == 1.0
    assert parse_retry_after(" 0 ") == 0.0
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc)
    later = (now + timedelta(seconds=3)).strftime("%a, %d %b %Y %H:%M:%S GMT")
    assert parse_retry_after(later, now=now) == pytest.approx(3.0)
    earlier = (now - timedelta(seconds=3)).strftime("%a, %d %b %Y %H:%M:%S GMT")
    assert parse_retry_after(earlier, now=now) == 0.0


def test_bad_policies_are_refused() -> None:
    with pytest.raises(ValueError):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ValueError):
        RetryPolicy(request_timeout=0)
    with pytest.raises(ValueError):
        RetryPolicy(base_delay=-1)
