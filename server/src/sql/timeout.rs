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
/// statement_timeout {TO | =} {value | DEFAULT}`, `RESET statement_timeout`, and `RESET ALL` /
/// `DISCARD ALL` (which reset every setting). `Some(Ok(None))` is "no limit". Comments are
/// ignored and the name may be double-quoted, as in PostgreSQL. `None` for every other
/// statement (`SET LOCAL` included: there are no transactions to scope it to, so it is
/// accepted and ignored like other settings).
pub fn change(stmt: &str) -> Option<Result<Option<Duration>, SqlError>> {
    let text = super::text::without_comments(stmt);
    let text = text.trim().trim_end_matches(';').replace('=', " = ");
    let lower: Vec<String> = text.split_whitespace().map(name).collect();
    let is = |i: usize, w: &str| lower.get(i).is_some_and(|x| x == w);
    if lower.len() == 2
        && ((is(0, "reset") && (is(1, "statement_timeout") || is(1, "all")))
            || (is(0, "discard") && is(1, "all")))
    {
        return Some(Ok(None));
    }
    let set = parse_set(stmt).filter(|s| !s.local && s.name == "statement_timeout")?;
    let Some(value) = set.value else {
        return Some(Err(invalid("", "expected SET statement_timeout TO value")));
    };
    if value.is_empty() {
        return Some(Err(invalid("", "a value is needed")));
    }
    Some(parse(&value).map_err(|msg| invalid(unquote(&value), msg)))
}

/// A `SET` statement, as [`parse_set`] reads it.
#[derive(Debug, PartialEq, Eq)]
pub struct SetStatement {
    /// `SET LOCAL` (PostgreSQL scopes it to the transaction).
    pub local: bool,
    /// The setting, as PostgreSQL reads names (folded to lower case unless double-quoted).
    pub name: String,
    /// The value after `TO` or `=`, its words joined by one space (quotes kept); for `SET
    /// NAMES x` (no `TO`), the words after `NAMES`. `None` when `TO` or `=` is missing.
    pub value: Option<String>,
}

/// `stmt` read as `SET [SESSION | LOCAL] name {TO | =} value` (comments ignored), or as
/// `SET NAMES value`; `None` for every other statement.
pub fn parse_set(stmt: &str) -> Option<SetStatement> {
    let text = super::text::without_comments(stmt);
    let text = text.trim().trim_end_matches(';').replace('=', " = ");
    let words: Vec<&str> = text.split_whitespace().collect();
    if name(words.first()?) != "set" {
        return None;
    }
    let scope = words.get(1).map(|w| name(w));
    let local = scope.as_deref() == Some("local");
    let name_at = if local || scope.as_deref() == Some("session") {
        2
    } else {
        1
    };
    let setting = name(words.get(name_at)?);
    let rest = words.get(name_at + 1..).unwrap_or_default();
    let value = if setting == "names" {
        Some(rest.join(" "))
    } else {
        match rest.split_first() {
            Some((sep, value)) if name(sep) == "to" || *sep == "=" => Some(value.join(" ")),
            _ => None,
        }
    };
    Some(SetStatement {
        local,
        name: setting,
        value,
    })
}

/// The error for a `statement_timeout` value that cannot be read (SQLSTATE 22023).
fn invalid(value: &str, msg: &str) -> SqlError {
    SqlError::InvalidSetting(format!(
        "invalid value for parameter \"statement_timeout\": \"{value}\": {msg}"
    ))
}

/// A setting name as PostgreSQL reads it: folded to lower case unless double-quoted.
fn name(word: &str) -> String {
    match word.strip_prefix('"').and_then(|w| w.strip_suffix('"')) {
        Some(quoted) => quoted.to_owned(),
        None => word.to_ascii_lowercase(),
    }
}

/// `value` without its single quotes, if it has them.
fn unquote(value: &str) -> &str {
    let v = value.trim();
    v.strip_prefix('\'')
        .and_then(|v| v.strip_suffix('\''))
        .unwrap_or(v)
        .trim()
}

/// The `statement_timeout` given in a connection's startup `options` parameter
/// (`-c statement_timeout=2000` or `--statement_timeout=2s`, as libpq's `options` connection
/// setting and `PGOPTIONS` send it; other options are ignored), if any.
pub fn from_startup_options(options: &str) -> Option<Result<Option<Duration>, SqlError>> {
    let value = startup_option(options, "statement_timeout")?;
    Some(parse(value).map_err(|msg| invalid(value, msg)))
}

/// The value the startup `options` parameter (`-c name=value`, `-cname=value` or
/// `--name=value`, space-separated, as libpq's `PGOPTIONS`) gives setting `name` (the last
/// one, case-insensitive), if any.
pub fn startup_option<'a>(options: &'a str, name: &str) -> Option<&'a str> {
    let mut words = options.split_whitespace();
    let mut found = None;
    while let Some(w) = words.next() {
        let setting = match w {
            "-c" => words.next(),
            _ => w.strip_prefix("--").or_else(|| w.strip_prefix("-c")),
        };
        if let Some((key, value)) = setting.and_then(|s| s.split_once('='))
            && key.eq_ignore_ascii_case(name)
        {
            found = Some(value);
        }
    }
    found
}

/// True for `SHOW statement_timeout` (comments ignored, the name may be double-quoted).
pub fn is_show(stmt: &str) -> bool {
    let text = super::text::without_comments(stmt);
    let mut words = text.trim().trim_end_matches(';').split_whitespace();
    words.next().is_some_and(|w| w.eq_ignore_ascii_case("show"))
        && words.next().is_some_and(|w| name(w) == "statement_timeout")
        && words.next().is_none()
}

/// `value` as a limit (`None`: no limit): `DEFAULT`, milliseconds, or a number (fractions
/// allowed, rounded to milliseconds) with one of PostgreSQL's units, which are case-sensitive
/// as there; quoted or not.
fn parse(value: &str) -> Result<Option<Duration>, &'static str> {
    if value.trim().eq_ignore_ascii_case("default") {
        return Ok(None);
    }
    let v = unquote(value);
    let digits = v
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(v.len());
    let (number, unit) = v.split_at(digits);
    let number: f64 = number
        .parse()
        .map_err(|_| "expected a number of milliseconds, or a number with a unit (\"ms\", \"s\", \"min\", \"h\", \"d\")")?;
    let ms_per_unit: f64 = match unit.trim() {
        "" | "ms" => 1.0,
        "s" => 1_000.0,
        "min" => 60_000.0,
        "h" => 3_600_000.0,
        "d" => 86_400_000.0,
        _ => return Err("valid units are \"ms\", \"s\", \"min\", \"h\" and \"d\""),
    };
    let ms = (number * ms_per_unit).round();
    if !(0.0..=f64::from(i32::MAX)).contains(&ms) {
        return Err("at most 2147483647 ms");
    }
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "checked to be in 0..=i32::MAX just above"
    )]
    let ms = ms as u64;
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

    #[test]
    fn startup_options_are_found_in_each_spelling() {
        let options = "-c statement_timeout=5 -cclient_encoding=LATIN1 --search_path=x";
        assert_eq!(startup_option(options, "statement_timeout"), Some("5"));
        assert_eq!(startup_option(options, "CLIENT_ENCODING"), Some("LATIN1"));
        assert_eq!(startup_option(options, "search_path"), Some("x"));
        assert_eq!(startup_option(options, "datestyle"), None);
        assert_eq!(startup_option("-c a=1 -c a=2", "a"), Some("2"));
    }

    use super::*;

    fn set(stmt: &str) -> Option<Duration> {
        match change(stmt) {
            Some(Ok(v)) => v,
            other => panic!("{stmt}: {other:?}"),
        }
    }

    fn ms(n: u64) -> Option<Duration> {
        Some(Duration::from_millis(n))
    }

    #[test]
    fn set_reset_and_show_read_postgresql_values() {
        assert_eq!(set("SET statement_timeout = 5000"), ms(5000));
        assert_eq!(set("set statement_timeout to '2s';"), ms(2000));
        assert_eq!(set("SET SESSION statement_timeout='250 ms'"), ms(250));
        assert_eq!(set("SET statement_timeout TO '1min'"), ms(60_000));
        assert_eq!(set("SET statement_timeout = '2.5s'"), ms(2500));
        assert_eq!(set("/* c */ SET statement_timeout = 100 -- c"), ms(100));
        assert_eq!(set("SET/**/\"statement_timeout\" = 700"), ms(700));
        for none in [
            "SET statement_timeout = 0",
            "SET statement_timeout TO DEFAULT",
            "RESET statement_timeout",
            "RESET ALL",
            "discard all",
        ] {
            assert_eq!(set(none), None, "{none}");
        }
        for bad in [
            "SET statement_timeout = 'soon'",
            "SET statement_timeout = '5 weeks'",
            "SET statement_timeout = 99999999999",
            "SET statement_timeout",
            "SET statement_timeout = ''",
            "SET statement_timeout = '2S'",
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
        let Some(Err(e)) = change("SET statement_timeout = 'abc'") else {
            panic!("accepted");
        };
        assert!(e.to_string().contains(": \"abc\":"), "{e}");
        for other in [
            "SET datestyle = 'ISO'",
            "SET LOCAL statement_timeout = 5",
            "SELECT 1",
            "RESET datestyle",
        ] {
            assert!(change(other).is_none(), "{other}");
        }
        assert_eq!(
            from_startup_options("-c statement_timeout=2000").map(Result::ok),
            Some(Some(ms(2000)))
        );
        assert_eq!(
            from_startup_options("-c search_path=x --statement_timeout=1min").map(Result::ok),
            Some(Some(ms(60_000)))
        );
        assert_eq!(
            from_startup_options("-c STATEMENT_TIMEOUT=300").map(Result::ok),
            Some(Some(ms(300)))
        );
        assert!(from_startup_options("-csearch_path=x").is_none());
        assert!(matches!(
            from_startup_options("-c statement_timeout=x"),
            Some(Err(_))
        ));
        assert!(is_show("SHOW statement_timeout;"));
        assert!(is_show("/* c */ SHOW \"statement_timeout\" -- c"));
        assert!(!is_show("SHOW server_version"));
        assert_eq!(show(None), "0");
        assert_eq!(show(ms(5000)), "5s");
        assert_eq!(show(ms(1500)), "1500ms");
        assert_eq!(show(ms(120_000)), "2min");
    }
}
