"""``AsyncClient``: the asyncio client."""

from __future__ import annotations

import asyncio
import uuid
from datetime import date
from typing import Any, AsyncIterator, Dict, List, Mapping, Optional, Sequence, TypeVar, Union

import httpx

from . import _calls
from ._attempts import (
    Attempts,
    OnRetry,
    answer_of,
    attempt_timed_out,
    outcome,
    request_headers,
    transport_error,
)
from ._wire import Answer, Call
from .errors import IntentInProgress, TallyError
from .intents import (
    AsyncStep,
    ClaimWait,
    IntentOutcome,
    OnceOptions,
    TaskHeartbeat,
    failure_of,
    lease_of,
    outcome_of,
    step_answer,
)
from .models import (
    Account,
    AccountPage,
    AccountSummary,
    AuditExport,
    AuditHead,
    AuditVerification,
    Balance,
    BatchResults,
    Entry,
    EntryPage,
    Health,
    Intent,
    IntentPage,
    Posted,
    Statement,
    StripeEvent,
    StripeEventPage,
    StripeIntegration,
    Usage,
    WebhookDelivery,
    WebhookDeliveryPage,
    WebhookEndpoint,
    WebhookEndpointWithSecret,
    WebhookReplay,
)
from .models import Hold as HoldView
from .requests import (
    AccountSettings,
    Adjustment,
    Amount,
    BatchOperation,
    Capture,
    Hold,
    Overdraft,
    Payment,
    Refund,
    Release,
    Reversal,
    UNSET,
    Timestamp,
    Unset,
    UsageDebit,
)
from .retry import RetryPolicy

T = TypeVar("T")

__all__ = ["AsyncClient"]


class AsyncClient:
    """The asyncio twin of ``Client``: the same methods, awaited.

    A tally client for one API key, safe to retry by construction.

    Every mutating call takes the upstream system's stable ID as a required
    argument and sends the same bytes on every attempt, so a retry after a
    lost answer is recognised by the server as the same request and answered
    with the recorded result (``Posted.replayed``). Only failures that may
    be transient are retried (connection errors, timeouts, 429, 5xx) under
    ``policy``; 4xx answers raise at once. When the policy gives up,
    ``RetriesExhausted`` carries the attempts and the last error.

    ``base_url`` is the server's root, e.g. ``http://127.0.0.1:8080``.
    ``on_retry`` is called before each retry (for logs and metrics).
    ``http_client`` replaces the ``httpx.AsyncClient`` the client makes.
    ``policy.request_timeout`` bounds each attempt as a whole
    (``asyncio.wait_for``); a long poll, ``list_entries(wait_ms=…)``, adds
    ``wait_ms`` to it.
    """

    def __init__(
        self,
        base_url: str,
        api_key: Optional[str] = None,
        *,
        policy: Optional[RetryPolicy] = None,
        on_retry: Optional[OnRetry] = None,
        http_client: Optional[httpx.AsyncClient] = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.policy = policy if policy is not None else RetryPolicy()
        self.on_retry = on_retry
        self._api_key = api_key
        self._owns_http = http_client is None
        self._http = http_client if http_client is not None else httpx.AsyncClient()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    def __repr__(self) -> str:
        return f"AsyncClient({self.base_url!r})"

    # --- usage debits and payments ------------------------------------------

    async def post_usage_debit(
        self,
        usage_record_id: str,
        account: str,
        amount: Amount,
        unit: str,
        *,
        meter: Optional[str] = None,
        quantity: Optional[Amount] = None,
        occurred_at: Optional[Timestamp] = None,
        counter_account: Optional[str] = None,
        metadata: Optional[Mapping[str, str]] = None,
    ) -> Posted:
        """``POST /v1/usage-debits``, keyed by the upstream usage record's ID."""
        debit = UsageDebit(
            usage_record_id, account, amount, unit, meter=meter, quantity=quantity,
            occurred_at=occurred_at, counter_account=counter_account, metadata=metadata,
        )  # fmt: skip
        return await self.run(_calls.post_usage_debit(debit))

    async def post_payment(
        self,
        payment_id: str,
        account: str,
        amount: Amount,
        unit: str,
        *,
        processor: Optional[str] = None,
        occurred_at: Optional[Timestamp] = None,
        counter_account: Optional[str] = None,
        metadata: Optional[Mapping[str, str]] = None,
    ) -> Posted:
        """``POST /v1/payments``, keyed by the upstream payment's ID."""
        payment = Payment(
            payment_id, account, amount, unit, processor=processor, occurred_at=occurred_at,
            counter_account=counter_account, metadata=metadata,
        )  # fmt: skip
        return await self.run(_calls.post_payment(payment))

    async def post_batch(self, operations: Sequence[BatchOperation]) -> BatchResults:
        """``POST /v1/batch``: 1 to 1,000 operations, one result each, in
        order. The whole batch is retried on transient failures; its items
        keep their upstream IDs, so a retried batch replays what committed."""
        return await self.run(_calls.post_batch(operations))

    # --- holds ----------------------------------------------------------------

    async def post_hold(
        self,
        hold_id: str,
        account: str,
        amount: Amount,
        unit: str,
        *,
        ttl_seconds: Optional[int] = None,
        expires_at: Optional[Timestamp] = None,
        counter_account: Optional[str] = None,
        metadata: Optional[Mapping[str, str]] = None,
    ) -> Posted:
        """``POST /v1/holds``: reserve ``amount`` (exactly one of
        ``ttl_seconds`` and ``expires_at``)."""
        hold = Hold(
            hold_id, account, amount, unit, ttl_seconds=ttl_seconds, expires_at=expires_at,
            counter_account=counter_account, metadata=metadata,
        )  # fmt: skip
        return await self.run(_calls.post_hold(hold))

    async def post_capture(
        self,
        hold_id: str,
        capture_id: str,
        amount: Amount,
        *,
        metadata: Optional[Mapping[str, str]] = None,
    ) -> Posted:
        """``POST /v1/holds/{hold_id}/capture``: post ``amount`` (at most the
        hold's), release the rest."""
        return await self.run(
            _calls.post_capture(hold_id, Capture(capture_id, amount, metadata=metadata))
        )

    async def post_release(
        self, hold_id: str, release_id: str, *, metadata: Optional[Mapping[str, str]] = None
    ) -> Posted:
        """``POST /v1/holds/{hold_id}/release``: release the whole hold."""
        return await self.run(_calls.post_release(hold_id, Release(release_id, metadata=metadata)))

    async def get_hold(self, hold_id: str) -> HoldView:
        """``GET /v1/holds/{hold_id}``."""
        return await self.run(_calls.get_hold(hold_id))

    # --- refunds, reversals, adjustments ----------------------------------------

    async def post_refund(
        self,
        refund_id: str,
        payment_id: str,
        amount: Amount,
        *,
        reason: Optional[str] = None,
        metadata: Optional[Mapping[str, str]] = None,
    ) -> Posted:
        """``POST /v1/refunds``: refund part or all of a payment."""
        refund = Refund(refund_id, payment_id, amount, reason=reason, metadata=metadata)
        return await self.run(_calls.post_refund(refund))

    async def post_reversal(
        self,
        reversal_id: str,
        entry_id: str,
        reason: str,
        *,
        metadata: Optional[Mapping[str, str]] = None,
    ) -> Posted:
        """``POST /v1/reversals``: undo an entry."""
        return await self.run(
            _calls.post_reversal(Reversal(reversal_id, entry_id, reason, metadata=metadata))
        )

    async def post_adjustment(
        self,
        adjustment_id: str,
        account: str,
        amount: Amount,
        direction: str,
        reason: str,
        *,
        unit: Optional[str] = None,
        metadata: Optional[Mapping[str, str]] = None,
    ) -> Posted:
        """``POST /v1/adjustments`` (scope ``admin``): ``direction`` is
        ``"credit"`` or ``"debit"``."""
        adjustment = Adjustment(
            adjustment_id, account, amount, direction, reason, unit=unit, metadata=metadata
        )
        return await self.run(_calls.post_adjustment(adjustment))

    # --- accounts -----------------------------------------------------------------

    async def put_account(
        self,
        account: str,
        unit: str,
        *,
        overdraft: Optional[Overdraft] = None,
        metadata: Optional[Mapping[str, str]] = None,
        low_balance: Optional[Amount] = None,
    ) -> Account:
        """``PUT /v1/accounts/{account}`` (scope ``admin``): the settings in
        full; equal settings write nothing. ``low_balance`` (any sign) sets
        the account's low-balance alert; ``None`` sets none (clears it)."""
        settings = AccountSettings(
            unit, overdraft=overdraft, metadata=metadata, low_balance=low_balance
        )
        return await self.run(_calls.put_account(account, settings))

    async def list_accounts(
        self, *, q: Optional[str] = None, after: Optional[str] = None, limit: Optional[int] = None
    ) -> AccountPage:
        """``GET /v1/accounts``: one page of the tenant's customer accounts
        that have entries, in account order (bytes), each with its balance
        now. ``q`` keeps those whose id contains it (ASCII letters in any
        case); pass ``next_after`` as ``after`` for the next page (or use
        ``iter_accounts``); ``limit`` is 1 to 1,000 (default 100)."""
        return await self.run(_calls.list_accounts(q=q, after=after, limit=limit))

    async def iter_accounts(
        self, *, q: Optional[str] = None, after: Optional[str] = None, page_size: Optional[int] = None
    ) -> AsyncIterator[AccountSummary]:
        """Every account matching ``q``, page after page."""
        cursor = after
        while True:
            page = await self.list_accounts(q=q, after=cursor, limit=page_size)
            for account in page.accounts:
                yield account
            if page.next_after is None:
                return
            cursor = page.next_after

    async def get_account(self, account: str) -> Account:
        """``GET /v1/accounts/{account}``: settings and balance."""
        return await self.run(_calls.get_account(account))

    async def get_balance(
        self,
        account: str,
        *,
        unit: Optional[str] = None,
        as_of_seq: Optional[int] = None,
        as_of: Optional[Timestamp] = None,
    ) -> Balance:
        """``GET /v1/accounts/{account}/balance``: now, right after entry
        ``as_of_seq``, or as of a time on the ledger's clock."""
        return await self.run(
            _calls.get_balance(account, unit=unit, as_of_seq=as_of_seq, as_of=as_of)
        )

    async def get_usage(
        self,
        account: str,
        *,
        meter: Optional[str] = None,
        from_: Union[date, str, None] = None,
        to: Union[date, str, None] = None,
        granularity: Optional[str] = None,
    ) -> Usage:
        """``GET /v1/accounts/{account}/usage``: usage per day (or
        ``granularity="month"``) and meter; ``from_`` included, ``to`` not."""
        return await self.run(
            _calls.get_usage(account, meter=meter, from_=from_, to=to, granularity=granularity)
        )

    async def get_statement(
        self, account: str, *, from_: Timestamp, to: Timestamp, unit: Optional[str] = None
    ) -> Statement:
        """``GET /v1/accounts/{account}/statement`` of ``[from_, to)``."""
        return await self.run(_calls.get_statement(account, from_=from_, to=to, unit=unit))

    # --- entries --------------------------------------------------------------------

    async def get_entry(self, entry_id: str) -> Entry:
        """``GET /v1/entries/{id}``."""
        return await self.run(_calls.get_entry(entry_id))

    async def list_entries(
        self,
        *,
        account: Optional[str] = None,
        kind: Optional[str] = None,
        after_seq: Optional[int] = None,
        limit: Optional[int] = None,
        from_: Optional[Timestamp] = None,
        to: Optional[Timestamp] = None,
        wait_ms: Optional[int] = None,
        status: Optional[str] = None,
        upstream_id: Optional[str] = None,
    ) -> EntryPage:
        """``GET /v1/entries``: one page; pass ``next_after_seq`` as
        ``after_seq`` for the next (or use ``iter_entries``). ``wait_ms``
        (0 to 30,000) long-polls: when no entry matches yet, the server
        answers as soon as one is committed, or with an empty page after
        ``wait_ms``; each attempt's timeout is extended by ``wait_ms``.
        ``status`` (``"posted"`` or ``"rejected"``) and ``upstream_id`` (the
        ``usage_record_id``, ``payment_id``, … that keyed an entry) filter
        further."""
        return await self.run(
            _calls.list_entries(
                account=account, kind=kind, after_seq=after_seq, limit=limit, from_=from_, to=to,
                wait_ms=wait_ms, status=status, upstream_id=upstream_id,
            )  # fmt: skip
        )

    async def iter_entries(
        self,
        *,
        account: Optional[str] = None,
        kind: Optional[str] = None,
        after_seq: Optional[int] = None,
        page_size: Optional[int] = None,
        from_: Optional[Timestamp] = None,
        to: Optional[Timestamp] = None,
        status: Optional[str] = None,
        upstream_id: Optional[str] = None,
    ) -> AsyncIterator[Entry]:
        """Every entry matching the filters, page after page."""
        cursor = after_seq
        while True:
            page = await self.list_entries(
                account=account, kind=kind, after_seq=cursor, limit=page_size, from_=from_, to=to,
                status=status, upstream_id=upstream_id,
            )  # fmt: skip
            for entry in page.entries:
                yield entry
            if page.next_after_seq is None:
                return
            cursor = page.next_after_seq

    # --- intents (docs/intents.md) ---------------------------------------------------

    async def claim_intent(
        self,
        intent_id: str,
        action: str,
        params: Mapping[str, Any],
        *,
        lease_seconds: Optional[int] = None,
        max_attempts: Optional[int] = None,
    ) -> Intent:
        """``POST /v1/intents``: claims ``intent_id`` (the caller's stable
        business ID) for ``action`` with ``params`` (a JSON object) under a
        lease of ``lease_seconds`` (server default 60). New, or its last lease
        ran out or was released: ``status`` ``claimed`` with ``lease`` (its
        ``token`` is shown only here). The outcome is stored: that outcome,
        ``replayed``. Another claim's lease is live: ``IntentInProgress``
        (``retry_after``, ``fence``), never retried by the policy. Another
        ``action`` or other ``params``: ``IdempotencyConflict``. A retried
        claim whose answer was lost gets ``IntentInProgress`` until that
        lease runs out. ``once()`` does all of this."""
        return await self.run(
            _calls.claim_intent(
                intent_id, action, params, lease_seconds=lease_seconds, max_attempts=max_attempts
            )
        )

    async def complete_intent(
        self,
        intent_id: str,
        token: str,
        result: Any,
        *,
        entries: Optional[Sequence[BatchOperation]] = None,
    ) -> Intent:
        """``POST /v1/intents/{id}/complete``: stores ``succeeded`` with
        ``result`` (any JSON) and commits ``entries`` (batch operations) in
        the same transaction; ``Intent.entries`` answers each. Retried like
        every call: the same body again is answered the same (``replayed``).
        A token that is not the current claim's: ``LeaseLost``."""
        return await self.run(_calls.complete_intent(intent_id, token, result, entries))

    async def fail_intent(
        self, intent_id: str, token: str, code: str, message: str, *, retryable: bool = False
    ) -> Intent:
        """``POST /v1/intents/{id}/fail``: stores ``failed`` with ``error``
        ``{code, message}``, or with ``retryable=True`` releases the lease
        (``released``; ``failed`` at the last attempt). The same body again
        is answered the same. A token that is not the current claim's:
        ``LeaseLost``."""
        return await self.run(
            _calls.fail_intent(intent_id, token, code, message, retryable=retryable)
        )

    async def heartbeat_intent(
        self, intent_id: str, token: str, *, lease_seconds: Optional[int] = None
    ) -> Intent:
        """``POST /v1/intents/{id}/heartbeat``: the live lease runs until now
        + ``lease_seconds`` (server default 60; never shortened). A token
        that is not the current claim's: ``LeaseLost``."""
        return await self.run(
            _calls.heartbeat_intent(intent_id, token, lease_seconds=lease_seconds)
        )

    async def get_intent(self, intent_id: str) -> Intent:
        """``GET /v1/intents/{id}``: the intent (never a token) with its
        ``history``, one ``IntentChange`` per entry in the log."""
        return await self.run(_calls.get_intent(intent_id))

    async def list_intents(
        self,
        *,
        status: Optional[str] = None,
        action: Optional[str] = None,
        after: Optional[str] = None,
        limit: Optional[int] = None,
    ) -> IntentPage:
        """``GET /v1/intents``: one page in ``intent_id`` order, filtered by
        ``status`` (``claimed``, ``released``, ``succeeded``, ``failed``, as
        read now) and ``action``; pass ``next_after`` as ``after`` for the
        next (or use ``iter_intents``); ``limit`` is 1 to 1,000 (default 100)."""
        return await self.run(
            _calls.list_intents(status=status, action=action, after=after, limit=limit)
        )

    async def iter_intents(
        self,
        *,
        status: Optional[str] = None,
        action: Optional[str] = None,
        after: Optional[str] = None,
        page_size: Optional[int] = None,
    ) -> AsyncIterator[Intent]:
        """Every intent matching the filters, page after page."""
        cursor = after
        while True:
            page = await self.list_intents(
                status=status, action=action, after=cursor, limit=page_size
            )
            for intent in page.intents:
                yield intent
            if page.next_after is None:
                return
            cursor = page.next_after

    async def once(
        self,
        intent_id: str,
        action: str,
        params: Mapping[str, Any],
        step: AsyncStep,
        *,
        lease_seconds: int = 60,
        max_attempts: int = 5,
        wait_budget_seconds: Optional[float] = None,
        heartbeat: bool = True,
    ) -> IntentOutcome:
        """Does ``step`` once for ``intent_id``, however often it is called.

        Claims the intent. Its outcome stored already: returns it
        (``replayed``), ``step`` is not called. Another claim's lease is
        live: sleeps its ``Retry-After`` and claims again, and raises
        ``IntentInProgress`` when the next claim would start after
        ``wait_budget_seconds`` (default: two leases). Otherwise awaits
        ``step(lease)`` (``async def step(lease: Lease)``), heartbeating every
        third of the lease on an asyncio task while it runs
        (``heartbeat=False``: never), and stores what came of it:

        - it returned: ``complete`` with the value as ``result`` (a
          ``StepResult`` also brings ``entries``), and returns the outcome;
        - it raised: ``fail`` with ``{code, message}`` (the class name, or a
          ``StepError``'s ``code``), retryable for a ``RetryableStepError``
          only, then raises the step's exception again. A cancellation (or
          another ``BaseException`` that is not an ``Exception``) sends
          nothing: the lease runs out.

        ``complete`` and ``fail`` whose answers are lost are retried with the
        same body, which the server answers as the first time. ``LeaseLost``
        from the complete: the lease ran out and another claim took the
        intent meanwhile; what this step did is not the stored outcome.
        """
        options = OnceOptions.of(lease_seconds, max_attempts, wait_budget_seconds)
        waiting = ClaimWait(options.wait_budget)
        while True:
            try:
                claimed = await self.claim_intent(
                    intent_id, action, params, lease_seconds=lease_seconds,
                    max_attempts=max_attempts,
                )  # fmt: skip
                break
            except IntentInProgress as busy:
                delay = waiting.delay_after(busy)
            await asyncio.sleep(delay)
        lease = lease_of(claimed)
        if lease is None:
            return outcome_of(claimed, replayed=True)
        token = lease.token
        beats = (
            TaskHeartbeat(
                lambda: self._run(
                    _calls.heartbeat_intent(intent_id, token, lease_seconds=lease_seconds),
                    options.heartbeat_policy(self.policy),
                ),
                options.heartbeat_interval,
            )
            if heartbeat
            else None
        )
        try:
            try:
                value = await step(lease)
            finally:
                if beats is not None:
                    await beats.stop()
        except Exception as error:
            code, message, retryable = failure_of(error)
            try:
                await self.fail_intent(intent_id, token, code, message, retryable=retryable)
            except TallyError:
                pass  # the fail was not stored: the lease runs out instead
            raise
        result, entries = step_answer(value)
        completed = await self.complete_intent(intent_id, token, result, entries=entries)
        return outcome_of(completed, replayed=False)

    # --- audit ------------------------------------------------------------------------

    async def get_audit_export(
        self, *, format: str = "jsonl", from_seq: Optional[int] = None, to_seq: Optional[int] = None
    ) -> AuditExport:
        """``GET /v1/audit/export`` (scope ``audit``): the log as JSONL or CSV."""
        return await self.run(
            _calls.get_audit_export(format=format, from_seq=from_seq, to_seq=to_seq)
        )

    async def get_audit_head(self) -> AuditHead:
        """``GET /v1/audit/head`` (scope ``audit``): the head, signed if the
        server has a signing key."""
        return await self.run(_calls.get_audit_head())

    async def post_audit_verify(self) -> AuditVerification:
        """``POST /v1/audit/verify`` (scope ``audit``): the server checks the
        tenant's ledger now (chain, fingerprints, balances, rule state,
        usage summaries) and reports ``"verified"``, ``"broken"`` or
        ``"incomplete"``. It can take up to ~25 s on a big ledger: each
        attempt's timeout is at least 30 s (or ``request_timeout`` if
        larger). It only reads, so it is retried like every call."""
        return await self.run(_calls.post_audit_verify())

    # --- webhooks (scope admin) -----------------------------------------------------

    async def post_webhook_endpoint(
        self, url: str, event_types: Sequence[str], *, description: Optional[str] = None
    ) -> WebhookEndpointWithSecret:
        """``POST /v1/webhook-endpoints``: events of the tenant's entries
        committed from now on are signed and sent to ``url``. The answer holds
        the signing ``secret``, shown only here. An endpoint has no upstream
        ID: if an attempt's answer is lost and the call is retried (connection
        error, timeout, 5xx), a second endpoint may be made; check
        ``list_webhook_endpoints()`` after a ``RetriesExhausted``, or use a
        ``RetryPolicy(max_attempts=1)`` client to never retry."""
        return await self.run(_calls.post_webhook_endpoint(url, event_types, description))

    async def list_webhook_endpoints(self) -> List[WebhookEndpoint]:
        """``GET /v1/webhook-endpoints``: every endpoint of the tenant, oldest
        first, without secrets."""
        return await self.run(_calls.list_webhook_endpoints())

    async def get_webhook_endpoint(self, endpoint_id: str) -> WebhookEndpoint:
        """``GET /v1/webhook-endpoints/{id}``: the endpoint, without its secret."""
        return await self.run(_calls.get_webhook_endpoint(endpoint_id))

    async def patch_webhook_endpoint(
        self,
        endpoint_id: str,
        *,
        url: Optional[str] = None,
        event_types: Optional[Sequence[str]] = None,
        description: Union[str, None, Unset] = UNSET,
        enabled: Optional[bool] = None,
    ) -> WebhookEndpoint:
        """``PATCH /v1/webhook-endpoints/{id}``: changes what is given
        (``description=None`` clears it; ``enabled=False`` holds deliveries
        back, ``True`` sends them again); nothing given raises ``ValueError``
        before sending. The same change again is harmless, so retrying is."""
        return await self.run(
            _calls.patch_webhook_endpoint(
                endpoint_id, url=url, event_types=event_types, description=description,
                enabled=enabled,
            )  # fmt: skip
        )

    async def delete_webhook_endpoint(self, endpoint_id: str) -> None:
        """``DELETE /v1/webhook-endpoints/{id}``: the endpoint and its
        deliveries are gone. A retry after a lost answer raises ``NotFound``."""
        return await self.run(_calls.delete_webhook_endpoint(endpoint_id))

    async def rotate_webhook_secret(self, endpoint_id: str) -> WebhookEndpointWithSecret:
        """``POST /v1/webhook-endpoints/{id}/rotate-secret``: a new secret;
        the previous one also signs until ``previous_secret_expires_at``. A
        retry after a lost answer rotates again."""
        return await self.run(_calls.rotate_webhook_secret(endpoint_id))

    async def list_webhook_deliveries(
        self,
        endpoint_id: str,
        *,
        status: Optional[str] = None,
        after: Optional[str] = None,
        limit: Optional[int] = None,
    ) -> WebhookDeliveryPage:
        """``GET /v1/webhook-endpoints/{id}/deliveries``: one page, newest
        first (``status``: ``pending``, ``delivered`` or ``failed``; ``limit``
        1 to 100); pass ``next_after`` as ``after`` for the next."""
        return await self.run(
            _calls.list_webhook_deliveries(endpoint_id, status=status, after=after, limit=limit)
        )

    async def retry_webhook_delivery(self, delivery_id: str) -> WebhookDelivery:
        """``POST /v1/webhook-deliveries/{id}/retry``: the delivery is pending
        again, due now, with the same event id."""
        return await self.run(_calls.retry_webhook_delivery(delivery_id))

    async def replay_webhook_events(self, endpoint_id: str, from_seq: int) -> WebhookReplay:
        """``POST /v1/webhook-endpoints/{id}/replay``: the endpoint's events of
        the entries from ``from_seq`` on are sent again with their original
        ids, at most 10,000 entries per call: go on from ``next_from_seq``."""
        return await self.run(_calls.replay_webhook_events(endpoint_id, from_seq))

    # --- the Stripe integration (docs/ingest.md) -------------------------------------

    async def put_stripe_integration(
        self, signing_secrets: Sequence[str], account_metadata_key: str
    ) -> StripeIntegration:
        """``PUT /v1/integrations/stripe`` (scope ``admin``): creates or
        replaces the tenant's Stripe settings: ``signing_secrets`` (1 to 5
        ``whsec_…`` from Stripe's dashboard, write-only) and
        ``account_metadata_key`` (the PaymentIntent metadata key whose value
        is the ledger account). ``endpoint_path`` of the answer is the path
        to give Stripe; it stays the same when the settings are replaced.
        The same settings again are harmless, so retrying is."""
        return await self.run(_calls.put_stripe_integration(signing_secrets, account_metadata_key))

    async def get_stripe_integration(self) -> StripeIntegration:
        """``GET /v1/integrations/stripe`` (scope ``admin``): the settings,
        never the secrets; ``NotFound`` when none is configured."""
        return await self.run(_calls.get_stripe_integration())

    async def delete_stripe_integration(self) -> None:
        """``DELETE /v1/integrations/stripe`` (scope ``admin``): deliveries to
        its path are refused from now on; the events received stay listed
        and their entries stay in the ledger. ``NotFound`` when none is
        configured (also for a retry after a lost answer)."""
        return await self.run(_calls.delete_stripe_integration())

    async def list_stripe_events(
        self,
        *,
        status: Optional[str] = None,
        after: Optional[str] = None,
        limit: Optional[int] = None,
    ) -> StripeEventPage:
        """``GET /v1/integrations/stripe/events`` (scope ``read``): one page
        of the events received, in ``event_id`` order (``status``:
        ``applied``, ``ignored`` or ``unmapped``; ``limit`` 1 to 1,000,
        default 100); pass ``next_after`` as ``after`` for the next (or use
        ``iter_stripe_events``)."""
        return await self.run(_calls.list_stripe_events(status=status, after=after, limit=limit))

    async def iter_stripe_events(
        self,
        *,
        status: Optional[str] = None,
        after: Optional[str] = None,
        page_size: Optional[int] = None,
    ) -> AsyncIterator[StripeEvent]:
        """Every Stripe event matching ``status``, page after page."""
        cursor = after
        while True:
            page = await self.list_stripe_events(status=status, after=cursor, limit=page_size)
            for event in page.events:
                yield event
            if page.next_after is None:
                return
            cursor = page.next_after

    async def reapply_stripe_event(self, event_id: str) -> StripeEvent:
        """``POST /v1/integrations/stripe/events/{event_id}/reapply`` (scope
        ``post``): maps the recorded event again with the current settings
        and decides its operations (for an ``unmapped`` event once its
        mapping is fixed); the event as recorded now. Idempotent: the
        entries are keyed by Stripe's ids. ``NotFound`` for an unknown
        event, ``InvalidRequest`` when no integration is configured."""
        return await self.run(_calls.reapply_stripe_event(event_id))

    # --- operations -------------------------------------------------------------------

    async def get_healthz(self) -> Health:
        """``GET /healthz``: the server and its database answer."""
        return await self.run(_calls.get_healthz())

    async def get_readyz(self) -> Health:
        """``GET /readyz``: this process should get traffic."""
        return await self.run(_calls.get_readyz())

    async def get_openapi(self) -> Dict[str, Any]:
        """``GET /openapi.json``: the API description the server serves."""
        return await self.run(_calls.get_openapi())

    async def get_metrics(self) -> str:
        """``GET /metrics``: Prometheus text."""
        return await self.run(_calls.get_metrics())

    # --- the retry loop ---------------------------------------------------------------

    async def run(self, call: Call[T]) -> T:
        """Performs ``call`` under the retry policy."""
        return await self._run(call, self.policy)

    async def _run(self, call: Call[T], policy: RetryPolicy) -> T:
        attempts = Attempts(policy, call, self.on_retry)
        request_id = str(uuid.uuid4())
        headers = request_headers(self._api_key, call, request_id)
        while True:
            attempts.begin()
            try:
                answer = await self._send_once(call, headers, attempts.count, request_id, policy)
                return outcome(call, answer)
            except TallyError as error:
                delay = attempts.delay_after(error)
            await asyncio.sleep(delay)

    async def _send_once(
        self,
        call: Call[Any],
        headers: Dict[str, str],
        attempt: int,
        request_id: str,
        policy: RetryPolicy,
    ) -> Answer:
        timeout = call.attempt_timeout(policy.request_timeout)
        try:
            return await asyncio.wait_for(
                self._exchange(call, headers, attempt, request_id, timeout), timeout
            )
        except asyncio.TimeoutError:
            raise attempt_timed_out(timeout, request_id) from None

    async def _exchange(
        self,
        call: Call[Any],
        headers: Dict[str, str],
        attempt: int,
        request_id: str,
        timeout: float,
    ) -> Answer:
        try:
            response = await self._http.request(
                call.method,
                self.base_url + call.target,
                content=call.body,
                headers=headers,
                timeout=httpx.Timeout(timeout),
            )
        except httpx.HTTPError as e:
            raise transport_error(e, request_id) from e
        return answer_of(response, response.content, attempt, request_id)
