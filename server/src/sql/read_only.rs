//! Read-only transactions, as PostgreSQL spells them: `BEGIN READ ONLY`, `START TRANSACTION
//! READ ONLY`, `SET TRANSACTION READ ONLY`, `SET default_transaction_read_only = on`, `SET
//! SESSION CHARACTERISTICS AS TRANSACTION READ ONLY` (what psycopg's `read_only = True` and
//! JDBC's `setReadOnly(true)` send).
//!
//! A PostgreSQL connection honours them: while read-only, a statement that writes is refused
//! with 25006 (`cannot execute INSERT in a read-only transaction`) and changes nothing. The
//! RESP `SQL` command has no session to keep the mode in, so it refuses them (0A000) instead
//! of accepting and ignoring them.

use super::SqlError;
use super::text::leading_words;

/// A statement that changes the read-only mode (see [`change`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// `BEGIN` / `START TRANSACTION` with `READ ONLY` (`Some(true)`), `READ WRITE`
    /// (`Some(false)`) or neither (`None`: the session's default).
    Begin(Option<bool>),
    /// `SET TRANSACTION READ ONLY | READ WRITE`, `SET transaction_read_only = on | off`:
    /// the current transaction's mode.
    Transaction(bool),
    /// `SET [SESSION] default_transaction_read_only = on | off`, `SET SESSION CHARACTERISTICS
    /// AS TRANSACTION READ ONLY | READ WRITE`; `RESET default_transaction_read_only`, `RESET
    /// ALL` and `DISCARD ALL` (off).
    Default(bool),
}

impl Change {
    /// True when it asks for read-only (what the RESP `SQL` command refuses).
    pub fn asks_read_only(self) -> bool {
        matches!(
            self,
            Change::Begin(Some(true)) | Change::Transaction(true) | Change::Default(true)
        )
    }
}

/// `READ ONLY` or `READ WRITE` among `words` (transaction modes), the last one winning.
fn mode(words: &[String]) -> Option<bool> {
    words
        .windows(2)
        .rev()
        .find_map(|w| match (w[0].as_str(), w[1].as_str()) {
            ("READ", "ONLY") => Some(true),
            ("READ", "WRITE") => Some(false),
            _ => None,
        })
}

/// A boolean setting's value as PostgreSQL reads it (`on`, `off`, `true`, `false`, `yes`,
/// `no`, `1`, `0`, quoted or not, and unambiguous prefixes of the words).
fn boolean(name: &str, value: &str) -> Result<bool, SqlError> {
    let v = value
        .trim()
        .trim_matches(|c| c == '\'' || c == '"')
        .to_ascii_lowercase();
    match v.as_str() {
        "on" | "true" | "t" | "tr" | "tru" | "yes" | "y" | "ye" | "1" => Ok(true),
        "off" | "of" | "false" | "f" | "fa" | "fal" | "fals" | "no" | "n" | "0" => Ok(false),
        _ => Err(SqlError::InvalidSetting(format!(
            "parameter \"{name}\" requires a Boolean value"
        ))),
    }
}

/// The read-only change `stmt` makes, if it is one; `Err` for a bad value (22023).
pub fn change(stmt: &str) -> Option<Result<Change, SqlError>> {
    let words = leading_words(stmt, 24);
    let w = |i: usize| words.get(i).map_or("", String::as_str);
    match (w(0), w(1)) {
        ("BEGIN", _) | ("START", "TRANSACTION") => Some(Ok(Change::Begin(mode(&words)))),
        ("SET", "TRANSACTION") => mode(&words).map(|ro| Ok(Change::Transaction(ro))),
        ("SET", "SESSION") if w(2) == "CHARACTERISTICS" => {
            mode(&words).map(|ro| Ok(Change::Default(ro)))
        }
        ("RESET", "DEFAULT_TRANSACTION_READ_ONLY" | "ALL") | ("DISCARD", "ALL") => {
            Some(Ok(Change::Default(false)))
        }
        ("SET", _) => {
            let set = super::timeout::parse_set(stmt)?;
            if set.name != "default_transaction_read_only" && set.name != "transaction_read_only" {
                return None;
            }
            let value = set.value.unwrap_or_default();
            Some(boolean(&set.name, &value).map(|ro| {
                if set.name == "transaction_read_only" {
                    Change::Transaction(ro)
                } else {
                    Change::Default(ro)
                }
            }))
        }
        _ => None,
    }
}

/// The command `stmt` names as PostgreSQL names it in "cannot execute X in a read-only
/// transaction" (`INSERT`, `CREATE TABLE`).
pub fn command_name(stmt: &str) -> String {
    let words = leading_words(stmt, 2);
    match words.as_slice() {
        [first, second] if matches!(first.as_str(), "CREATE" | "DROP" | "ALTER") => {
            format!("{first} {second}")
        }
        [first, ..] => first.clone(),
        [] => "this statement".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_only_statements_are_recognized() {
        let ok = |s: &str| change(s).map(|r| r.ok());
        assert_eq!(ok("BEGIN READ ONLY"), Some(Some(Change::Begin(Some(true)))));
        assert_eq!(
            ok("start transaction isolation level serializable, read write"),
            Some(Some(Change::Begin(Some(false))))
        );
        assert_eq!(
            ok("BEGIN ISOLATION LEVEL READ COMMITTED"),
            Some(Some(Change::Begin(None)))
        );
        assert_eq!(
            ok("SET TRANSACTION READ ONLY"),
            Some(Some(Change::Transaction(true)))
        );
        assert_eq!(ok("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE"), None);
        assert_eq!(
            ok("SET default_transaction_read_only = on"),
            Some(Some(Change::Default(true)))
        );
        assert_eq!(
            ok("set session default_transaction_read_only to 'off'"),
            Some(Some(Change::Default(false)))
        );
        assert_eq!(
            ok("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY"),
            Some(Some(Change::Default(true)))
        );
        assert_eq!(
            ok("SET transaction_read_only TO 1"),
            Some(Some(Change::Transaction(true)))
        );
        assert_eq!(ok("RESET ALL"), Some(Some(Change::Default(false))));
        assert_eq!(ok("SET search_path = public"), None);
        assert_eq!(ok("SELECT 1"), None);
        assert!(matches!(
            change("SET default_transaction_read_only = maybe"),
            Some(Err(SqlError::InvalidSetting(_)))
        ));
        assert_eq!(command_name("insert into t values (1)"), "INSERT");
        assert_eq!(command_name("CREATE TABLE t (a BIGINT)"), "CREATE TABLE");
    }
}
