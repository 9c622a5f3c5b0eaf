//! Databases migrated from an earlier wording of a migration file start.
//!
//! sqlx records the SHA-384 of every migration it applies and refuses to
//! start (`VersionMismatch`) once a file's text no longer matches, even if
//! only a comment changed. The files in [`REWORDED`] had their comments
//! reworded; their SQL is the same. Before migrating, a stored checksum
//! that is exactly the earlier text's is replaced by the current file's, so
//! those databases start as before. Any other mismatch is left for sqlx to
//! refuse: a migration whose SQL changed after it ran must still stop
//! start-up.

use sqlx::migrate::Migrator;
use sqlx::{PgPool, Row, SqlitePool};

use crate::LedgerError;

static SQLITE_MIGRATIONS: Migrator = sqlx::migrate!("../migrations/sqlite");
static POSTGRES_MIGRATIONS: Migrator = sqlx::migrate!("../migrations/postgres");

/// A migration file whose comments were reworded after databases ran it.
struct Reworded {
    version: i64,
    /// SHA-384 of the earlier text, lower-case hex, as sqlx stored it.
    earlier_sha384: &'static str,
}

/// Per engine: (engine, migrations whose earlier text is accepted).
const REWORDED: [(Engine, &[Reworded]); 2] = [
    (
        Engine::Sqlite,
        &[Reworded {
            version: 5,
            earlier_sha384: "2d3617d915c57540d32a126538def67bd767230aa9bded9eab8437dbc1e585d1973baa9fe2dea9af19bece742bf2a789",
        }],
    ),
    (
        Engine::Postgres,
        &[
            Reworded {
                version: 5,
                earlier_sha384: "890b2556f2519b52d27fcbb733214156d55b825aa2fa186fb249ab7d39033f2286e231f2d6ffcf9e870d8280d0028dba",
            },
            Reworded {
                version: 6,
                earlier_sha384: "c3e2a0f30ea7ef92ebb60b9eea93a2d877b7541f37fd66e8ec149fbb5bbb24de9662bf9e08c13574b66512f2d42052ee",
            },
            Reworded {
                version: 7,
                earlier_sha384: "60733af795e2e5bbac8c2c14bee29b0e4f8dc5af1600424c0b2bc13e7f048e9e7579faab4ad8ae5bd14eac0366879a39",
            },
        ],
    ),
];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Engine {
    Sqlite,
    Postgres,
}

/// The updates to make: (version, stored checksum, current checksum) for
/// every stored checksum that is a reworded file's earlier text.
fn updates(engine: Engine, stored: &[(i64, Vec<u8>)]) -> Vec<(i64, Vec<u8>, Vec<u8>)> {
    let migrator = match engine {
        Engine::Sqlite => &SQLITE_MIGRATIONS,
        Engine::Postgres => &POSTGRES_MIGRATIONS,
    };
    let reworded = REWORDED
        .iter()
        .filter(|(e, _)| *e == engine)
        .flat_map(|(_, files)| files.iter());
    let mut out = Vec::new();
    for file in reworded {
        let Some(current) = migrator.iter().find(|m| m.version == file.version) else {
            continue;
        };
        for (version, checksum) in stored {
            if *version == file.version && hex::encode(checksum) == file.earlier_sha384 {
                out.push((*version, checksum.clone(), current.checksum.to_vec()));
            }
        }
    }
    out
}

/// On SQLite: accepts the reworded files' earlier checksums (module docs).
pub(super) async fn accept_reworded_sqlite(pool: &SqlitePool) -> Result<(), LedgerError> {
    let tables: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'",
    )
    .fetch_one(pool)
    .await?;
    if tables == 0 {
        return Ok(());
    }
    let stored = stored_checksums(
        sqlx::query("SELECT version, checksum FROM _sqlx_migrations")
            .fetch_all(pool)
            .await?,
    )?;
    for (version, earlier, current) in updates(Engine::Sqlite, &stored) {
        sqlx::query("UPDATE _sqlx_migrations SET checksum = ? WHERE version = ? AND checksum = ?")
            .bind(current)
            .bind(version)
            .bind(earlier)
            .execute(pool)
            .await?;
    }
    Ok(())
}

/// On PostgreSQL: accepts the reworded files' earlier checksums (module
/// docs). Processes starting together may both update a row: each writes
/// the same value, and only over the earlier checksum.
pub(super) async fn accept_reworded_postgres(pool: &PgPool) -> Result<(), LedgerError> {
    let exists: bool = sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations') IS NOT NULL")
        .fetch_one(pool)
        .await?;
    if !exists {
        return Ok(());
    }
    let stored = stored_checksums(
        sqlx::query("SELECT version, checksum FROM _sqlx_migrations")
            .fetch_all(pool)
            .await?,
    )?;
    for (version, earlier, current) in updates(Engine::Postgres, &stored) {
        sqlx::query(
            "UPDATE _sqlx_migrations SET checksum = $1 WHERE version = $2 AND checksum = $3",
        )
        .bind(current)
        .bind(version)
        .bind(earlier)
        .execute(pool)
        .await?;
    }
    Ok(())
}

fn stored_checksums<R: Row>(rows: Vec<R>) -> Result<Vec<(i64, Vec<u8>)>, LedgerError>
where
    for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> Vec<u8>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    usize: sqlx::ColumnIndex<R>,
{
    rows.iter()
        .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Every recorded earlier checksum is well-formed, names a migration
    /// this binary embeds, and differs from that migration's current text
    /// (otherwise the entry would be pointless or hide a typo).
    #[test]
    fn every_reworded_file_is_embedded_and_changed() {
        for (engine, files) in REWORDED {
            let migrator = match engine {
                Engine::Sqlite => &SQLITE_MIGRATIONS,
                Engine::Postgres => &POSTGRES_MIGRATIONS,
            };
            for file in files {
                let earlier = hex::decode(file.earlier_sha384).unwrap();
                assert_eq!(earlier.len(), 48, "version {}", file.version);
                let current = migrator.iter().find(|m| m.version == file.version).unwrap();
                assert_ne!(&*current.checksum, earlier.as_slice());
                let stored = vec![(file.version, earlier.clone()), (99, earlier.clone())];
                let found = updates(engine, &stored);
                assert_eq!(found.len(), 1, "only the matching version is updated");
                assert_eq!(found[0].2, current.checksum.to_vec());
            }
        }
    }
}
