"""Scenario 3: every operation of the API once, on a tenant of its own,
asserting the fields that matter. Runs with both clients on every engine."""

from __future__ import annotations

import re
import threading
import time
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Any, List, Set, Tuple

import pytest

import tally

from .conftest import uid
from .tallyserver import TallyServer


def wait_for_usage(client: Any, account: str, timeout: float = 10.0) -> tally.Usage:
    """Usage summaries are an asynchronous projection: wait until complete."""
    deadline = time.monotonic() + timeout
    while True:
        usage: tally.Usage = client.get_usage(account)
        if usage.complete or time.monotonic() > deadline:
            return usage
        time.sleep(0.1)


@pytest.fixture
def operations_called(monkeypatch: pytest.MonkeyPatch) -> Set[Tuple[str, str]]:
    """Every operation (method, path template) either client ran."""
    called: Set[Tuple[str, str]] = set()
    patterns = [
        (method, path, re.compile("^" + re.sub(r"\{[^}]+\}", "[^/]+", path) + "$"))
        for method, path in tally.OPERATIONS
    ]

    def record(call: Any) -> None:
        path = call.target.split("?", 1)[0]
        for method, template, pattern in patterns:
            if method == call.method and pattern.match(path):
                called.add((method, template))

    sync_run, async_run = tally.Client.run, tally.AsyncClient.run

    def run(self: tally.Client, call: Any) -> Any:
        record(call)
        return sync_run(self, call)

    async def arun(self: tally.AsyncClient, call: Any) -> Any:
        record(call)
        return await async_run(self, call)

    monkeypatch.setattr(tally.Client, "run", run)
    monkeypatch.setattr(tally.AsyncClient, "run", arun)
    return called


def test_every_operation(
    client: Any, engine: str, operations_called: Set[Tuple[str, str]]
) -> None:
    started = datetime.now(timezone.utc) - timedelta(seconds=1)
    acct = uid("cust")

    # PUT/GET /v1/accounts/{account}: a prepaid account that may not go below zero.
    account = client.put_account(acct, "USD", overdraft="forbid", metadata={"plan": "pro"})
    assert (account.account, account.unit, account.overdraft) == (acct, "USD", "forbid")
    assert account.settings_version == 1 and account.settings_entry_id is not None
    assert account.metadata == {"plan": "pro"} and account.balance.posted == Decimal("0")
    assert client.put_account(acct, "USD", overdraft="forbid", metadata={"plan": "pro"}) == account
    limited = client.put_account(acct, "USD", overdraft=tally.OverdraftLimit(Decimal("0.00")))
    assert limited.overdraft == tally.OverdraftLimit(Decimal("0")) and limited.settings_version == 2
    account = client.put_account(acct, "USD", overdraft="forbid", metadata={"plan": "pro"})
    assert account.settings_version == 3
    assert client.get_account(acct) == account

    # POST /v1/payments
    pay_id = uid("pay")
    payment = client.post_payment(pay_id, acct, Decimal("10"), "USD", processor="stripe")
    assert payment.created and payment.entry.kind == "payment"
    assert payment.entry.processor == "stripe" and payment.entry.balance_after == Decimal("10")
    assert payment.entry.credit_account == acct

    # POST /v1/usage-debits
    debit = client.post_usage_debit(
        uid("ur"), acct, Decimal("1.25"), "USD", meter="llm-tokens", quantity=Decimal("1250")
    )
    assert debit.entry.kind == "usage_debit" and debit.entry.balance_after == Decimal("8.75")
    assert debit.entry.debit_account == acct and debit.entry.credit_account == "@revenue"

    # POST /v1/holds, GET /v1/holds/{hold_id}, GET balance with `held`
    hold_id = uid("job")
    hold = client.post_hold(hold_id, acct, Decimal("5"), "USD", ttl_seconds=300)
    assert hold.entry.kind == "hold" and hold.entry.upstream_id == hold_id
    assert hold.entry.ttl_seconds == 300 and hold.entry.expires_at is not None
    state = client.get_hold(hold_id)
    assert (state.status, state.amount, state.account, state.entry_id) == (
        "open", Decimal("5"), acct, hold.entry.id,
    )  # fmt: skip
    balance = client.get_balance(acct)
    assert (balance.posted, balance.held, balance.available) == (
        Decimal("8.75"), Decimal("5"), Decimal("3.75"),
    )  # fmt: skip

    # POST /v1/holds/{hold_id}/capture: 3.20 posted, the rest released
    capture = client.post_capture(hold_id, uid("cap"), Decimal("3.20"))
    assert capture.entry.hold_id == hold_id
    assert capture.entry.kind == "hold_capture" and capture.entry.balance_after == Decimal("5.55")
    state = client.get_hold(hold_id)
    assert state.status == "captured" and state.closed_by == capture.entry.id

    # POST /v1/holds/{hold_id}/release
    hold2 = uid("job")
    client.post_hold(hold2, acct, Decimal("1"), "USD", ttl_seconds=60)
    release = client.post_release(hold2, uid("rel"))
    assert release.entry.kind == "hold_release"
    assert client.get_hold(hold2).status == "released"
    with pytest.raises(tally.HoldNotOpen) as not_open:
        client.post_capture(hold2, uid("cap"), Decimal("1"))
    assert not_open.value.entry is not None and not_open.value.entry.status == "rejected"

    # POST /v1/refunds
    refund = client.post_refund(uid("re"), pay_id, Decimal("2"), reason="goodwill")
    assert refund.entry.kind == "refund" and refund.entry.payment_id == pay_id
    assert refund.entry.balance_after == Decimal("3.55")

    # POST /v1/reversals, and GET /v1/entries/{id} shows `reversed_by`
    reversal = client.post_reversal(uid("rev"), debit.entry.id, "recorded twice upstream")
    assert reversal.entry.kind == "reversal" and reversal.entry.entry_id == debit.entry.id
    assert reversal.entry.balance_after == Decimal("4.80")
    reversed_debit = client.get_entry(debit.entry.id)
    assert reversed_debit.reversed_by == reversal.entry.id
    assert reversed_debit.hash == debit.entry.hash  # the entry itself never changes

    # POST /v1/adjustments (admin)
    adjustment = client.post_adjustment(uid("adj"), acct, Decimal("1"), "credit", "support credit")
    assert adjustment.entry.kind == "adjustment" and adjustment.entry.direction == "credit"
    assert adjustment.entry.balance_after == Decimal("5.80")

    # A stored rejection: the same 422 with the same rejected entry on every retry.
    overdraw = uid("ur")
    with pytest.raises(tally.InsufficientFunds) as first:
        client.post_usage_debit(overdraw, acct, Decimal("50"), "USD")
    rejected = first.value.entry
    assert rejected is not None and rejected.status == "rejected" and not first.value.replayed
    assert rejected.rejection is not None and rejected.rejection.code == "insufficient_funds"
    with pytest.raises(tally.InsufficientFunds) as again:
        client.post_usage_debit(overdraw, acct, Decimal("50"), "USD")
    assert again.value.replayed and again.value.entry is not None
    assert again.value.entry.id == rejected.id

    # POST /v1/batch: a payment and a metered debit; the same batch again is replayed.
    ops = [
        tally.Payment(uid("pay"), acct, Decimal("20"), "USD"),
        tally.UsageDebit(
            uid("ur"), acct, Decimal("0.50"), "USD", meter="api-calls", quantity=Decimal("50")
        ),
    ]
    batch = client.post_batch(ops)
    assert [r.status for r in batch] == [201, 201] and all(r.ok for r in batch.results)
    assert batch[1].entry is not None and batch[1].entry.balance_after == Decimal("25.30")
    replay = client.post_batch(ops)
    assert [(r.status, r.replayed) for r in replay] == [(200, True), (200, True)]
    assert [r.entry.id for r in replay if r.entry] == [r.entry.id for r in batch if r.entry]
    mixed = client.post_batch([ops[0], tally.UsageDebit(uid("ur"), acct, Decimal("1000"), "USD")])
    assert mixed[0].replayed and isinstance(mixed[1].error, tally.InsufficientFunds)
    assert mixed[1].entry is not None and mixed[1].entry.status == "rejected"

    # GET /v1/entries, page by page
    page = client.list_entries(account=acct, limit=100)
    kinds = [e.kind for e in page.entries]
    assert kinds == [
        "account_settings", "account_settings", "account_settings", "payment", "usage_debit",
        "hold", "hold_capture", "hold", "hold_release", "hold_capture", "refund", "reversal",
        "adjustment", "usage_debit", "payment", "usage_debit", "usage_debit",
    ]  # fmt: skip
    assert page.next_after_seq is None
    assert [e.seq for e in page.entries] == sorted(e.seq for e in page.entries)
    paged = list(client.iter_entries(account=acct, page_size=4))
    assert [e.id for e in paged] == [e.id for e in page.entries]
    payments = client.list_entries(account=acct, kind="payment")
    assert [e.kind for e in payments.entries] == ["payment", "payment"]

    # GET /v1/entries by status and by upstream ID: the stored rejections alone
    refused = client.list_entries(account=acct, status="rejected")
    assert [e.id for e in refused.entries] == [
        e.id for e in page.entries if e.status == "rejected"
    ]
    assert rejected.id in [e.id for e in refused.entries] and len(refused.entries) == 3
    assert {e.rejection.code for e in refused.entries if e.rejection} == {
        "hold_not_open", "insufficient_funds",
    }  # fmt: skip
    posted_only = client.list_entries(account=acct, status="posted", limit=100)
    assert [e.id for e in posted_only.entries] == [
        e.id for e in page.entries if e.status == "posted"
    ]
    by_upstream = client.list_entries(upstream_id=overdraw)
    assert [(e.id, e.status) for e in by_upstream.entries] == [(rejected.id, "rejected")]
    assert [e.id for e in client.list_entries(upstream_id=pay_id).entries] == [payment.entry.id]
    assert client.list_entries(upstream_id=pay_id, status="rejected").entries == []
    assert [e.id for e in client.iter_entries(status="rejected", page_size=1)] == [
        e.id for e in refused.entries
    ]

    # GET /v1/accounts/{account}/balance: now and right after an entry
    balance = client.get_balance(acct)
    assert balance.posted == Decimal("25.30") and balance.held == Decimal("0")
    assert balance.available == Decimal("25.30") and balance.unit == "USD"
    at_refund = client.get_balance(acct, as_of_seq=refund.entry.seq)
    assert at_refund.posted == Decimal("3.55") and at_refund.as_of_seq == refund.entry.seq
    as_of_now = client.get_balance(
        acct, as_of=datetime.now(timezone.utc) - timedelta(milliseconds=1)
    )
    assert as_of_now.posted == balance.posted

    # GET /v1/accounts: the tenant's one customer account, with its balance now
    accounts = client.list_accounts()
    assert accounts.next_after is None
    assert accounts.accounts == [
        tally.AccountSummary(
            account=acct, unit="USD", debits=balance.debits, credits=balance.credits,
            posted=balance.posted, held=balance.held, available=balance.available,
        )
    ]  # fmt: skip
    assert client.list_accounts(q=acct.upper()).accounts == accounts.accounts
    assert client.list_accounts(q="no-such-account").accounts == []

    # GET /v1/accounts/{account}/usage: the reversed debit nets to zero, the batch's stays
    usage = wait_for_usage(client, acct)
    assert usage.complete and usage.granularity == "day"
    rows = {p.meter: p for p in usage.usage}
    assert rows["api-calls"].quantity == Decimal("50") and rows["api-calls"].amount == Decimal(
        "0.5"
    )
    assert "llm-tokens" not in rows  # its only debit was reversed: an all-zero period is left out
    monthly = client.get_usage(acct, granularity="month", meter="api-calls")
    assert [p.meter for p in monthly.usage] == ["api-calls"] and monthly.granularity == "month"

    # GET /v1/accounts/{account}/statement: opening + movements = closing
    statement = client.get_statement(acct, from_=started, to=datetime.now(timezone.utc))
    assert statement.opening_balance.posted == Decimal("0")
    assert statement.closing_balance.posted == balance.posted
    assert statement.movements.net == balance.posted
    assert statement.movements.entries == len(page.entries) == len(statement.entries)
    assert any(e.status == "rejected" for e in statement.entries)

    # GET /v1/audit/head and /v1/audit/export (audit)
    head = client.get_audit_head()
    assert head.seq == page.entries[-1].seq and head.hash == page.entries[-1].hash
    assert head.signing == "off" and head.signature is None and head.notice
    export = client.get_audit_export()
    records = export.records()
    assert records[0]["record"] == "header" and records[-1]["record"] == "trailer"
    assert records[-1]["last_hash"] == head.hash and records[-1]["entries"] == head.seq
    assert [r["id"] for r in records[1:-1]] == [e.id for e in page.entries]
    assert export.filename is not None and export.filename.endswith(".jsonl")
    csv_export = client.get_audit_export(format="csv", from_seq=2, to_seq=head.seq)
    rows_csv = csv_export.rows()
    assert [int(r["seq"]) for r in rows_csv] == list(range(2, head.seq + 1))
    assert rows_csv[-1]["hash"] == head.hash

    # POST /v1/audit/verify (audit): the server checks the whole log now
    report = client.post_audit_verify()
    assert report.status == "verified" and report.verified, report
    assert report.tenant == head.tenant and report.problems == []
    assert report.head == tally.HeadSummary(seq=head.seq, hash=head.hash)
    assert report.checked_entries == head.seq
    assert report.balances >= 1 and report.budget_ms > 0

    # GET /healthz, /readyz, /openapi.json, /metrics
    health = client.get_healthz()
    assert (health.status, health.engine) == ("ok", engine)
    ready = client.get_readyz()
    assert ready.status == "ready" and ready.schema_version is not None
    assert "/v1/usage-debits" in client.get_openapi()["paths"]
    assert "tally_" in client.get_metrics()

    # The webhook operations (admin). An https:// URL of a public name needs no
    # --webhook-allow-insecure; it is contacted only later, and its delivery
    # failures change nothing here.
    created = client.post_webhook_endpoint(
        "https://hooks.example.com/tally", ["entry.posted", "balance.low"], description="billing"
    )
    assert created.id.startswith("we_") and created.secret.startswith("whsec_")
    assert created.secret not in repr(created), "the secret stays out of logs"
    assert created.previous_secret_expires_at is None
    endpoint = created.endpoint
    assert sorted(endpoint.event_types) == ["balance.low", "entry.posted"]
    assert endpoint.enabled and endpoint.disabled_reason is None
    assert endpoint.description == "billing" and endpoint.after_seq == head.seq
    assert client.list_webhook_endpoints() == [endpoint]
    assert "secret" not in client.get_webhook_endpoint(created.id).raw
    assert client.get_webhook_endpoint(created.id) == endpoint
    disabled = client.patch_webhook_endpoint(created.id, enabled=False, description=None)
    assert not disabled.enabled and disabled.disabled_reason == "disabled"
    assert disabled.description is None, "None clears the description"
    kept = client.patch_webhook_endpoint(created.id, event_types=["entry.posted"])
    assert kept.event_types == ["entry.posted"] and kept.description is None
    assert not kept.enabled, "what is not given is not changed"
    with pytest.raises(ValueError):
        client.patch_webhook_endpoint(created.id)
    with pytest.raises(tally.InvalidRequest):
        client.post_webhook_endpoint("https://hooks.example.com/x", ["entry.created"])
    rotated = client.rotate_webhook_secret(created.id)
    assert rotated.secret.startswith("whsec_") and rotated.secret != created.secret
    assert rotated.previous_secret_expires_at is not None
    assert tally.parse_timestamp(rotated.previous_secret_expires_at) > datetime.now(timezone.utc)
    replay = client.replay_webhook_events(created.id, 1)
    assert (replay.from_seq, replay.to_seq, replay.next_from_seq) == (1, head.seq, None)
    posted_entries = [e for e in page.entries if e.status == "posted"]
    assert replay.scheduled == len(posted_entries), "one entry.posted per posted entry"
    deliveries = client.list_webhook_deliveries(created.id, limit=100)
    assert len(deliveries.deliveries) == replay.scheduled and deliveries.next_after is None
    assert sorted(d.seq for d in deliveries.deliveries) == [e.seq for e in posted_entries]
    delivery = deliveries.deliveries[0]
    assert delivery.id.startswith("wd_") and delivery.endpoint_id == created.id
    assert delivery.status == "pending" and delivery.attempts == [], "disabled: it waits"
    assert delivery.event["id"] == delivery.event_id and delivery.event["type"] == "entry.posted"
    assert delivery.event["seq"] == delivery.seq
    first = client.list_webhook_deliveries(created.id, status="pending", limit=1)
    assert len(first.deliveries) == 1 and first.next_after == first.deliveries[0].id
    second = client.list_webhook_deliveries(created.id, status="pending", after=first.next_after)
    assert first.deliveries[0].id not in [d.id for d in second.deliveries]
    assert len(second.deliveries) == replay.scheduled - 1
    retried = client.retry_webhook_delivery(delivery.id)
    assert retried.id == delivery.id and retried.event_id == delivery.event_id
    assert retried.status == "pending"
    client.delete_webhook_endpoint(created.id)
    assert client.list_webhook_endpoints() == []
    with pytest.raises(tally.NotFound):
        client.get_webhook_endpoint(created.id)

    # The intent operations (post and read): claim, heartbeat, complete with an
    # entry, get with its history, list; a second intent failed.
    invoice = uid("inv")
    params = {"customer": acct, "amount": Decimal("49.00"), "currency": "USD"}
    claimed = client.claim_intent(invoice, "invoice.charge", params, lease_seconds=30)
    assert (claimed.status, claimed.attempt, claimed.max_attempts, claimed.fence) == (
        "claimed", 1, 5, 1,
    )  # fmt: skip
    assert claimed.lease is not None and claimed.lease.fence == 1 and not claimed.replayed
    assert claimed.params == params and claimed.lease_expires_at == claimed.lease.expires_at
    token = claimed.lease.token
    with pytest.raises(tally.IntentInProgress) as busy:
        client.claim_intent(invoice, "invoice.charge", params)
    assert busy.value.fence == 1 and busy.value.retry_after is not None
    beat = client.heartbeat_intent(invoice, token, lease_seconds=60)
    assert beat.status == "claimed" and beat.lease is None, "the token is shown once"
    assert beat.lease_expires_at is not None
    assert tally.parse_timestamp(beat.lease_expires_at) > tally.parse_timestamp(
        claimed.lease.expires_at
    )
    charge = uid("ch")
    done = client.complete_intent(
        invoice, token, {"charge_id": charge},
        entries=[tally.Payment(charge, acct, Decimal("49.00"), "USD", processor="p.example")],
    )  # fmt: skip
    assert (done.status, done.result, done.lease_expires_at) == (
        "succeeded", {"charge_id": charge}, None,
    )  # fmt: skip
    assert done.entries is not None and [(r.status, r.ok) for r in done.entries] == [(201, True)]
    assert done.entries[0].entry is not None and done.entries[0].entry.upstream_id == charge
    replayed = client.claim_intent(invoice, "invoice.charge", params)
    assert replayed.replayed and replayed.result == {"charge_id": charge} and replayed.lease is None
    with pytest.raises(tally.LeaseLost):
        client.complete_intent(invoice, token, {"charge_id": "another"})
    read = client.get_intent(invoice)
    assert read.history is not None
    assert [(c.type, c.fence, c.attempt) for c in read.history] == [
        ("claimed", 1, 1), ("succeeded", 1, 1),
    ]  # fmt: skip
    logged = client.list_entries(kind="intent_succeeded").entries
    assert [e.id for e in logged] == [read.history[1].entry_id]

    email = uid("mail")
    mail = client.claim_intent(email, "email.send", {"to": "ada@example.com"}, max_attempts=2)
    assert mail.lease is not None
    released = client.fail_intent(email, mail.lease.token, "smtp_down", "421", retryable=True)
    assert (released.status, released.error) == (
        "released", tally.IntentFailure("smtp_down", "421"),
    )  # fmt: skip
    mail = client.claim_intent(email, "email.send", {"to": "ada@example.com"})
    assert mail.lease is not None and (mail.attempt, mail.fence) == (2, 2)
    failed = client.fail_intent(email, mail.lease.token, "bounced", "no such mailbox")
    assert failed.status == "failed" and failed.error == tally.IntentFailure(
        "bounced", "no such mailbox"
    )
    with pytest.raises(tally.NotFound):
        client.get_intent(uid("never"))

    listed = client.list_intents()
    assert sorted(i.intent_id for i in listed.intents) == sorted([invoice, email])
    assert listed.next_after is None and all(i.history is None for i in listed.intents)
    assert [i.intent_id for i in client.list_intents(status="failed").intents] == [email]
    assert [i.intent_id for i in client.list_intents(action="invoice.charge").intents] == [invoice]
    assert [i.intent_id for i in client.iter_intents(page_size=1)] == [
        i.intent_id for i in listed.intents
    ]
    assert client.post_audit_verify().verified, "the intents' entries verify like any"

    # The Stripe integration (admin, read, post): configured, read without its
    # secret, no event yet, an unknown event, removed.
    stripe = client.put_stripe_integration(["whsec_every_operation"], "tally_account")
    assert stripe.endpoint_path.startswith("/v1/ingest/stripe/")
    assert client.get_stripe_integration() == stripe and stripe.signing_secrets_count == 1
    assert client.list_stripe_events(status="unmapped") == tally.StripeEventPage([], None)
    with pytest.raises(tally.NotFound):
        client.reapply_stripe_event("evt_unknown")
    client.delete_stripe_integration()
    with pytest.raises(tally.NotFound):
        client.get_stripe_integration()

    missing = set(tally.OPERATIONS) - operations_called
    assert not missing, f"operations not exercised: {sorted(missing)}"


def test_accounts_are_listed_with_their_balances(client: Any) -> None:
    # Four customer accounts (their own tenant): byte order puts capitals first.
    names = ["zeta-1", "beta", "alpha-3", "Alpha-2"]
    for i, name in enumerate(names):
        client.post_payment(uid("pay"), name, Decimal(10 + i), "USD")
    client.post_usage_debit(uid("ur"), "beta", Decimal("2.5"), "USD")
    client.post_hold(uid("job"), "alpha-3", Decimal("4"), "USD", ttl_seconds=300)
    client.put_account("zeta-1", "USD", overdraft="forbid")
    with pytest.raises(tally.InsufficientFunds):
        client.post_usage_debit(uid("ur"), "zeta-1", Decimal("100"), "USD")

    listed = client.list_accounts()
    assert [a.account for a in listed.accounts] == ["Alpha-2", "alpha-3", "beta", "zeta-1"]
    assert listed.next_after is None
    for a in listed.accounts:
        b = client.get_balance(a.account)
        assert (a.unit, a.debits, a.credits, a.posted, a.held, a.available) == (
            b.unit, b.debits, b.credits, b.posted, b.held, b.available,
        )  # fmt: skip
    by_name = {a.account: a for a in listed.accounts}
    assert by_name["beta"].posted == Decimal("8.5") and by_name["beta"].debits == Decimal("2.5")
    assert by_name["alpha-3"].held == Decimal("4") and by_name["alpha-3"].available == Decimal(8)
    assert by_name["zeta-1"].posted == Decimal("10"), "the refused debit moved nothing"

    # q: a case-insensitive substring.
    assert [a.account for a in client.list_accounts(q="ALPHA").accounts] == ["Alpha-2", "alpha-3"]
    assert [a.account for a in client.list_accounts(q="ta").accounts] == ["beta", "zeta-1"]

    # Pages: next_after is passed as after until it is None.
    first = client.list_accounts(limit=2)
    assert [a.account for a in first.accounts] == ["Alpha-2", "alpha-3"]
    assert first.next_after == "alpha-3"
    second = client.list_accounts(after=first.next_after, limit=2)
    assert [a.account for a in second.accounts] == ["beta", "zeta-1"]
    assert second.next_after in (None, "zeta-1")
    assert list(client.iter_accounts(page_size=1)) == listed.accounts
    assert [a.account for a in client.iter_accounts(q="a-", page_size=1)] == [
        "Alpha-2", "alpha-3", "zeta-1",
    ]  # fmt: skip
    with pytest.raises(tally.InvalidRequest):
        client.list_accounts(limit=0)


def test_verify_reports_the_head(client: Any) -> None:
    empty = client.post_audit_verify()
    assert empty.status == "verified" and empty.checked_entries == 0
    acct = uid("cust")
    client.post_payment(uid("pay"), acct, Decimal("3"), "USD")
    debit = client.post_usage_debit(uid("ur"), acct, Decimal("1"), "USD")
    report = client.post_audit_verify()
    assert report.status == "verified" and report.problems == []
    assert report.head is not None and report.head.seq == debit.entry.seq
    assert report.head.hash == debit.entry.hash
    assert report.head.seq == client.get_audit_head().seq


def test_verify_gets_a_longer_attempt_timeout() -> None:
    from tally import _calls

    call = _calls.post_audit_verify()
    assert (call.method, call.target) == ("POST", "/v1/audit/verify")
    assert call.attempt_timeout(10.0) == 30.0
    assert call.attempt_timeout(45.0) == 45.0


def test_account_alerts_round_trip(client: Any) -> None:
    acct = uid("cust")

    # PUT with a low-balance alert: read back as an exact Decimal.
    account = client.put_account(acct, "USD", overdraft="forbid", low_balance=Decimal("10.50"))
    assert account.alerts == tally.Alerts(low_balance=Decimal("10.5"))
    assert isinstance(account.alerts.low_balance, Decimal)
    assert client.get_account(acct).alerts == account.alerts
    assert client.put_account(acct, "USD", overdraft="forbid", low_balance=Decimal("10.5")) == account

    # Any sign: an alert below zero, for an account allowed to overdraw.
    negative = client.put_account(acct, "USD", overdraft="allow", low_balance=Decimal("-25"))
    assert negative.alerts.low_balance == Decimal("-25")
    assert negative.settings_version == account.settings_version + 1

    # The settings are in full: None (the default) clears the alert.
    cleared = client.put_account(acct, "USD", overdraft="allow")
    assert cleared.alerts == tally.Alerts() and cleared.alerts.low_balance is None
    assert cleared.settings_version == negative.settings_version + 1
    assert client.get_account(acct).alerts == tally.Alerts()

    # The account_settings entries show the alert only when one was set.
    settings = client.list_entries(account=acct, kind="account_settings").entries
    assert [e.alerts for e in settings] == [
        tally.Alerts(low_balance=Decimal("10.5")),
        tally.Alerts(low_balance=Decimal("-25")),
        None,
    ]

    # Money is never a float.
    with pytest.raises(TypeError):
        client.put_account(acct, "USD", low_balance=10.5)


def last_seq(client: Any, account: str) -> int:
    seq: int = client.list_entries(account=account, limit=1000).entries[-1].seq
    return seq


def test_long_poll_answers_with_an_entry_posted_meanwhile(
    client: Any, server: TallyServer, api_key: str
) -> None:
    acct = uid("cust")
    client.put_account(acct, "USD")
    after = last_seq(client, acct)
    pay_id = uid("pay")

    def post() -> None:
        with tally.Client(server.base_url, api_key) as poster:
            poster.post_payment(pay_id, acct, Decimal("1.25"), "USD")

    timer = threading.Timer(0.3, post)
    started = time.monotonic()
    timer.start()
    try:
        page = client.list_entries(account=acct, after_seq=after, wait_ms=10_000)
    finally:
        timer.join()
    elapsed = time.monotonic() - started
    assert [(e.kind, e.upstream_id) for e in page.entries] == [("payment", pay_id)]
    assert page.entries[0].amount == Decimal("1.25")
    assert 0.2 < elapsed < 8.0, elapsed


def test_long_poll_answers_an_empty_page_after_the_wait(client: Any) -> None:
    acct = uid("cust")
    client.put_account(acct, "USD")
    after = last_seq(client, acct)
    started = time.monotonic()
    page = client.list_entries(account=acct, after_seq=after, wait_ms=300)
    elapsed = time.monotonic() - started
    assert page.entries == [] and page.next_after_seq is None
    assert 0.25 < elapsed < 5.0, elapsed
    assert client.list_entries(account=acct, after_seq=after, wait_ms=0).entries == []


def test_a_long_poll_outlasts_the_request_timeout(
    make_client: Any, server: TallyServer, api_key: str
) -> None:
    """Each attempt's timeout is request_timeout + wait_ms: a poll longer
    than request_timeout is answered, not timed out and retried."""
    retries: List[tally.RetryEvent] = []
    client = make_client(
        server.base_url,
        api_key,
        policy=tally.RetryPolicy(request_timeout=0.5, max_attempts=2),
        on_retry=retries.append,
    )
    acct = uid("cust")
    client.put_account(acct, "USD")
    after = last_seq(client, acct)
    started = time.monotonic()
    page = client.list_entries(account=acct, after_seq=after, wait_ms=1_200)
    elapsed = time.monotonic() - started
    assert page.entries == [] and retries == []
    assert elapsed > 1.0, elapsed
