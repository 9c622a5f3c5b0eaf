"""Intents through ``once()``: a costly action done once against real
servers. Each scenario runs on every engine with the sync client (its step
a function, heartbeats on a thread) and the asyncio client (its step a
coroutine, heartbeats on a task)."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from typing import Any, Callable, Iterator, List, Optional

import pytest

import tally

from .conftest import uid
from .faults import DroppingProxy
from .tallyserver import TallyServer


class Spy:
    """A step for either client: records the lease of each call, sleeps
    ``sleep`` seconds (without blocking the event loop for the asyncio
    client), then returns ``body(lease)`` or raises what it raises."""

    def __init__(self, kind: str, body: Callable[[tally.Lease], Any], sleep: float) -> None:
        self.kind = kind
        self.body = body
        self.sleep = sleep
        self.leases: List[tally.Lease] = []

    def _sync(self, lease: tally.Lease) -> Any:
        self.leases.append(lease)
        time.sleep(self.sleep)
        return self.body(lease)

    async def _async(self, lease: tally.Lease) -> Any:
        self.leases.append(lease)
        await asyncio.sleep(self.sleep)
        return self.body(lease)

    @property
    def step(self) -> Any:
        return self._sync if self.kind == "sync" else self._async

    @property
    def calls(self) -> int:
        return len(self.leases)


SpyMaker = Callable[..., Spy]


@pytest.fixture
def spy(client_kind: str) -> SpyMaker:
    def make(body: Callable[[tally.Lease], Any], sleep: float = 0.0) -> Spy:
        return Spy(client_kind, body, sleep)

    return make


@pytest.fixture
def proxies() -> Iterator[Callable[..., DroppingProxy]]:
    made: List[DroppingProxy] = []

    def make(server: TallyServer, drop: Callable[[str, str, int], bool]) -> DroppingProxy:
        proxy = DroppingProxy(server.port, drop)
        made.append(proxy)
        return proxy

    yield make
    for proxy in made:
        proxy.close()


def first(suffix: str) -> Callable[[str, str, int], bool]:
    """A proxy's choice: drop the answer to the first request whose path ends with ``suffix``."""
    seen: List[str] = []

    def drop(method: str, path: str, n: int) -> bool:
        if method == "POST" and path.endswith(suffix) and not seen:
            seen.append(path)
            return True
        return False

    return drop


def history(client: Any, intent_id: str) -> List[str]:
    intent: tally.Intent = client.get_intent(intent_id)
    return [change.type for change in intent.history or []]


# --- a step that succeeds runs once --------------------------------------------------


def test_a_step_that_succeeds_runs_once(client: Any, spy: SpyMaker) -> None:
    intent_id = uid("doc")
    params = {"document": "doc_771", "model": "m1", "temperature": Decimal("0.2")}
    summary = {"summary": "The contract renews yearly", "tokens": 1250, "cost": Decimal("0.0125")}
    step = spy(lambda lease: summary)

    first = client.once(intent_id, "llm.summarize", params, step.step)
    assert isinstance(first, tally.IntentOutcome)
    assert (first.status, first.succeeded, first.replayed) == ("succeeded", True, False)
    assert (first.attempt, first.fence, first.error, first.entries) == (1, 1, None, [])
    assert first.result == summary and isinstance(first.result["cost"], Decimal)
    lease = step.leases[0]
    assert (lease.intent_id, lease.action, lease.attempt, lease.max_attempts, lease.fence) == (
        intent_id, "llm.summarize", 1, 5, 1,
    )  # fmt: skip
    assert lease.params == params and lease.token and tally.parse_timestamp(lease.expires_at)
    assert lease.token not in repr(lease), "the token stays out of logs"

    # Called again (the job runs again next hour): the stored result, the step not run.
    again = client.once(intent_id, "llm.summarize", params, step.step)
    assert step.calls == 1
    assert (again.status, again.replayed, again.result) == ("succeeded", True, summary)
    assert again.intent.replayed and again.intent.lease is None and again.entries == []
    assert history(client, intent_id) == ["claimed", "succeeded"]

    # The same ID with other params is another request: refused, nothing run.
    with pytest.raises(tally.IdempotencyConflict) as conflict:
        client.once(intent_id, "llm.summarize", {**params, "model": "m2"}, step.step)
    assert conflict.value.intent_id == intent_id
    assert conflict.value.differing_fields == ["params.model"] and step.calls == 1


# --- a retryable error, then success at attempt 2 ------------------------------------


def test_a_retryable_error_releases_and_the_next_call_is_attempt_2(
    client: Any, spy: SpyMaker
) -> None:
    intent_id = uid("doc")

    def body(lease: tally.Lease) -> Any:
        if lease.attempt == 1:
            raise tally.RetryableStepError("429 from provider", code="model_overloaded")
        return {"summary": "done at attempt 2"}

    step = spy(body)
    with pytest.raises(tally.RetryableStepError, match="429 from provider"):
        client.once(intent_id, "llm.summarize", {"document": "doc_1"}, step.step, max_attempts=3)
    released = client.get_intent(intent_id)
    assert (released.status, released.attempt, released.max_attempts) == ("released", 1, 3)
    assert released.error == tally.IntentFailure("model_overloaded", "429 from provider")

    outcome = client.once(intent_id, "llm.summarize", {"document": "doc_1"}, step.step)
    assert (outcome.status, outcome.attempt, outcome.fence, outcome.replayed) == (
        "succeeded", 2, 2, False,
    )  # fmt: skip
    assert outcome.result == {"summary": "done at attempt 2"} and outcome.error is None
    assert [(lease.attempt, lease.fence) for lease in step.leases] == [(1, 1), (2, 2)]
    assert step.leases[0].token != step.leases[1].token
    assert history(client, intent_id) == ["claimed", "released", "claimed", "succeeded"]


def test_a_retryable_error_at_the_last_attempt_fails_for_good(client: Any, spy: SpyMaker) -> None:
    intent_id = uid("job")

    def body(lease: tally.Lease) -> Any:
        raise tally.RetryableStepError("still overloaded")

    step = spy(body)
    with pytest.raises(tally.RetryableStepError):
        client.once(intent_id, "llm.call", {}, step.step, max_attempts=1)
    outcome = client.once(intent_id, "llm.call", {}, step.step, max_attempts=1)
    assert step.calls == 1 and outcome.failed and outcome.replayed
    assert outcome.error == tally.IntentFailure("RetryableStepError", "still overloaded")


# --- a non-retryable error: failed for ever ------------------------------------------


def test_a_non_retryable_error_fails_for_good(client: Any, spy: SpyMaker) -> None:
    intent_id = uid("inv")

    def body(lease: tally.Lease) -> Any:
        raise ValueError("card declined")

    step = spy(body)
    with pytest.raises(ValueError, match="card declined"):
        client.once(intent_id, "invoice.charge", {"amount": "49.00"}, step.step)
    failed = client.get_intent(intent_id)
    assert (failed.status, failed.attempt) == ("failed", 1)

    outcome = client.once(intent_id, "invoice.charge", {"amount": "49.00"}, step.step)
    assert step.calls == 1
    assert (outcome.status, outcome.failed, outcome.replayed, outcome.result) == (
        "failed", True, True, None,
    )  # fmt: skip
    assert outcome.error == tally.IntentFailure("ValueError", "card declined")
    assert history(client, intent_id) == ["claimed", "failed"]
    logged = client.list_entries(kind="intent_failed", upstream_id=intent_id).entries
    assert [(e.kind, e.upstream_id, e.amount, e.account) for e in logged] == [
        ("intent_failed", intent_id, Decimal("0"), ""),
    ]

    # A StepError names its own code.
    other = uid("inv")

    def declined(lease: tally.Lease) -> Any:
        raise tally.StepError("insufficient funds", code="card_declined")

    with pytest.raises(tally.StepError):
        client.once(other, "invoice.charge", {}, spy(declined).step)
    assert client.get_intent(other).error == tally.IntentFailure(
        "card_declined", "insufficient funds"
    )


# --- a step that outlives its lease -----------------------------------------------------


def test_heartbeats_keep_a_step_that_outlives_its_lease(
    make_client: Callable[..., Any],
    server: TallyServer,
    api_key: str,
    spy: SpyMaker,
    proxies: Callable[..., DroppingProxy],
) -> None:
    """lease_seconds=2 and a step of 3.5 s: the heartbeats (every 2/3 s)
    keep the lease, so a concurrent claim at 2.6 s (the first lease would
    have run out at 2 s) gets intent_in_progress, and the complete counts."""
    wire = proxies(server, lambda method, path, n: False)  # records the heartbeats
    client = make_client(wire.base_url, api_key)
    intent_id = uid("job")
    step = spy(lambda lease: {"rendered": True}, sleep=3.5)
    concurrent: List[Any] = []

    def claim_meanwhile() -> None:
        with tally.Client(server.base_url, api_key) as other:
            try:
                concurrent.append(other.claim_intent(intent_id, "video.render", {"id": 7}))
            except tally.IntentInProgress as busy:
                concurrent.append(busy)

    timer = threading.Timer(2.6, claim_meanwhile)
    timer.start()
    try:
        started = time.monotonic()
        outcome = client.once(intent_id, "video.render", {"id": 7}, step.step, lease_seconds=2)
        elapsed = time.monotonic() - started
    finally:
        timer.join()

    assert elapsed >= 3.5
    assert (outcome.status, outcome.attempt, outcome.fence) == ("succeeded", 1, 1)
    assert len(concurrent) == 1 and isinstance(concurrent[0], tally.IntentInProgress)
    busy = concurrent[0]
    assert (busy.status, busy.code, busy.intent_id, busy.fence) == (
        409, "intent_in_progress", intent_id, 1,
    )  # fmt: skip
    assert busy.retry_after is not None and 1.0 <= busy.retry_after <= 2.0
    beats = [x for x in wire.exchanges if x.path.endswith("/heartbeat")]
    assert 4 <= len(beats) <= 6 and all(x.status == 200 for x in beats), beats
    assert all(x.at < wire.exchanges[-1].at for x in beats), "no heartbeat after the complete"
    assert history(client, intent_id) == ["claimed", "succeeded"]


def test_without_heartbeats_an_outlived_lease_is_lost(
    client: Any, server: TallyServer, api_key: str, spy: SpyMaker
) -> None:
    """The other side: with heartbeat=False a step longer than its lease
    loses it to a later claim, and its complete raises LeaseLost."""
    intent_id = uid("job")
    step = spy(lambda lease: {"by": "first"}, sleep=1.8)
    taken: List[tally.Intent] = []

    def claim_meanwhile() -> None:
        with tally.Client(server.base_url, api_key) as other:
            taken.append(other.claim_intent(intent_id, "email.send", {}, lease_seconds=30))

    timer = threading.Timer(1.3, claim_meanwhile)
    timer.start()
    try:
        with pytest.raises(tally.LeaseLost) as lost:
            client.once(intent_id, "email.send", {}, step.step, lease_seconds=1, heartbeat=False)
    finally:
        timer.join()
    assert lost.value.intent_id == intent_id and lost.value.status == 409
    second = taken[0]
    assert (second.status, second.attempt, second.fence) == ("claimed", 2, 2)
    assert second.lease is not None
    client.complete_intent(intent_id, second.lease.token, {"by": "second"})
    outcome = client.once(intent_id, "email.send", {}, step.step)
    assert outcome.replayed and outcome.result == {"by": "second"} and step.calls == 1


# --- lost answers --------------------------------------------------------------------


def test_a_lost_complete_answer_is_retried_into_the_stored_outcome(
    make_client: Callable[..., Any],
    server: TallyServer,
    api_key: str,
    spy: SpyMaker,
    proxies: Callable[..., DroppingProxy],
) -> None:
    proxy = proxies(server, first("/complete"))
    events: List[tally.RetryEvent] = []
    client = make_client(proxy.base_url, api_key, on_retry=events.append)
    intent_id, acct, charge = uid("inv"), uid("cust"), uid("ch")
    step = spy(
        lambda lease: tally.StepResult(
            {"charge_id": charge},
            entries=[tally.Payment(charge, acct, Decimal("49.00"), "USD", processor="p.example")],
        )
    )

    outcome = client.once(intent_id, "invoice.charge", {"customer": acct}, step.step)

    completes = [x for x in proxy.exchanges if x.path.endswith("/complete")]
    assert [(x.status, x.dropped) for x in completes] == [(200, True), (200, False)]
    assert len(events) == 1 and isinstance(events[0].error, tally.TransportError)
    assert outcome.status == "succeeded" and outcome.result == {"charge_id": charge}
    assert not outcome.replayed, "the step ran in this call"
    assert outcome.intent.replayed, "the complete's retry was answered as a replay"
    assert [(r.status, r.ok) for r in outcome.entries] == [(201, True)], "shown as the first time"
    assert step.calls == 1
    assert client.get_balance(acct).posted == Decimal("49.00")
    assert [e.upstream_id for e in client.list_entries(account=acct).entries] == [charge]


def test_a_lost_fail_answer_is_retried_into_the_stored_failure(
    make_client: Callable[..., Any],
    server: TallyServer,
    api_key: str,
    spy: SpyMaker,
    proxies: Callable[..., DroppingProxy],
) -> None:
    proxy = proxies(server, first("/fail"))
    client = make_client(proxy.base_url, api_key)
    intent_id = uid("inv")

    def body(lease: tally.Lease) -> Any:
        raise LookupError("no such card")

    with pytest.raises(LookupError):
        client.once(intent_id, "invoice.charge", {}, spy(body).step)
    fails = [x for x in proxy.exchanges if x.path.endswith("/fail")]
    assert [(x.status, x.dropped) for x in fails] == [(200, True), (200, False)]
    failed = client.get_intent(intent_id)
    assert failed.status == "failed"
    assert failed.error == tally.IntentFailure("LookupError", "no such card")
    assert history(client, intent_id) == ["claimed", "failed"]


def test_a_lost_claim_answer_waits_for_its_own_lease_then_attempt_2(
    make_client: Callable[..., Any],
    server: TallyServer,
    api_key: str,
    spy: SpyMaker,
    proxies: Callable[..., DroppingProxy],
) -> None:
    """The claim's answer (and its token) is lost: its retry is answered
    intent_in_progress, which the policy does not retry; once() waits the
    Retry-After within its budget, and the next claim is attempt 2."""
    proxy = proxies(server, first("/v1/intents"))
    client = make_client(proxy.base_url, api_key)
    intent_id = uid("job")
    step = spy(lambda lease: "sent")

    outcome = client.once(intent_id, "email.send", {}, step.step, lease_seconds=1)

    claims = [(x.status, x.dropped) for x in proxy.exchanges if x.path == "/v1/intents"]
    assert claims == [(201, True), (409, False), (201, False)]
    assert (outcome.status, outcome.result, outcome.attempt, outcome.fence) == (
        "succeeded", "sent", 2, 2,
    )  # fmt: skip
    assert [lease.attempt for lease in step.leases] == [2]
    assert history(client, intent_id) == ["claimed", "claimed", "succeeded"]


# --- entries committed with the outcome, once -----------------------------------------


def test_entries_returned_by_the_step_are_committed_once(client: Any, spy: SpyMaker) -> None:
    intent_id, acct, prepaid = uid("doc"), uid("cust"), uid("cust")
    client.put_account(prepaid, "USD", overdraft="forbid")
    pay, usage, refused = uid("pay"), uid("ur"), uid("ur")
    step = spy(
        lambda lease: tally.StepResult(
            {"tokens": 1250},
            entries=[
                tally.Payment(pay, acct, Decimal("10"), "USD"),
                tally.UsageDebit(
                    usage,
                    acct,
                    Decimal("0.0125"),
                    "USD",
                    meter="llm-tokens",
                    quantity=Decimal("1250"),
                ),  # fmt: skip
                tally.UsageDebit(refused, prepaid, Decimal("1"), "USD"),
            ],
        )
    )

    outcome = client.once(intent_id, "llm.summarize", {"document": "doc_9"}, step.step)
    assert outcome.succeeded and outcome.result == {"tokens": 1250}
    assert [r.status for r in outcome.entries] == [201, 201, 422]
    posted = [r.entry for r in outcome.entries[:2]]
    assert [(e.kind, e.upstream_id) for e in posted if e] == [
        ("payment", pay), ("usage_debit", usage),
    ]  # fmt: skip
    refusal = outcome.entries[2]
    assert not refusal.ok and isinstance(refusal.error, tally.InsufficientFunds)
    assert refusal.entry is not None and refusal.entry.status == "rejected"

    # Again: the stored outcome, and no entry twice.
    again = client.once(intent_id, "llm.summarize", {"document": "doc_9"}, step.step)
    assert again.replayed and again.entries == [] and step.calls == 1
    assert client.get_balance(acct).posted == Decimal("9.9875")
    assert [e.upstream_id for e in client.list_entries(account=acct).entries] == [pay, usage]
    assert [e.upstream_id for e in client.list_entries(upstream_id=refused).entries] == [refused]
    # The outcome and its entries are one group in the log: the outcome first.
    outcome_entry = client.list_entries(kind="intent_succeeded", upstream_id=intent_id).entries
    assert len(outcome_entry) == 1
    seqs = [r.entry.seq for r in outcome.entries if r.entry]
    assert seqs == [outcome_entry[0].seq + i for i in (1, 2, 3)]


# --- waiting for another claim's lease --------------------------------------------------


def test_once_waits_for_another_claims_outcome(
    client: Any, server: TallyServer, api_key: str, spy: SpyMaker
) -> None:
    intent_id = uid("inv")
    with tally.Client(server.base_url, api_key) as worker:
        held = worker.claim_intent(intent_id, "invoice.charge", {}, lease_seconds=2)
        assert held.lease is not None
        token = held.lease.token

        def finish() -> None:
            worker.complete_intent(intent_id, token, {"charge_id": "ch_other"})

        timer = threading.Timer(0.5, finish)
        timer.start()
        try:
            step = spy(lambda lease: {"charge_id": "ch_mine"})
            started = time.monotonic()
            outcome = client.once(intent_id, "invoice.charge", {}, step.step)
            elapsed = time.monotonic() - started
        finally:
            timer.join()
    assert outcome.replayed and outcome.result == {"charge_id": "ch_other"} and step.calls == 0
    assert 1.0 <= elapsed < 5.0, elapsed  # it slept the Retry-After, then claimed again


def test_once_gives_up_when_the_lease_outlasts_its_budget(client: Any, spy: SpyMaker) -> None:
    intent_id = uid("inv")
    held = client.claim_intent(intent_id, "invoice.charge", {}, lease_seconds=30)
    step = spy(lambda lease: None)
    started = time.monotonic()
    with pytest.raises(tally.IntentInProgress) as busy:
        client.once(intent_id, "invoice.charge", {}, step.step, wait_budget_seconds=5)
    assert time.monotonic() - started < 2.0, "no sleep that would end past the budget"
    assert busy.value.fence == held.fence == 1 and step.calls == 0
    assert busy.value.retry_after is not None and busy.value.retry_after > 5


# --- many callers at once ----------------------------------------------------------------


def test_concurrent_once_calls_run_the_step_once_threads(server: TallyServer, api_key: str) -> None:
    """Six threads share one sync client: one runs the step, the others
    wait out its lease (Retry-After) and get its outcome."""
    intent_id = uid("job")
    ran: List[int] = []
    lock = threading.Lock()

    def step(lease: tally.Lease) -> Any:
        with lock:
            ran.append(lease.attempt)
        time.sleep(0.3)
        return {"done": True}

    with tally.Client(server.base_url, api_key) as client, ThreadPoolExecutor(6) as pool:
        outcomes = list(
            pool.map(
                lambda _: client.once(intent_id, "job.run", {}, step, lease_seconds=1), range(6)
            )
        )
    assert ran == [1]
    assert sum(not o.replayed for o in outcomes) == 1
    assert all(o.succeeded and o.result == {"done": True} for o in outcomes)


async def test_concurrent_once_calls_run_the_step_once_asyncio(
    server: TallyServer, api_key: str
) -> None:
    intent_id = uid("job")
    ran: List[int] = []

    async def step(lease: tally.Lease) -> Any:
        ran.append(lease.attempt)
        await asyncio.sleep(0.3)
        return {"done": True}

    async with tally.AsyncClient(server.base_url, api_key) as client:
        outcomes = await asyncio.gather(
            *(client.once(intent_id, "job.run", {}, step, lease_seconds=1) for _ in range(6))
        )
        assert (await client.get_intent(intent_id)).status == "succeeded"
    assert ran == [1]
    assert sum(not o.replayed for o in outcomes) == 1
    assert all(o.succeeded and o.result == {"done": True} for o in outcomes)


async def test_a_cancelled_step_sends_nothing_and_stops_its_heartbeats(
    server: TallyServer, api_key: str
) -> None:
    intent_id = uid("job")
    started = asyncio.Event()

    async def step(lease: tally.Lease) -> Any:
        started.set()
        await asyncio.sleep(30)

    async with tally.AsyncClient(server.base_url, api_key) as client:
        task = asyncio.ensure_future(client.once(intent_id, "job.run", {}, step, lease_seconds=3))
        await started.wait()
        await asyncio.sleep(1.2)  # one heartbeat has gone out
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        held = await client.get_intent(intent_id)
        assert held.status == "claimed" and held.error is None, "no fail was sent"
        assert [c.type for c in held.history or []] == ["claimed"]
    pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    assert pending == [], "the heartbeat task ended with the step"


def wait_released(client: tally.Client, intent_id: str, timeout: float) -> Optional[tally.Intent]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        intent = client.get_intent(intent_id)
        if intent.status != "claimed":
            return intent
        time.sleep(0.1)
    return None


def test_an_interrupt_of_a_sync_step_sends_nothing(server: TallyServer, api_key: str) -> None:
    intent_id = uid("job")

    def step(lease: tally.Lease) -> Any:
        raise KeyboardInterrupt

    with tally.Client(server.base_url, api_key) as client:
        with pytest.raises(KeyboardInterrupt):
            client.once(intent_id, "job.run", {}, step, lease_seconds=1)
        assert client.get_intent(intent_id).status == "claimed", "no fail was sent"
        released = wait_released(client, intent_id, timeout=5.0)
        assert released is not None and released.status == "released"
        beating = [t for t in threading.enumerate() if t.name == "tally-heartbeat"]
        assert beating == [], "the heartbeat thread ended with the step"
