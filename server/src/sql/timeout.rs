//! PostgreSQL's `statement_timeout` for a connection: `SET statement_timeout = 5000`,
//! `SET statement_timeout TO '2s'`, `RESET statement_timeout`, `SHOW statement_timeout`.
//!
//! A statement that runs longer is stopped through its interrupt and fails with SQLSTATE
//! 57014, as in PostgreSQL ("canceling statement due to statement timeout"). Values are
//! milliseconds, or a number with one of PostgreSQL's units `ms`, `s`, `min`, `h`, `d`; 0 (the
//! default) means no limit.

use std::time::Duration;

use super::SqlError;

/// A change of the connection's `statement_timeout`, if `stmt` is one: `SET [SESSION]
/// statement_timeout {TO | =} {value | DEFAULT}` or `RESET statement_timeout`. `Some(Ok(None))`
/// is "no limit". `None` for every other statement (`SET LOCAL` included: there are no
/// transactions to scope it to, so it is accepted and ignored like other settings).
pub fn change(stmt: &str) -> Option<Result<Option<Duration>, SqlError>> {
    let text = stmt.trim().trim_end_matches(';').replace('=', " = ");
    let words: Vec<&str> = text.split_whitespace().collect();
    let lower: Vec<String> = words.iter().map(|w| w.to_ascii_lowercase()).collect();
    let is = |i: usize, w: &str| lower.get(i).is_some_and(|x| x == w);
    if is(0, "reset") && is(1, "statement_timeout") && lower.len() == 2 {
        return Some(Ok(None));
    }
    if !is(0, "set") {
        return None;
    }
    let name_at = if is(1, "session") { 2 } else { 1 };
    if !is(name_at, "statement_timeout") || !(is(name_at + 1, "to") || is(name_at + 1, "=")) {
        return None;
    }
    let value = words.get(name_at + 2..).unwrap_or_default().join(" ");
    Some(parse(&value).map_err(|msg| {
        SqlError::InvalidSetting(format!(
            "invalid value for parameter \"statement_timeout\": \"{value}\": {msg}"
        ))
    }))
}

/// The `statement_timeout` given in a connection's startup `options` parameter
/// (`-c statement_timeout=2000` or `--statement_timeout=2s`, as libpq's `options` connection
/// setting and `PGOPTIONS` send it; other options are ignored), if any.
pub fn from_startup_options(options: &str) -> Option<Result<Option<Duration>, SqlError>> {
    let mut words = options.split_whitespace();
    let mut found = None;
    while let Some(w) = words.next() {
        let setting = match w {
            "-c" => words.next(),
            _ => w.strip_prefix("--").or_else(|| w.strip_prefix("-c")),
        };
        if let Some(value) = setting.and_then(|s| s.strip_prefix("statement_timeout=")) {
            found = Some(value);
        }
    }
    let value = found?;
    Some(parse(value).map_err(|msg| {
        SqlError::InvalidSetting(format!(
            "invalid value for parameter \"statement_timeout\": \"{value}\": {msg}"
        ))
    }))
}

/// True for `SHOW statement_timeout`.
pub fn is_show(stmt: &str) -> bool {
    let text = stmt.trim().trim_end_matches(';');
    let mut words = text.split_whitespace();
    words.next().is_some_and(|w| w.eq_ignore_ascii_case("show"))
        && words
            .next()
            .is_some_and(|w| w.eq_ignore_ascii_case("statement_timeout"))
        && words.next().is_none()
}

/// `value` as a limit (`None`: no limit): `DEFAULT`, milliseconds, or a number with a unit,
/// quoted or not.
fn parse(value: &str) -> Result<Option<Duration>, &'static str> {
    let v = value.trim();
    let v = v
        .strip_prefix('\'')
        .and_then(|v| v.strip_suffix('\''))
        .unwrap_or(v)
        .trim();
    if v.eq_ignore_ascii_case("default") {
        return Ok(None);
    }
    let digits = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (number, unit) = v.split_at(digits);
    let number: u64 = number
        .parse()
        .map_err(|_| "expected a number of milliseconds")?;
    let ms_per_unit: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "ms" => 1,
        "s" => 1_000,
        "min" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err("valid units are \"ms\", \"s\", \"min\", \"h\" and \"d\""),
    };
    let ms = number
        .checked_mul(ms_per_unit)
        .filter(|ms| *ms <= i32::MAX as u64)
        .ok_or("at most 2147483647 ms")?;
    Ok((ms > 0).then(|| Duration::from_millis(ms)))
}

/// The limit as `SHOW statement_timeout` prints it: `0`, or the largest unit that divides it
/// (`5s`, `1500ms`, `2min`), as PostgreSQL does.
pub fn show(limit: Option<Duration>) -> String {
    let Some(ms) = limit.map(|d| d.as_millis()) else {
        return "0".to_owned();
    };
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("min", 60_000),
        ("s", 1_000),
    ] {
        if ms % size == 0 {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(stmt: &str) -> Option<Duration> {
        match change(stmt) {
            Some(Ok(v)) => v,
            other => panic!("{stmt}: {other:?}"),
        }
    }

    #[test]
    fn set_reset_and_show_read_postgresql_values() {
        assert_eq!(
            set("SET statement_timeout = 5000"),
            Some(Duration::from_secs(5))
        );
        assert_eq!(
            set("set statement_timeout to '2s';"),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            set("SET SESSION statement_timeout='250 ms'"),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            set("SET statement_timeout TO '1min'"),
            Some(Duration::from_secs(60))
        );
        assert_eq!(set("SET statement_timeout = 0"), None);
        assert_eq!(set("SET statement_timeout TO DEFAULT"), None);
        assert_eq!(set("RESET statement_timeout"), None);
        for bad in [
            "SET statement_timeout = 'soon'",
            "SET statement_timeout = '5 weeks'",
            "SET statement_timeout = 99999999999",
        ] {
            let Some(Err(e)) = change(bad) else {
                panic!("{bad} accepted");
            };
            assert!(
                e.to_string()
                    .starts_with("invalid value for parameter \"statement_timeout\""),
                "{e}"
            );
        }
        for other in [
            "SET datestyle = 'ISO'",
            "SET LOCAL statement_timeout = 5",
            "SELECT 1",
            "RESET ALL",
        ] {
            assert!(change(other).is_none(), "{other}");
        }
        assert_eq!(
            from_startup_options("-c statement_timeout=2000").map(Result::ok),
            Some(Some(Some(Duration::from_secs(2))))
        );
        assert_eq!(
            from_startup_options("-c search_path=x --statement_timeout=1min").map(Result::ok),
            Some(Some(Some(Duration::from_secs(60))))
        );
        assert!(from_startup_options("-csearch_path=x").is_none());
        assert!(matches!(
            from_startup_options("-c statement_timeout=x"),
            Some(Err(_))
        ));
        assert!(is_show("SHOW statement_timeout;"));
        assert!(!is_show("SHOW server_version"));
        assert_eq!(show(None), "0");
        assert_eq!(show(Some(Duration::from_millis(5000))), "5s");
        assert_eq!(show(Some(Duration::from_millis(1500))), "1500ms");
        assert_eq!(show(Some(Duration::from_secs(120))), "2min");
    }
}
