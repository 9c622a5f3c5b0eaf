"""Every operation of the API as a ``Call``: method, path, query, body and
the reading of its answer. ``Client`` and ``AsyncClient`` only run them."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, TypeVar, Union

from . import _json as j
from ._wire import Answer, Call, QueryValue, segment, target
from .errors import error_from_answer
from .models import (
    Account,
    AccountPage,
    AuditExport,
    AuditHead,
    AuditVerification,
    Balance,
    BatchResult,
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
from .models import (
    Hold as HoldView,
)
from .requests import (
    AccountSettings,
    Adjustment,
    BatchOperation,
    Capture,
    Hold,
    Payment,
    Refund,
    Release,
    Reversal,
    Timestamp,
    Unset,
    UsageDebit,
    batch_item,
)

T = TypeVar("T")


def _json_model(parse: Callable[[Any], T]) -> Callable[[Answer], T]:
    def decode(answer: Answer) -> T:
        return parse(j.loads(answer.content))

    return decode


def _posted(answer: Answer) -> Posted:
    return Posted(
        entry=Entry.from_json(j.loads(answer.content)),
        status=answer.status,
        created=answer.status == 201,
        replayed=answer.replayed,
        attempts=answer.attempts,
        body=answer.content,
        request_id=answer.request_id,
    )


def _post(path: str, body: Dict[str, Any]) -> Call[Posted]:
    return Call("POST", path, _posted, body=j.dumps(body))


def post_usage_debit(debit: UsageDebit) -> Call[Posted]:
    return _post("/v1/usage-debits", debit.to_json())


def post_payment(payment: Payment) -> Call[Posted]:
    return _post("/v1/payments", payment.to_json())


def post_hold(hold: Hold) -> Call[Posted]:
    return _post("/v1/holds", hold.to_json())


def post_capture(hold_id: str, capture: Capture) -> Call[Posted]:
    return _post(f"/v1/holds/{segment(hold_id, 'hold_id')}/capture", capture.to_json())


def post_release(hold_id: str, release: Release) -> Call[Posted]:
    return _post(f"/v1/holds/{segment(hold_id, 'hold_id')}/release", release.to_json())


def get_hold(hold_id: str) -> Call[HoldView]:
    return Call("GET", f"/v1/holds/{segment(hold_id, 'hold_id')}", _json_model(HoldView.from_json))


def post_refund(refund: Refund) -> Call[Posted]:
    return _post("/v1/refunds", refund.to_json())


def post_reversal(reversal: Reversal) -> Call[Posted]:
    return _post("/v1/reversals", reversal.to_json())


def post_adjustment(adjustment: Adjustment) -> Call[Posted]:
    return _post("/v1/adjustments", adjustment.to_json())


def _batch_result(item: j.JsonObject, request_id: Optional[str]) -> BatchResult:
    """One item of a batch's ``results`` (or of a completion's ``entries``)."""
    status = j.integer(item, "status")
    replayed = j.boolean(item, "replayed")
    entry = Entry.from_json(item["entry"]) if item.get("entry") is not None else None
    problem = item.get("problem")
    error = None
    if isinstance(problem, dict):
        error = error_from_answer(
            status, j.dumps(problem), replayed=replayed, request_id=request_id
        )
        if entry is None and "entry" in problem:
            entry = Entry.from_json(problem["entry"])
    return BatchResult(
        status=status,
        replayed=replayed,
        entry=entry,
        error=error,
        problem=problem if isinstance(problem, dict) else None,
    )


def _batch(answer: Answer) -> BatchResults:
    o = j.obj(j.loads(answer.content), "batch answer")
    results = [_batch_result(item, answer.request_id) for item in j.objects(o, "results")]
    return BatchResults(results=results, attempts=answer.attempts)


def post_batch(operations: Sequence[BatchOperation]) -> Call[BatchResults]:
    if not operations:
        raise ValueError("a batch holds 1 to 1,000 operations")
    body = {"operations": [batch_item(op) for op in operations]}
    return Call("POST", "/v1/batch", _batch, body=j.dumps(body))


def put_account(account: str, settings: AccountSettings) -> Call[Account]:
    return Call(
        "PUT",
        f"/v1/accounts/{segment(account, 'account')}",
        _json_model(Account.from_json),
        body=j.dumps(settings.to_json()),
    )


def get_account(account: str) -> Call[Account]:
    return Call(
        "GET", f"/v1/accounts/{segment(account, 'account')}", _json_model(Account.from_json)
    )


def list_accounts(
    *, q: Optional[str], after: Optional[str], limit: Optional[int]
) -> Call[AccountPage]:
    query: List[Tuple[str, QueryValue]] = [("q", q), ("after", after), ("limit", limit)]
    return Call("GET", target("/v1/accounts", query), _json_model(AccountPage.from_json))


def get_entry(entry_id: str) -> Call[Entry]:
    return Call("GET", f"/v1/entries/{segment(entry_id, 'entry_id')}", _json_model(Entry.from_json))


def list_entries(
    *,
    account: Optional[str],
    kind: Optional[str],
    after_seq: Optional[int],
    limit: Optional[int],
    from_: Optional[Timestamp],
    to: Optional[Timestamp],
    wait_ms: Optional[int] = None,
    status: Optional[str] = None,
    upstream_id: Optional[str] = None,
) -> Call[EntryPage]:
    if wait_ms is not None and (isinstance(wait_ms, bool) or not isinstance(wait_ms, int)):
        raise TypeError(f"wait_ms must be an int (milliseconds), not {type(wait_ms).__name__}")
    query: List[Tuple[str, QueryValue]] = [
        ("account", account),
        ("kind", kind),
        ("after_seq", after_seq),
        ("limit", limit),
        ("from", from_),
        ("to", to),
        ("wait_ms", wait_ms),
        ("status", status),
        ("upstream_id", upstream_id),
    ]
    # A long poll: the server may hold the answer up to wait_ms, so each
    # attempt's timeout is extended by it (else it would time out and retry).
    wait = max(wait_ms or 0, 0) / 1000
    return Call(
        "GET", target("/v1/entries", query), _json_model(EntryPage.from_json), wait=wait
    )


def get_balance(
    account: str,
    *,
    unit: Optional[str],
    as_of_seq: Optional[int],
    as_of: Optional[Timestamp],
) -> Call[Balance]:
    query: List[Tuple[str, QueryValue]] = [
        ("as_of_seq", as_of_seq),
        ("as_of", as_of),
        ("unit", unit),
    ]
    return Call(
        "GET",
        target(f"/v1/accounts/{segment(account, 'account')}/balance", query),
        _json_model(Balance.from_json),
    )


def get_usage(
    account: str,
    *,
    meter: Optional[str],
    from_: QueryValue,
    to: QueryValue,
    granularity: Optional[str],
) -> Call[Usage]:
    query: List[Tuple[str, QueryValue]] = [
        ("meter", meter),
        ("from", from_),
        ("to", to),
        ("granularity", granularity),
    ]
    return Call(
        "GET",
        target(f"/v1/accounts/{segment(account, 'account')}/usage", query),
        _json_model(Usage.from_json),
    )


def get_statement(
    account: str, *, from_: Timestamp, to: Timestamp, unit: Optional[str]
) -> Call[Statement]:
    query: List[Tuple[str, QueryValue]] = [("from", from_), ("to", to), ("unit", unit)]
    return Call(
        "GET",
        target(f"/v1/accounts/{segment(account, 'account')}/statement", query),
        _json_model(Statement.from_json),
    )


def get_audit_export(
    *, format: str, from_seq: Optional[int], to_seq: Optional[int]
) -> Call[AuditExport]:
    if format not in ("jsonl", "csv"):
        raise ValueError('format must be "jsonl" or "csv"')

    def decode(answer: Answer) -> AuditExport:
        return AuditExport(
            format=format,
            content=answer.content,
            filename=AuditExport.filename_of(answer.headers.get("content-disposition")),
            content_type=answer.headers.get("content-type", ""),
        )

    query: List[Tuple[str, QueryValue]] = [
        ("format", format),
        ("from_seq", from_seq),
        ("to_seq", to_seq),
    ]
    accept = "application/x-ndjson" if format == "jsonl" else "text/csv"
    return Call("GET", target("/v1/audit/export", query), decode, accept=accept)


def get_audit_head() -> Call[AuditHead]:
    return Call("GET", "/v1/audit/head", _json_model(AuditHead.from_json))


VERIFY_TIMEOUT = 30.0
"""The least timeout (seconds) of one attempt of ``POST /v1/audit/verify``:
the server works on it up to 25 s."""


def post_audit_verify() -> Call[AuditVerification]:
    return Call(
        "POST",
        "/v1/audit/verify",
        _json_model(AuditVerification.from_json),
        min_timeout=VERIFY_TIMEOUT,
    )


def get_healthz() -> Call[Health]:
    return Call("GET", "/healthz", _json_model(Health.from_json))


def get_readyz() -> Call[Health]:
    return Call("GET", "/readyz", _json_model(Health.from_json))


def get_openapi() -> Call[Dict[str, Any]]:
    def decode(answer: Answer) -> Dict[str, Any]:
        return dict(j.obj(j.loads(answer.content), "OpenAPI document"))

    return Call("GET", "/openapi.json", decode)


def get_metrics() -> Call[str]:
    def decode(answer: Answer) -> str:
        return answer.content.decode("utf-8")

    return Call("GET", "/metrics", decode, accept="text/plain")


# --- webhooks (scope admin) ----------------------------------------------------


def _event_types(event_types: Sequence[str]) -> List[str]:
    if isinstance(event_types, str):
        raise TypeError('event_types is a list of event types, e.g. ["entry.posted"]')
    types = list(event_types)
    if not types or not all(isinstance(t, str) for t in types):
        raise ValueError("event_types must hold at least one event type (a str)")
    return types


def _endpoint_path(endpoint_id: str) -> str:
    return f"/v1/webhook-endpoints/{segment(endpoint_id, 'endpoint_id')}"


def post_webhook_endpoint(
    url: str, event_types: Sequence[str], description: Optional[str]
) -> Call[WebhookEndpointWithSecret]:
    body: Dict[str, Any] = {"url": url, "event_types": _event_types(event_types)}
    if description is not None:
        body["description"] = description
    return Call(
        "POST",
        "/v1/webhook-endpoints",
        _json_model(WebhookEndpointWithSecret.from_json),
        body=j.dumps(body),
    )


def list_webhook_endpoints() -> Call[List[WebhookEndpoint]]:
    def decode(answer: Answer) -> List[WebhookEndpoint]:
        o = j.obj(j.loads(answer.content), "webhook endpoint list")
        return [WebhookEndpoint.from_json(e) for e in j.objects(o, "endpoints")]

    return Call("GET", "/v1/webhook-endpoints", decode)


def get_webhook_endpoint(endpoint_id: str) -> Call[WebhookEndpoint]:
    return Call("GET", _endpoint_path(endpoint_id), _json_model(WebhookEndpoint.from_json))


def patch_webhook_endpoint(
    endpoint_id: str,
    *,
    url: Optional[str],
    event_types: Optional[Sequence[str]],
    description: Union[str, None, Unset],
    enabled: Optional[bool],
) -> Call[WebhookEndpoint]:
    body: Dict[str, Any] = {}
    if url is not None:
        body["url"] = url
    if event_types is not None:
        body["event_types"] = _event_types(event_types)
    if not isinstance(description, Unset):
        body["description"] = description
    if enabled is not None:
        if not isinstance(enabled, bool):
            raise TypeError("enabled must be a bool")
        body["enabled"] = enabled
    if not body:
        raise ValueError("nothing to change: give url, event_types, description or enabled")
    return Call(
        "PATCH",
        _endpoint_path(endpoint_id),
        _json_model(WebhookEndpoint.from_json),
        body=j.dumps(body),
    )


def delete_webhook_endpoint(endpoint_id: str) -> Call[None]:
    def decode(answer: Answer) -> None:
        return None

    return Call("DELETE", _endpoint_path(endpoint_id), decode)


def rotate_webhook_secret(endpoint_id: str) -> Call[WebhookEndpointWithSecret]:
    return Call(
        "POST",
        f"{_endpoint_path(endpoint_id)}/rotate-secret",
        _json_model(WebhookEndpointWithSecret.from_json),
    )


def list_webhook_deliveries(
    endpoint_id: str, *, status: Optional[str], after: Optional[str], limit: Optional[int]
) -> Call[WebhookDeliveryPage]:
    query: List[Tuple[str, QueryValue]] = [("status", status), ("after", after), ("limit", limit)]
    return Call(
        "GET",
        target(f"{_endpoint_path(endpoint_id)}/deliveries", query),
        _json_model(WebhookDeliveryPage.from_json),
    )


def retry_webhook_delivery(delivery_id: str) -> Call[WebhookDelivery]:
    return Call(
        "POST",
        f"/v1/webhook-deliveries/{segment(delivery_id, 'delivery_id')}/retry",
        _json_model(WebhookDelivery.from_json),
    )


def replay_webhook_events(endpoint_id: str, from_seq: int) -> Call[WebhookReplay]:
    if isinstance(from_seq, bool) or not isinstance(from_seq, int):
        raise TypeError(f"from_seq must be an int, not {type(from_seq).__name__}")
    return Call(
        "POST",
        f"{_endpoint_path(endpoint_id)}/replay",
        _json_model(WebhookReplay.from_json),
        body=j.dumps({"from_seq": from_seq}),
    )


# --- the Stripe integration (docs/ingest.md) ---------------------------------------

_STRIPE = "/v1/integrations/stripe"


def put_stripe_integration(
    signing_secrets: Sequence[str], account_metadata_key: str
) -> Call[StripeIntegration]:
    if isinstance(signing_secrets, str):
        raise TypeError('signing_secrets is a list of secrets, e.g. ["whsec_…"]')
    secrets = list(signing_secrets)
    if not all(isinstance(s, str) for s in secrets):
        raise TypeError("signing_secrets must hold strings (whsec_…)")
    if not isinstance(account_metadata_key, str):
        raise TypeError("account_metadata_key must be a string")
    body = {"signing_secrets": secrets, "account_metadata_key": account_metadata_key}
    return Call("PUT", _STRIPE, _json_model(StripeIntegration.from_json), body=j.dumps(body))


def get_stripe_integration() -> Call[StripeIntegration]:
    return Call("GET", _STRIPE, _json_model(StripeIntegration.from_json))


def delete_stripe_integration() -> Call[None]:
    def decode(answer: Answer) -> None:
        return None

    return Call("DELETE", _STRIPE, decode)


def list_stripe_events(
    *, status: Optional[str], after: Optional[str], limit: Optional[int]
) -> Call[StripeEventPage]:
    query: List[Tuple[str, QueryValue]] = [("status", status), ("after", after), ("limit", limit)]
    return Call(
        "GET", target(f"{_STRIPE}/events", query), _json_model(StripeEventPage.from_json)
    )


def reapply_stripe_event(event_id: str) -> Call[StripeEvent]:
    return Call(
        "POST",
        f"{_STRIPE}/events/{segment(event_id, 'event_id')}/reapply",
        _json_model(StripeEvent.from_json),
    )


# --- intents (docs/intents.md) ---------------------------------------------------


def _text(value: str, name: str) -> str:
    if not isinstance(value, str) or value == "":
        raise ValueError(f"{name} must be a non-empty string")
    return value


def _int_or_none(value: Optional[int], name: str) -> Optional[int]:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    return value


def _intent_path(intent_id: str) -> str:
    return f"/v1/intents/{segment(intent_id, 'intent_id')}"


def _intent(answer: Answer) -> Intent:
    return Intent.from_json(j.loads(answer.content), replayed=answer.replayed)


def _completion(answer: Answer) -> Intent:
    o = j.obj(j.loads(answer.content), "intent completion")
    entries = [_batch_result(item, answer.request_id) for item in j.objects(o, "entries")]
    return Intent.from_json(o, replayed=answer.replayed, entries=entries)


def claim_intent(
    intent_id: str,
    action: str,
    params: Mapping[str, Any],
    *,
    lease_seconds: Optional[int],
    max_attempts: Optional[int],
) -> Call[Intent]:
    if not isinstance(params, Mapping):
        raise TypeError(f"params must be a JSON object (a dict), not {type(params).__name__}")
    body: Dict[str, Any] = {
        "intent_id": _text(intent_id, "intent_id"),
        "action": _text(action, "action"),
        "params": dict(params),
    }
    if _int_or_none(lease_seconds, "lease_seconds") is not None:
        body["lease_seconds"] = lease_seconds
    if _int_or_none(max_attempts, "max_attempts") is not None:
        body["max_attempts"] = max_attempts
    return Call("POST", "/v1/intents", _intent, body=j.dumps(body))


def complete_intent(
    intent_id: str, token: str, result: Any, entries: Optional[Sequence[BatchOperation]]
) -> Call[Intent]:
    body: Dict[str, Any] = {"token": _text(token, "token"), "result": result}
    if entries is not None:
        body["entries"] = [batch_item(op) for op in entries]
    return Call("POST", f"{_intent_path(intent_id)}/complete", _completion, body=j.dumps(body))


def fail_intent(
    intent_id: str, token: str, code: str, message: str, *, retryable: bool
) -> Call[Intent]:
    if not isinstance(message, str):
        raise TypeError(f"message must be a string, not {type(message).__name__}")
    if not isinstance(retryable, bool):
        raise TypeError("retryable must be a bool")
    body = {
        "token": _text(token, "token"),
        "error": {"code": _text(code, "code"), "message": message},
        "retryable": retryable,
    }
    return Call("POST", f"{_intent_path(intent_id)}/fail", _intent, body=j.dumps(body))


def heartbeat_intent(intent_id: str, token: str, *, lease_seconds: Optional[int]) -> Call[Intent]:
    body: Dict[str, Any] = {"token": _text(token, "token")}
    if _int_or_none(lease_seconds, "lease_seconds") is not None:
        body["lease_seconds"] = lease_seconds
    return Call("POST", f"{_intent_path(intent_id)}/heartbeat", _intent, body=j.dumps(body))


def get_intent(intent_id: str) -> Call[Intent]:
    return Call("GET", _intent_path(intent_id), _intent)


def list_intents(
    *, status: Optional[str], action: Optional[str], after: Optional[str], limit: Optional[int]
) -> Call[IntentPage]:
    query: List[Tuple[str, QueryValue]] = [
        ("status", status),
        ("action", action),
        ("after", after),
        ("limit", limit),
    ]
    return Call("GET", target("/v1/intents", query), _json_model(IntentPage.from_json))
