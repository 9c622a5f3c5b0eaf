"""Scenarios 1 and 2: a replay is the same entry, a conflict names what
differs. Each runs on every engine with the sync and the async client."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from typing import Any

import pytest

import tally

from .conftest import uid
from .tallyserver import TallyServer


def test_a_repeated_usage_debit_is_a_replay_of_the_same_entry(client: Any) -> None:
    record, account = uid("ur"), uid("cust")
    first = client.post_usage_debit(
        record, account, Decimal("0.0125"), "USD", meter="llm-tokens",
        quantity=Decimal("1250"), metadata={"model": "m1"},
    )  # fmt: skip
    assert (first.status, first.created, first.replayed, first.attempts) == (201, True, False, 1)
    assert first.entry.upstream_id == record and first.entry.status == "posted"
    assert first.entry.amount == Decimal("0.0125") and isinstance(first.entry.amount, Decimal)
    assert first.entry.balance_after == Decimal("-0.0125")
    assert first.entry.quantity == Decimal("1250")

    # "0.01250" is the same amount: the same request.
    again = client.post_usage_debit(
        record, account, Decimal("0.01250"), "USD", meter="llm-tokens",
        quantity=Decimal("1250"), metadata={"model": "m1"},
    )  # fmt: skip
    assert (again.status, again.created, again.replayed) == (200, False, True)
    assert again.entry.id == first.entry.id
    assert again.body == first.body  # byte for byte the first answer

    balance = client.get_balance(account)
    assert balance.debits == Decimal("0.0125")  # charged once


def test_the_same_id_with_another_amount_is_a_conflict(client: Any) -> None:
    record, account = uid("ur"), uid("cust")
    first = client.post_usage_debit(record, account, Decimal("0.0125"), "USD")
    with pytest.raises(tally.IdempotencyConflict) as caught:
        client.post_usage_debit(record, account, Decimal("5"), "USD")
    conflict = caught.value
    assert conflict.status == 409 and conflict.code == "idempotency_conflict"
    assert conflict.entry_id == first.entry.id
    assert conflict.differing_fields == ["amount"]
    assert conflict.problem["entry_id"] == first.entry.id
    assert not conflict.retryable
    assert client.get_balance(account).debits == Decimal("0.0125")  # nothing written


def test_a_conflict_is_final_and_not_retried(
    make_client: Any, server: TallyServer, api_key: str
) -> None:
    retries: list[tally.RetryEvent] = []
    client = make_client(server.base_url, api_key, on_retry=retries.append)
    record, account = uid("pay"), uid("cust")
    client.post_payment(record, account, Decimal("10"), "USD")
    with pytest.raises(tally.IdempotencyConflict) as caught:
        client.post_payment(record, account, Decimal("10"), "USD", processor="stripe")
    assert caught.value.differing_fields == ["processor"]
    assert retries == []


async def test_concurrent_deliveries_of_one_request_make_one_entry(
    server: TallyServer, api_key: str
) -> None:
    """The asyncio client, natively: ten simultaneous deliveries of one
    usage record create it once; every other one is a replay of it."""
    record, account = uid("ur"), uid("cust")
    async with tally.AsyncClient(server.base_url, api_key) as client:
        results = await asyncio.gather(
            *(client.post_usage_debit(record, account, Decimal("2.5"), "USD") for _ in range(10))
        )
        assert sum(r.created for r in results) == 1
        assert sum(r.replayed for r in results) == 9
        assert len({r.entry.id for r in results}) == 1
        page = await client.list_entries(account=account)
        assert [e.upstream_id for e in page.entries] == [record]
