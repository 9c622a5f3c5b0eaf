"""Scenarios 4–6: what the client does when the network or the server
fails. Each runs with the sync and the async client (6 also needs no
database, so it runs once per client)."""

from __future__ import annotations

import json
import time
from decimal import Decimal
from typing import Any, Callable, Iterator, List, Set

import pytest

import tally

from .conftest import new_tenant, uid
from .faults import DroppingProxy, StubServer
from .tallyserver import TallyServer


@pytest.fixture
def stub() -> Iterator[Callable[..., StubServer]]:
    made: List[StubServer] = []

    def make(**kwargs: Any) -> StubServer:
        s = StubServer(**kwargs)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


# --- 4. a 429 with Retry-After is honoured ---------------------------------------


def test_a_429_is_retried_after_its_retry_after(
    make_client: Callable[..., Any], start_server: Callable[..., TallyServer]
) -> None:
    limited = start_server("--rate-limit-per-second", "1", "--rate-limit-burst", "1")
    # A proxy that drops nothing: it records when each attempt reached the server.
    wire = DroppingProxy(limited.port, drop=lambda method, path, n: False)
    try:
        events: List[tally.RetryEvent] = []
        client = make_client(wire.base_url, limited.create_key(new_tenant()), on_retry=events.append)
        acct = uid("cust")
        first = client.post_payment(uid("pay"), acct, Decimal("1"), "USD")  # the only token
        assert first.attempts == 1
        started = time.monotonic()
        record = uid("ur")
        second = client.post_usage_debit(record, acct, Decimal("0.5"), "USD")
        elapsed = time.monotonic() - started

        assert second.created and not second.replayed and second.attempts >= 2
        limits = [e for e in events if isinstance(e.error, tally.RateLimited)]
        assert limits, "the server should have answered 429 at least once"
        assert all(e.error.status == 429 and e.error.code == "rate_limited" for e in limits)
        retry_after = limits[0].error.retry_after
        assert retry_after is not None and retry_after >= 1.0
        assert all(e.delay >= (e.error.retry_after or 0) for e in limits)  # the floor
        assert elapsed >= retry_after  # it waited, then went through

        # On the wire: each attempt after a 429 came at least Retry-After later.
        debits = [x for x in wire.exchanges if x.path == "/v1/usage-debits"]
        assert [x.status for x in debits] == [429] * (len(debits) - 1) + [201]
        gaps = [b.at - a.at for a, b in zip(debits, debits[1:])]
        assert gaps and all(gap >= retry_after - 0.01 for gap in gaps), gaps
        assert client.get_balance(acct).posted == Decimal("0.5")
    finally:
        wire.close()


def test_a_retry_after_beyond_the_budget_gives_up_at_once(
    make_client: Callable[..., Any], start_server: Callable[..., TallyServer]
) -> None:
    limited = start_server("--rate-limit-per-second", "0.2", "--rate-limit-burst", "1")
    client = make_client(
        limited.base_url,
        limited.create_key(new_tenant()),
        policy=tally.RetryPolicy(total_budget=3.0),
    )
    client.get_audit_head()  # takes the only token; the next comes in 5 s
    started = time.monotonic()
    with pytest.raises(tally.RetriesExhausted) as caught:
        client.get_audit_head()
    # Waiting the 5 s the server asks for would pass the 3 s budget: no retry starts.
    assert caught.value.attempts == 1 and isinstance(caught.value.last, tally.RateLimited)
    assert caught.value.retry_after == 5.0
    assert (caught.value.status, caught.value.code) == (429, "rate_limited")
    assert time.monotonic() - started < 1.0


# --- 5. the answer is lost after the server committed ---------------------------


def test_a_lost_answer_is_retried_and_replayed(
    make_client: Callable[..., Any], server: TallyServer, api_key: str
) -> None:
    proxy = DroppingProxy(server.port, drop=lambda method, path, n: method == "POST" and n == 1)
    try:
        events: List[tally.RetryEvent] = []
        client = make_client(proxy.base_url, api_key, on_retry=events.append)
        record, acct = uid("ur"), uid("cust")
        posted = client.post_usage_debit(record, acct, Decimal("0.0125"), "USD", meter="llm")

        assert len(proxy.dropped) == 1
        lost = proxy.dropped[0]
        assert lost.status == 201  # the server committed, the client never heard
        assert posted.attempts == 2 and posted.replayed and posted.status == 200
        assert posted.entry.id == json.loads(lost.body)["id"]
        assert posted.body == lost.body  # the replay is the very body that was lost
        assert len(events) == 1 and isinstance(events[0].error, tally.TransportError)

        listed = client.list_entries(account=acct)
        assert [(e.upstream_id, e.id) for e in listed.entries] == [(record, posted.entry.id)]
        assert client.get_balance(acct).debits == Decimal("0.0125")  # charged once
    finally:
        proxy.close()


def test_a_lost_batch_answer_is_replayed_item_by_item(
    make_client: Callable[..., Any], server: TallyServer, api_key: str
) -> None:
    proxy = DroppingProxy(server.port, drop=lambda method, path, n: path == "/v1/batch" and n == 1)
    try:
        client = make_client(proxy.base_url, api_key)
        acct = uid("cust")
        ops = [tally.Payment(uid("pay"), acct, Decimal("3"), "USD")] + [
            tally.UsageDebit(uid("ur"), acct, Decimal("1"), "USD") for _ in range(2)
        ]
        results = client.post_batch(ops)
        assert results.attempts == 2 and all(r.replayed and r.status == 200 for r in results)
        assert len(client.list_entries(account=acct).entries) == 3
        assert client.get_balance(acct).posted == Decimal("1")
    finally:
        proxy.close()


def test_every_mutation_whose_answer_is_lost_is_replayed(
    make_client: Callable[..., Any], server: TallyServer, api_key: str
) -> None:
    """The first answer to each mutating endpoint is dropped after commit:
    every operation's retry gets the original entry back, nothing twice."""
    seen: Set[str] = set()

    def first_of_each(method: str, path: str, n: int) -> bool:
        if method not in ("POST", "PUT") or path in seen:
            return False
        seen.add(path)
        return True

    proxy = DroppingProxy(server.port, drop=first_of_each)
    try:
        client = make_client(proxy.base_url, api_key)
        acct, pay, hold1, hold2 = uid("cust"), uid("pay"), uid("job"), uid("job")
        account = client.put_account(acct, "USD", overdraft="forbid")
        assert account.settings_version == 1  # the retried PUT wrote nothing more
        posted = [
            client.post_payment(pay, acct, Decimal("10"), "USD"),
            client.post_usage_debit(uid("ur"), acct, Decimal("1"), "USD"),
            client.post_hold(hold1, acct, Decimal("2"), "USD", ttl_seconds=300),
            client.post_capture(hold1, uid("cap"), Decimal("1.5")),
            client.post_hold(hold2, acct, Decimal("1"), "USD", ttl_seconds=300),
            client.post_release(hold2, uid("rel")),
            client.post_refund(uid("re"), pay, Decimal("1")),
            client.post_adjustment(uid("adj"), acct, Decimal("0.25"), "credit", "goodwill"),
        ]
        posted.append(client.post_reversal(uid("rev"), posted[1].entry.id, "twice"))
        retried = posted[:4] + posted[5:]  # the second hold's path was seen already
        assert not posted[4].replayed and posted[4].attempts == 1
        for p in retried:
            assert p.replayed and p.status == 200 and p.attempts == 2, p.entry.kind
        # Every lost answer was a commit (201), and its replay is that very body.
        lost = [x for x in proxy.dropped if x.method == "POST"]
        assert len(lost) == len(retried) and all(x.status == 201 for x in lost)
        assert sorted(x.body for x in lost) == sorted(p.body for p in retried)
        entries = list(client.iter_entries(account=acct))
        assert len(entries) == len({e.upstream_id for e in entries}) == 1 + len(posted)
        # 10 - 1 - 1.5 (capture) - 1 (refund) + 0.25 + 1 (reversed debit)
        assert client.get_balance(acct).posted == Decimal("7.75")
    finally:
        proxy.close()


# --- 6. the budget is spent: a terminal error ------------------------------------


def test_503_every_time_gives_up_after_max_attempts(
    make_client: Callable[..., Any], stub: Callable[..., StubServer]
) -> None:
    always = stub(status=503, headers={"Retry-After": "0"})
    client = make_client(always.base_url, "k", policy=tally.RetryPolicy(max_attempts=3))
    with pytest.raises(tally.RetriesExhausted) as caught:
        client.post_usage_debit(uid("ur"), uid("cust"), Decimal("1"), "USD")
    error = caught.value
    assert error.attempts == 3 and len(always.requests) == 3
    assert isinstance(error.last, tally.Unavailable) and error.__cause__ is error.last
    assert (error.status, error.code) == (503, "unavailable")
    assert "gave up after 3 attempt(s)" in str(error)


def test_the_time_budget_stops_retries(
    make_client: Callable[..., Any], stub: Callable[..., StubServer]
) -> None:
    slow = stub(status=503, headers={"Retry-After": "1"})
    client = make_client(
        slow.base_url, "k", policy=tally.RetryPolicy(max_attempts=6, total_budget=2.5)
    )
    started = time.monotonic()
    with pytest.raises(tally.RetriesExhausted) as caught:
        client.get_balance("cust")
    elapsed = time.monotonic() - started
    # Attempts at 0 s, 1 s, 2 s; a fourth would start after 3 s > 2.5 s.
    assert caught.value.attempts == 3 and len(slow.requests) == 3
    assert 2.0 <= elapsed < 2.5
    gaps = [b - a for a, b in zip(slow.requests, slow.requests[1:])]
    assert all(gap >= 0.99 for gap in gaps)  # Retry-After: 1 honoured each time


def test_an_attempt_that_never_answers_times_out(
    make_client: Callable[..., Any], stub: Callable[..., StubServer]
) -> None:
    silent = stub(hang=True)
    client = make_client(
        silent.base_url,
        policy=tally.RetryPolicy(max_attempts=2, request_timeout=0.3, base_delay=0.01),
    )
    started = time.monotonic()
    with pytest.raises(tally.RetriesExhausted) as caught:
        client.get_healthz()
    last = caught.value.last
    assert isinstance(last, tally.TransportError) and last.timeout and last.status is None
    assert caught.value.attempts == 2 and len(silent.requests) == 2
    assert 0.6 <= time.monotonic() - started < 2.0


def test_a_refused_connection_is_retried_then_given_up(make_client: Callable[..., Any]) -> None:
    from .tallyserver import free_port

    client = make_client(
        f"http://127.0.0.1:{free_port()}",
        policy=tally.RetryPolicy(max_attempts=3, base_delay=0.01),
    )
    with pytest.raises(tally.RetriesExhausted) as caught:
        client.get_healthz()
    assert caught.value.attempts == 3
    assert isinstance(caught.value.last, tally.TransportError) and not caught.value.last.timeout


def test_a_final_answer_is_not_retried(
    make_client: Callable[..., Any], stub: Callable[..., StubServer]
) -> None:
    conflict = stub(status=409, headers={}, code="idempotency_conflict")
    client = make_client(conflict.base_url, "k")
    with pytest.raises(tally.IdempotencyConflict):
        client.post_payment(uid("pay"), uid("cust"), Decimal("1"), "USD")
    assert len(conflict.requests) == 1


def test_a_claim_in_progress_is_not_retried_by_the_policy(
    make_client: Callable[..., Any], stub: Callable[..., StubServer]
) -> None:
    """409 intent_in_progress is final for the retry policy: one request,
    the error with its Retry-After; only once() waits, within its budget."""
    busy = stub(status=409, headers={"Retry-After": "1"}, code="intent_in_progress")
    events: List[tally.RetryEvent] = []
    client = make_client(busy.base_url, "k", on_retry=events.append)
    with pytest.raises(tally.IntentInProgress) as caught:
        client.claim_intent(uid("inv"), "invoice.charge", {})
    assert caught.value.retry_after == 1.0 and not caught.value.retryable
    assert len(busy.requests) == 1 and events == []

    def step(lease: tally.Lease) -> Any:
        raise AssertionError("the step never runs while another claim holds the lease")

    started = time.monotonic()
    with pytest.raises(tally.IntentInProgress):
        client.once(uid("inv"), "invoice.charge", {}, step, wait_budget_seconds=0.5)
    assert len(busy.requests) == 2, "1 s to wait would pass the 0.5 s budget: no second claim"
    with pytest.raises(tally.IntentInProgress):
        client.once(uid("inv"), "invoice.charge", {}, step, wait_budget_seconds=1.5)
    assert len(busy.requests) == 4, "a claim, 1 s, a claim; 1 s more would pass 1.5 s"
    gap = busy.requests[3] - busy.requests[2]
    assert 0.99 <= gap < 1.5, gap
    assert time.monotonic() - started < 2.5
