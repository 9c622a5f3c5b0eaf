//! One method per operation of the API (api/openapi.json).

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::model::{
    Account, AccountPage, AccountSettings, Adjustment, AuditHead, AuditVerification, Balance,
    BatchResult, BatchResults, Capture, Entry, EntryPage, Health, Hold, HoldInfo, Operation,
    Payment, Posted, Refund, Release, Reversal, Statement, StripeEvent, StripeEventPage,
    StripeIntegration, StripeIntegrationRequest, Usage, UsageDebit, WebhookDelivery,
    WebhookDeliveryPage, WebhookEndpoint, WebhookEndpointChange, WebhookEndpointList,
    WebhookEndpointRequest, WebhookEndpointWithSecret, WebhookReplay, WebhookReplayRequest,
};
use crate::query::{
    encode, AccountQuery, BalanceQuery, EntryQuery, ExportQuery, StatementQuery, StripeEventQuery,
    UsageQuery, WebhookDeliveryQuery,
};
use crate::{Answer, Client, ClientError, Method};

/// The least time one attempt of [`Client::post_audit_verify`] may take
/// (the server's budget is 25 s).
pub const VERIFY_TIMEOUT: Duration = Duration::from_secs(30);

fn decode<T: DeserializeOwned>(answer: &Answer) -> Result<T, ClientError> {
    serde_json::from_slice(&answer.body).map_err(|e| ClientError::Decode(e.to_string()))
}

fn to_body<T: Serialize>(body: &T) -> Result<Vec<u8>, ClientError> {
    serde_json::to_vec(body).map_err(|e| ClientError::Decode(e.to_string()))
}

impl Client {
    /// `POST /v1/usage-debits`, retried safely under the debit's own ID.
    pub async fn post_usage_debit(&self, debit: &UsageDebit) -> Result<Posted, ClientError> {
        self.post_entry("/v1/usage-debits".into(), debit).await
    }

    /// `POST /v1/payments`, retried safely under the payment's own ID.
    pub async fn post_payment(&self, payment: &Payment) -> Result<Posted, ClientError> {
        self.post_entry("/v1/payments".into(), payment).await
    }

    /// `POST /v1/batch`: up to 1,000 operations, one result each, in order.
    /// The whole batch is retried on transient failures; its items keep
    /// their upstream IDs, so a retried batch replays what already committed.
    pub async fn post_batch(
        &self,
        operations: &[Operation],
    ) -> Result<Vec<BatchResult>, ClientError> {
        let body = to_body(&serde_json::json!({ "operations": operations }))?;
        let answer = self.send(Method::Post, "/v1/batch", Some(body)).await?;
        Ok(decode::<BatchResults>(&answer)?.results)
    }

    /// `POST /v1/holds`, keyed by `hold_id`.
    pub async fn post_hold(&self, hold: &Hold) -> Result<Posted, ClientError> {
        self.post_entry("/v1/holds".into(), hold).await
    }

    /// `GET /v1/holds/{hold_id}`.
    pub async fn get_hold(&self, hold_id: &str) -> Result<HoldInfo, ClientError> {
        self.get_json(&format!("/v1/holds/{}", encode(hold_id)))
            .await
    }

    /// `POST /v1/holds/{hold_id}/capture`, keyed by `capture_id`.
    pub async fn post_capture(
        &self,
        hold_id: &str,
        capture: &Capture,
    ) -> Result<Posted, ClientError> {
        let path = format!("/v1/holds/{}/capture", encode(hold_id));
        self.post_entry(path, capture).await
    }

    /// `POST /v1/holds/{hold_id}/release`, keyed by `release_id`.
    pub async fn post_release(
        &self,
        hold_id: &str,
        release: &Release,
    ) -> Result<Posted, ClientError> {
        let path = format!("/v1/holds/{}/release", encode(hold_id));
        self.post_entry(path, release).await
    }

    /// `POST /v1/refunds`, keyed by `refund_id`.
    pub async fn post_refund(&self, refund: &Refund) -> Result<Posted, ClientError> {
        self.post_entry("/v1/refunds".into(), refund).await
    }

    /// `POST /v1/reversals`, keyed by `reversal_id`.
    pub async fn post_reversal(&self, reversal: &Reversal) -> Result<Posted, ClientError> {
        self.post_entry("/v1/reversals".into(), reversal).await
    }

    /// `POST /v1/adjustments` (scope `admin`), keyed by `adjustment_id`.
    pub async fn post_adjustment(&self, adjustment: &Adjustment) -> Result<Posted, ClientError> {
        self.post_entry("/v1/adjustments".into(), adjustment).await
    }

    /// `GET /v1/accounts/{account}`: settings and balance.
    pub async fn get_account(&self, account: &str) -> Result<Account, ClientError> {
        self.get_json(&format!("/v1/accounts/{}", encode(account)))
            .await
    }

    /// `PUT /v1/accounts/{account}` (scope `admin`): the settings in full.
    /// Idempotent by content, so retried like every call.
    pub async fn put_account(
        &self,
        account: &str,
        settings: &AccountSettings,
    ) -> Result<Account, ClientError> {
        let path = format!("/v1/accounts/{}", encode(account));
        let answer = self
            .send(Method::Put, &path, Some(to_body(settings)?))
            .await?;
        decode(&answer)
    }

    /// One page of `GET /v1/accounts`: the tenant's customer accounts that
    /// have entries, in account order (bytes), each with its balance now;
    /// follow `next_after` (as `after`) for the next page.
    pub async fn list_accounts(&self, query: &AccountQuery) -> Result<AccountPage, ClientError> {
        self.get_json(&format!("/v1/accounts{}", query.to_query()))
            .await
    }

    /// One page of `GET /v1/entries`; follow `next_after_seq` for the next.
    /// With `wait_ms` (a long poll) each attempt's timeout is extended by it.
    pub async fn list_entries(&self, query: &EntryQuery) -> Result<EntryPage, ClientError> {
        let path = format!("/v1/entries{}", query.to_query());
        let wait = Duration::from_millis(query.wait_ms.map_or(0, u64::from));
        let answer = self.send_waiting(Method::Get, &path, None, wait).await?;
        decode(&answer)
    }

    /// `GET /v1/entries/{id}`.
    pub async fn get_entry(&self, id: &str) -> Result<Entry, ClientError> {
        self.get_json(&format!("/v1/entries/{}", encode(id))).await
    }

    /// `GET /v1/accounts/{account}/balance`, now or as of a seq or a time.
    pub async fn get_balance(
        &self,
        account: &str,
        query: &BalanceQuery,
    ) -> Result<Balance, ClientError> {
        self.get_json(&format!(
            "/v1/accounts/{}/balance{}",
            encode(account),
            query.to_query()
        ))
        .await
    }

    /// The balance of `account` now.
    pub async fn balance(&self, account: &str) -> Result<Balance, ClientError> {
        self.get_balance(account, &BalanceQuery::default()).await
    }

    /// The balance right after entry `seq`.
    pub async fn balance_as_of(&self, account: &str, seq: i64) -> Result<Balance, ClientError> {
        let query = BalanceQuery {
            as_of_seq: Some(seq),
            ..BalanceQuery::default()
        };
        self.get_balance(account, &query).await
    }

    /// `GET /v1/accounts/{account}/usage`: usage summaries by period.
    pub async fn get_usage(&self, account: &str, query: &UsageQuery) -> Result<Usage, ClientError> {
        self.get_json(&format!(
            "/v1/accounts/{}/usage{}",
            encode(account),
            query.to_query()
        ))
        .await
    }

    /// `GET /v1/accounts/{account}/statement`.
    pub async fn get_statement(
        &self,
        account: &str,
        query: &StatementQuery,
    ) -> Result<Statement, ClientError> {
        self.get_json(&format!(
            "/v1/accounts/{}/statement{}",
            encode(account),
            query.to_query()
        ))
        .await
    }

    /// `GET /v1/audit/export` (scope `audit`): the export as text, JSON
    /// Lines or CSV, with its trailer (`tally verify --export` checks it).
    pub async fn get_audit_export(&self, query: &ExportQuery) -> Result<String, ClientError> {
        let path = format!("/v1/audit/export{}", query.to_query());
        let answer = self.send(Method::Get, &path, None).await?;
        String::from_utf8(answer.body).map_err(|e| ClientError::Decode(e.to_string()))
    }

    /// `GET /v1/audit/head` (scope `audit`): the chain head, signed when the
    /// server has a key.
    pub async fn get_audit_head(&self) -> Result<AuditHead, ClientError> {
        self.get_json("/v1/audit/head").await
    }

    /// `POST /v1/audit/verify` (scope `audit`): the server checks the
    /// tenant's ledger now (chain, fingerprints, balances, rule state, usage
    /// summaries). It can take up to ~25 s on a big ledger, so each attempt
    /// may last at least [`VERIFY_TIMEOUT`] (or the policy's request timeout
    /// if larger). It only reads, so it is retried like every call.
    pub async fn post_audit_verify(&self) -> Result<AuditVerification, ClientError> {
        let extra = VERIFY_TIMEOUT.saturating_sub(self.policy().request_timeout);
        let answer = self
            .send_waiting(Method::Post, "/v1/audit/verify", None, extra)
            .await?;
        decode(&answer)
    }

    /// `GET /healthz`: the process is up and the database answers.
    pub async fn healthz(&self) -> Result<Health, ClientError> {
        self.get_json("/healthz").await
    }

    /// `GET /readyz`: migrated, the database answers in time, not stopping.
    pub async fn readyz(&self) -> Result<Health, ClientError> {
        self.get_json("/readyz").await
    }

    /// `POST /v1/webhook-endpoints` (scope `admin`): events of the tenant's
    /// entries committed from now on are signed and sent to `url`. The
    /// answer holds the signing `secret`, shown only here. An endpoint has
    /// no upstream ID: when an attempt's answer is lost and the call is
    /// retried, a second endpoint may be made (check
    /// [`Client::list_webhook_endpoints`] after an `Exhausted`, or use a
    /// client whose policy has `max_attempts: 1`).
    pub async fn post_webhook_endpoint(
        &self,
        request: &WebhookEndpointRequest,
    ) -> Result<WebhookEndpointWithSecret, ClientError> {
        let body = to_body(request)?;
        let answer = self
            .send(Method::Post, "/v1/webhook-endpoints", Some(body))
            .await?;
        decode(&answer)
    }

    /// `GET /v1/webhook-endpoints` (scope `admin`): every endpoint of the
    /// tenant, oldest first, without secrets.
    pub async fn list_webhook_endpoints(&self) -> Result<Vec<WebhookEndpoint>, ClientError> {
        let list: WebhookEndpointList = self.get_json("/v1/webhook-endpoints").await?;
        Ok(list.endpoints)
    }

    /// `GET /v1/webhook-endpoints/{id}` (scope `admin`), without its secret.
    pub async fn get_webhook_endpoint(&self, id: &str) -> Result<WebhookEndpoint, ClientError> {
        self.get_json(&webhook_endpoint_path(id)).await
    }

    /// `PATCH /v1/webhook-endpoints/{id}` (scope `admin`): changes what
    /// `change` gives (at least one field, else `InvalidRequest`). The same
    /// change again is harmless, so it is retried like every call.
    pub async fn patch_webhook_endpoint(
        &self,
        id: &str,
        change: &WebhookEndpointChange,
    ) -> Result<WebhookEndpoint, ClientError> {
        let body = to_body(change)?;
        let answer = self
            .send(Method::Patch, &webhook_endpoint_path(id), Some(body))
            .await?;
        decode(&answer)
    }

    /// `DELETE /v1/webhook-endpoints/{id}` (scope `admin`): the endpoint and
    /// its deliveries are gone (204). A retry after a lost answer gets
    /// `NotFound`.
    pub async fn delete_webhook_endpoint(&self, id: &str) -> Result<(), ClientError> {
        self.send(Method::Delete, &webhook_endpoint_path(id), None)
            .await?;
        Ok(())
    }

    /// `POST /v1/webhook-endpoints/{id}/rotate-secret` (scope `admin`): a
    /// new secret; the previous one also signs until
    /// `previous_secret_expires_at`. A retry after a lost answer rotates
    /// again.
    pub async fn rotate_webhook_secret(
        &self,
        id: &str,
    ) -> Result<WebhookEndpointWithSecret, ClientError> {
        let path = format!("{}/rotate-secret", webhook_endpoint_path(id));
        let answer = self.send(Method::Post, &path, None).await?;
        decode(&answer)
    }

    /// `GET /v1/webhook-endpoints/{id}/deliveries` (scope `admin`): one
    /// page, newest first, each delivery with its attempts and the event as
    /// sent; follow `next_after` for the next.
    pub async fn list_webhook_deliveries(
        &self,
        id: &str,
        query: &WebhookDeliveryQuery,
    ) -> Result<WebhookDeliveryPage, ClientError> {
        self.get_json(&format!(
            "{}/deliveries{}",
            webhook_endpoint_path(id),
            query.to_query()
        ))
        .await
    }

    /// `POST /v1/webhook-deliveries/{id}/retry` (scope `admin`, 202): the
    /// delivery is pending again, due now, with the same event id.
    pub async fn retry_webhook_delivery(&self, id: &str) -> Result<WebhookDelivery, ClientError> {
        let path = format!("/v1/webhook-deliveries/{}/retry", encode(id));
        let answer = self.send(Method::Post, &path, None).await?;
        decode(&answer)
    }

    /// `POST /v1/webhook-endpoints/{id}/replay` (scope `admin`, 202): the
    /// endpoint's events of the entries from `from_seq` on are sent again
    /// with their original ids, at most 10,000 entries per call; go on from
    /// `next_from_seq` until it is `None`.
    pub async fn replay_webhook_events(
        &self,
        id: &str,
        from_seq: i64,
    ) -> Result<WebhookReplay, ClientError> {
        let path = format!("{}/replay", webhook_endpoint_path(id));
        let body = to_body(&WebhookReplayRequest { from_seq })?;
        let answer = self.send(Method::Post, &path, Some(body)).await?;
        decode(&answer)
    }

    /// `PUT /v1/integrations/stripe` (scope `admin`): creates or replaces
    /// the tenant's Stripe settings. The answer's `endpoint_path` is the
    /// path to give Stripe (it stays the same when the settings are
    /// replaced); the secrets are never answered back. The same settings
    /// again are harmless, so it is retried like every call.
    pub async fn put_stripe_integration(
        &self,
        request: &StripeIntegrationRequest,
    ) -> Result<StripeIntegration, ClientError> {
        let body = to_body(request)?;
        let answer = self
            .send(Method::Put, STRIPE_INTEGRATION_PATH, Some(body))
            .await?;
        decode(&answer)
    }

    /// `GET /v1/integrations/stripe` (scope `admin`), without its secrets;
    /// `NotFound` when none is configured.
    pub async fn get_stripe_integration(&self) -> Result<StripeIntegration, ClientError> {
        self.get_json(STRIPE_INTEGRATION_PATH).await
    }

    /// `DELETE /v1/integrations/stripe` (scope `admin`, 204): deliveries to
    /// its path are refused from now on; the events received stay listed
    /// and their entries stay in the ledger. `NotFound` when none is
    /// configured (also for a retry after a lost answer).
    pub async fn delete_stripe_integration(&self) -> Result<(), ClientError> {
        self.send(Method::Delete, STRIPE_INTEGRATION_PATH, None)
            .await?;
        Ok(())
    }

    /// One page of `GET /v1/integrations/stripe/events` (scope `read`): the
    /// events received, in `event_id` order, filtered by status; follow
    /// `next_after` (as `after`) for the next page.
    pub async fn list_stripe_events(
        &self,
        query: &StripeEventQuery,
    ) -> Result<StripeEventPage, ClientError> {
        self.get_json(&format!(
            "{STRIPE_INTEGRATION_PATH}/events{}",
            query.to_query()
        ))
        .await
    }

    /// `POST /v1/integrations/stripe/events/{event_id}/reapply` (scope
    /// `post`): maps the recorded event again with the current settings and
    /// decides its operations (for an `unmapped` event once its mapping is
    /// fixed); the event as recorded now. Idempotent: the entries are keyed
    /// by Stripe's ids. `NotFound` for an unknown event, `InvalidRequest`
    /// when no integration is configured.
    pub async fn reapply_stripe_event(&self, event_id: &str) -> Result<StripeEvent, ClientError> {
        let path = format!(
            "{STRIPE_INTEGRATION_PATH}/events/{}/reapply",
            encode(event_id)
        );
        let answer = self.send(Method::Post, &path, None).await?;
        decode(&answer)
    }

    async fn post_entry<T: Serialize>(
        &self,
        path: String,
        body: &T,
    ) -> Result<Posted, ClientError> {
        let answer = self.send(Method::Post, &path, Some(to_body(body)?)).await?;
        let entry: Entry = decode(&answer)?;
        Ok(Posted {
            created: answer.status == 201,
            replayed: answer
                .headers
                .get("idempotent-replayed")
                .map(|v| v == "true")
                .unwrap_or(false),
            entry,
            body: answer.body,
            attempts: answer.attempts,
        })
    }

    async fn get_json<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        let answer = self.send(Method::Get, path, None).await?;
        decode(&answer)
    }
}

const STRIPE_INTEGRATION_PATH: &str = "/v1/integrations/stripe";

fn webhook_endpoint_path(id: &str) -> String {
    format!("/v1/webhook-endpoints/{}", encode(id))
}
