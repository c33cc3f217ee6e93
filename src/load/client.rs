//! The RESP client side shared by `strata load --resp` and `strata rebalance`: addresses,
//! connections (through the `redis` crate) and checking the reply of every pipelined command.

use std::time::Duration;

use anyhow::Context;
use redis::{ConnectionAddr, IntoConnectionInfo, RedisConnectionInfo, Value};

/// Connect, read and write timeout: a stuck server or proxy fails the command instead of
/// hanging it. Generous, because a pipeline of writes with `--sync always` waits for fsyncs.
pub(crate) const IO_TIMEOUT: Duration = Duration::from_secs(60);

/// Splits `HOST:PORT` (`[v6]:PORT` for IPv6 literals).
///
/// # Errors
/// No port, or a port that is not a number in 1..=65535.
pub(crate) fn parse_addr(addr: &str) -> anyhow::Result<(String, u16)> {
    let (host, port) = addr
        .rsplit_once(':')
        .with_context(|| format!("{addr:?} is not HOST:PORT"))?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    anyhow::ensure!(!host.is_empty(), "{addr:?} has no host");
    let port: u16 = port
        .parse()
        .ok()
        .filter(|&p| p != 0)
        .with_context(|| format!("{addr:?}: the port must be a number in 1..=65535"))?;
    Ok((host.to_string(), port))
}

/// What to send after connecting to a node directly: the database a nutcracker pool's
/// `redis_db` selects and the password of its `redis_auth`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Login {
    /// Database index (`SELECT`), 0 by default.
    pub(crate) db: i64,
    /// Password (`AUTH`), if any.
    pub(crate) password: Option<String>,
}

/// Opens a RESP2 connection to `addr` (`HOST:PORT`), authenticated and on the database of
/// `login` (`AUTH` and `SELECT` are sent on connect only when they differ from the defaults).
///
/// Nothing else is sent on connect: the `redis` crate's default `CLIENT SETINFO` is turned off
/// because twemproxy closes connections that send commands it does not proxy.
///
/// # Errors
/// A bad address, the connection failing within [`IO_TIMEOUT`], `AUTH` or `SELECT` refused.
pub(crate) fn connect(addr: &str, login: &Login) -> anyhow::Result<redis::Connection> {
    let (host, port) = parse_addr(addr)?;
    let mut settings = RedisConnectionInfo::default()
        .set_skip_set_lib_name()
        .set_db(login.db);
    if let Some(password) = &login.password {
        settings = settings.set_password(password);
    }
    let info = ConnectionAddr::Tcp(host, port)
        .into_connection_info()
        .context("connection settings")?
        .set_redis_settings(settings);
    let client = redis::Client::open(info).context("connection settings")?;
    let conn = client
        .get_connection_with_timeout(IO_TIMEOUT)
        .with_context(|| format!("connecting to {addr}"))?;
    conn.set_read_timeout(Some(IO_TIMEOUT))?;
    conn.set_write_timeout(Some(IO_TIMEOUT))?;
    Ok(conn)
}

/// Sends `pipe` and returns one reply per command, error replies included (as
/// [`Value::ServerError`]), so the caller can check each one.
///
/// # Errors
/// Connection and protocol errors, or a reply count that does not match.
pub(crate) fn replies(
    conn: &mut redis::Connection,
    pipe: &mut redis::Pipeline,
) -> anyhow::Result<Vec<Value>> {
    let expected = pipe.len();
    let values: Vec<Value> = pipe.ignore_errors().query(conn).map_err(|e| {
        // The client library's parse errors quote raw bytes; say what it means.
        if e.kind() == redis::ErrorKind::Parse {
            anyhow::Error::new(e).context(
                "the server's reply is not in the Redis protocol (is the address a Redis or \
                 `strata serve` RESP port?)",
            )
        } else {
            e.into()
        }
    })?;
    anyhow::ensure!(
        values.len() == expected,
        "{} replies to a pipeline of {expected} commands",
        values.len()
    );
    Ok(values)
}

/// Why a reply is not the one expected, or `None` when it is.
pub(crate) fn refused(reply: &Value, expect: Expect) -> Option<String> {
    match (reply, expect) {
        (Value::Okay, Expect::Ok) | (Value::Int(_), Expect::Int) => None,
        (Value::SimpleString(s), Expect::Ok) if s == "OK" => None,
        (Value::ServerError(e), _) => Some(format!("the server replied: {e}")),
        (other, _) => Some(format!("unexpected reply {other:?}")),
    }
}

/// The reply a command must get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expect {
    /// `+OK` (SET).
    Ok,
    /// An integer (INCRBY, DEL).
    Int,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_need_a_host_and_a_port() {
        assert_eq!(
            parse_addr("127.0.0.1:22121").expect("addr"),
            ("127.0.0.1".to_string(), 22121)
        );
        assert_eq!(
            parse_addr("[::1]:6380").expect("addr"),
            ("::1".to_string(), 6380)
        );
        assert_eq!(
            parse_addr("proxy.lab:6380").expect("addr"),
            ("proxy.lab".to_string(), 6380)
        );
        for bad in ["127.0.0.1", ":6380", "h:0", "h:70000", "h:x"] {
            assert!(parse_addr(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn only_the_expected_replies_pass() {
        assert_eq!(refused(&Value::Okay, Expect::Ok), None);
        assert_eq!(refused(&Value::SimpleString("OK".into()), Expect::Ok), None);
        assert_eq!(refused(&Value::Int(3), Expect::Int), None);
        assert!(refused(&Value::Nil, Expect::Ok).is_some());
        assert!(refused(&Value::Okay, Expect::Int).is_some());
    }
}
