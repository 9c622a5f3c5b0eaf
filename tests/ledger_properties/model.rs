//! What the ledger must answer, worked out from docs/ledger-rules.md and
//! SPEC §1–§3 by a model that keeps exact balances, holds, refunded totals,
//! reversals, usage sums and the first answer of every key.
//!
//! Where the rules leave a choice to the server, or timing does (a short
//! hold may expire between two requests), the model allows every answer the
//! rules permit and learns from the one it gets:
//! - totals have no ceiling: an entry whose totals grow past 28 digits (or
//!   past what `rust_decimal` holds) must post, exactly;
//! - a system counter account other than the kind's default may be refused
//!   with 422 (consistently: the first answer fixes the policy);
//! - a hold whose `expires_at` has passed may or may not have been released
//!   by the server's sweep yet.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, NaiveDate, Utc};
use serde_json::Value;

pub use super::call::{Call, HoldExpiry};
use super::fx::{reference_value, Fx};
use super::gen::Amt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    UsageDebit,
    Payment,
    Hold,
    HoldCapture,
    HoldRelease,
    Refund,
    Reversal,
    Adjustment,
    AccountSettings,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::UsageDebit => "usage_debit",
            Kind::Payment => "payment",
            Kind::Hold => "hold",
            Kind::HoldCapture => "hold_capture",
            Kind::HoldRelease => "hold_release",
            Kind::Refund => "refund",
            Kind::Reversal => "reversal",
            Kind::Adjustment => "adjustment",
            Kind::AccountSettings => "account_settings",
        }
    }

    /// Kinds that move posted money (the others change `held` or nothing).
    pub fn moves_money(self) -> bool {
        !matches!(self, Kind::Hold | Kind::HoldRelease | Kind::AccountSettings)
    }
}

pub const HOLDS: &str = "@holds";
const ADJUSTMENTS: &str = "@adjustments";

/// When a request was decided: somewhere between sending it and reading
/// its answer (client and server share this machine's clock).
#[derive(Clone, Copy, Debug)]
pub struct Window {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
}

// ---------------------------------------------------------------- names

fn check_text(v: &str, max: usize) -> bool {
    !v.is_empty() && v.len() <= max && !v.chars().any(char::is_control)
}

fn valid_id(v: &str) -> bool {
    check_text(v, 255)
}

fn valid_customer(v: &str) -> bool {
    check_text(v, 128) && !v.starts_with('@')
}

fn valid_unit(v: &str) -> bool {
    !v.is_empty()
        && v.len() <= 32
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'))
}

fn positive(a: &Amt) -> Option<Fx> {
    reference_value(&a.0).filter(|v| !v.is_zero() && !v.is_negative())
}

fn non_negative(a: &Amt) -> Option<Fx> {
    reference_value(&a.0).filter(|v| !v.is_negative())
}

pub fn is_system(account: &str) -> bool {
    account.starts_with('@')
}

/// An `Overdraft` as the model understands it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Overdraft {
    Allow,
    Forbid,
    Limit(Fx),
}

impl Overdraft {
    fn floor(&self) -> Option<Fx> {
        match self {
            Overdraft::Allow => None,
            Overdraft::Forbid => Some(Fx::zero()),
            Overdraft::Limit(l) => Some(l.neg()),
        }
    }

    pub fn to_json(&self) -> Value {
        match self {
            Overdraft::Allow => Value::from("allow"),
            Overdraft::Forbid => Value::from("forbid"),
            Overdraft::Limit(l) => serde_json::json!({ "limit": l.canonical() }),
        }
    }

    fn parse(raw: &Option<String>) -> Option<Overdraft> {
        let Some(raw) = raw else {
            return Some(Overdraft::Allow);
        };
        match raw.as_str() {
            "\"allow\"" => Some(Overdraft::Allow),
            "\"forbid\"" => Some(Overdraft::Forbid),
            other => {
                let inner = other.strip_prefix("{\"limit\":")?.strip_suffix('}')?;
                non_negative(&Amt(inner.to_owned())).map(Overdraft::Limit)
            }
        }
    }
}

fn instant(text: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

// ---------------------------------------------------------------- state

#[derive(Clone, Debug, Default)]
pub struct Bal {
    pub debits: Fx,
    pub credits: Fx,
}

impl Bal {
    pub fn posted(&self) -> Fx {
        self.credits.sub(&self.debits)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HoldStatus {
    Open,
    Captured,
    Released,
    Expired,
    Rejected,
}

impl HoldStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            HoldStatus::Open => "open",
            HoldStatus::Captured => "captured",
            HoldStatus::Released => "released",
            HoldStatus::Expired => "expired",
            HoldStatus::Rejected => "rejected",
        }
    }
}

#[derive(Clone, Debug)]
pub struct HoldRec {
    pub account: String,
    pub unit: String,
    pub amount: Fx,
    pub counter: String,
    pub expires_at: DateTime<Utc>,
    pub status: HoldStatus,
}

#[derive(Clone, Debug)]
pub struct Settings {
    pub unit: String,
    pub overdraft: Overdraft,
    pub version: i64,
}

/// Normalised request parameters, as the server fingerprints them.
pub type Params = BTreeMap<&'static str, String>;

/// The first answer to a key, which every replay must repeat.
#[derive(Clone, Debug)]
pub struct Stored {
    pub params: Params,
    pub entry_id: String,
    pub posted: bool,
    /// The entry (of a 201, or inside a stored rejection).
    pub entry: Value,
    /// The whole body when it came from a single endpoint (a 201's entry
    /// or a 422's problem), for byte-for-byte comparison.
    pub raw: Option<Vec<u8>>,
    /// The problem of a stored rejection.
    pub problem: Option<Value>,
    pub account: String,
    pub debit: String,
    pub credit: String,
    pub amount: Fx,
    pub unit: String,
}

#[derive(Clone, Debug)]
pub struct ModelEntry {
    pub id: String,
    pub kind: Kind,
    pub posted: bool,
    pub account: String,
    pub debit: String,
    pub credit: String,
    pub amount: Fx,
    pub unit: String,
    /// The entry as first answered.
    pub first: Value,
    /// Its usage key and quantity, for a posted usage debit.
    pub usage: Option<(UsageKey, Fx)>,
}

/// (account, meter or "", day, unit).
pub type UsageKey = (String, String, NaiveDate, String);

#[derive(Clone, Debug, Default)]
pub struct UsageRow {
    pub amount: Fx,
    pub quantity: Fx,
    pub entries: i64,
}

#[derive(Default)]
pub struct Model {
    pub bal: BTreeMap<(String, String), Bal>,
    pub units: BTreeMap<String, String>,
    pub settings: BTreeMap<String, Settings>,
    pub holds: BTreeMap<String, HoldRec>,
    pub stored: BTreeMap<(Kind, String), Stored>,
    pub entries: Vec<ModelEntry>,
    pub by_id: BTreeMap<String, usize>,
    pub refunded: BTreeMap<String, Fx>,
    pub reversed: BTreeMap<String, String>,
    pub usage: BTreeMap<UsageKey, UsageRow>,
    /// Whether a (kind, system counter account) passed validation.
    pub counter_policy: BTreeMap<(Kind, String), bool>,
}

// ---------------------------------------------------------------- expectations

/// Something that may legitimately happen after a rule decided.
#[derive(Clone, Debug)]
pub enum Learn {
    /// The sweep had released this hold.
    HoldExpired(String),
}

/// One answer the server may give.
#[derive(Clone, Debug)]
pub enum Alt {
    /// Nothing stored. `code: None` allows any code of that status;
    /// `counter` marks the refusal of a counter account by policy.
    Refuse {
        status: u16,
        code: Option<&'static str>,
        counter: Option<(Kind, String)>,
    },
    Replay(Kind, String),
    Conflict {
        entry_id: String,
        fields: BTreeSet<String>,
    },
    Post(Box<Effect>),
    /// A stored rejection (`code: None`: any code, for totals out of range).
    Reject {
        code: Option<&'static str>,
        effect: Box<Effect>,
        learn: Option<Learn>,
    },
    /// A settings PUT: the version it must answer, and the entry it appends
    /// when it changes anything.
    Settings {
        account: String,
        unit: String,
        overdraft: Overdraft,
        version: i64,
        changed: bool,
    },
}

/// What an entry does when it is appended.
#[derive(Clone, Debug)]
pub struct Effect {
    pub kind: Kind,
    pub key: String,
    pub params: Params,
    pub account: String,
    pub debit: String,
    pub credit: String,
    pub amount: Fx,
    pub unit: String,
    pub held_delta: Fx,
    pub record: Record,
}

#[derive(Clone, Debug)]
pub enum Record {
    None,
    OpenHold { counter: String },
    CloseHold(String, HoldStatus),
    Refunded(String),
    Reversed(String),
}

/// A rule's outcome before the floor and the totals are looked at.
enum Rule {
    Pass,
    Reject(&'static str, Option<Learn>),
}

fn refuse(status: u16, code: &'static str) -> Vec<Alt> {
    vec![Alt::Refuse {
        status,
        code: Some(code),
        counter: None,
    }]
}

impl Model {
    /// Held on an account during `w`: (surely, at most). A hold past its
    /// expiry may already have been released by the sweep.
    fn held(&self, account: &str, unit: &str, w: &Window) -> (Fx, Fx) {
        let mut sure = Fx::zero();
        let mut most = Fx::zero();
        for h in self.holds.values() {
            if h.status == HoldStatus::Open && h.account == account && h.unit == unit {
                most = most.add(&h.amount);
                if h.expires_at > w.end {
                    sure = sure.add(&h.amount);
                }
            }
        }
        (sure, most)
    }

    /// Held on an account by every hold the model knows to be open (exact
    /// once the sweep has released every expired hold).
    pub fn held_now(&self, account: &str, unit: &str) -> Fx {
        self.holds
            .values()
            .filter(|h| h.status == HoldStatus::Open && h.account == account && h.unit == unit)
            .fold(Fx::zero(), |sum, h| sum.add(&h.amount))
    }

    /// The answers the rules allow for `call`, decided during `w`.
    pub fn expect(&self, call: &Call, w: &Window) -> Vec<Alt> {
        let kind = call.kind();
        let Some((key, params, counter)) = self.validate(call) else {
            return refuse(422, "invalid_request");
        };
        let mut alts = Vec::new();
        // A counter account the server may refuse by policy (finding 4:
        // which system accounts a caller may name is the server's choice).
        if let Some(c) = &counter {
            let default = match kind {
                Kind::Payment => "@payments",
                _ => "@revenue",
            };
            if is_system(c) && c != default {
                match self.counter_policy.get(&(kind, c.clone())) {
                    Some(false) => {
                        return vec![Alt::Refuse {
                            status: 422,
                            code: None,
                            counter: Some((kind, c.clone())),
                        }]
                    }
                    Some(true) => {}
                    None => alts.push(Alt::Refuse {
                        status: 422,
                        code: None,
                        counter: Some((kind, c.clone())),
                    }),
                }
            }
        }
        if kind != Kind::AccountSettings {
            if let Some(s) = self.stored.get(&(kind, key.clone())) {
                if s.params == params {
                    alts.push(Alt::Replay(kind, key));
                } else {
                    let names: BTreeSet<&'static str> =
                        s.params.keys().chain(params.keys()).copied().collect();
                    let fields = names
                        .into_iter()
                        .filter(|n| s.params.get(n) != params.get(n))
                        .map(str::to_owned)
                        .collect();
                    alts.push(Alt::Conflict {
                        entry_id: s.entry_id.clone(),
                        fields,
                    });
                }
                return alts;
            }
        }
        alts.extend(self.decide(call, key, params, w));
        alts
    }

    /// Handler-side validation: the key, the normalised parameters and the
    /// counter account, or `None` for a 422 `invalid_request`.
    fn validate(&self, call: &Call) -> Option<(String, Params, Option<String>)> {
        let mut p = Params::new();
        let counter_ok = |c: &Option<String>, account: &str| match c {
            Some(c) => check_text(c, 128) && c != account,
            None => true,
        };
        match call {
            Call::Debit(d, counter) => {
                let amount = positive(&d.amount)?;
                let ok = valid_id(&d.id)
                    && valid_customer(&d.account)
                    && valid_unit(&d.unit)
                    && counter_ok(counter, &d.account)
                    && d.meter.as_deref().is_none_or(|m| check_text(m, 128));
                let quantity = match &d.quantity {
                    Some(q) => Some(non_negative(q)?),
                    None => None,
                };
                let occurred = match &d.occurred_at {
                    Some(t) => Some(instant(t)?),
                    None => None,
                };
                if !ok {
                    return None;
                }
                p.insert("account", d.account.clone());
                p.insert("amount", amount.canonical());
                p.insert("unit", d.unit.clone());
                if let Some(m) = &d.meter {
                    p.insert("meter", m.clone());
                }
                if let Some(q) = quantity {
                    p.insert("quantity", q.canonical());
                }
                if let Some(t) = occurred {
                    p.insert("occurred_at", t.timestamp_micros().to_string());
                }
                if let Some(c) = counter {
                    p.insert("counter_account", c.clone());
                }
                if let Some(m) = &d.metadata {
                    p.insert("metadata", m.clone());
                }
                Some((d.id.clone(), p, counter.clone()))
            }
            Call::Payment(x, counter) => {
                let amount = positive(&x.amount)?;
                let ok = valid_id(&x.id)
                    && valid_customer(&x.account)
                    && valid_unit(&x.unit)
                    && counter_ok(counter, &x.account);
                if !ok {
                    return None;
                }
                p.insert("account", x.account.clone());
                p.insert("amount", amount.canonical());
                p.insert("unit", x.unit.clone());
                if let Some(pr) = &x.processor {
                    p.insert("processor", pr.clone());
                }
                if let Some(c) = counter {
                    p.insert("counter_account", c.clone());
                }
                Some((x.id.clone(), p, counter.clone()))
            }
            Call::Hold(h, counter, expiry) => {
                let amount = positive(&h.amount)?;
                let ok = valid_id(&h.id)
                    && valid_customer(&h.account)
                    && valid_unit(&h.unit)
                    && counter_ok(counter, &h.account)
                    && !matches!(expiry, HoldExpiry::Ttl(t) if !(1..=2_592_000).contains(t));
                if !ok {
                    return None;
                }
                p.insert("account", h.account.clone());
                p.insert("amount", amount.canonical());
                p.insert("unit", h.unit.clone());
                match expiry {
                    HoldExpiry::At(_, t) => {
                        p.insert("expires_at", t.timestamp_micros().to_string())
                    }
                    HoldExpiry::Ttl(t) => p.insert("ttl_seconds", t.to_string()),
                };
                if let Some(c) = counter {
                    p.insert("counter_account", c.clone());
                }
                Some((h.id.clone(), p, counter.clone()))
            }
            Call::Capture { hold, id, amount } => {
                let amount = positive(amount)?;
                if !(valid_id(hold) && valid_id(id)) {
                    return None;
                }
                p.insert("hold_id", hold.clone());
                p.insert("amount", amount.canonical());
                Some((id.clone(), p, None))
            }
            Call::Release { hold, id } => {
                if !(valid_id(hold) && valid_id(id) && !id.starts_with('@')) {
                    return None;
                }
                p.insert("hold_id", hold.clone());
                Some((id.clone(), p, None))
            }
            Call::Refund(r) => {
                let amount = positive(&r.amount)?;
                if !(valid_id(&r.id) && valid_id(&r.payment)) {
                    return None;
                }
                p.insert("payment_id", r.payment.clone());
                p.insert("amount", amount.canonical());
                if let Some(reason) = &r.reason {
                    p.insert("reason", reason.clone());
                }
                Some((r.id.clone(), p, None))
            }
            Call::Reversal { id, entry_id } => {
                if !(valid_id(id) && valid_id(entry_id)) {
                    return None;
                }
                p.insert("entry_id", entry_id.clone());
                p.insert("reason", "correction".into());
                Some((id.clone(), p, None))
            }
            Call::Adjustment {
                id,
                account,
                amount,
                direction,
                unit,
            } => {
                let amount = positive(amount)?;
                let ok = valid_id(id)
                    && valid_customer(account)
                    && unit.as_deref().is_none_or(valid_unit)
                    && matches!(direction.as_str(), "credit" | "debit");
                if !ok {
                    return None;
                }
                p.insert("account", account.clone());
                p.insert("amount", amount.canonical());
                if let Some(u) = unit {
                    p.insert("unit", u.clone());
                }
                p.insert("direction", direction.clone());
                p.insert("reason", "support credit".into());
                Some((id.clone(), p, None))
            }
            Call::Settings {
                account,
                unit,
                overdraft,
            } => {
                let od = Overdraft::parse(overdraft)?;
                if !(valid_customer(account) && valid_unit(unit)) {
                    return None;
                }
                p.insert("unit", unit.clone());
                p.insert("overdraft", od.to_json().to_string());
                Some((account.clone(), p, None))
            }
        }
    }

    fn decide(&self, call: &Call, key: String, params: Params, w: &Window) -> Vec<Alt> {
        let kind = call.kind();
        let effect = |account: &str, debit: &str, credit: &str, amount: Fx, unit: &str| Effect {
            kind,
            key: key.clone(),
            params: params.clone(),
            account: account.to_owned(),
            debit: debit.to_owned(),
            credit: credit.to_owned(),
            amount,
            unit: unit.to_owned(),
            held_delta: Fx::zero(),
            record: Record::None,
        };
        let mut pre = Vec::new();
        // (effect, rule outcomes, whether the floor applies)
        let (e, rules, floor): (Effect, Vec<Rule>, bool) = match call {
            Call::Debit(d, counter) => {
                let credit = counter.clone().unwrap_or_else(|| "@revenue".into());
                let amount = positive(&d.amount).unwrap_or_default();
                (
                    effect(&d.account, &d.account, &credit, amount, &d.unit),
                    vec![Rule::Pass],
                    true,
                )
            }
            Call::Payment(x, counter) => {
                let debit = counter.clone().unwrap_or_else(|| "@payments".into());
                let amount = positive(&x.amount).unwrap_or_default();
                (
                    effect(&x.account, &debit, &x.account, amount, &x.unit),
                    vec![Rule::Pass],
                    true,
                )
            }
            Call::Hold(h, counter, expiry) => {
                if let HoldExpiry::At(_, t) = expiry {
                    if *t <= w.start || *t > w.end + chrono::Duration::days(366) {
                        return refuse(422, "invalid_request");
                    }
                    if *t <= w.end {
                        // Decided at the edge of its expiry: maybe already past.
                        pre.extend(refuse(422, "invalid_request"));
                    }
                }
                let amount = positive(&h.amount).unwrap_or_default();
                let mut e = effect(&h.account, &h.account, HOLDS, amount.clone(), &h.unit);
                e.held_delta = amount;
                e.record = Record::OpenHold {
                    counter: counter.clone().unwrap_or_else(|| "@revenue".into()),
                };
                (e, vec![Rule::Pass], true)
            }
            Call::Capture { hold, amount, .. } => {
                let Some(h) = self.holds.get(hold) else {
                    return refuse(404, "not_found");
                };
                let amount = positive(amount).unwrap_or_default();
                if amount > h.amount {
                    return refuse(422, "invalid_request");
                }
                let mut e = effect(&h.account, &h.account, &h.counter, amount, &h.unit);
                e.held_delta = h.amount.neg();
                e.record = Record::CloseHold(hold.clone(), HoldStatus::Captured);
                let learn = || Some(Learn::HoldExpired(hold.clone()));
                let rules = if h.status != HoldStatus::Open {
                    vec![Rule::Reject("hold_not_open", None)]
                } else if h.expires_at > w.end {
                    vec![Rule::Pass]
                } else if h.expires_at <= w.start {
                    vec![
                        Rule::Reject("hold_expired", None),
                        Rule::Reject("hold_not_open", learn()),
                    ]
                } else {
                    vec![
                        Rule::Pass,
                        Rule::Reject("hold_expired", None),
                        Rule::Reject("hold_not_open", learn()),
                    ]
                };
                (e, rules, false)
            }
            Call::Release { hold, .. } => {
                let Some(h) = self.holds.get(hold) else {
                    return refuse(404, "not_found");
                };
                let mut e = effect(&h.account, &h.account, HOLDS, h.amount.clone(), &h.unit);
                e.held_delta = h.amount.neg();
                e.record = Record::CloseHold(hold.clone(), HoldStatus::Released);
                let rules = if h.status != HoldStatus::Open {
                    vec![Rule::Reject("hold_not_open", None)]
                } else if h.expires_at > w.end {
                    vec![Rule::Pass]
                } else {
                    vec![
                        Rule::Pass,
                        Rule::Reject("hold_not_open", Some(Learn::HoldExpired(hold.clone()))),
                    ]
                };
                (e, rules, false)
            }
            Call::Refund(r) => {
                let Some(pay) = self.stored.get(&(Kind::Payment, r.payment.clone())) else {
                    return refuse(404, "not_found");
                };
                let amount = positive(&r.amount).unwrap_or_default();
                let mut e = effect(
                    &pay.account,
                    &pay.credit,
                    &pay.debit,
                    amount.clone(),
                    &pay.unit,
                );
                e.record = Record::Refunded(r.payment.clone());
                let refundable = if pay.posted && !self.reversed.contains_key(&pay.entry_id) {
                    pay.amount.clone()
                } else {
                    Fx::zero()
                };
                let refunded = self.refunded.get(&r.payment).cloned().unwrap_or_default();
                let rules = if refunded.add(&amount) > refundable {
                    vec![Rule::Reject("refund_exceeds_payment", None)]
                } else {
                    vec![Rule::Pass]
                };
                (e, rules, true)
            }
            Call::Reversal { entry_id, .. } => {
                let Some(&i) = self.by_id.get(entry_id) else {
                    return refuse(404, "not_found");
                };
                let t = &self.entries[i];
                let reversible = matches!(
                    t.kind,
                    Kind::UsageDebit
                        | Kind::Payment
                        | Kind::Refund
                        | Kind::Adjustment
                        | Kind::HoldCapture
                );
                if !reversible || !t.posted {
                    return refuse(422, "invalid_request");
                }
                let mut e = effect(&t.account, &t.credit, &t.debit, t.amount.clone(), &t.unit);
                e.record = Record::Reversed(entry_id.clone());
                let rules = if self.reversed.contains_key(entry_id) {
                    vec![Rule::Reject("already_reversed", None)]
                } else {
                    vec![Rule::Pass]
                };
                (e, rules, false)
            }
            Call::Adjustment {
                account,
                amount,
                direction,
                unit,
                ..
            } => {
                let Some(unit) = unit.clone().or_else(|| self.units.get(account).cloned()) else {
                    return refuse(422, "invalid_request");
                };
                let amount = positive(amount).unwrap_or_default();
                let (debit, credit) = if direction == "credit" {
                    (ADJUSTMENTS, account.as_str())
                } else {
                    (account.as_str(), ADJUSTMENTS)
                };
                (
                    effect(account, debit, credit, amount, &unit),
                    vec![Rule::Pass],
                    false,
                )
            }
            Call::Settings {
                account,
                unit,
                overdraft,
            } => {
                let od = Overdraft::parse(overdraft).unwrap_or(Overdraft::Allow);
                let current = self.settings.get(account);
                if let Some(c) = current {
                    if c.unit == *unit && c.overdraft == od {
                        return vec![Alt::Settings {
                            account: account.clone(),
                            unit: unit.clone(),
                            overdraft: od,
                            version: c.version,
                            changed: false,
                        }];
                    }
                }
                if self.units.get(account).is_some_and(|u| u != unit) {
                    return refuse(422, "unit_mismatch");
                }
                return vec![Alt::Settings {
                    account: account.clone(),
                    unit: unit.clone(),
                    overdraft: od,
                    version: current.map_or(1, |c| c.version + 1),
                    changed: true,
                }];
            }
        };
        // Units are checked before the floor, on both sides.
        for a in [&e.debit, &e.credit] {
            if !is_system(a) && self.units.get(a).is_some_and(|u| *u != e.unit) {
                pre.extend(refuse(422, "unit_mismatch"));
                return pre;
            }
        }
        pre.extend(self.finish(e, rules, floor, w));
        pre
    }

    /// Applies the floor to each rule outcome.
    fn finish(&self, e: Effect, rules: Vec<Rule>, floor: bool, w: &Window) -> Vec<Alt> {
        let mut alts = Vec::new();
        for rule in rules {
            match rule {
                Rule::Reject(code, learn) => alts.push(Alt::Reject {
                    code: Some(code),
                    effect: Box::new(e.clone()),
                    learn,
                }),
                Rule::Pass => {
                    let (may_pass, may_fail) = if floor {
                        self.floor(&e, w)
                    } else {
                        (true, false)
                    };
                    if may_fail {
                        alts.push(Alt::Reject {
                            code: Some("insufficient_funds"),
                            effect: Box::new(e.clone()),
                            learn: None,
                        });
                    }
                    // Totals have no ceiling (docs/ledger-rules.md,
                    // "Limits"): whatever size they reach, the entry posts.
                    if may_pass {
                        alts.push(Alt::Post(Box::new(e.clone())));
                    }
                }
            }
        }
        alts
    }

    /// (may pass, may fail) the overdraft floor of the debited customer.
    fn floor(&self, e: &Effect, w: &Window) -> (bool, bool) {
        let holds = e.held_delta > Fx::zero();
        let account = if holds { &e.account } else { &e.debit };
        if is_system(account) {
            return (true, false);
        }
        let Some(floor) = self.settings.get(account).and_then(|s| s.overdraft.floor()) else {
            return (true, false);
        };
        let taken = if holds { &e.held_delta } else { &e.amount };
        let posted = self.posted(account, &e.unit);
        let (sure, most) = self.held(account, &e.unit, w);
        let best = posted.sub(&sure).sub(taken);
        let worst = posted.sub(&most).sub(taken);
        (best >= floor, worst < floor)
    }
}
