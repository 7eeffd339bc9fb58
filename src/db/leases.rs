//! Named leases (`leases`): which instance scrapes a fleet or runs a periodic job, and until
//! when. Every change is a compare-and-set on what the caller read, so of two instances that
//! read the same lease and decide to take it, exactly one succeeds. Who may take a lease is
//! `domain::lease::may_take`'s decision, not SQL's.

use sqlx::AnyConnection;

use crate::domain::lease::Held;
use crate::domain::UnixMillis;

/// Lease `name` as stored, if any.
pub async fn get(conn: &mut AnyConnection, name: &str) -> sqlx::Result<Option<Held>> {
    let row: Option<(String, i64)> =
        sqlx::query_as("SELECT holder, held_until FROM leases WHERE name = $1")
            .bind(name)
            .fetch_optional(conn)
            .await?;
    Ok(row.map(|(holder, until)| Held { holder, until }))
}

/// Sets lease `name` to `holder` until `until` provided it is still as `seen` (`None`:
/// absent). True when it was written.
pub async fn swap(
    conn: &mut AnyConnection,
    name: &str,
    seen: Option<&Held>,
    holder: &str,
    until: UnixMillis,
) -> sqlx::Result<bool> {
    let done = match seen {
        None => {
            sqlx::query(
                "INSERT INTO leases (name, holder, held_until) VALUES ($1, $2, $3)
                 ON CONFLICT (name) DO NOTHING",
            )
            .bind(name)
            .bind(holder)
            .bind(until)
            .execute(conn)
            .await?
        }
        Some(s) => {
            sqlx::query(
                "UPDATE leases SET holder = $1, held_until = $2
                 WHERE name = $3 AND holder = $4 AND held_until = $5",
            )
            .bind(holder)
            .bind(until)
            .bind(name)
            .bind(&s.holder)
            .bind(s.until)
            .execute(conn)
            .await?
        }
    };
    Ok(done.rows_affected() == 1)
}

/// Gives lease `name` up if `holder` holds it (a clean stop: another instance need not wait
/// for it to run out).
pub async fn release(conn: &mut AnyConnection, name: &str, holder: &str) -> sqlx::Result<()> {
    sqlx::query("DELETE FROM leases WHERE name = $1 AND holder = $2")
        .bind(name)
        .bind(holder)
        .execute(conn)
        .await?;
    Ok(())
}
