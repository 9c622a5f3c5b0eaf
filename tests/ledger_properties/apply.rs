//! Matching an answer against the answers the model allows, and moving the
//! model along with it.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::fx::Fx;
use super::model::{
    is_system, Alt, Call, Effect, HoldRec, HoldStatus, Kind, Learn, Model, ModelEntry, Record,
    Settings, Stored, UsageKey, HOLDS,
};

/// One answer: of a single endpoint (`raw` holds its body) or one item of
/// a batch. `body` is the entry of a 2xx, the problem of a 4xx.
#[derive(Clone, Debug)]
pub struct Answer {
    pub status: u16,
    pub replayed: bool,
    pub body: Value,
    pub raw: Option<Vec<u8>>,
}

fn text(v: &Value, field: &str) -> String {
    v[field].as_str().unwrap_or("").to_owned()
}

fn dec(v: &Value, field: &str) -> Option<Fx> {
    v[field].as_str().and_then(Fx::parse)
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 1500 {
        let mut end = 1500;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}…", &s[..end])
    } else {
        s
    }
}

impl Model {
    /// Checks `a` against `alts`; on a match, applies it.
    pub fn apply(&mut self, call: &Call, alts: &[Alt], a: &Answer) -> Result<(), String> {
        let why = |m: String| {
            Err(format!(
                "{m}\n  answer: {} {}{}\n  allowed: {alts:?}",
                a.status,
                if a.replayed { "(replayed) " } else { "" },
                short(&a.body)
            ))
        };
        if a.status >= 500 {
            return why("a 5xx answer".into());
        }
        let counter_alt = alts.iter().find_map(|x| match x {
            Alt::Refuse {
                counter: Some(c), ..
            } => Some(c.clone()),
            _ => None,
        });
        let code = text(&a.body, "code");
        if a.status >= 400
            && (code.is_empty() || a.body["status"].as_u64() != Some(a.status.into()))
        {
            return why("a problem without its code or status".into());
        }
        let rejected_entry = a.body.get("entry").filter(|e| e["status"] == "rejected");
        // Whether the server refused a counter account by its policy.
        let mut counter_refused = false;
        let outcome = if let Call::Settings { .. } = call {
            if a.status == 200 {
                self.match_settings(alts, a)
            } else {
                match_refusal(alts, a, &code).map(|_| ())
            }
        } else if a.replayed {
            self.match_replay(alts, a)
        } else if a.status == 201 {
            self.match_post(alts, a)
        } else if a.status == 422 && rejected_entry.is_some() {
            self.match_reject(alts, a, &code)
        } else if a.status == 409 {
            match_conflict(alts, a, &code)
        } else if (400..500).contains(&a.status) {
            match_refusal(alts, a, &code).map(|c| counter_refused = c)
        } else {
            Err("an unexpected status".into())
        };
        if let Err(m) = outcome {
            return why(m);
        }
        if let Some(c) = counter_alt {
            self.counter_policy.insert(c, !counter_refused);
        }
        Ok(())
    }

    fn match_replay(&mut self, alts: &[Alt], a: &Answer) -> Result<(), String> {
        let Some((kind, key)) = alts.iter().find_map(|x| match x {
            Alt::Replay(k, key) => Some((*k, key.clone())),
            _ => None,
        }) else {
            return Err("a replay of a key the model does not hold".into());
        };
        let s = &self.stored[&(kind, key)];
        let want = if s.posted { 200 } else { 422 };
        if a.status != want {
            return Err(format!("a replay must answer {want}"));
        }
        if let (Some(raw), Some(first)) = (&a.raw, &s.raw) {
            if raw != first {
                return Err(format!(
                    "the replay's body differs from the first answer's\n  first: {}",
                    String::from_utf8_lossy(first)
                ));
            }
        }
        let first = if s.posted {
            &s.entry
        } else {
            s.problem.as_ref().unwrap_or(&Value::Null)
        };
        if &a.body != first {
            return Err(format!(
                "the replay differs from the first answer\n  first: {}",
                short(first)
            ));
        }
        Ok(())
    }

    fn match_post(&mut self, alts: &[Alt], a: &Answer) -> Result<(), String> {
        let Some(e) = alts.iter().find_map(|x| match x {
            Alt::Post(e) => Some(e.clone()),
            _ => None,
        }) else {
            return Err("posted, where the rules do not allow it".into());
        };
        let entry = &a.body;
        if entry["status"] != "posted" {
            return Err("a 201 whose entry is not posted".into());
        }
        let balance_after = self.posted_after(&e);
        check_entry(entry, &e, &balance_after)?;
        self.post(&e, entry, a);
        Ok(())
    }

    fn match_reject(&mut self, alts: &[Alt], a: &Answer, code: &str) -> Result<(), String> {
        let entry = &a.body["entry"];
        if entry["rejection"]["code"] != code {
            return Err("the entry's rejection code differs from the problem's".into());
        }
        // A named code first, then a rejection for totals out of range.
        let found = alts
            .iter()
            .filter_map(|x| match x {
                Alt::Reject {
                    code: c,
                    effect,
                    learn,
                } if c.is_none_or(|c| c == code) => {
                    Some((c.is_some(), effect.clone(), learn.clone()))
                }
                _ => None,
            })
            .max_by_key(|(named, _, _)| *named);
        let Some((_, e, learn)) = found else {
            return Err("a rejection the rules do not allow".into());
        };
        let posted = self.posted(&e.account, &e.unit);
        check_entry(entry, &e, &posted)?;
        if let Some(Learn::HoldExpired(id)) = learn {
            if let Some(h) = self.holds.get_mut(&id) {
                h.status = HoldStatus::Expired;
            }
        }
        if e.kind == Kind::Hold {
            let expires_at = instant(entry, "expires_at").unwrap_or_default();
            let counter = match &e.record {
                Record::OpenHold { counter } => counter.clone(),
                _ => String::new(),
            };
            self.holds.insert(
                e.key.clone(),
                HoldRec {
                    account: e.account.clone(),
                    unit: e.unit.clone(),
                    amount: e.amount.clone(),
                    counter,
                    expires_at,
                    status: HoldStatus::Rejected,
                },
            );
        }
        self.remember(&e, entry, a, false, None);
        Ok(())
    }

    fn match_settings(&mut self, alts: &[Alt], a: &Answer) -> Result<(), String> {
        let Some(Alt::Settings {
            account,
            unit,
            overdraft,
            version,
            changed,
        }) = alts.iter().find(|x| matches!(x, Alt::Settings { .. }))
        else {
            return Err("settings taken where the rules refuse them".into());
        };
        let b = &a.body;
        if b["settings_version"].as_i64() != Some(*version)
            || b["overdraft"] != overdraft.to_json()
            || b["unit"] != unit.as_str()
            || b["account"] != account.as_str()
        {
            return Err(format!(
                "settings answered other than version {version}, {}",
                overdraft.to_json()
            ));
        }
        if *changed {
            self.settings.insert(
                account.clone(),
                Settings {
                    unit: unit.clone(),
                    overdraft: overdraft.clone(),
                    version: *version,
                },
            );
            self.units
                .entry(account.clone())
                .or_insert_with(|| unit.clone());
            self.bal.entry((account.clone(), unit.clone())).or_default();
            let id = text(b, "settings_entry_id");
            self.by_id.insert(id.clone(), self.entries.len());
            self.entries.push(ModelEntry {
                id,
                kind: Kind::AccountSettings,
                posted: true,
                account: account.clone(),
                debit: account.clone(),
                credit: account.clone(),
                amount: Fx::zero(),
                unit: unit.clone(),
                first: Value::Null,
                usage: None,
            });
        }
        let bal = self
            .bal
            .get(&(account.clone(), unit.clone()))
            .cloned()
            .unwrap_or_default();
        if dec(&b["balance"], "debits") != Some(bal.debits.clone())
            || dec(&b["balance"], "credits") != Some(bal.credits.clone())
        {
            return Err(format!(
                "the account's balance differs from the model's {bal:?}"
            ));
        }
        Ok(())
    }

    fn posted_after(&self, e: &Effect) -> Fx {
        let mut p = self.posted(&e.account, &e.unit);
        if e.kind.moves_money() {
            if e.credit == e.account {
                p = p.add(&e.amount);
            }
            if e.debit == e.account {
                p = p.sub(&e.amount);
            }
        }
        p
    }

    pub fn posted(&self, account: &str, unit: &str) -> Fx {
        self.bal
            .get(&(account.to_owned(), unit.to_owned()))
            .map(|b| b.posted())
            .unwrap_or_default()
    }

    fn post(&mut self, e: &Effect, entry: &Value, a: &Answer) {
        let unit = e.unit.clone();
        if e.kind.moves_money() {
            let d = self.bal.entry((e.debit.clone(), unit.clone())).or_default();
            d.debits = d.debits.add(&e.amount);
            let c = self
                .bal
                .entry((e.credit.clone(), unit.clone()))
                .or_default();
            c.credits = c.credits.add(&e.amount);
        }
        for acct in [&e.debit, &e.credit, &e.account] {
            if acct == HOLDS {
                continue;
            }
            self.bal.entry((acct.clone(), unit.clone())).or_default();
            if !is_system(acct) {
                self.units
                    .entry(acct.clone())
                    .or_insert_with(|| unit.clone());
            }
        }
        let id = text(entry, "id");
        let mut usage = None;
        match &e.record {
            Record::None => {}
            Record::OpenHold { counter } => {
                self.holds.insert(
                    e.key.clone(),
                    HoldRec {
                        account: e.account.clone(),
                        unit: unit.clone(),
                        amount: e.amount.clone(),
                        counter: counter.clone(),
                        expires_at: instant(entry, "expires_at").unwrap_or_default(),
                        status: HoldStatus::Open,
                    },
                );
            }
            Record::CloseHold(hold, status) => {
                if let Some(h) = self.holds.get_mut(hold) {
                    h.status = *status;
                }
            }
            Record::Refunded(payment) => {
                let r = self.refunded.entry(payment.clone()).or_default();
                *r = r.add(&e.amount);
            }
            Record::Reversed(target) => {
                self.reversed.insert(target.clone(), id.clone());
                let original = self.by_id.get(target).map(|&i| self.entries[i].clone());
                if let Some(ModelEntry {
                    usage: Some((key, quantity)),
                    amount,
                    ..
                }) = original
                {
                    let row = self.usage.entry(key).or_default();
                    row.amount = row.amount.sub(&amount);
                    row.quantity = row.quantity.sub(&quantity);
                    row.entries -= 1;
                }
            }
        }
        if e.kind == Kind::UsageDebit {
            let day = match e.params.get("occurred_at") {
                Some(micros) => {
                    DateTime::<Utc>::from_timestamp_micros(micros.parse().unwrap_or_default())
                }
                None => instant(entry, "recorded_at"),
            }
            .unwrap_or_default()
            .date_naive();
            let key: UsageKey = (
                e.account.clone(),
                e.params.get("meter").cloned().unwrap_or_default(),
                day,
                unit.clone(),
            );
            let quantity = e
                .params
                .get("quantity")
                .and_then(|q| Fx::parse(q))
                .unwrap_or_default();
            let row = self.usage.entry(key.clone()).or_default();
            row.amount = row.amount.add(&e.amount);
            row.quantity = row.quantity.add(&quantity);
            row.entries += 1;
            usage = Some((key, quantity));
        }
        self.remember(e, entry, a, true, usage);
    }

    fn remember(
        &mut self,
        e: &Effect,
        entry: &Value,
        a: &Answer,
        posted: bool,
        usage: Option<(UsageKey, Fx)>,
    ) {
        let id = text(entry, "id");
        self.by_id.insert(id.clone(), self.entries.len());
        self.entries.push(ModelEntry {
            id: id.clone(),
            kind: e.kind,
            posted,
            account: e.account.clone(),
            debit: e.debit.clone(),
            credit: e.credit.clone(),
            amount: e.amount.clone(),
            unit: e.unit.clone(),
            first: entry.clone(),
            usage,
        });
        self.stored.insert(
            (e.kind, e.key.clone()),
            Stored {
                params: e.params.clone(),
                entry_id: id,
                posted,
                entry: entry.clone(),
                raw: a.raw.clone(),
                problem: (!posted).then(|| a.body.clone()),
                account: e.account.clone(),
                debit: e.debit.clone(),
                credit: e.credit.clone(),
                amount: e.amount.clone(),
                unit: e.unit.clone(),
            },
        );
    }
}

fn instant(entry: &Value, field: &str) -> Option<DateTime<Utc>> {
    entry[field]
        .as_str()
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.with_timezone(&Utc))
}

/// Ok(true) when only the refusal of a counter account by policy explains
/// the answer (a 422 that names `counter_account`, whatever its code).
fn match_refusal(alts: &[Alt], a: &Answer, code: &str) -> Result<bool, String> {
    let policy_allowed = alts.iter().any(|x| {
        matches!(
            x,
            Alt::Refuse {
                counter: Some(_),
                ..
            }
        )
    });
    // A 422 that names `counter_account` as its invalid field is the
    // policy's answer even where a rule could also refuse: taking it as the
    // rule's would learn that the server accepts the counter account, and
    // fail its next refusal.
    let refuses_counter = a.status == 422
        && code == "invalid_request"
        && a.body["errors"]
            .as_array()
            .is_some_and(|e| e.iter().any(|e| e["field"] == "counter_account"));
    if policy_allowed && refuses_counter {
        return Ok(true);
    }
    let by_rule = alts.iter().any(|x| {
        matches!(x, Alt::Refuse { status, code: c, counter: None }
            if *status == a.status && c.is_none_or(|c| c == code))
    });
    if by_rule {
        return Ok(false);
    }
    let names_counter = a.body.to_string().contains("counter_account");
    let by_policy = a.status == 422
        && names_counter
        && alts.iter().any(|x| {
            matches!(
                x,
                Alt::Refuse {
                    counter: Some(_),
                    ..
                }
            )
        });
    if by_policy {
        Ok(true)
    } else {
        Err("a refusal the rules do not allow".into())
    }
}

fn match_conflict(alts: &[Alt], a: &Answer, code: &str) -> Result<(), String> {
    let Some((entry_id, fields)) = alts.iter().find_map(|x| match x {
        Alt::Conflict { entry_id, fields } => Some((entry_id, fields)),
        _ => None,
    }) else {
        return Err("a conflict where the model holds no such key".into());
    };
    let got: std::collections::BTreeSet<String> = a.body["differing_fields"]
        .as_array()
        .map(|v| {
            v.iter()
                .filter_map(|f| f.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    if code != "idempotency_conflict" || a.body["entry_id"] != entry_id.as_str() || &got != fields {
        return Err(format!(
            "the conflict should name {entry_id} and {fields:?}"
        ));
    }
    Ok(())
}

/// The entry says what the model expects it to.
fn check_entry(entry: &Value, e: &Effect, balance_after: &Fx) -> Result<(), String> {
    let mut wrong = Vec::new();
    let field = |f: &str| entry[f].as_str().unwrap_or("").to_owned();
    if field("kind") != e.kind.as_str() {
        wrong.push("kind");
    }
    if field("upstream_id") != e.key {
        wrong.push("upstream_id");
    }
    if field("account") != e.account {
        wrong.push("account");
    }
    if field("debit_account") != e.debit {
        wrong.push("debit_account");
    }
    if field("credit_account") != e.credit {
        wrong.push("credit_account");
    }
    if field("unit") != e.unit {
        wrong.push("unit");
    }
    if dec(entry, "amount").as_ref() != Some(&e.amount) {
        wrong.push("amount");
    }
    if dec(entry, "balance_after").as_ref() != Some(balance_after) {
        wrong.push("balance_after");
    }
    if field("id").is_empty() || entry["seq"].as_i64().is_none_or(|s| s < 1) {
        wrong.push("id/seq");
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the entry's {wrong:?} differ from the model's: account {} debit {} credit {} amount {:?} unit {} balance_after {balance_after:?}",
            e.account, e.debit, e.credit, e.amount, e.unit
        ))
    }
}
