//! An operation resolved into the request it sends: its body as raw JSON
//! fields, so numbers go out with exactly the digits generated.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::gen::{self, Amt, Counter};
use super::model::Kind;

/// A hold's expiry as sent.
#[derive(Clone, Debug)]
pub enum HoldExpiry {
    At(String, DateTime<Utc>),
    Ttl(i64),
}

/// An operation with everything resolved that depends on the run: the
/// counter account, the expiry instant, the entry a reversal names.
#[derive(Clone, Debug)]
pub enum Call {
    Debit(gen::Debit, Option<String>),
    Payment(gen::Payment, Option<String>),
    Hold(gen::Hold, Option<String>, HoldExpiry),
    Capture {
        hold: String,
        id: String,
        amount: Amt,
    },
    Release {
        hold: String,
        id: String,
    },
    Refund(gen::Refund),
    Reversal {
        id: String,
        entry_id: String,
    },
    Adjustment {
        id: String,
        account: String,
        amount: Amt,
        direction: String,
        unit: Option<String>,
    },
    Settings {
        account: String,
        unit: String,
        overdraft: Option<String>,
    },
}

pub fn resolve_counter(counter: &Option<Counter>, account: &str) -> Option<String> {
    counter.as_ref().map(|c| match c {
        Counter::Named(n) => n.clone(),
        Counter::Same => account.to_owned(),
    })
}

impl Call {
    pub fn kind(&self) -> Kind {
        match self {
            Call::Debit(..) => Kind::UsageDebit,
            Call::Payment(..) => Kind::Payment,
            Call::Hold(..) => Kind::Hold,
            Call::Capture { .. } => Kind::HoldCapture,
            Call::Release { .. } => Kind::HoldRelease,
            Call::Refund(..) => Kind::Refund,
            Call::Reversal { .. } => Kind::Reversal,
            Call::Adjustment { .. } => Kind::Adjustment,
            Call::Settings { .. } => Kind::AccountSettings,
        }
    }

    /// The body's fields as (name, raw JSON).
    pub fn fields(&self) -> Vec<(&'static str, String)> {
        let s = |v: &str| Value::String(v.to_owned()).to_string();
        let mut f: Vec<(&'static str, String)> = Vec::new();
        match self {
            Call::Debit(d, counter) => {
                f.push(("usage_record_id", s(&d.id)));
                f.push(("account", s(&d.account)));
                f.push(("amount", d.amount.0.clone()));
                f.push(("unit", s(&d.unit)));
                if let Some(c) = counter {
                    f.push(("counter_account", s(c)));
                }
                if let Some(m) = &d.meter {
                    f.push(("meter", s(m)));
                }
                if let Some(q) = &d.quantity {
                    f.push(("quantity", q.0.clone()));
                }
                if let Some(t) = &d.occurred_at {
                    f.push(("occurred_at", s(t)));
                }
                if let Some(m) = &d.metadata {
                    f.push(("metadata", format!("{{\"n\":{}}}", s(m))));
                }
            }
            Call::Payment(p, counter) => {
                f.push(("payment_id", s(&p.id)));
                f.push(("account", s(&p.account)));
                f.push(("amount", p.amount.0.clone()));
                f.push(("unit", s(&p.unit)));
                if let Some(c) = counter {
                    f.push(("counter_account", s(c)));
                }
                if let Some(p) = &p.processor {
                    f.push(("processor", s(p)));
                }
            }
            Call::Hold(h, counter, expiry) => {
                f.push(("hold_id", s(&h.id)));
                f.push(("account", s(&h.account)));
                f.push(("amount", h.amount.0.clone()));
                f.push(("unit", s(&h.unit)));
                match expiry {
                    HoldExpiry::At(text, _) => f.push(("expires_at", s(text))),
                    HoldExpiry::Ttl(t) => f.push(("ttl_seconds", t.to_string())),
                }
                if let Some(c) = counter {
                    f.push(("counter_account", s(c)));
                }
            }
            Call::Capture { id, amount, .. } => {
                f.push(("capture_id", s(id)));
                f.push(("amount", amount.0.clone()));
            }
            Call::Release { id, .. } => f.push(("release_id", s(id))),
            Call::Refund(r) => {
                f.push(("refund_id", s(&r.id)));
                f.push(("payment_id", s(&r.payment)));
                f.push(("amount", r.amount.0.clone()));
                if let Some(reason) = &r.reason {
                    f.push(("reason", s(reason)));
                }
            }
            Call::Reversal { id, entry_id } => {
                f.push(("reversal_id", s(id)));
                f.push(("entry_id", s(entry_id)));
                f.push(("reason", s("correction")));
            }
            Call::Adjustment {
                id,
                account,
                amount,
                direction,
                unit,
            } => {
                f.push(("adjustment_id", s(id)));
                f.push(("account", s(account)));
                f.push(("amount", amount.0.clone()));
                f.push(("direction", s(direction)));
                f.push(("reason", s("support credit")));
                if let Some(u) = unit {
                    f.push(("unit", s(u)));
                }
            }
            Call::Settings {
                unit, overdraft, ..
            } => {
                f.push(("unit", s(unit)));
                if let Some(o) = overdraft {
                    f.push(("overdraft", o.clone()));
                }
            }
        }
        f
    }
}

/// The body of a request: the fields in order, values as raw JSON text
/// (so a number keeps exactly the digits generated).
pub fn body_text(fields: &[(&str, String)]) -> String {
    let parts: Vec<String> = fields
        .iter()
        .map(|(k, v)| format!("{}:{v}", Value::String((*k).to_owned())))
        .collect();
    format!("{{{}}}", parts.join(","))
}
