//! Migrations that change stored data, checked against what the product itself writes: a
//! database at the version before the change is filled, migrated, and compared with a database
//! that the current code filled from the start.

use headroom::domain::capacity::{Observation, Sample, Source};
use sqlx::{AnyConnection, Connection};

/// Every migration up to and including `last`, applied by hand to a fresh in-memory database.
async fn migrated_to(last: i64) -> AnyConnection {
    let mut conn = {
        headroom::db::install_drivers();
        AnyConnection::connect("sqlite::memory:")
    }
    .await
    .unwrap();
    sqlx::raw_sql("PRAGMA foreign_keys = ON")
        .execute(&mut conn)
        .await
        .unwrap();
    for m in headroom::db::MIGRATOR.iter().filter(|m| m.version <= last) {
        sqlx::raw_sql(m.sql.clone())
            .execute(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("migration {}: {e}", m.version));
    }
    conn
}

async fn apply(conn: &mut AnyConnection, version: i64) {
    let m = headroom::db::MIGRATOR
        .iter()
        .find(|m| m.version == version)
        .expect("the migration exists");
    sqlx::raw_sql(m.sql.clone()).execute(conn).await.unwrap();
}

fn sample(at: i64, i: i64) -> Sample {
    // Spare wanders 0..=3, every seventh tick fails: min, max, last and gaps all matter.
    let outcome = if i % 7 == 3 {
        Err("timed out".to_owned())
    } else {
        Ok(Observation {
            absorption: None,
            source: if i % 5 == 0 {
                Source::Derived
            } else {
                Source::Native
            },
            spare: ((i / 11) % 4) as u32,
            required: 1 + ((i / 97) % 2) as u32,
            leader_id: Some(1),
            leader_url: None,
            term: Some(3),
            members: Vec::new(),
            evidence: serde_json::Value::Null,
        })
    };
    Sample {
        at,
        latency_ms: 5,
        outcome,
    }
}

type Rollup = (
    i64,
    i64,
    i64,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    i64,
    String,
);

async fn rollups(conn: &mut AnyConnection, resolution: i64) -> Vec<Rollup> {
    sqlx::query_as(
        "SELECT bucket, samples, ok_samples, spare_min, spare_max, spare_last, required_min,
                required_max, required_last, last_at, source_last
         FROM fleet_rollups WHERE resolution = ? ORDER BY bucket",
    )
    .bind(resolution)
    .fetch_all(conn)
    .await
    .unwrap()
}

/// Stores `rows` as fleet 1's rollups of `resolution` (the columns every version has).
async fn insert_rollups(conn: &mut AnyConnection, resolution: i64, rows: &[Rollup]) {
    for r in rows {
        sqlx::query(
            "INSERT INTO fleet_rollups (fleet_id, resolution, bucket, samples, ok_samples,
                 spare_min, spare_max, spare_last, required_min, required_max, required_last,
                 last_at, source_last)
             VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(resolution)
        .bind(r.0)
        .bind(r.1)
        .bind(r.2)
        .bind(r.3)
        .bind(r.4)
        .bind(r.5)
        .bind(r.6)
        .bind(r.7)
        .bind(r.8)
        .bind(r.9)
        .bind(&r.10)
        .execute(&mut *conn)
        .await
        .unwrap();
    }
}

/// An absorption verdict on each minute row, as 0016's columns hold it, varying by minute.
const VERDICTS_ON_MINUTES: &str = "UPDATE fleet_rollups
     SET absorbed_min = (bucket / 60000) % 2, machines_needed_max = (bucket / 60000) % 3
     WHERE resolution = 60";

/// 0011 rebuilds `fleet_rollups` for the six-hour level and fills it from the hour rows: the
/// result equals the six-hour rows the current code writes sample by sample.
#[tokio::test]
async fn six_hour_rollups_filled_by_the_migration_equal_those_written_with_each_sample() {
    let fleet = "INSERT INTO fleets (id, name, spec, restore_machine_config, created_at, updated_at, updated_by)
                 VALUES (1, 'prod', '{}', 'spare', 0, 0, 'test')";
    // Today's code, from the start.
    let mut current = migrated_to(i64::MAX).await;
    sqlx::raw_sql(fleet).execute(&mut current).await.unwrap();
    // Thirty hours from a time inside a six-hour bucket, every 15 s.
    let start = 1_796_000_000_000_i64 - 1_796_000_000_000 % 3_600_000 + 2 * 3_600_000;
    for i in 0..(30 * 240) {
        headroom::db::fleet_samples::insert(&mut current, 1, &sample(start + i * 15_000, i))
            .await
            .unwrap();
    }
    // The same hours in a database from before 0011: only minute and hour rows existed.
    let mut before = migrated_to(10).await;
    sqlx::raw_sql(fleet).execute(&mut before).await.unwrap();
    let hours = rollups(&mut current, 3600).await;
    insert_rollups(&mut before, 3600, &hours).await;
    assert!(
        sqlx::query("INSERT INTO fleet_rollups (fleet_id, resolution, bucket, samples, ok_samples, last_at, source_last)
                     VALUES (1, 21600, 0, 1, 0, 0, 'none')")
            .execute(&mut before)
            .await
            .is_err(),
        "before 0011 the six-hour level is refused by the table's CHECK"
    );
    apply(&mut before, 11).await;

    let expected = rollups(&mut current, 21_600).await;
    // 30 hours starting two hours into a six-hour bucket touch six buckets.
    assert_eq!(expected.len(), 6);
    assert_eq!(rollups(&mut before, 21_600).await, expected);
    // The hour rows came through the rebuild untouched.
    assert_eq!(
        rollups(&mut before, 3600).await,
        rollups(&mut current, 3600).await
    );
    // And the rebuilt table, brought up to date, takes new samples at every level.
    for m in headroom::db::MIGRATOR.iter().filter(|m| m.version > 11) {
        apply(&mut before, m.version).await;
    }
    headroom::db::fleet_samples::insert(&mut before, 1, &sample(start + 31 * 3_600_000, 1))
        .await
        .unwrap();
}

/// 0017 rebuilds `fleet_rollups` for the five-minute level and fills it from the minute rows:
/// the result equals the five-minute rows the current code writes sample by sample, and the
/// absorption columns (0016) come through the rebuild.
#[tokio::test]
async fn five_minute_rollups_filled_by_the_migration_equal_those_written_with_each_sample() {
    let fleet = "INSERT INTO fleets (id, name, spec, restore_machine_config, created_at, updated_at, updated_by)
                 VALUES (1, 'prod', '{}', 'spare', 0, 0, 'test')";
    let mut current = migrated_to(i64::MAX).await;
    sqlx::raw_sql(fleet).execute(&mut current).await.unwrap();
    // Two hours from a time inside a five-minute bucket, every 15 s.
    let start = 1_796_000_000_000_i64 - 1_796_000_000_000 % 300_000 + 120_000;
    for i in 0..(2 * 240) {
        headroom::db::fleet_samples::insert(&mut current, 1, &sample(start + i * 15_000, i))
            .await
            .unwrap();
    }
    // A verdict on the minute rows, as absorption leaves it: kept by the rebuild, folded
    // (worst, most) into the new level.
    sqlx::raw_sql(VERDICTS_ON_MINUTES)
        .execute(&mut current)
        .await
        .unwrap();
    let mut before = migrated_to(16).await;
    sqlx::raw_sql(fleet).execute(&mut before).await.unwrap();
    let minute_rows: Vec<Rollup> = rollups(&mut current, 60).await;
    let verdicts: Vec<(Option<i64>, Option<i64>)> = sqlx::query_as(
        "SELECT absorbed_min, machines_needed_max FROM fleet_rollups
         WHERE resolution = 60 ORDER BY bucket",
    )
    .fetch_all(&mut current)
    .await
    .unwrap();
    insert_rollups(&mut before, 60, &minute_rows).await;
    sqlx::raw_sql(VERDICTS_ON_MINUTES)
        .execute(&mut before)
        .await
        .unwrap();
    assert!(
        sqlx::query("INSERT INTO fleet_rollups (fleet_id, resolution, bucket, samples, ok_samples, last_at, source_last)
                     VALUES (1, 300, 0, 1, 0, 0, 'none')")
            .execute(&mut before)
            .await
            .is_err(),
        "before 0017 the five-minute level is refused by the table's CHECK"
    );
    apply(&mut before, 17).await;

    // The current code's five-minute rows, with the verdicts folded as the fill folds them.
    let expected = rollups(&mut current, 300).await;
    // Two hours starting two minutes into a five-minute bucket touch 25 buckets.
    assert_eq!(expected.len(), 25);
    assert_eq!(rollups(&mut before, 300).await, expected);
    let folded: Vec<(Option<i64>, Option<i64>)> = sqlx::query_as(
        "SELECT min(absorbed_min), max(machines_needed_max) FROM fleet_rollups
         WHERE resolution = 60 GROUP BY bucket / 300000 ORDER BY bucket / 300000",
    )
    .fetch_all(&mut current)
    .await
    .unwrap();
    let filled: Vec<(Option<i64>, Option<i64>)> = sqlx::query_as(
        "SELECT absorbed_min, machines_needed_max FROM fleet_rollups
         WHERE resolution = 300 ORDER BY bucket",
    )
    .fetch_all(&mut before)
    .await
    .unwrap();
    assert_eq!(filled, folded);
    // The minute rows came through the rebuild untouched, verdicts included.
    assert_eq!(rollups(&mut before, 60).await, minute_rows);
    let kept: Vec<(Option<i64>, Option<i64>)> = sqlx::query_as(
        "SELECT absorbed_min, machines_needed_max FROM fleet_rollups
         WHERE resolution = 60 ORDER BY bucket",
    )
    .fetch_all(&mut before)
    .await
    .unwrap();
    assert_eq!(kept, verdicts);
    // And the rebuilt table, brought up to date, takes new samples at every level.
    for m in headroom::db::MIGRATOR.iter().filter(|m| m.version > 17) {
        apply(&mut before, m.version).await;
    }
    headroom::db::fleet_samples::insert(&mut before, 1, &sample(start + 3 * 3_600_000, 1))
        .await
        .unwrap();
}

/// 0018 rebuilds `fleet_rollups` for the two-hour level and fills it from the hour rows: the
/// result equals the two-hour rows the current code writes sample by sample, verdicts folded
/// (worst, most), and every other level comes through the rebuild untouched.
#[tokio::test]
async fn two_hour_rollups_filled_by_the_migration_equal_those_written_with_each_sample() {
    let fleet = "INSERT INTO fleets (id, name, spec, restore_machine_config, created_at, updated_at, updated_by)
                 VALUES (1, 'prod', '{}', 'spare', 0, 0, 'test')";
    const VERDICTS_ON_HOURS: &str = "UPDATE fleet_rollups
         SET absorbed_min = (bucket / 3600000) % 2, machines_needed_max = (bucket / 3600000) % 3
         WHERE resolution = 3600";
    let mut current = migrated_to(i64::MAX).await;
    sqlx::raw_sql(fleet).execute(&mut current).await.unwrap();
    // Nine hours from a time inside a two-hour bucket, every 15 s.
    let start = 1_796_000_000_000_i64 - 1_796_000_000_000 % 7_200_000 + 3_600_000 + 120_000;
    for i in 0..(9 * 240) {
        headroom::db::fleet_samples::insert(&mut current, 1, &sample(start + i * 15_000, i))
            .await
            .unwrap();
    }
    sqlx::raw_sql(VERDICTS_ON_HOURS)
        .execute(&mut current)
        .await
        .unwrap();
    let mut before = migrated_to(17).await;
    sqlx::raw_sql(fleet).execute(&mut before).await.unwrap();
    let mut other_levels = Vec::new();
    for resolution in [60, 300, 3600, 21_600] {
        let rows = rollups(&mut current, resolution).await;
        insert_rollups(&mut before, resolution, &rows).await;
        other_levels.push((resolution, rows));
    }
    sqlx::raw_sql(VERDICTS_ON_HOURS)
        .execute(&mut before)
        .await
        .unwrap();
    assert!(
        sqlx::query("INSERT INTO fleet_rollups (fleet_id, resolution, bucket, samples, ok_samples, last_at, source_last)
                     VALUES (1, 7200, 0, 1, 0, 0, 'none')")
            .execute(&mut before)
            .await
            .is_err(),
        "before 0018 the two-hour level is refused by the table's CHECK"
    );
    apply(&mut before, 18).await;

    let expected = rollups(&mut current, 7200).await;
    // Nine hours starting an hour and two minutes into a two-hour bucket touch six buckets.
    assert_eq!(expected.len(), 6);
    assert_eq!(rollups(&mut before, 7200).await, expected);
    let verdicts = "SELECT min(absorbed_min), max(machines_needed_max) FROM fleet_rollups
                    WHERE resolution = 3600 GROUP BY bucket / 7200000 ORDER BY bucket / 7200000";
    let folded: Vec<(Option<i64>, Option<i64>)> = sqlx::query_as(verdicts)
        .fetch_all(&mut current)
        .await
        .unwrap();
    let filled: Vec<(Option<i64>, Option<i64>)> = sqlx::query_as(
        "SELECT absorbed_min, machines_needed_max FROM fleet_rollups
         WHERE resolution = 7200 ORDER BY bucket",
    )
    .fetch_all(&mut before)
    .await
    .unwrap();
    assert_eq!(filled, folded);
    for (resolution, rows) in other_levels {
        assert_eq!(rollups(&mut before, resolution).await, rows, "{resolution}");
    }
    for m in headroom::db::MIGRATOR.iter().filter(|m| m.version > 18) {
        apply(&mut before, m.version).await;
    }
    headroom::db::fleet_samples::insert(&mut before, 1, &sample(start + 10 * 3_600_000, 1))
        .await
        .unwrap();
}

/// Migration 0013 keeps every session, takes deficits that had ended as settled, and from then
/// on a session id is never handed out twice (a row cached for a second by another process's
/// deletion can no longer name a newcomer's session).
#[tokio::test]
async fn sessions_survive_0013_and_their_ids_are_never_reused_after_it() {
    let mut conn = migrated_to(12).await;
    sqlx::raw_sql(
        "INSERT INTO users (id, username, role, password_hash, created_at, updated_at)
             VALUES (1, 'alice', 'admin', 'x', 0, 0);
         INSERT INTO sessions (id, token_hash, user_id, created_at, last_seen_at, flash)
             VALUES (5, 'h5', 1, 10, 20, 'saved'), (9, 'h9', 1, 11, 21, NULL);
         INSERT INTO fleets (id, name, spec, restore_machine_config, created_at, updated_at,
                             updated_by)
             VALUES (1, 'prod', '{}', 'spare-fsn1', 0, 0, 'alice');
         INSERT INTO fleet_deficits (id, fleet_id, started_at, detected_at, spare, required,
                                     evidence, ended_at)
             VALUES (1, 1, 100, 150, 0, 1, '{}', 900), (2, 1, 1000, 1050, 0, 1, '{}', NULL);",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    apply(&mut conn, 13).await;

    let kept: Vec<(i64, String, i64, i64, Option<String>)> = sqlx::query_as(
        "SELECT id, token_hash, created_at, last_seen_at, flash FROM sessions ORDER BY id",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    assert_eq!(
        kept,
        vec![
            (5, "h5".into(), 10, 20, Some("saved".into())),
            (9, "h9".into(), 11, 21, None),
        ]
    );
    // The rebuilt table keeps its index and its unique token hash, and every reference holds.
    let indexes: Vec<(String, i64)> =
        sqlx::query_as("SELECT name, \"unique\" FROM pragma_index_list('sessions') ORDER BY name")
            .fetch_all(&mut conn)
            .await
            .unwrap();
    assert_eq!(indexes.len(), 2, "{indexes:?}");
    assert!(
        indexes.contains(&("sessions_user".into(), 0)),
        "{indexes:?}"
    );
    assert!(
        indexes.iter().any(|(_, unique)| *unique == 1),
        "{indexes:?}"
    );
    let duplicate = sqlx::query(
        "INSERT INTO sessions (token_hash, user_id, created_at, last_seen_at)
         VALUES ('h5', 1, 40, 40)",
    )
    .execute(&mut conn)
    .await;
    assert!(duplicate.is_err(), "token hashes stay unique");
    let broken: Vec<(String,)> = sqlx::query_as("SELECT \"table\" FROM pragma_foreign_key_check")
        .fetch_all(&mut conn)
        .await
        .unwrap();
    assert!(broken.is_empty(), "{broken:?}");
    // Before 0013 the highest id, once deleted, was handed out again.
    sqlx::query("DELETE FROM sessions WHERE id = 9")
        .execute(&mut conn)
        .await
        .unwrap();
    let next: i64 = sqlx::query_scalar(
        "INSERT INTO sessions (token_hash, user_id, created_at, last_seen_at)
         VALUES ('h-new', 1, 30, 30) RETURNING id",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!(next, 10, "never 9 again");
    // Deficits that had ended are taken as settled at their end; the open one is not.
    let settled: Vec<(i64, Option<i64>)> =
        sqlx::query_as("SELECT id, settled_at FROM fleet_deficits ORDER BY id")
            .fetch_all(&mut conn)
            .await
            .unwrap();
    assert_eq!(settled, vec![(1, Some(900)), (2, None)]);
    // Cascades still apply.
    sqlx::query("DELETE FROM users WHERE id = 1")
        .execute(&mut conn)
        .await
        .unwrap();
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM sessions")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(left, 0);
}

/// A small provisioning history on `conn`: 24 requests over three fleets and three plan prices
/// (one plan without a price), two machines each, in every machine status with and without a
/// server, and an approval of every second request.
async fn provisioning_history(conn: &mut AnyConnection) {
    for id in 1..=24_i64 {
        let fleet = ["prod", "edge", "lab"][(id % 3) as usize];
        let plan = match id % 4 {
            0 => r#"{"monthly_price":"4.51"}"#,
            1 => r#"{"monthly_price":"9.20"}"#,
            2 => r#"{"monthly_price":"4.51"}"#,
            _ => r#"{}"#,
        };
        sqlx::query(
            "INSERT INTO provisions (id, fleet, machine_config, config_version, template,
                 template_version, count, reason, requester, state, plan, plan_hash,
                 approvals_required, created_at, updated_at, expires_at)
             VALUES (?1, ?2, 'spare', 1, 'default', 1, 2, 'test', ?3, 'pending_approval', ?4,
                 'h', 1, ?1, ?1, ?1 + 1000)",
        )
        .bind(id)
        .bind(fleet)
        .bind(["olga", "oscar", "system"][(id % 5 % 3) as usize])
        .bind(plan)
        .execute(&mut *conn)
        .await
        .unwrap();
        for idx in 0..2_i64 {
            let n = (id + idx) % 6;
            let status = [
                "planned",
                "creating",
                "booting",
                "created",
                "failed",
                "destroyed",
            ][n as usize];
            // Some failures came before a server was created.
            let server = (n >= 2 && !(n == 4 && id % 5 == 0)).then_some(id * 10 + idx);
            sqlx::query(
                "INSERT INTO provision_machines (provision_id, idx, name, sha256, size_bytes,
                     redacted_payload, status, server_id, updated_at)
                 VALUES (?, ?, ?, 's', 1, 'p', ?, ?, 0)",
            )
            .bind(id)
            .bind(idx)
            .bind(format!("m-{id}-{idx}"))
            .bind(status)
            .bind(server)
            .execute(&mut *conn)
            .await
            .unwrap();
        }
        if id % 2 == 0 {
            sqlx::query(
                "INSERT INTO provision_approvals (provision_id, approver, plan_hash, approved_at)
                 VALUES (?, ?, 'h', ?)",
            )
            .bind(id)
            .bind(["abe", "ada"][(id % 4 / 2) as usize])
            .bind(id)
            .execute(&mut *conn)
            .await
            .unwrap();
        }
    }
}

/// Machines that still have a server, counted from every machine of the history: what
/// `fleet_running_machines` must hold (its zero rows aside).
const RUNNING_COUNTED: &str =
    "SELECT p.fleet, COALESCE(json_extract(p.plan, '$.monthly_price'), ''), COUNT(*)
     FROM provision_machines m JOIN provisions p ON p.id = m.provision_id
     WHERE m.server_id IS NOT NULL AND m.status != 'destroyed' GROUP BY 1, 2 ORDER BY 1, 2";
const RUNNING_KEPT: &str = "SELECT fleet, monthly_price, machines FROM fleet_running_machines
     WHERE machines > 0 ORDER BY 1, 2";

async fn running(conn: &mut AnyConnection, sql: &'static str) -> Vec<(String, String, i64)> {
    sqlx::query_as(sql).fetch_all(conn).await.unwrap()
}

/// 0021 fills `fleet_running_machines` from the history, and its triggers keep it equal to a
/// count over every machine as the runner creates, fails and destroys machines; the plan
/// checks' reading of it (less the request's own machines) equals the per-request count it
/// replaces.
#[tokio::test]
async fn running_machines_filled_by_0021_and_kept_by_its_triggers_equal_a_count_of_every_machine() {
    use headroom::db::provision_jobs::{set_machine, MachineUpdate};
    use headroom::domain::MachineStatus::*;
    let mut before = migrated_to(20).await;
    provisioning_history(&mut before).await;
    apply(&mut before, 21).await;
    let counted = running(&mut before, RUNNING_COUNTED).await;
    assert!(
        counted.len() >= 6 && counted.iter().any(|c| c.1.is_empty()),
        "fleets and prices, a plan without one among them: {counted:?}"
    );
    assert_eq!(running(&mut before, RUNNING_KEPT).await, counted);

    let mut current = migrated_to(i64::MAX).await;
    provisioning_history(&mut current).await;
    assert_eq!(running(&mut current, RUNNING_KEPT).await, counted);
    // The runner's writer: every planned machine is created, every created one destroyed,
    // every booting one fails (keeping its server), and a failed one without a server stays.
    let machines: Vec<(i64, i64, String)> =
        sqlx::query_as("SELECT provision_id, idx, status FROM provision_machines")
            .fetch_all(&mut current)
            .await
            .unwrap();
    for (id, idx, status) in machines {
        let idx = u32::try_from(idx).unwrap();
        let (from, to, server) = match status.as_str() {
            "planned" => (Planned, Created, Some(id * 100 + i64::from(idx))),
            "created" => (Created, Destroyed, None),
            "booting" => (Booting, Failed, None),
            _ => continue,
        };
        let update = MachineUpdate {
            server_id: server,
            action_id: None,
            ipv4: None,
            provider_status: None,
            error: None,
        };
        assert!(set_machine(&mut current, id, idx, &[from], to, &update, 1)
            .await
            .unwrap());
        assert_eq!(
            running(&mut current, RUNNING_KEPT).await,
            running(&mut current, RUNNING_COUNTED).await,
            "after {id}/{idx} {status} → {to:?}"
        );
    }
    for fleet in ["prod", "edge", "lab"] {
        for except in [0, 3, 4, 6, 7] {
            let per_request: Vec<(i64, Option<String>)> = sqlx::query_as(
                "SELECT COUNT(*), json_extract(p.plan, '$.monthly_price')
                 FROM provisions p JOIN provision_machines m ON m.provision_id = p.id
                 WHERE p.fleet = ? AND p.id != ? AND m.server_id IS NOT NULL
                   AND m.status != 'destroyed'
                 GROUP BY p.id",
            )
            .bind(fleet)
            .bind(except)
            .fetch_all(&mut current)
            .await
            .unwrap();
            let mut expected = std::collections::BTreeMap::<String, i64>::new();
            for (n, price) in per_request {
                *expected.entry(price.unwrap_or_default()).or_default() += n;
            }
            let expected: Vec<(i64, String)> = expected.into_iter().map(|(p, n)| (n, p)).collect();
            let read =
                headroom::db::provisions::running_machines_of_fleet(&mut current, fleet, except)
                    .await
                    .unwrap();
            assert_eq!(read, expected, "{fleet} except {except}");
        }
    }
}

/// 0020 copies each approval's request columns (fleet, config, requester, state) as approving
/// now writes them, and the state follows the request's.
#[tokio::test]
async fn approvals_carry_their_requests_filter_columns_from_0020_on() {
    const COPIES: &str =
        "SELECT a.provision_id, a.approver, a.fleet, a.machine_config, a.requester, a.state
         FROM provision_approvals a ORDER BY 1, 2";
    const FROM_REQUESTS: &str =
        "SELECT a.provision_id, a.approver, p.fleet, p.machine_config, p.requester, p.state
         FROM provision_approvals a JOIN provisions p ON p.id = a.provision_id ORDER BY 1, 2";
    type Copy = (i64, String, String, String, String, String);
    let mut before = migrated_to(19).await;
    provisioning_history(&mut before).await;
    apply(&mut before, 20).await;
    let expected: Vec<Copy> = sqlx::query_as(FROM_REQUESTS)
        .fetch_all(&mut before)
        .await
        .unwrap();
    assert_eq!(expected.len(), 12);
    let copied: Vec<Copy> = sqlx::query_as(COPIES).fetch_all(&mut before).await.unwrap();
    assert_eq!(copied, expected);

    let mut current = migrated_to(i64::MAX).await;
    provisioning_history(&mut current).await;
    // Approvals as approving writes them.
    sqlx::query("DELETE FROM provision_approvals")
        .execute(&mut current)
        .await
        .unwrap();
    for id in (2..=24).step_by(2) {
        let approver = ["abe", "ada"][(id % 4 / 2) as usize];
        assert!(
            headroom::db::provisions::insert_approval(&mut current, id, approver, "h", id)
                .await
                .unwrap()
        );
    }
    sqlx::query("UPDATE provisions SET state = 'approved' WHERE id % 4 = 0")
        .execute(&mut current)
        .await
        .unwrap();
    let expected: Vec<Copy> = sqlx::query_as(FROM_REQUESTS)
        .fetch_all(&mut current)
        .await
        .unwrap();
    assert!(expected.iter().any(|c| c.5 == "approved"));
    let copied: Vec<Copy> = sqlx::query_as(COPIES)
        .fetch_all(&mut current)
        .await
        .unwrap();
    assert_eq!(copied, expected);
}
