//! Holds: placed, captured, released (by the client or at expiry).

use chrono::{DateTime, Duration, Utc};
use rust_decimal::Decimal;

use crate::amount::canonical;
use crate::names::HOLDS_ACCOUNT;
use crate::request::{EntryRequest, HoldRequest};
use crate::rule_state::{HoldRecord, HoldStatus};

use super::{GroupState, Plan, RecordChange, Refusal};

/// Farthest in the future a hold may expire.
pub const MAX_HOLD_HORIZON_DAYS: i64 = 366;

/// A hold: `amount` held on the account until captured, released or
/// expired, the account held to its floor.
pub(super) fn hold(
    request: &EntryRequest,
    h: &HoldRequest,
    now: DateTime<Utc>,
) -> Result<Plan, Refusal> {
    let expires_at = h.expiry.resolve(now);
    if expires_at <= now {
        return Err(Refusal::Invalid {
            field: "expires_at",
            message: "is not in the future".into(),
        });
    }
    if expires_at > now + Duration::days(MAX_HOLD_HORIZON_DAYS) {
        return Err(Refusal::Invalid {
            field: "expires_at",
            message: format!("must be within {MAX_HOLD_HORIZON_DAYS} days"),
        });
    }
    let mut p = Plan::new(
        request,
        &h.account,
        &h.account,
        HOLDS_ACCOUNT,
        h.amount,
        &h.unit,
    );
    p.moves_money = false;
    p.held_delta = h.amount;
    p.checks_floor = true;
    let record = HoldRecord {
        hold_id: request.upstream_id.clone(),
        account: h.account.clone(),
        unit: h.unit.clone(),
        amount: h.amount,
        counter_account: h.counter_account.clone(),
        expires_at,
        status: HoldStatus::Open,
        entry_id: String::new(),
        closed_by: None,
    };
    p.on_rejected.push(RecordChange::OpenHold(HoldRecord {
        status: HoldStatus::Rejected,
        ..record.clone()
    }));
    p.on_posted.push(RecordChange::OpenHold(record));
    Ok(p)
}

/// A capture of an open hold, up to its amount.
pub(super) fn capture(
    state: &GroupState,
    request: &EntryRequest,
    hold_id: &str,
    amount: &Decimal,
    now: DateTime<Utc>,
) -> Result<Plan, Refusal> {
    let Some(hold) = state.hold(hold_id) else {
        return Err(Refusal::NotFound {
            field: "hold_id",
            id: hold_id.to_owned(),
        });
    };
    if *amount > hold.amount {
        return Err(Refusal::Invalid {
            field: "amount",
            message: format!(
                "exceeds the held amount {} {}",
                canonical(hold.amount),
                hold.unit
            ),
        });
    }
    let mut p = Plan::new(
        request,
        &hold.account,
        &hold.account,
        &hold.counter_account,
        *amount,
        &hold.unit,
    );
    reject_unless_open(&mut p, hold, now);
    p.held_delta = -hold.amount;
    p.on_posted.push(RecordChange::CloseHold(
        hold_id.to_owned(),
        HoldStatus::Captured,
    ));
    Ok(p)
}

/// A release of a hold, by the client or (`expiry`) by the server.
pub(super) fn release(
    state: &GroupState,
    request: &EntryRequest,
    hold_id: &str,
    expiry: &bool,
) -> Result<Plan, Refusal> {
    let Some(hold) = state.hold(hold_id) else {
        return Err(Refusal::NotFound {
            field: "hold_id",
            id: hold_id.to_owned(),
        });
    };
    if *expiry && hold.status != HoldStatus::Open {
        return Err(Refusal::HoldAlreadyClosed);
    }
    let mut p = Plan::new(
        request,
        &hold.account,
        &hold.account,
        HOLDS_ACCOUNT,
        hold.amount,
        &hold.unit,
    );
    p.moves_money = false;
    if hold.status != HoldStatus::Open {
        p.reject(
            "hold_not_open",
            format!("hold {hold_id} is {}", hold.status.as_str()),
        );
    }
    p.held_delta = -hold.amount;
    let closed = if *expiry {
        HoldStatus::Expired
    } else {
        HoldStatus::Released
    };
    p.on_posted
        .push(RecordChange::CloseHold(hold_id.to_owned(), closed));
    Ok(p)
}

/// A capture needs an open hold whose time has not run out.
pub(super) fn reject_unless_open(p: &mut Plan, hold: &HoldRecord, now: DateTime<Utc>) {
    if hold.status != HoldStatus::Open {
        p.reject(
            "hold_not_open",
            format!("hold {} is {}", hold.hold_id, hold.status.as_str()),
        );
    } else if now >= hold.expires_at {
        p.reject(
            "hold_expired",
            format!(
                "hold {} expired at {}",
                hold.hold_id,
                crate::entry::format_recorded_at(&hold.expires_at)
            ),
        );
    }
}
