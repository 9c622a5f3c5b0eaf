//! Requests that refer to the ledger's own records or change its rules:
//! account settings, refunds, reversals and adjustments.

use serde_json::{Map, Value};

use super::model::{
    request_fields, Action, AdjustmentRequest, Direction, EntryKind, EntryRequest, SettingsChange,
};
use crate::amount::canonical;
use crate::fields::{Fields, ValidationErrors};
use crate::names;
use crate::rule_state::Overdraft;

fn text(params: &mut Map<String, Value>, key: &str, value: &str) {
    params.insert(key.into(), Value::String(value.to_owned()));
}

impl EntryRequest {
    /// `PUT /v1/accounts/{account}`. Its upstream ID is chosen by the writer
    /// (`<account>#<version>`): a PUT is idempotent by its content, not by a
    /// client key.
    pub fn settings(
        account: &str,
        body: Map<String, Value>,
    ) -> Result<EntryRequest, ValidationErrors> {
        let mut f = Fields::new(body, request_fields::SETTINGS);
        if let Err(m) = names::check_customer_account(account) {
            f.error("account", m);
        }
        let unit = f.required_str("unit", names::check_unit);
        let overdraft = match f.optional_value("overdraft") {
            None => Some(Overdraft::Allow),
            Some(v) => match Overdraft::from_json(&v) {
                Ok(o) => Some(o),
                Err(m) => {
                    f.error("overdraft", m);
                    None
                }
            },
        };
        let metadata = f.optional_metadata("metadata");
        let low_balance = match f.optional_value("alerts") {
            None => Some(None),
            Some(v) => match crate::rule_state::low_balance_from_json(&v) {
                Ok(low) => Some(low),
                Err(m) => {
                    f.error("alerts", m);
                    None
                }
            },
        };
        f.finish()?;
        let (Some(unit), Some(overdraft), Some(metadata), Some(low_balance)) =
            (unit, overdraft, metadata, low_balance)
        else {
            return Err(ValidationErrors::single("body", "is invalid"));
        };
        let mut params = Map::new();
        text(&mut params, "account", account);
        text(&mut params, "unit", &unit);
        params.insert("overdraft".into(), overdraft.to_json());
        if let Some(m) = &metadata {
            params.insert("metadata".into(), Value::Object(m.clone()));
        }
        // Absent when unset, so the settings written before alerts existed
        // keep their fingerprints.
        if let Some(low) = low_balance {
            params.insert("alerts".into(), crate::rule_state::low_balance_to_json(low));
        }
        let change = SettingsChange {
            account: account.to_owned(),
            unit,
            overdraft,
            metadata,
            low_balance,
        };
        Ok(Self::build(
            EntryKind::AccountSettings,
            String::new(),
            Action::Settings(change),
            params,
        ))
    }

    /// `POST /v1/refunds`: back to the payer, out of the paid account.
    pub fn refund(body: Map<String, Value>) -> Result<EntryRequest, ValidationErrors> {
        let mut f = Fields::new(body, request_fields::REFUND);
        let upstream_id = f.required_str("refund_id", names::check_upstream_id);
        let payment_id = f.required_str("payment_id", names::check_upstream_id);
        let amount = f.required_amount("amount");
        let reason = f.optional_str("reason", names::check_reason);
        let metadata = f.optional_metadata("metadata");
        f.finish()?;
        let (Some(upstream_id), Some(payment_id), Some(amount), Some(reason), Some(metadata)) =
            (upstream_id, payment_id, amount, reason, metadata)
        else {
            return Err(ValidationErrors::single("body", "is invalid"));
        };
        let mut params = Map::new();
        text(&mut params, "payment_id", &payment_id);
        text(&mut params, "amount", &canonical(amount));
        if let Some(r) = reason {
            text(&mut params, "reason", &r);
        }
        if let Some(m) = metadata {
            params.insert("metadata".into(), Value::Object(m));
        }
        Ok(Self::build(
            EntryKind::Refund,
            upstream_id,
            Action::Refund { payment_id, amount },
            params,
        ))
    }

    /// `POST /v1/reversals`: the compensating entry of another.
    pub fn reversal(body: Map<String, Value>) -> Result<EntryRequest, ValidationErrors> {
        let mut f = Fields::new(body, request_fields::REVERSAL);
        let upstream_id = f.required_str("reversal_id", names::check_upstream_id);
        let entry_id = f.required_str("entry_id", names::check_upstream_id);
        let reason = f.required_str("reason", names::check_reason);
        let metadata = f.optional_metadata("metadata");
        f.finish()?;
        let (Some(upstream_id), Some(entry_id), Some(reason), Some(metadata)) =
            (upstream_id, entry_id, reason, metadata)
        else {
            return Err(ValidationErrors::single("body", "is invalid"));
        };
        let mut params = Map::new();
        text(&mut params, "entry_id", &entry_id);
        text(&mut params, "reason", &reason);
        if let Some(m) = metadata {
            params.insert("metadata".into(), Value::Object(m));
        }
        Ok(Self::build(
            EntryKind::Reversal,
            upstream_id,
            Action::Reversal { entry_id },
            params,
        ))
    }

    /// `POST /v1/adjustments` (scope `admin`): a correction against `@adjustments`.
    pub fn adjustment(body: Map<String, Value>) -> Result<EntryRequest, ValidationErrors> {
        let mut f = Fields::new(body, request_fields::ADJUSTMENT);
        let upstream_id = f.required_str("adjustment_id", names::check_upstream_id);
        let account = f.required_str("account", names::check_customer_account);
        let amount = f.required_amount("amount");
        let unit = f.optional_str("unit", names::check_unit);
        let direction = f.required_choice("direction", &["credit", "debit"]);
        let reason = f.required_str("reason", names::check_reason);
        let metadata = f.optional_metadata("metadata");
        f.finish()?;
        let (
            Some(upstream_id),
            Some(account),
            Some(amount),
            Some(unit),
            Some(direction),
            Some(reason),
            Some(metadata),
        ) = (
            upstream_id,
            account,
            amount,
            unit,
            direction,
            reason,
            metadata,
        )
        else {
            return Err(ValidationErrors::single("body", "is invalid"));
        };
        let mut params = Map::new();
        text(&mut params, "account", &account);
        text(&mut params, "amount", &canonical(amount));
        if let Some(u) = &unit {
            text(&mut params, "unit", u);
        }
        text(&mut params, "direction", direction);
        text(&mut params, "reason", &reason);
        if let Some(m) = metadata {
            params.insert("metadata".into(), Value::Object(m));
        }
        let direction = if direction == "credit" {
            Direction::Credit
        } else {
            Direction::Debit
        };
        Ok(Self::build(
            EntryKind::Adjustment,
            upstream_id,
            Action::Adjustment(AdjustmentRequest {
                account,
                amount,
                unit,
                direction,
            }),
            params,
        ))
    }
}
