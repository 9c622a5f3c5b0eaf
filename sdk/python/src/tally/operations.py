"""Every operation the server serves, and the client method for it.

The table README.md shows; tests/test_coverage.py checks it against the
OpenAPI document the server serves (both ways) and against both clients.
"""

from __future__ import annotations

from typing import Dict, Tuple

__all__ = ["OPERATIONS"]

OPERATIONS: Dict[Tuple[str, str], str] = {
    ("POST", "/v1/usage-debits"): "post_usage_debit",
    ("POST", "/v1/payments"): "post_payment",
    ("POST", "/v1/batch"): "post_batch",
    ("POST", "/v1/holds"): "post_hold",
    ("GET", "/v1/holds/{hold_id}"): "get_hold",
    ("POST", "/v1/holds/{hold_id}/capture"): "post_capture",
    ("POST", "/v1/holds/{hold_id}/release"): "post_release",
    ("POST", "/v1/refunds"): "post_refund",
    ("POST", "/v1/reversals"): "post_reversal",
    ("POST", "/v1/adjustments"): "post_adjustment",
    ("PUT", "/v1/accounts/{account}"): "put_account",
    ("GET", "/v1/accounts"): "list_accounts",
    ("GET", "/v1/accounts/{account}"): "get_account",
    ("GET", "/v1/accounts/{account}/balance"): "get_balance",
    ("GET", "/v1/accounts/{account}/usage"): "get_usage",
    ("GET", "/v1/accounts/{account}/statement"): "get_statement",
    ("GET", "/v1/entries"): "list_entries",
    ("GET", "/v1/entries/{id}"): "get_entry",
    ("POST", "/v1/intents"): "claim_intent",
    ("POST", "/v1/intents/{intent_id}/complete"): "complete_intent",
    ("POST", "/v1/intents/{intent_id}/fail"): "fail_intent",
    ("POST", "/v1/intents/{intent_id}/heartbeat"): "heartbeat_intent",
    ("GET", "/v1/intents/{intent_id}"): "get_intent",
    ("GET", "/v1/intents"): "list_intents",
    ("POST", "/v1/webhook-endpoints"): "post_webhook_endpoint",
    ("GET", "/v1/webhook-endpoints"): "list_webhook_endpoints",
    ("GET", "/v1/webhook-endpoints/{id}"): "get_webhook_endpoint",
    ("PATCH", "/v1/webhook-endpoints/{id}"): "patch_webhook_endpoint",
    ("DELETE", "/v1/webhook-endpoints/{id}"): "delete_webhook_endpoint",
    ("POST", "/v1/webhook-endpoints/{id}/rotate-secret"): "rotate_webhook_secret",
    ("GET", "/v1/webhook-endpoints/{id}/deliveries"): "list_webhook_deliveries",
    ("POST", "/v1/webhook-deliveries/{id}/retry"): "retry_webhook_delivery",
    ("POST", "/v1/webhook-endpoints/{id}/replay"): "replay_webhook_events",
    ("PUT", "/v1/integrations/stripe"): "put_stripe_integration",
    ("GET", "/v1/integrations/stripe"): "get_stripe_integration",
    ("DELETE", "/v1/integrations/stripe"): "delete_stripe_integration",
    ("GET", "/v1/integrations/stripe/events"): "list_stripe_events",
    ("POST", "/v1/integrations/stripe/events/{event_id}/reapply"): "reapply_stripe_event",
    ("GET", "/v1/audit/export"): "get_audit_export",
    ("GET", "/v1/audit/head"): "get_audit_head",
    ("POST", "/v1/audit/verify"): "post_audit_verify",
    ("GET", "/healthz"): "get_healthz",
    ("GET", "/readyz"): "get_readyz",
    ("GET", "/metrics"): "get_metrics",
    ("GET", "/openapi.json"): "get_openapi",
}
"""(HTTP method, path template) → the method of ``Client`` and ``AsyncClient``.
Not covered: ``GET /docs`` and its assets (Swagger UI, for browsers), and
``POST /v1/ingest/stripe/{endpoint_id}``, which Stripe calls (signed with
``Stripe-Signature``, no API key)."""
