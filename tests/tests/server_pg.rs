//! `strata serve`'s PostgreSQL front end driven by `tokio-postgres`: simple and extended
//! query, typed columns and parameters, SQLSTATEs, database selection by name, accepted
//! transaction statements, password authentication, and the RESP `SQL` command on the same
//! data.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a panic is how a test fails"
)]

mod server_util;

use server_util::TestServer;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::Type;
use tokio_postgres::{Client, NoTls, SimpleQueryMessage};

type TestResult = Result<(), Box<dyn std::error::Error>>;

async fn connect(server: &TestServer, dbname: &str) -> Result<Client, tokio_postgres::Error> {
    connect_with(server, &format!("dbname={dbname}")).await
}

async fn connect_with(server: &TestServer, extra: &str) -> Result<Client, tokio_postgres::Error> {
    let addr = server.pg_addr();
    let conninfo = format!(
        "host={} port={} user=tester {extra}",
        addr.ip(),
        addr.port()
    );
    let (client, connection) = tokio_postgres::connect(&conninfo, NoTls).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

const SCHEMA: &str = "CREATE TABLE reads (seq TEXT PRIMARY KEY, n BIGINT NOT NULL, \
                      q DOUBLE, ok BOOLEAN, raw BLOB)";

#[tokio::test]
async fn simple_query_runs_statements_in_order() -> TestResult {
    let server = TestServer::start(|_| {});
    let client = connect(&server, "run1").await?;
    client
        .batch_execute(&format!(
            "{SCHEMA}; INSERT INTO reads VALUES ('ACGT', 12, 0.5, true, x'00ff'), \
             ('TTGA', 3, NULL, false, NULL)"
        ))
        .await?;
    let messages = client
        .simple_query("SELECT seq, n, q, ok, raw FROM reads ORDER BY n")
        .await?;
    let rows: Vec<Vec<Option<String>>> = messages
        .iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(r) => {
                Some((0..r.len()).map(|i| r.get(i).map(str::to_owned)).collect())
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            vec![
                Some("TTGA".into()),
                Some("3".into()),
                None,
                Some("f".into()),
                None
            ],
            vec![
                Some("ACGT".into()),
                Some("12".into()),
                Some("0.5".into()),
                Some("t".into()),
                Some("\\x00ff".into())
            ],
        ]
    );
    assert!(
        messages
            .iter()
            .any(|m| matches!(m, SimpleQueryMessage::CommandComplete(2)))
    );
    Ok(())
}

#[tokio::test]
async fn extended_query_types_columns_and_binary_parameters() -> TestResult {
    let server = TestServer::start(|_| {});
    let client = connect(&server, "run2").await?;
    client.batch_execute(SCHEMA).await?;
    // Binary parameters with their types, as psycopg 3 and tokio-postgres send them.
    let inserted = client
        .execute_typed(
            "INSERT INTO reads VALUES ($1, $2, $3, $4, $5)",
            &[
                (&"it's", Type::TEXT),
                (&7i64, Type::INT8),
                (&1.25f64, Type::FLOAT8),
                (&true, Type::BOOL),
                (&vec![1u8, 2, 3], Type::BYTEA),
            ],
        )
        .await?;
    assert_eq!(inserted, 1);
    client
        .execute_typed(
            "INSERT INTO reads (seq, n) VALUES ($1, $2)",
            &[(&"small", Type::TEXT), (&-4i32, Type::INT4)],
        )
        .await?;
    let rows = client
        .query_typed(
            "SELECT seq, n, q, ok, raw FROM reads WHERE n > $1 ORDER BY n",
            &[(&0i16, Type::INT2)],
        )
        .await?;
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    assert_eq!(row.get::<_, &str>(0), "it's");
    assert_eq!(row.get::<_, i64>(1), 7);
    assert_eq!(row.get::<_, Option<f64>>(2), Some(1.25));
    assert_eq!(row.get::<_, Option<bool>>(3), Some(true));
    assert_eq!(row.get::<_, Option<Vec<u8>>>(4), Some(vec![1, 2, 3]));
    // A prepared statement is described before it runs: its columns are typed.
    let stmt = client
        .prepare("SELECT seq, n * 2 AS twice, COUNT(*) AS c FROM reads GROUP BY seq, n")
        .await?;
    let types: Vec<&Type> = stmt.columns().iter().map(|c| c.type_()).collect();
    assert_eq!(types, vec![&Type::TEXT, &Type::INT8, &Type::INT8]);
    let rows = client.query(&stmt, &[]).await?;
    assert_eq!(rows.len(), 2);
    let total: i64 = rows.iter().map(|r| r.get::<_, i64>("twice")).sum();
    assert_eq!(total, 6);
    // NULL parameters.
    let rows = client
        .query_typed(
            "SELECT seq FROM reads WHERE q IS NULL AND seq = $1",
            &[(&"small", Type::TEXT)],
        )
        .await?;
    assert_eq!(rows.len(), 1);
    Ok(())
}

#[tokio::test]
async fn errors_carry_sqlstates() -> TestResult {
    let server = TestServer::start(|_| {});
    let client = connect(&server, "run3").await?;
    client
        .batch_execute("CREATE TABLE t (k BIGINT PRIMARY KEY); INSERT INTO t VALUES (1)")
        .await?;
    let code = |r: Result<u64, tokio_postgres::Error>| r.unwrap_err().code().cloned();
    assert_eq!(
        code(client.execute("SELEC 1", &[]).await),
        Some(SqlState::SYNTAX_ERROR)
    );
    assert_eq!(
        code(client.execute("SELECT * FROM missing", &[]).await),
        Some(SqlState::UNDEFINED_TABLE)
    );
    assert_eq!(
        code(client.execute("INSERT INTO t VALUES (1)", &[]).await),
        Some(SqlState::UNIQUE_VIOLATION)
    );
    assert_eq!(
        code(
            client
                .execute("SELECT * FROM t JOIN t AS u ON true", &[])
                .await
        ),
        Some(SqlState::FEATURE_NOT_SUPPORTED)
    );
    assert_eq!(
        code(
            client
                .execute("SELECT relname FROM pg_catalog.pg_class", &[])
                .await
        ),
        Some(SqlState::FEATURE_NOT_SUPPORTED)
    );
    assert_eq!(
        code(client.execute("SELECT k FROM t LIMIT -1", &[]).await),
        Some(SqlState::from_code("2201W"))
    );
    assert_eq!(
        code(client.execute("SELECT k FROM t OFFSET -1", &[]).await),
        Some(SqlState::from_code("2201X"))
    );
    assert_eq!(
        code(client.execute("SELECT k FROM t ORDER BY 5", &[]).await),
        Some(SqlState::INVALID_COLUMN_REFERENCE)
    );
    // The connection is still usable after errors.
    let rows = client.query("SELECT k FROM t", &[]).await?;
    assert_eq!(rows[0].get::<_, i64>(0), 1);
    Ok(())
}

#[tokio::test]
async fn the_database_name_selects_the_database() -> TestResult {
    let server = TestServer::start(|_| {});
    let a = connect(&server, "project_a").await?;
    a.batch_execute("CREATE TABLE only_in_a (k BIGINT PRIMARY KEY)")
        .await?;
    let b = connect(&server, "project_b").await?;
    let err = b.execute("SELECT * FROM only_in_a", &[]).await.unwrap_err();
    assert_eq!(err.code(), Some(&SqlState::UNDEFINED_TABLE));
    assert!(server.dir.path().join("project_a").is_dir());
    assert!(server.dir.path().join("project_b").is_dir());
    Ok(())
}

/// An invalid database name fails the connection itself (FATAL 3D000, as PostgreSQL
/// answers for a database that does not exist), not the first query.
#[tokio::test]
async fn an_invalid_database_name_fails_at_connect() -> TestResult {
    let server = TestServer::start(|_| {});
    for name in ["bad.name", "a%2Fb", &"n".repeat(65)] {
        let err = connect(&server, name)
            .await
            .err()
            .unwrap_or_else(|| panic!("connecting to {name:?} succeeded"));
        assert_eq!(err.code(), Some(&SqlState::INVALID_CATALOG_NAME), "{err}");
        let db = err.as_db_error().expect("a server error");
        assert_eq!(db.severity(), "FATAL");
        assert!(db.message().contains("does not exist"), "{}", db.message());
    }
    let mut entries = std::fs::read_dir(server.dir.path())?
        .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect::<std::io::Result<Vec<_>>>()?;
    entries.sort();
    assert_eq!(entries, ["db0", "strata-serve.lock"], "only db0");
    // A valid name still works (and creates the database).
    connect(&server, "fine_name")
        .await?
        .simple_query("SELECT 1")
        .await?;
    Ok(())
}

/// A typed parameter types the expression it is in, before and after Bind: `$1 + 1` with an
/// integer is `int8`, not `text`.
#[tokio::test]
async fn typed_parameters_type_result_columns() -> TestResult {
    let server = TestServer::start(|_| {});
    let client = connect(&server, "params").await?;
    let rows = client
        .query_typed("SELECT $1 + 1", &[(&41i64, Type::INT8)])
        .await?;
    assert_eq!(rows[0].columns()[0].type_(), &Type::INT8);
    assert_eq!(rows[0].get::<_, i64>(0), 42);
    let rows = client
        .query_typed("SELECT $1 * 2", &[(&1.5f64, Type::FLOAT8)])
        .await?;
    assert_eq!(rows[0].get::<_, f64>(0), 3.0);
    // Described before Bind (prepare with types): the same column types.
    let stmt = client
        .prepare_typed("SELECT $1 + 1, $2", &[Type::INT4, Type::TEXT])
        .await?;
    let types: Vec<&Type> = stmt.columns().iter().map(|c| c.type_()).collect();
    assert_eq!(types, [&Type::INT8, &Type::TEXT]);
    let rows = client.query(&stmt, &[&5i32, &"x"]).await?;
    assert_eq!(rows[0].get::<_, i64>(0), 6);
    assert_eq!(rows[0].get::<_, &str>(1), "x");
    Ok(())
}

/// `--timeout` closes idle PostgreSQL connections too, with PostgreSQL's FATAL 57P05
/// (`idle_session_timeout`); a connection that keeps running statements stays open.
#[tokio::test]
async fn idle_pg_connections_are_closed_after_the_timeout() -> TestResult {
    let server =
        TestServer::start(|c| c.idle_timeout = Some(std::time::Duration::from_millis(400)));
    let addr = server.pg_addr();
    let conninfo = format!(
        "host={} port={} user=tester dbname=idle",
        addr.ip(),
        addr.port()
    );
    let (idle, connection) = tokio_postgres::connect(&conninfo, NoTls).await?;
    let ended = tokio::spawn(connection);
    let busy = connect(&server, "idle").await?;
    idle.simple_query("SELECT 1").await?;
    let start = std::time::Instant::now();
    for _ in 0..8 {
        tokio::time::sleep(std::time::Duration::from_millis(150)).await;
        busy.simple_query("SELECT 1").await?;
    }
    // 1.2 s of 150 ms gaps: the busy connection is still open, the idle one is not.
    let result = tokio::time::timeout(std::time::Duration::from_secs(5), ended).await??;
    assert!(start.elapsed() < std::time::Duration::from_secs(5));
    let err = result.expect_err("the idle connection was closed with an error");
    assert_eq!(err.code(), Some(&SqlState::IDLE_SESSION_TIMEOUT), "{err}");
    assert!(idle.simple_query("SELECT 1").await.is_err());
    assert!(idle.is_closed());
    busy.simple_query("SELECT 1").await?;
    Ok(())
}

#[tokio::test]
async fn transaction_statements_are_accepted() -> TestResult {
    let server = TestServer::start(|_| {});
    let mut client = connect(&server, "run4").await?;
    client
        .batch_execute("BEGIN; CREATE TABLE t (k BIGINT PRIMARY KEY); COMMIT")
        .await?;
    let tx = client.transaction().await?;
    tx.execute("INSERT INTO t VALUES (1)", &[]).await?;
    tx.commit().await?;
    let rows = client.query("SELECT k FROM t", &[]).await?;
    assert_eq!(rows.len(), 1);
    for stmt in [
        "SET datestyle = 'ISO'",
        "SHOW server_version",
        "SELECT version()",
    ] {
        client.simple_query(stmt).await?;
    }
    Ok(())
}

#[tokio::test]
async fn deallocate_removes_prepared_statements_as_psycopg_expects() -> TestResult {
    let server = TestServer::start(|_| {});
    let client = connect(&server, "run5").await?;
    client
        .batch_execute("CREATE TABLE t (k BIGINT PRIMARY KEY); INSERT INTO t VALUES (1)")
        .await?;
    // A statement prepared with the extended protocol (tokio-postgres names them `s<N>`
    // from a counter of its own), then removed by name.
    let stmt = client
        .prepare_typed("SELECT k FROM t WHERE k = $1", &[Type::INT8])
        .await?;
    assert_eq!(client.query(&stmt, &[&1i64]).await?.len(), 1);
    let mut removed = 0;
    for n in 0..1000 {
        if client
            .batch_execute(&format!("DEALLOCATE s{n}"))
            .await
            .is_ok()
        {
            removed += 1;
        }
    }
    assert_eq!(removed, 1);
    assert!(client.query(&stmt, &[&1i64]).await.is_err());
    let err = client
        .batch_execute("DEALLOCATE PREPARE nosuch")
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(&SqlState::INVALID_SQL_STATEMENT_NAME));
    // psycopg's rollback after an error sends DEALLOCATE ALL once it has prepared statements.
    client
        .batch_execute("DEALLOCATE ALL; deallocate all;")
        .await?;
    let err = client.batch_execute("DEALLOCATE").await.unwrap_err();
    assert_eq!(err.code(), Some(&SqlState::SYNTAX_ERROR));
    Ok(())
}

#[tokio::test]
async fn result_columns_are_typed_as_their_values_in_binary_format() -> TestResult {
    let server = TestServer::start(|_| {});
    let client = connect(&server, "run6").await?;
    client
        .batch_execute(
            "CREATE TABLE m (id BIGINT PRIMARY KEY, i BIGINT, d DOUBLE, b BLOB, jpg_type TEXT); \
             INSERT INTO m VALUES (1, NULL, 1.5, x'0001', 'png'), (2, 7, NULL, x'ff', NULL)",
        )
        .await?;
    // tokio-postgres reads results in binary: coalesce of BIGINT and DOUBLE is a float8
    // column, BLOB || BLOB a bytea one.
    let rows = client
        .query("SELECT coalesce(i, d), b || b FROM m ORDER BY id", &[])
        .await?;
    assert_eq!(rows[0].columns()[0].type_(), &Type::FLOAT8);
    assert_eq!(rows[0].get::<_, f64>(0), 1.5);
    assert_eq!(rows[1].get::<_, f64>(0), 7.0);
    assert_eq!(rows[0].get::<_, Vec<u8>>(1), vec![0, 1, 0, 1]);
    // A column whose name contains a catalog's name is not a catalog query.
    let rows = client
        .query("SELECT jpg_type FROM m WHERE id = 1", &[])
        .await?;
    assert_eq!(rows[0].get::<_, String>(0), "png");
    // Savepoints are accepted (and undo nothing), as transactions are.
    client
        .batch_execute(
            "BEGIN; SAVEPOINT s1; INSERT INTO m (id) VALUES (3); ROLLBACK TO SAVEPOINT s1; \
             RELEASE SAVEPOINT s1; COMMIT",
        )
        .await?;
    // At most 65,535 parameters, as in PostgreSQL; the statement is refused at Parse.
    let err = client.prepare("SELECT $70000").await.unwrap_err();
    assert_eq!(err.code(), Some(&SqlState::UNDEFINED_PARAMETER), "{err}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_running_at_shutdown_gets_its_reply() -> TestResult {
    let mut server = TestServer::start(|_| {});
    let client = connect(&server, "run7").await?;
    client
        .batch_execute("CREATE TABLE big (id BIGINT PRIMARY KEY, g BIGINT)")
        .await?;
    let values: Vec<String> = (0..40_000).map(|i| format!("({i}, 0)")).collect();
    client
        .batch_execute(&format!("INSERT INTO big VALUES {}", values.join(", ")))
        .await?;
    let update = tokio::spawn(async move {
        let n = client.execute("UPDATE big SET g = g + 1", &[]).await;
        (n, client)
    });
    // Long enough for the UPDATE to reach the server on a slow machine; it runs on for over a
    // second after it in a debug build.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    // SIGTERM's path: stop accepting, let running statements finish, close the connections.
    let stopped = tokio::task::spawn_blocking(move || {
        server.stop();
        server
    });
    let (n, client) = update.await?;
    assert_eq!(n?, 40_000, "the statement committed and its reply arrived");
    let mut server = stopped.await?;
    // Then the connection is closed with PostgreSQL's administrator-shutdown error.
    let err = client.simple_query("SELECT 1").await.unwrap_err();
    assert!(
        err.is_closed() || err.code() == Some(&SqlState::ADMIN_SHUTDOWN),
        "{err}"
    );
    server.restart();
    let client = connect(&server, "run7").await?;
    let rows = client
        .query("SELECT count(*) FROM big WHERE g = 1", &[])
        .await?;
    assert_eq!(rows[0].get::<_, i64>(0), 40_000);
    Ok(())
}

#[tokio::test]
async fn a_database_beyond_max_databases_is_refused_with_53000() -> TestResult {
    // The default database db0 is open from the start: one more fits.
    let server = TestServer::start(|c| c.max_databases = 2);
    let client = connect(&server, "first").await?;
    client.simple_query("SELECT 1").await?;
    let refused = match connect(&server, "second").await {
        Err(e) => e,
        Ok(c) => c
            .simple_query("SELECT 1")
            .await
            .expect_err("over the limit"),
    };
    assert_eq!(
        refused.code(),
        Some(&SqlState::INSUFFICIENT_RESOURCES),
        "{refused}"
    );
    client.simple_query("SELECT 1").await?;
    Ok(())
}

#[tokio::test]
async fn password_is_required_when_configured() -> TestResult {
    let server = TestServer::start(|c| c.requirepass = Some("pg-secret".into()));
    assert!(connect(&server, "db0").await.is_err());
    assert!(
        connect_with(&server, "dbname=db0 password=wrong")
            .await
            .is_err()
    );
    let client = connect_with(&server, "dbname=db0 password=pg-secret").await?;
    client.simple_query("SELECT 1").await?;
    Ok(())
}

#[tokio::test]
async fn resp_sql_command_and_pg_share_the_database() -> TestResult {
    let server = TestServer::start(|_| {});
    let mut redis = server.client();
    let created: String = redis::cmd("SQL")
        .arg("CREATE TABLE counts (k TEXT PRIMARY KEY, n BIGINT)")
        .query(&mut redis)?;
    assert_eq!(created, "CREATE TABLE");
    let _: String = redis::cmd("SQL")
        .arg("INSERT INTO counts VALUES ('a', 1), ('b', 2)")
        .query(&mut redis)?;
    let rows: redis::Value = redis::cmd("SQL")
        .arg("SELECT k, n FROM counts ORDER BY k")
        .query(&mut redis)?;
    let expected = redis::Value::Array(vec![
        redis::Value::Array(vec![
            redis::Value::BulkString(b"k".to_vec()),
            redis::Value::BulkString(b"n".to_vec()),
        ]),
        redis::Value::Array(vec![
            redis::Value::BulkString(b"a".to_vec()),
            redis::Value::Int(1),
        ]),
        redis::Value::Array(vec![
            redis::Value::BulkString(b"b".to_vec()),
            redis::Value::Int(2),
        ]),
    ]);
    assert_eq!(rows, expected);
    // Doubles print as docs/sql.md says, so a whole double does not read as an integer.
    let doubles: redis::Value = redis::cmd("SQL")
        .arg("SELECT 3.0, 1e16, 1e300, 0.5 FROM counts WHERE k = 'a'")
        .query(&mut redis)?;
    let redis::Value::Array(doubles) = doubles else {
        panic!("{doubles:?}")
    };
    let texts: Vec<redis::Value> = ["3.0", "1e16", "1e300", "0.5"]
        .iter()
        .map(|t| redis::Value::BulkString(t.as_bytes().to_vec()))
        .collect();
    assert_eq!(doubles[1], redis::Value::Array(texts));
    let err = redis::cmd("SQL")
        .arg("SELECT * FROM nope")
        .query::<redis::Value>(&mut redis)
        .unwrap_err();
    assert!(err.to_string().contains("[42P01]"), "{err}");
    assert!(!err.to_string().contains("statement 1"), "{err}");
    // A later statement's error says the ones before it ran.
    let err = redis::cmd("SQL")
        .arg("INSERT INTO counts VALUES ('late', 0); SELECT nope FROM counts; SELECT 1")
        .query::<redis::Value>(&mut redis)
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("(statement 2 of 3; the 1 before it ran, and their changes stay)"),
        "{err}"
    );
    // Redis keys and SQL tables live side by side.
    let () = redis::Commands::set(&mut redis, "plain", "key")?;
    let client = connect(&server, "db0").await?;
    let rows = client.query("SELECT SUM(n) FROM counts", &[]).await?;
    assert_eq!(rows[0].get::<_, i64>(0), 3);
    let keys: Vec<String> = redis::Commands::keys(&mut redis, "*")?;
    assert_eq!(keys, vec!["plain"]);
    Ok(())
}

/// Fills `big (id BIGINT PRIMARY KEY, g BIGINT)` with `n` rows, `g = 0`.
async fn fill_big(client: &Client, n: usize) -> TestResult {
    client
        .batch_execute("CREATE TABLE big (id BIGINT PRIMARY KEY, g BIGINT)")
        .await?;
    let ids: Vec<usize> = (0..n).collect();
    for chunk in ids.chunks(40_000) {
        let values: Vec<String> = chunk.iter().map(|i| format!("({i}, 0)")).collect();
        client
            .batch_execute(&format!("INSERT INTO big VALUES {}", values.join(", ")))
            .await?;
    }
    Ok(())
}

/// Runs `sql` on `client` while sending cancel requests for it (every 20 ms, from 20 ms on:
/// one sent before the statement reached the server does nothing, as in PostgreSQL); returns
/// the statement's result.
async fn cancel_while_running(
    client: Client,
    sql: &'static str,
) -> Result<(Result<u64, tokio_postgres::Error>, Client), Box<dyn std::error::Error>> {
    let token = client.cancel_token();
    let running = tokio::spawn(async move {
        let r = client.execute(sql, &[]).await;
        (r, client)
    });
    while !running.is_finished() {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        token.cancel_query(NoTls).await?;
    }
    // The client does not wait for the server to act on a cancel request: let the last one
    // land (on no running statement) before the next statement starts.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    Ok(running.await?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_request_stops_the_running_statement_with_57014() -> TestResult {
    for password in [None, Some("pg-secret")] {
        let server = TestServer::start(|c| c.requirepass = password.map(str::to_owned));
        let extra = match password {
            Some(p) => format!("dbname=run8 password={p}"),
            None => "dbname=run8".to_owned(),
        };
        let mut client = connect_with(&server, &extra).await?;
        fill_big(&client, 100_000).await?;
        for sql in [
            "SELECT count(*) FROM big WHERE g >= 0",
            "UPDATE big SET g = g + 1",
            "CREATE INDEX by_g ON big (g)",
        ] {
            let (result, back) = cancel_while_running(client, sql).await?;
            client = back;
            let err = result.expect_err(sql);
            assert_eq!(err.code(), Some(&SqlState::QUERY_CANCELED), "{sql}: {err}");
            // The connection goes on, and the statement changed nothing.
            let rows = client
                .query("SELECT count(*), sum(g) FROM big", &[])
                .await?;
            assert_eq!(rows[0].get::<_, i64>(0), 100_000, "{sql}");
            assert_eq!(rows[0].get::<_, Option<i64>>(1), Some(0), "{sql}");
        }
        // Not interrupted, the index is built; a cancel with no statement running is ignored.
        client.cancel_token().cancel_query(NoTls).await?;
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        client.batch_execute("CREATE INDEX by_g ON big (g)").await?;
        let rows = client
            .query("SELECT count(*) FROM big WHERE g = 0", &[])
            .await?;
        assert_eq!(rows[0].get::<_, i64>(0), 100_000);
    }
    Ok(())
}

/// The first column of the first row `sql` (a `SHOW`) returns.
async fn shown(client: &Client, sql: &str) -> Result<Option<String>, tokio_postgres::Error> {
    Ok(client
        .simple_query(sql)
        .await?
        .into_iter()
        .find_map(|m| match m {
            SimpleQueryMessage::Row(r) => r.get(0).map(str::to_owned),
            _ => None,
        }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statement_timeout_stops_long_statements_with_57014() -> TestResult {
    let server = TestServer::start(|_| {});
    let client = connect(&server, "run9").await?;
    fill_big(&client, 100_000).await?;
    assert_eq!(
        shown(&client, "SHOW statement_timeout").await?.as_deref(),
        Some("0")
    );
    // A few milliseconds: a full scan of 100,000 rows in a debug build takes far longer.
    client.batch_execute("SET statement_timeout = 5").await?;
    assert_eq!(
        shown(&client, "SHOW statement_timeout").await?.as_deref(),
        Some("5ms")
    );
    for sql in [
        "SELECT count(*) FROM big WHERE g >= 0",
        "UPDATE big SET g = g + 1",
    ] {
        let err = client.execute(sql, &[]).await.expect_err(sql);
        assert_eq!(err.code(), Some(&SqlState::QUERY_CANCELED), "{sql}: {err}");
        let db = err.as_db_error().expect("a server error");
        assert!(
            db.message().contains("statement timeout"),
            "{}",
            db.message()
        );
    }
    // In one query string, the SET applies to the statements after it.
    let err = client
        .batch_execute(
            "SET statement_timeout TO '1min'; SET statement_timeout TO '5ms'; DELETE FROM big",
        )
        .await
        .expect_err("timed out");
    assert_eq!(err.code(), Some(&SqlState::QUERY_CANCELED), "{err}");
    // RESET ALL resets it too (as connection pools send between clients), and answers RESET.
    client.batch_execute("SET statement_timeout = 5").await?;
    client.batch_execute("RESET ALL").await?;
    assert_eq!(
        shown(&client, "SHOW statement_timeout").await?.as_deref(),
        Some("0")
    );
    client
        .batch_execute("/* a comment */ SET \"statement_timeout\" = '2.5s' -- more")
        .await?;
    assert_eq!(
        shown(&client, "SHOW statement_timeout -- c")
            .await?
            .as_deref(),
        Some("2500ms")
    );
    client.batch_execute("RESET statement_timeout").await?;
    assert_eq!(
        shown(&client, "SHOW statement_timeout").await?.as_deref(),
        Some("0")
    );
    let rows = client
        .query("SELECT count(*), sum(g) FROM big", &[])
        .await?;
    assert_eq!(rows[0].get::<_, i64>(0), 100_000);
    assert_eq!(rows[0].get::<_, Option<i64>>(1), Some(0));
    let err = client
        .batch_execute("SET statement_timeout = 'soon'")
        .await
        .expect_err("a bad value");
    assert_eq!(
        err.code(),
        Some(&SqlState::INVALID_PARAMETER_VALUE),
        "{err}"
    );
    let message = err.as_db_error().map(|e| e.message().to_owned());
    assert!(
        message
            .as_deref()
            .is_some_and(|m| m.starts_with("invalid value for parameter \"statement_timeout\"")),
        "{message:?}"
    );
    // The startup options can set it, as libpq's `options` and PGOPTIONS do; a bad value
    // fails the connection.
    let with_options =
        connect_with(&server, "dbname=run9 options='-c statement_timeout=5'").await?;
    assert_eq!(
        shown(&with_options, "SHOW statement_timeout")
            .await?
            .as_deref(),
        Some("5ms")
    );
    let err = with_options
        .execute("SELECT count(*) FROM big WHERE g >= 0", &[])
        .await
        .expect_err("timed out");
    assert_eq!(err.code(), Some(&SqlState::QUERY_CANCELED), "{err}");
    let refused = connect_with(&server, "dbname=run9 options='-c statement_timeout=soon'")
        .await
        .expect_err("a bad value");
    assert_eq!(
        refused.code(),
        Some(&SqlState::INVALID_PARAMETER_VALUE),
        "{refused}"
    );
    // Another connection has its own setting.
    let other = connect(&server, "run9").await?;
    assert_eq!(
        shown(&other, "SHOW statement_timeout").await?.as_deref(),
        Some("0")
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_still_running_after_the_grace_period_is_stopped_and_changes_nothing()
-> TestResult {
    let mut server =
        TestServer::start(|c| c.shutdown_grace = std::time::Duration::from_millis(100));
    let client = connect(&server, "run10").await?;
    fill_big(&client, 100_000).await?;
    // A full-table UPDATE runs far longer than 100 ms in a debug build.
    let update = tokio::spawn(async move { client.execute("UPDATE big SET g = g + 1", &[]).await });
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let started = std::time::Instant::now();
    let stopped = tokio::task::spawn_blocking(move || {
        server.stop();
        server
    });
    let err = update.await?.expect_err("stopped by the shutdown");
    // The statement's own error (57P01, as PostgreSQL's fast shutdown), not a bare EOF.
    assert_eq!(err.code(), Some(&SqlState::ADMIN_SHUTDOWN), "{err}");
    let mut server = stopped.await?;
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "shutdown took {:?}",
        started.elapsed()
    );
    server.restart();
    let client = connect(&server, "run10").await?;
    let rows = client
        .query("SELECT count(*), sum(g) FROM big", &[])
        .await?;
    assert_eq!(rows[0].get::<_, i64>(0), 100_000);
    assert_eq!(
        rows[0].get::<_, Option<i64>>(1),
        Some(0),
        "the UPDATE changed nothing"
    );
    Ok(())
}

/// One frontend message: type byte, then the big-endian length (itself included) and body.
#[expect(clippy::big_endian_bytes, reason = "PostgreSQL's wire format")]
fn pg_message(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut m = vec![kind];
    m.extend_from_slice(&u32::try_from(body.len() + 4).unwrap().to_be_bytes());
    m.extend_from_slice(body);
    m
}

/// Backend messages read up to and including ReadyForQuery, as (type, body).
#[expect(clippy::big_endian_bytes, reason = "PostgreSQL's wire format")]
fn read_until_ready(stream: &mut std::net::TcpStream) -> Vec<(u8, Vec<u8>)> {
    use std::io::Read;
    let mut messages = Vec::new();
    loop {
        let mut head = [0u8; 5];
        stream.read_exact(&mut head).expect("a message");
        let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
        let mut body = vec![0u8; len - 4];
        stream.read_exact(&mut body).expect("its body");
        messages.push((head[0], body));
        if head[0] == b'Z' {
            return messages;
        }
    }
}

/// A raw connection to `server`'s PostgreSQL port, started up (protocol 3.0, user `tester`,
/// database `database`) and ready for queries.
fn raw_session(server: &TestServer, database: &str) -> std::net::TcpStream {
    use std::io::Write;
    let mut stream = std::net::TcpStream::connect(server.pg_addr()).expect("connect");
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .expect("timeout");
    let packet = server_util::pg_startup_packet(database);
    stream.write_all(&packet).expect("startup");
    read_until_ready(&mut stream);
    stream
}

/// The body of the first ErrorResponse among `replies`, as text (fields `C08P01`, `M...`).
fn error_response(replies: &[(u8, Vec<u8>)]) -> Option<String> {
    replies
        .iter()
        .find(|(kind, _)| *kind == b'E')
        .map(|(_, body)| String::from_utf8_lossy(body).into_owned())
}

/// Backend messages read until one of type `last` (inclusive), as (type, body).
#[expect(clippy::big_endian_bytes, reason = "PostgreSQL's wire format")]
fn read_until(stream: &mut std::net::TcpStream, last: u8) -> Vec<(u8, Vec<u8>)> {
    use std::io::Read;
    let mut messages = Vec::new();
    loop {
        let mut head = [0u8; 5];
        stream.read_exact(&mut head).expect("a message");
        let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
        let mut body = vec![0u8; len - 4];
        stream.read_exact(&mut body).expect("its body");
        messages.push((head[0], body));
        if head[0] == last {
            return messages;
        }
    }
}

/// Replies to pipelined messages are held back only while the client has sent more: a
/// pipeline that ends in Flush, with no Sync, gets every reply, an error's too (the
/// messages after the error are skipped and send nothing); several statements pipelined
/// before one Sync get each its replies, in order, point lookups and scans alike.
#[test]
fn pipelined_replies_are_all_sent_when_the_client_waits() {
    use std::io::Write;
    let server = TestServer::start(|_| {});
    let mut stream = raw_session(&server, "pipe");
    stream
        .write_all(&pg_message(
            b'Q',
            b"CREATE TABLE t (k BIGINT PRIMARY KEY, v TEXT); \
              INSERT INTO t VALUES (1, 'one'), (2, 'two'), (3, 'three')\0",
        ))
        .expect("setup");
    assert_eq!(error_response(&read_until_ready(&mut stream)), None);
    let extended = |sql: &str| {
        let mut bytes = pg_message(b'P', &[b"\0", sql.as_bytes(), b"\0\0\0"].concat());
        bytes.extend(pg_message(b'B', b"\0\0\0\0\0\0\0\0"));
        bytes.extend(pg_message(b'D', b"P\0"));
        bytes.extend(pg_message(b'E', b"\0\0\0\0\0"));
        bytes
    };
    // A failing statement, then Flush: the ErrorResponse comes without a Sync.
    let mut bytes = extended("SELECT nope FROM t");
    bytes.extend(pg_message(b'H', b""));
    stream.write_all(&bytes).expect("pipeline");
    let replies = read_until(&mut stream, b'E');
    assert!(error_response(&replies).is_some_and(|e| e.contains("C42703")));
    stream.write_all(&pg_message(b'S', b"")).expect("sync");
    assert_eq!(
        read_until_ready(&mut stream).last().map(|m| m.0),
        Some(b'Z')
    );
    // A point lookup, then Flush: its row and CommandComplete come without a Sync.
    let mut bytes = extended("SELECT v FROM t WHERE k = 2");
    bytes.extend(pg_message(b'H', b""));
    stream.write_all(&bytes).expect("pipeline");
    let replies = read_until(&mut stream, b'C');
    let rows: Vec<&[u8]> = replies
        .iter()
        .filter(|(kind, _)| *kind == b'D')
        .map(|(_, body)| body.as_slice())
        .collect();
    assert_eq!(rows, vec![&b"\0\x01\0\0\0\x03two"[..]]);
    stream.write_all(&pg_message(b'S', b"")).expect("sync");
    read_until_ready(&mut stream);
    // Three statements, one Sync: each answered in order.
    let mut bytes = extended("SELECT v FROM t WHERE k = 3");
    bytes.extend(extended("SELECT count(*) FROM t WHERE v <> 'x'"));
    bytes.extend(extended(
        "SELECT v FROM t WHERE k IN (1, 2) ORDER BY k DESC",
    ));
    bytes.extend(pg_message(b'S', b""));
    stream.write_all(&bytes).expect("pipeline");
    let replies = read_until_ready(&mut stream);
    assert_eq!(error_response(&replies), None);
    let kinds: String = replies.iter().map(|(kind, _)| char::from(*kind)).collect();
    assert_eq!(kinds, "12TDC12TDC12TDDCZ");
    let rows: Vec<String> = replies
        .iter()
        .filter(|(kind, _)| *kind == b'D')
        .map(|(_, body)| String::from_utf8_lossy(&body[6..]).into_owned())
        .collect();
    assert_eq!(rows, vec!["three", "3", "two", "one"]);
}

/// Replies to messages sent together with a Terminate are sent before the connection
/// closes: a simple query's, and an extended query's without a Sync; an INSERT's
/// CommandComplete too (it committed).
#[test]
fn replies_sent_with_a_terminate_behind_them_arrive() {
    use std::io::{Read, Write};
    let server = TestServer::start(|_| {});
    let mut setup = raw_session(&server, "bye");
    setup
        .write_all(&pg_message(
            b'Q',
            b"CREATE TABLE t (k BIGINT PRIMARY KEY, v TEXT); INSERT INTO t VALUES (7, 'seven')\0",
        ))
        .expect("setup");
    assert_eq!(error_response(&read_until_ready(&mut setup)), None);
    let until_closed = |bytes: Vec<u8>| {
        let mut stream = raw_session(&server, "bye");
        stream.write_all(&bytes).expect("pipeline");
        let mut replies = Vec::new();
        stream.read_to_end(&mut replies).expect("read to the close");
        replies
    };
    let terminate = pg_message(b'X', b"");
    let mut bytes = pg_message(b'Q', b"SELECT v FROM t WHERE k = 7\0");
    bytes.extend(&terminate);
    let replies = until_closed(bytes);
    assert!(replies.windows(5).any(|w| w == b"seven"), "{replies:?}");
    assert!(replies.ends_with(&pg_message(b'Z', b"I")), "{replies:?}");
    let mut bytes = pg_message(b'P', b"\0SELECT v FROM t WHERE k = 7\0\0\0");
    bytes.extend(pg_message(b'B', b"\0\0\0\0\0\0\0\0"));
    bytes.extend(pg_message(b'E', b"\0\0\0\0\0"));
    bytes.extend(&terminate);
    let replies = until_closed(bytes);
    assert!(replies.windows(5).any(|w| w == b"seven"), "{replies:?}");
    assert!(
        replies.windows(14).any(|w| w == b"C\0\0\0\rSELECT 1\0"),
        "{replies:?}"
    );
    let mut bytes = pg_message(b'Q', b"INSERT INTO t VALUES (8, 'eight')\0");
    bytes.extend(&terminate);
    let replies = until_closed(bytes);
    assert!(
        replies.windows(13).any(|w| w == b"INSERT 0 1\0Z\0"),
        "{replies:?}"
    );
}

#[test]
fn a_bind_with_result_formats_for_the_wrong_number_of_columns_is_an_error() {
    use std::io::Write;
    let server = TestServer::start(|_| {});
    let mut stream = raw_session(&server, "fmt");
    for round in 0..2 {
        let mut bytes = pg_message(b'P', b"\0SELECT 1, 2, 3\0\0\0");
        // Portal "", statement "", no parameter formats, no parameters, two result formats
        // (binary, text) for three columns; then in the second round a code that is neither.
        let codes: &[u8] = if round == 0 {
            &[0, 1, 0, 0]
        } else {
            &[0, 7, 0, 0]
        };
        let mut bind = b"\0\0\0\0\0\0\0\x02".to_vec();
        bind.extend_from_slice(codes);
        bytes.extend(pg_message(b'B', &bind));
        bytes.extend(pg_message(b'E', b"\0\0\0\0\0"));
        bytes.extend(pg_message(b'S', b""));
        stream.write_all(&bytes).expect("extended query");
        let replies = read_until_ready(&mut stream);
        let error = error_response(&replies).expect("an ErrorResponse, the connection kept");
        let expected = if round == 0 { "C08P01" } else { "C22023" };
        assert!(error.contains(expected), "{error}");
        assert!(
            !replies.iter().any(|(kind, _)| *kind == b'D'),
            "no row sent"
        );
    }
}

#[test]
#[expect(clippy::big_endian_bytes, reason = "PostgreSQL's wire format")]
fn text_integers_outside_their_declared_type_are_out_of_range() {
    use std::io::Write;
    let server = TestServer::start(|_| {});
    let mut stream = raw_session(&server, "ints");
    for (oid, text, expected) in [
        (21u32, &b"70000"[..], "C22003"),
        (23, b"3000000000", "C22003"),
        (21, b"12x", "C22P02"),
        (21, b"-32768", ""),
    ] {
        // Parse "SELECT $1 + 1" with one parameter of type `oid`; Bind it as text.
        let mut parse = b"\0SELECT $1 + 1\0\0\x01".to_vec();
        parse.extend_from_slice(&oid.to_be_bytes());
        let mut bytes = pg_message(b'P', &parse);
        let mut bind = b"\0\0\0\0\0\x01".to_vec();
        bind.extend_from_slice(&u32::try_from(text.len()).unwrap().to_be_bytes());
        bind.extend_from_slice(text);
        bind.extend_from_slice(b"\0\0");
        bytes.extend(pg_message(b'B', &bind));
        bytes.extend(pg_message(b'E', b"\0\0\0\0\0"));
        bytes.extend(pg_message(b'S', b""));
        stream.write_all(&bytes).expect("extended query");
        let replies = read_until_ready(&mut stream);
        let error = error_response(&replies);
        match error {
            Some(e) => assert!(!expected.is_empty() && e.contains(expected), "{oid} {e}"),
            None => assert!(expected.is_empty(), "{oid}: no error"),
        }
    }
}

/// Regression: a statement described while `v` was TEXT, executed after another connection
/// recreated the table with `v BIGINT`, sent binary int8 values under the old TEXT
/// RowDescription (asyncpg returned `v='abcdefgh'`). PostgreSQL refuses with 0A000, "cached
/// plan must not change result type", and the client prepares the statement again.
#[tokio::test]
async fn a_statement_whose_result_columns_changed_is_refused_with_0a000() -> TestResult {
    let server = TestServer::start(|_| {});
    let client = connect(&server, "plan").await?;
    let other = connect(&server, "plan").await?;
    other
        .batch_execute(
            "CREATE TABLE t (id BIGINT PRIMARY KEY, v TEXT); INSERT INTO t VALUES (1, 'one')",
        )
        .await?;
    let stmt = client.prepare("SELECT v FROM t").await?;
    assert_eq!(
        client.query(&stmt, &[]).await?[0].get::<_, String>(0),
        "one"
    );
    other
        .batch_execute(
            "DROP TABLE t; CREATE TABLE t (id BIGINT PRIMARY KEY, v BIGINT); \
             INSERT INTO t VALUES (1, 7017280452245743464)",
        )
        .await?;
    for _ in 0..2 {
        let err = client.query(&stmt, &[]).await.unwrap_err();
        assert_eq!(err.code(), Some(&SqlState::FEATURE_NOT_SUPPORTED), "{err}");
        let db = err.as_db_error().expect("a server error");
        assert_eq!(db.message(), "cached plan must not change result type");
        assert_eq!(db.routine(), Some("RevalidateCachedQuery"));
    }
    // Prepared again, it runs with the new columns; unprepared queries (described per run,
    // as psycopg's) never fail.
    let again = client.prepare("SELECT v FROM t").await?;
    assert_eq!(
        client.query(&again, &[]).await?[0].get::<_, i64>(0),
        7_017_280_452_245_743_464
    );
    assert_eq!(
        client.query("SELECT v FROM t", &[]).await?[0].get::<_, i64>(0),
        7_017_280_452_245_743_464
    );
    // A parameter's column, described as text before Bind (its type unknown), is not a
    // change when it runs as TEXT.
    let echo = client.prepare("SELECT $1").await?;
    for _ in 0..2 {
        assert_eq!(
            client.query_one(&echo, &[&"x"]).await?.get::<_, String>(0),
            "x"
        );
    }
    // Same columns after a recreate: still runs.
    other
        .batch_execute(
            "DROP TABLE t; CREATE TABLE t (id BIGINT PRIMARY KEY, v BIGINT); \
             INSERT INTO t VALUES (1, 5)",
        )
        .await?;
    assert_eq!(client.query(&again, &[]).await?[0].get::<_, i64>(0), 5);
    Ok(())
}

/// Regression: psycopg's `Decimal("12345678901234567")` (a numeric parameter) bound into a
/// BIGINT column stored 12345678901234568: numeric parameters became doubles, and a whole
/// double past 2^53 was accepted into BIGINT.
#[test]
#[expect(clippy::big_endian_bytes, reason = "PostgreSQL's wire format")]
fn whole_numeric_parameters_are_stored_exactly_in_bigint_columns() {
    use std::io::Write;
    let server = TestServer::start(|_| {});
    let mut stream = raw_session(&server, "dec");
    let run = |stream: &mut std::net::TcpStream, bytes: Vec<u8>| {
        stream.write_all(&bytes).expect("send");
        read_until_ready(stream)
    };
    let replies = run(
        &mut stream,
        pg_message(b'Q', b"CREATE TABLE t (id BIGINT PRIMARY KEY)\0"),
    );
    assert!(error_response(&replies).is_none(), "{replies:?}");
    // As text (oid 1700, numeric), then as binary numeric: 1|2345|6789|0123|4567 (weight 4).
    let mut binary = Vec::new();
    for word in [5u16, 4, 0, 0, 1, 2345, 6789, 123, 4567] {
        binary.extend_from_slice(&word.to_be_bytes());
    }
    for (format, value) in [(0u16, b"-12345678901234567".to_vec()), (1, binary)] {
        let mut bytes = pg_message(b'P', b"\0INSERT INTO t VALUES ($1)\0\0\x01\0\0\x06\xa4");
        let mut bind = b"\0\0\0\x01".to_vec();
        bind.extend_from_slice(&format.to_be_bytes());
        bind.extend_from_slice(b"\0\x01");
        bind.extend_from_slice(&u32::try_from(value.len()).unwrap().to_be_bytes());
        bind.extend_from_slice(&value);
        bind.extend_from_slice(b"\0\0");
        bytes.extend(pg_message(b'B', &bind));
        bytes.extend(pg_message(b'E', b"\0\0\0\0\0"));
        bytes.extend(pg_message(b'S', b""));
        let replies = run(&mut stream, bytes);
        assert!(error_response(&replies).is_none(), "{replies:?}");
    }
    let replies = run(
        &mut stream,
        pg_message(b'Q', b"SELECT id FROM t ORDER BY id\0"),
    );
    let rows: Vec<&[u8]> = replies
        .iter()
        .filter(|(kind, _)| *kind == b'D')
        .map(|(_, body)| &body[6..])
        .collect();
    assert_eq!(rows, [&b"-12345678901234567"[..], b"12345678901234567"]);
    // A double past 2^53 is not silently stored into BIGINT: it stands for many integers.
    let replies = run(
        &mut stream,
        pg_message(b'Q', b"INSERT INTO t VALUES (12345678901234568.0)\0"),
    );
    let error = error_response(&replies).expect("refused");
    assert!(error.contains("C22003"), "{error}");
    // Within 2^53 a whole double still converts.
    let replies = run(
        &mut stream,
        pg_message(b'Q', b"INSERT INTO t VALUES (42.0)\0"),
    );
    assert!(error_response(&replies).is_none(), "{replies:?}");
    // `SELECT $1` with a numeric parameter is described before Bind as float8 (its `0.0`
    // stand-in): bound as the integer 12, it is sent as the float8 12.0 the client expects.
    let mut bytes = pg_message(b'P', b"\0SELECT $1\0\0\x01\0\0\x06\xa4");
    bytes.extend(pg_message(b'D', b"S\0"));
    bytes.extend(pg_message(b'B', b"\0\0\0\0\0\x01\0\0\0\x0212\0\x01\0\x01"));
    bytes.extend(pg_message(b'E', b"\0\0\0\0\0"));
    bytes.extend(pg_message(b'S', b""));
    let replies = run(&mut stream, bytes);
    assert!(error_response(&replies).is_none(), "{replies:?}");
    let row = replies
        .iter()
        .find(|(kind, _)| *kind == b'D')
        .map(|(_, body)| body.clone())
        .expect("a row");
    assert_eq!(&row[6..], 12.0f64.to_be_bytes());
}

/// Protocol details clients rely on: a Describe of a statement returning no rows answers
/// NoData (an empty RowDescription before), a format code other than 0 and 1 is refused with
/// 22023 (a single code 2 was read as binary), an unknown portal is 34000 (not 26000).
#[test]
fn describe_format_codes_and_unknown_portals_answer_as_postgresql() {
    use std::io::Write;
    let server = TestServer::start(|_| {});
    let mut stream = raw_session(&server, "proto");
    stream
        .write_all(&pg_message(
            b'Q',
            b"CREATE TABLE t (id BIGINT PRIMARY KEY, d DOUBLE)\0",
        ))
        .unwrap();
    read_until_ready(&mut stream);
    let tags = |replies: &[(u8, Vec<u8>)]| replies.iter().map(|(k, _)| *k).collect::<Vec<u8>>();
    for sql in [
        &b"INSERT INTO t VALUES ($1, $2)"[..],
        b"UPDATE t SET d = $1 WHERE id = $2",
        b"DELETE FROM t WHERE id = $1",
    ] {
        let mut bytes = pg_message(b'P', &[b"\0", sql, b"\0\0\0"].concat());
        bytes.extend(pg_message(b'D', b"S\0"));
        bytes.extend(pg_message(b'S', b""));
        stream.write_all(&bytes).unwrap();
        assert_eq!(tags(&read_until_ready(&mut stream)), b"1tnZ");
    }
    let mut bytes = pg_message(b'P', b"\0SELECT 1\0\0\0");
    bytes.extend(pg_message(b'B', b"\0\0\0\0\0\0\0\x01\0\x02"));
    bytes.extend(pg_message(b'E', b"\0\0\0\0\0"));
    bytes.extend(pg_message(b'S', b""));
    stream.write_all(&bytes).unwrap();
    let replies = read_until_ready(&mut stream);
    assert!(error_response(&replies).unwrap().contains("C22023"));
    assert!(!tags(&replies).contains(&b'D'));
    let mut bytes = pg_message(b'E', b"nope\0\0\0\0\0");
    bytes.extend(pg_message(b'S', b""));
    stream.write_all(&bytes).unwrap();
    let error = error_response(&read_until_ready(&mut stream)).unwrap();
    assert!(error.contains("C34000"), "{error}");
}

/// Regression: `BEGIN READ ONLY`, `SET default_transaction_read_only = on` (psycopg's
/// `read_only = True`) were accepted and then INSERTs succeeded, and `SHOW
/// transaction_read_only` answered off. Read-only is honoured now: writes are refused with
/// 25006 and change nothing.
#[tokio::test]
async fn read_only_transactions_refuse_writes_with_25006() -> TestResult {
    let server = TestServer::start(|_| {});
    let client = connect(&server, "ro").await?;
    client
        .batch_execute("CREATE TABLE t (id BIGINT PRIMARY KEY)")
        .await?;
    let read_only = || async { shown(&client, "SHOW transaction_read_only").await };
    assert_eq!(read_only().await?.as_deref(), Some("off"));
    client.batch_execute("BEGIN READ ONLY").await?;
    assert_eq!(read_only().await?.as_deref(), Some("on"));
    let err = client
        .execute("INSERT INTO t VALUES (1)", &[])
        .await
        .unwrap_err();
    assert_eq!(
        err.code(),
        Some(&SqlState::READ_ONLY_SQL_TRANSACTION),
        "{err}"
    );
    assert_eq!(
        err.as_db_error().unwrap().message(),
        "cannot execute INSERT in a read-only transaction"
    );
    client.batch_execute("ROLLBACK").await?;
    assert_eq!(read_only().await?.as_deref(), Some("off"));
    client.execute("INSERT INTO t VALUES (2)", &[]).await?;
    // The session default, and a READ WRITE transaction within it.
    client
        .batch_execute("SET default_transaction_read_only = on")
        .await?;
    assert_eq!(
        shown(&client, "SHOW default_transaction_read_only")
            .await?
            .as_deref(),
        Some("on")
    );
    for sql in ["DELETE FROM t", "CREATE TABLE u (id BIGINT PRIMARY KEY)"] {
        let err = client.execute(sql, &[]).await.unwrap_err();
        assert_eq!(
            err.code(),
            Some(&SqlState::READ_ONLY_SQL_TRANSACTION),
            "{sql}"
        );
    }
    assert_eq!(client.query("SELECT id FROM t", &[]).await?.len(), 1);
    client
        .batch_execute("BEGIN READ WRITE; INSERT INTO t VALUES (3); COMMIT")
        .await?;
    client.batch_execute("RESET ALL").await?;
    client.execute("INSERT INTO t VALUES (4)", &[]).await?;
    assert_eq!(client.query("SELECT id FROM t", &[]).await?.len(), 3);
    Ok(())
}

/// After an error in a transaction block its later statements are refused with 25P02 and
/// not run, as in PostgreSQL, until ROLLBACK; COMMIT ends the failed block; ROLLBACK TO
/// SAVEPOINT lets the block go on. (They used to run.)
#[tokio::test]
async fn statements_after_an_error_in_a_block_are_refused_until_it_ends() -> TestResult {
    let server = TestServer::start(|_| {});
    let client = connect(&server, "aborted").await?;
    client
        .batch_execute("CREATE TABLE t (id BIGINT PRIMARY KEY)")
        .await?;
    let ids = || async {
        let rows = client.query("SELECT id FROM t ORDER BY id", &[]).await?;
        Ok::<_, tokio_postgres::Error>(rows.iter().map(|r| r.get(0)).collect::<Vec<i64>>())
    };
    client.batch_execute("BEGIN").await?;
    client.execute("INSERT INTO t VALUES (1)", &[]).await?;
    let err = client
        .execute("INSERT INTO t VALUES (1)", &[])
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(&SqlState::UNIQUE_VIOLATION), "{err}");
    for sql in [
        "INSERT INTO t VALUES (2)",
        "SELECT id FROM t",
        "SET statement_timeout = 5",
        "BEGIN",
    ] {
        let err = client.batch_execute(sql).await.unwrap_err();
        assert_eq!(
            err.code(),
            Some(&SqlState::IN_FAILED_SQL_TRANSACTION),
            "{sql}: {err}"
        );
    }
    let err = client
        .execute("INSERT INTO t VALUES (2)", &[])
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(&SqlState::IN_FAILED_SQL_TRANSACTION));
    // COMMIT ends the block; 1 was committed before the error, 2 never ran.
    client.batch_execute("COMMIT").await?;
    assert_eq!(ids().await?, [1]);
    // An error at Parse or Describe (before anything runs) fails the block too.
    client.batch_execute("BEGIN").await?;
    assert!(client.prepare("SELECT nope FROM t").await.is_err());
    let err = client
        .execute("INSERT INTO t VALUES (2)", &[])
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(&SqlState::IN_FAILED_SQL_TRANSACTION));
    client.batch_execute("ROLLBACK").await?;
    // ROLLBACK TO SAVEPOINT: the block goes on.
    client.batch_execute("BEGIN; SAVEPOINT s").await?;
    assert!(client.batch_execute("SELECT * FROM nosuch").await.is_err());
    client.batch_execute("ROLLBACK TO SAVEPOINT s").await?;
    client.execute("INSERT INTO t VALUES (3)", &[]).await?;
    client.batch_execute("COMMIT").await?;
    // Savepoints are followed as in PostgreSQL: ROLLBACK TO a name the block does not have
    // is 3B001 and leaves a failed block failed; RELEASE drops the savepoint; outside a
    // block they are 25P01.
    client
        .batch_execute("BEGIN; SAVEPOINT a; SAVEPOINT \"B\"")
        .await?;
    assert!(client.batch_execute("SELECT * FROM nosuch").await.is_err());
    for (sql, code) in [
        (
            "ROLLBACK TO SAVEPOINT nosuch",
            &SqlState::S_E_INVALID_SPECIFICATION,
        ),
        ("ROLLBACK TO b", &SqlState::S_E_INVALID_SPECIFICATION),
        (
            "INSERT INTO t VALUES (5)",
            &SqlState::IN_FAILED_SQL_TRANSACTION,
        ),
    ] {
        let err = client.batch_execute(sql).await.unwrap_err();
        assert_eq!(err.code(), Some(code), "{sql}: {err}");
    }
    client.batch_execute("ROLLBACK TO \"B\"; RELEASE a").await?;
    let err = client.batch_execute("ROLLBACK TO a").await.unwrap_err();
    assert_eq!(err.code(), Some(&SqlState::S_E_INVALID_SPECIFICATION));
    client.batch_execute("ROLLBACK").await?;
    // Comments and quoted names with spaces are read too; a name that is not one identifier
    // is a syntax error (it used to pass as an untracked savepoint).
    client
        .batch_execute("BEGIN; SAVEPOINT /* c */ \"two words\" -- end")
        .await?;
    assert!(client.batch_execute("SELECT * FROM nosuch").await.is_err());
    client
        .batch_execute("ROLLBACK /* x */ TO SAVEPOINT \"two words\"")
        .await?;
    for sql in ["SAVEPOINT a b", "ROLLBACK TO", "RELEASE 'a'"] {
        let err = client.batch_execute(sql).await.unwrap_err();
        assert_eq!(err.code(), Some(&SqlState::SYNTAX_ERROR), "{sql}: {err}");
        client.batch_execute("ROLLBACK TO \"two words\"").await?;
    }
    client.batch_execute("ROLLBACK").await?;
    for sql in ["SAVEPOINT a", "RELEASE a", "ROLLBACK TO a"] {
        let err = client.batch_execute(sql).await.unwrap_err();
        assert_eq!(
            err.code(),
            Some(&SqlState::NO_ACTIVE_SQL_TRANSACTION),
            "{sql}"
        );
    }
    // ROLLBACK ends a failed block too; outside a block an error stops nothing.
    client.batch_execute("BEGIN").await?;
    assert!(client.batch_execute("SELECT * FROM nosuch").await.is_err());
    client.batch_execute("ROLLBACK").await?;
    assert!(client.batch_execute("SELECT * FROM nosuch").await.is_err());
    client.execute("INSERT INTO t VALUES (4)", &[]).await?;
    assert_eq!(ids().await?, [1, 3, 4]);
    Ok(())
}

/// ReadyForQuery's transaction status follows the block: `E` after an error, `T` again after
/// `ROLLBACK TO SAVEPOINT` (psql's `ON_ERROR_ROLLBACK` reads it to decide whether to set its
/// savepoints), `I` after the block.
#[test]
fn ready_for_query_reports_a_block_resumed_by_rollback_to() {
    use std::io::Write;
    let server = TestServer::start(|_| {});
    let mut stream = raw_session(&server, "rbto");
    // A simple Query, or with `extended` Parse, Bind, Execute (no row limit: -1), Sync.
    let mut run_as = |sql: &str, extended: bool| {
        if extended {
            let mut m = pg_message(b'P', format!("\0{sql}\0\0\0").as_bytes());
            m.extend(pg_message(b'B', b"\0\0\0\0\0\0\0\0"));
            m.extend(pg_message(b'E', b"\0\xff\xff\xff\xff"));
            m.extend(pg_message(b'S', b""));
            stream.write_all(&m).unwrap();
        } else {
            stream
                .write_all(&pg_message(b'Q', format!("{sql}\0").as_bytes()))
                .unwrap();
        }
        let replies = read_until_ready(&mut stream);
        let status = replies
            .last()
            .filter(|(kind, _)| *kind == b'Z')
            .and_then(|(_, body)| body.first().copied());
        (replies, status)
    };
    for extended in [false, true] {
        let mut run = |sql: &str| run_as(sql, extended);
        run("DROP TABLE IF EXISTS t");
        run("CREATE TABLE t (id BIGINT PRIMARY KEY)");
        assert_eq!(run("BEGIN").1, Some(b'T'));
        assert_eq!(run("SAVEPOINT s").1, Some(b'T'));
        assert_eq!(run("INSERT INTO t VALUES (1)").1, Some(b'T'));
        assert_eq!(run("INSERT INTO t VALUES (1)").1, Some(b'E'));
        assert_eq!(run("INSERT INTO t VALUES (2)").1, Some(b'E'));
        assert_eq!(run("ROLLBACK TO SAVEPOINT s").1, Some(b'T'), "{extended}");
        let (replies, status) = run("INSERT INTO t VALUES (3)");
        assert_eq!(status, Some(b'T'), "{extended}: {replies:?}");
        // A DEALLOCATE of no statement fails the block as any error does.
        assert_eq!(run("DEALLOCATE nosuch").1, Some(b'E'));
        assert_eq!(run("INSERT INTO t VALUES (4)").1, Some(b'E'));
        assert_eq!(run("ROLLBACK WORK TO SAVEPOINT s").1, Some(b'T'));
        // AND CHAIN ends the block and opens the next at once, a failed one too; outside a
        // block it is 25P01.
        let (replies, status) = run("COMMIT AND CHAIN");
        assert_eq!(status, Some(b'T'), "{extended}: {replies:?}");
        assert!(replies.iter().any(|(k, b)| *k == b'C' && b == b"COMMIT\0"));
        assert_eq!(run("SELECT * FROM nosuch").1, Some(b'E'));
        let (replies, status) = run("COMMIT AND CHAIN");
        assert_eq!(status, Some(b'T'), "{extended}: {replies:?}");
        assert!(
            replies
                .iter()
                .any(|(k, b)| *k == b'C' && b == b"ROLLBACK\0")
        );
        assert_eq!(run("ROLLBACK AND CHAIN").1, Some(b'T'));
        assert_eq!(run("COMMIT").1, Some(b'I'));
        let (replies, status) = run("COMMIT AND CHAIN");
        assert_eq!(status, Some(b'I'), "{extended}: {replies:?}");
        assert!(
            replies
                .iter()
                .any(|(k, b)| *k == b'E' && String::from_utf8_lossy(b).contains("25P01")),
            "{extended}: {replies:?}"
        );
        let (replies, _) = run("SELECT count(*) FROM t");
        assert!(
            replies
                .iter()
                .any(|(kind, body)| *kind == b'D' && body.ends_with(b"2")),
            "{extended}: {replies:?}"
        );
    }
    // A failed DEALLOCATE stops the statements after it in one Query, as any error does.
    let (replies, _) = run_as("DEALLOCATE nosuch; INSERT INTO t VALUES (9)", false);
    assert!(replies.iter().all(|(kind, _)| *kind != b'C'), "{replies:?}");
    let (replies, _) = run_as("SELECT count(*) FROM t", true);
    assert!(
        replies
            .iter()
            .any(|(kind, body)| *kind == b'D' && body.ends_with(b"2")),
        "{replies:?}"
    );
}

/// A ROLLBACK after writes warns (a NoticeResponse, which clients show) that nothing was
/// undone: statements commit one at a time.
#[test]
fn a_rollback_after_writes_warns_that_nothing_was_rolled_back() {
    use std::io::Write;
    let server = TestServer::start(|_| {});
    let mut stream = raw_session(&server, "rb");
    let mut run = |sql: &str| {
        stream
            .write_all(&pg_message(b'Q', format!("{sql}\0").as_bytes()))
            .unwrap();
        read_until_ready(&mut stream)
    };
    run("CREATE TABLE t (id BIGINT PRIMARY KEY)");
    let notices = |replies: &[(u8, Vec<u8>)]| {
        replies
            .iter()
            .filter(|(kind, _)| *kind == b'N')
            .map(|(_, body)| String::from_utf8_lossy(body).into_owned())
            .collect::<Vec<_>>()
    };
    // Nothing written: no warning.
    run("BEGIN");
    assert!(notices(&run("ROLLBACK")).is_empty());
    run("BEGIN");
    run("INSERT INTO t VALUES (1)");
    let replies = run("ROLLBACK");
    let notice = notices(&replies);
    assert_eq!(notice.len(), 1, "{replies:?}");
    assert!(
        notice[0].contains("SWARNING") && notice[0].contains("nothing was rolled back"),
        "{notice:?}"
    );
    // The notice comes before the ROLLBACK's CommandComplete.
    let kinds: Vec<u8> = replies.iter().map(|(k, _)| *k).collect();
    assert_eq!(kinds, b"NCZ");
}

/// The RESP `SQL` command: `SET statement_timeout` holds for the statements after it in the
/// same call (it was answered SET and ignored); read-only transactions, which it cannot keep,
/// are refused with 0A000 instead of ignored; text that is not UTF-8 carries `[22021]` as
/// other SQL errors carry their SQLSTATE.
#[tokio::test]
async fn resp_sql_honours_statement_timeout_and_refuses_read_only() -> TestResult {
    let server = TestServer::start(|_| {});
    // RESP connections start in db0.
    let client = connect(&server, "db0").await?;
    fill_big(&client, 100_000).await?;
    let mut redis = server.client();
    let slow = "SELECT count(*) FROM big WHERE g >= 0";
    let err = redis::cmd("SQL")
        .arg(format!("SET statement_timeout = 5; {slow}"))
        .query::<redis::Value>(&mut redis)
        .unwrap_err();
    assert!(err.to_string().contains("[57014]"), "{err}");
    // The next call has no limit again.
    let shown: redis::Value = redis::cmd("SQL")
        .arg("SHOW statement_timeout")
        .query(&mut redis)?;
    assert_eq!(
        shown,
        redis::Value::Array(vec![
            redis::Value::Array(vec![redis::Value::BulkString(
                b"statement_timeout".to_vec()
            )]),
            redis::Value::Array(vec![redis::Value::BulkString(b"0".to_vec())]),
        ])
    );
    let _: redis::Value = redis::cmd("SQL").arg(slow).query(&mut redis)?;
    for sql in ["BEGIN READ ONLY", "SET default_transaction_read_only = on"] {
        let err = redis::cmd("SQL")
            .arg(sql)
            .query::<redis::Value>(&mut redis)
            .unwrap_err();
        assert!(
            err.to_string().contains("[0A000] read-only"),
            "{sql}: {err}"
        );
    }
    let err = redis::cmd("SQL")
        .arg(&b"SELECT '\xff'"[..])
        .query::<redis::Value>(&mut redis)
        .unwrap_err();
    assert!(err.to_string().contains("[22021]"), "{err}");
    Ok(())
}
