//! The cache of API keys found in the database: a key found is trusted for
//! `--key-recheck-ms` (10 s), then asked for again, so a key deleted from
//! `api_keys` (revoked) stops working on every instance within that time;
//! a miss always asks the database, so a key created a moment ago works at
//! once.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use tally_ledger::keys::ApiKey;
use tally_ledger::store::Storage;

use crate::problem::ApiError;

#[derive(Clone)]
pub struct KeyCache {
    /// Key hash → the key and when the database last confirmed it.
    known: Arc<RwLock<HashMap<String, (ApiKey, Instant)>>>,
    /// How long a key found in the database is trusted without asking
    /// again: the longest a revoked key keeps working. One indexed read
    /// per key and interval, whatever the request rate.
    recheck_after: Duration,
}

impl KeyCache {
    pub fn new(recheck_after: Duration) -> Self {
        Self {
            known: Arc::default(),
            recheck_after,
        }
    }

    pub async fn lookup(&self, storage: &Storage, hash: &str) -> Result<Option<ApiKey>, ApiError> {
        if let Some((key, checked)) = self
            .known
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(hash)
        {
            if checked.elapsed() < self.recheck_after {
                return Ok(Some(key.clone()));
            }
        }
        let found = storage.find_api_key(hash).await?;
        let mut known = self.known.write().unwrap_or_else(|p| p.into_inner());
        match &found {
            Some(key) => {
                known.insert(hash.to_owned(), (key.clone(), Instant::now()));
            }
            None => {
                known.remove(hash);
            }
        }
        Ok(found)
    }
}
