//! Connection and server commands: `AUTH`, `HELLO`, `SELECT`, `PING`, `ECHO`, `QUIT`,
//! `CLIENT`, `FUNCTION`, `INFO`, and the `SQL` extension (`COMMAND` and `CONFIG` are in
//! [`super::introspect`]).

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::clients::{ClientEntry, ClientState};
use super::commands::{NOT_INTEGER, SYNTAX, arg};
use super::keyspace::count_keys;
use super::session::Session;
use crate::error::resp_server_error;
use crate::protocol::request::parse_decimal;

/// The Redis version whose protocol and replies we follow (reported by HELLO and INFO).
pub(crate) const REDIS_VERSION: &str = "7.0.15";

/// Numbered databases `SELECT n` accepts (`db0`..`db15`), as Redis's default `databases`.
pub(crate) const NUMBERED_DATABASES: i64 = 16;

fn password_matches(expected: &str, given: &[u8]) -> bool {
    let expected = expected.as_bytes();
    // Constant time in the length of the given password.
    let mut diff = u8::from(expected.len() != given.len());
    for (i, &b) in given.iter().enumerate() {
        diff |= b ^ expected.get(i).copied().unwrap_or(0);
    }
    diff == 0
}

/// Checks `user`/`password`; encodes an error reply and returns false on failure.
fn authenticate(s: &mut Session, user: Option<&[u8]>, password: &[u8]) -> bool {
    let Some(expected) = s.shared.config.requirepass.clone() else {
        // As in Redis 7: without a password the default user is `nopass`, so the two-argument
        // form naming it succeeds (clients configured with username "default" send it); the
        // one-argument form is an error.
        match user {
            Some(b"default") => {
                s.authenticated = true;
                return true;
            }
            Some(_) => {
                s.out
                    .error("WRONGPASS invalid username-password pair or user is disabled.");
                return false;
            }
            None => {}
        }
        s.out.error(
            "ERR AUTH <password> called without any password configured for the default user. \
             Are you sure your configuration is correct?",
        );
        return false;
    };
    let user_ok = user.is_none_or(|u| u == b"default");
    if user_ok && password_matches(&expected, password) {
        s.authenticated = true;
        true
    } else {
        s.out
            .error("WRONGPASS invalid username-password pair or user is disabled.");
        false
    }
}

/// AUTH [username] password
pub(crate) fn auth(s: &mut Session, args: &[Bytes]) {
    let ok = match args.len() {
        2 => authenticate(s, None, arg(args, 1)),
        3 => authenticate(s, Some(arg(args, 1)), arg(args, 2)),
        _ => {
            s.out.error(SYNTAX);
            return;
        }
    };
    if ok {
        s.out.ok();
    }
}

/// HELLO [protover [AUTH username password] [SETNAME clientname]]
pub(crate) fn hello(s: &mut Session, args: &[Bytes]) {
    let mut resp3 = s.out.resp3();
    if let Some(v) = args.get(1) {
        match parse_decimal(v) {
            Some(2) => resp3 = false,
            Some(3) => resp3 = true,
            Some(_) => return s.out.error("NOPROTO unsupported protocol version"),
            None => {
                return s
                    .out
                    .error("ERR Protocol version is not an integer or out of range");
            }
        }
    }
    let mut i = 2;
    let mut auth: Option<(&[u8], &[u8])> = None;
    let mut setname: Option<Bytes> = None;
    while i < args.len() {
        let opt = arg(args, i);
        if opt.eq_ignore_ascii_case(b"AUTH") && i + 2 < args.len() {
            auth = Some((arg(args, i + 1), arg(args, i + 2)));
            i += 3;
        } else if opt.eq_ignore_ascii_case(b"SETNAME") && i + 1 < args.len() {
            setname = args.get(i + 1).cloned();
            i += 2;
        } else {
            return s
                .out
                .error_echo("ERR Syntax error in HELLO option '", opt, usize::MAX, "'");
        }
    }
    if let Some((user, password)) = auth {
        if !authenticate(s, Some(user), password) {
            return;
        }
    } else if !s.authenticated {
        return s.out.error(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the \
             HELLO AUTH <user> <pass> option can be used to authenticate the client and \
             select the RESP protocol version at the same time",
        );
    }
    if let Some(name) = setname {
        if !valid_client_name(&name) {
            return s.out.error(BAD_CLIENT_NAME);
        }
        s.name = (!name.is_empty()).then_some(name);
    }
    s.out.set_resp3(resp3);
    s.out.map(8);
    s.out.bulk(b"server");
    s.out.bulk(b"redis");
    s.out.bulk(b"version");
    s.out.bulk(REDIS_VERSION.as_bytes());
    s.out.bulk(b"proto");
    s.out.integer(if resp3 { 3 } else { 2 });
    s.out.bulk(b"id");
    s.out.integer(i64::try_from(s.id()).unwrap_or(i64::MAX));
    s.out.bulk(b"mode");
    s.out.bulk(b"standalone");
    s.out.bulk(b"role");
    s.out.bulk(b"master");
    s.out.bulk(b"modules");
    s.out.array(0);
    s.out.bulk(b"strata_version");
    s.out.bulk(env!("CARGO_PKG_VERSION").as_bytes());
}

/// Redis's reply to an index that does not fit a C `int`.
const INT_RANGE: &str = "ERR value is out of range, value must between -2147483648 and 2147483647";

/// What `SELECT arg` names.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum SelectTarget {
    /// `0`..`15`: `db0`..`db15`, created on first use (Redis's numbered databases).
    Numbered(String),
    /// Any other valid database name that is not a number (a Strata extension); it must
    /// exist already (`DATABASES CREATE name` or a PostgreSQL connection creates it).
    Named(String),
}

/// Parses `SELECT arg` with Redis's replies for what is not a database index: `ERR value is
/// not an integer or out of range` for text that is not a number, `ERR value is out of range,
/// ...` beyond a 32-bit integer, `ERR DB index is out of range` outside 0..15.
pub(crate) fn database_for_select(arg: &[u8]) -> Result<SelectTarget, &'static str> {
    if let Some(n) = parse_decimal(arg) {
        if i32::try_from(n).is_err() {
            return Err(INT_RANGE);
        }
        if (0..NUMBERED_DATABASES).contains(&n) {
            return Ok(SelectTarget::Numbered(format!("db{n}")));
        }
        return Err("ERR DB index is out of range");
    }
    let name = std::str::from_utf8(arg).map_err(|_| NOT_INTEGER)?;
    let numeric = name.bytes().all(|b| b.is_ascii_digit() || b == b'-');
    if numeric || crate::databases::validate_name(name).is_err() {
        return Err(NOT_INTEGER);
    }
    Ok(SelectTarget::Named(name.to_owned()))
}

/// SELECT index | name. A name that is not an existing database gets Redis's reply to a
/// non-integer index, and nothing is created (so a typo never makes a database).
pub(crate) fn select(s: &mut Session, args: &[Bytes]) {
    let name = match database_for_select(arg(args, 1)) {
        Ok(SelectTarget::Numbered(n)) => n,
        Ok(SelectTarget::Named(n)) if s.shared.databases.exists(&n) => n,
        Ok(SelectTarget::Named(_)) => return s.out.error(NOT_INTEGER),
        Err(e) => return s.out.error(e),
    };
    match s.shared.databases.get_or_open(&name) {
        Ok(db) => {
            s.set_db(db);
            s.out.ok();
        }
        Err(e) => s.out.error(&resp_server_error(&e)),
    }
}

/// PING [message]
pub(crate) fn ping(s: &mut Session, args: &[Bytes]) {
    match args.len() {
        1 => s.out.simple("PONG"),
        2 => s.out.bulk(arg(args, 1)),
        _ => s
            .out
            .error("ERR wrong number of arguments for 'ping' command"),
    }
}

/// ECHO message
pub(crate) fn echo(s: &mut Session, args: &[Bytes]) {
    s.out.bulk(arg(args, 1));
}

/// QUIT: replies OK and closes the connection.
pub(crate) fn quit(s: &mut Session, _args: &[Bytes]) {
    s.out.ok();
    s.quit = true;
}

/// SHUTDOWN [NOSAVE | SAVE] [NOW] [FORCE] [ABORT]: begins the server's shutdown, as the first
/// SIGINT/SIGTERM does (the WALs are synced and the databases closed whichever option is
/// given: there is no snapshot to save or skip, and no replica to wait for). As in Redis, the
/// connection is closed without a reply; a shutdown cannot be aborted.
pub(crate) fn shutdown(s: &mut Session, args: &[Bytes]) {
    let mut save_selector = false;
    for arg in args.iter().skip(1) {
        match arg.to_ascii_uppercase().as_slice() {
            b"NOSAVE" | b"SAVE" if !save_selector => save_selector = true,
            b"NOW" | b"FORCE" => {}
            b"ABORT" if args.len() == 2 => return s.out.error("ERR No shutdown in progress."),
            _ => return s.out.error(SYNTAX),
        }
    }
    tracing::info!(client = s.id(), "SHUTDOWN asked by a client");
    s.shared.shutdown_asked.send_replace(true);
    s.quit = true;
}

const BAD_CLIENT_NAME: &str =
    "ERR Client names cannot contain spaces, newlines or special characters.";

fn valid_client_name(name: &[u8]) -> bool {
    name.iter().all(|&b| (b'!'..=b'~').contains(&b))
}

/// The reply to a subcommand of `command` (upper case) that its dispatcher does not handle:
/// `HELP` lists `help` (pairs of a usage line and its indented description, as Redis's
/// `addReplyHelp` prints them: one status reply per line), anything else is Redis's
/// unknown-subcommand error.
pub(crate) fn subcommand_error(s: &mut Session, command: &str, args: &[Bytes], help: &[&str]) {
    let sub = arg(args, 1);
    if sub.eq_ignore_ascii_case(b"HELP") {
        if args.len() != 2 {
            return sub_arity_error(s, &command.to_ascii_lowercase(), sub);
        }
        let head = format!("{command} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:");
        s.out.array(help.len() + 3);
        s.out.simple(&head);
        for line in help {
            s.out.simple(line);
        }
        s.out.simple("HELP");
        s.out.simple("    Print this help.");
        return;
    }
    s.out.error_echo(
        "ERR unknown subcommand '",
        sub,
        128,
        &format!("'. Try {command} HELP."),
    );
}

/// `CLIENT HELP`.
const CLIENT_HELP: &[&str] = &[
    "ID",
    "    Return the ID of the current connection.",
    "GETNAME",
    "    Return the name of the current connection.",
    "SETNAME <name>",
    "    Assign the name <name> to the current connection.",
    "SETINFO <option> <value>",
    "    Accept LIB-NAME or LIB-VER meta data (checked, not stored).",
    "INFO",
    "    Return information about the current connection.",
    "LIST [TYPE <normal|master|replica|pubsub>] [ID <id> [<id> ...]]",
    "    Return information about client connections.",
    "KILL <ip:port>",
    "    Kill connection made from <ip:port>.",
    "KILL <option> <value> [<option> <value> [...]]",
    "    Kill connections. Options are:",
    "    * ADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made from the specified address",
    "    * LADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made to specified local address",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Kill connections by type.",
    "    * USER <username>",
    "      Kill connections authenticated by <username>.",
    "    * SKIPME (YES|NO)",
    "      Skip killing current connection (default: yes).",
    "    * ID <client-id>",
    "      Kill connections by client id.",
    "    * MAXAGE <maxage>",
    "      Kill connections older than the specified age.",
];

/// `FUNCTION HELP`.
const FUNCTION_HELP: &[&str] = &[
    "FLUSH [ASYNC|SYNC]",
    "    Delete all functions (strata has none: only answers OK).",
];

pub(crate) fn sub_arity_error(s: &mut Session, command: &str, sub: &[u8]) {
    let sub = String::from_utf8_lossy(sub).to_ascii_lowercase();
    s.out.error(&format!(
        "ERR wrong number of arguments for '{command}|{sub}' command"
    ));
}

/// One connection's line of `CLIENT LIST` / `CLIENT INFO`, with Redis 7's field names
/// (those that mean something here; the buffer and memory fields are left out).
fn client_line(entry: &ClientEntry, state: &ClientState, laddr: Option<SocketAddr>) -> String {
    let db = state
        .db
        .as_ref()
        .map_or(crate::server::DEFAULT_DATABASE, |d| d.name());
    format!(
        "id={} addr={} laddr={} name={} age={} idle={} flags=N db={} sub=0 psub=0 multi=-1 \
         cmd={} user=default resp={}\n",
        entry.id,
        entry.peer,
        laddr.map_or_else(String::new, |a| a.to_string()),
        state
            .name
            .as_deref()
            .map(String::from_utf8_lossy)
            .unwrap_or_default(),
        entry.created.elapsed().as_secs(),
        state.last_active.elapsed().as_secs(),
        // Numbered databases (`SELECT n`, named `db<n>`) as the bare number, as Redis
        // reports them (redis-py parses it as an integer).
        db.strip_prefix("db")
            .filter(|n| n.parse::<u8>().is_ok())
            .unwrap_or(db),
        state.last_command.to_ascii_lowercase(),
        state.resp,
    )
}

/// This connection's `CLIENT LIST` line, from its live state.
fn own_client_line(s: &Session) -> String {
    client_line(&s.registration.entry, &s.client_state(), s.shared.resp_addr)
}

/// CLIENT ID | GETNAME | SETNAME name | SETINFO attr value | INFO | LIST | KILL
pub(crate) fn client(s: &mut Session, args: &[Bytes]) {
    let sub = arg(args, 1).to_ascii_uppercase();
    let argc = args.len();
    match sub.as_slice() {
        b"ID" if argc == 2 => s.out.integer(i64::try_from(s.id()).unwrap_or(i64::MAX)),
        b"GETNAME" if argc == 2 => {
            let name = s.name.clone();
            s.out.bulk_or_null(name.as_deref());
        }
        b"SETNAME" if argc == 3 => {
            let name = args.get(2).cloned().unwrap_or_default();
            if valid_client_name(&name) {
                s.name = (!name.is_empty()).then_some(name);
                s.out.ok();
            } else {
                s.out.error(BAD_CLIENT_NAME);
            }
        }
        // As Redis 7.2 (whose command it is; redis-py sends it on connect): two known
        // attributes, values of printable characters without spaces. Nothing is stored.
        b"SETINFO" if argc == 4 => {
            let attr = arg(args, 2).to_ascii_lowercase();
            let name = String::from_utf8_lossy(&attr).into_owned();
            if attr != b"lib-name" && attr != b"lib-ver" {
                s.out.error(&format!(
                    "ERR Unrecognized option '{}'",
                    String::from_utf8_lossy(arg(args, 2))
                ));
            } else if arg(args, 3).iter().any(|&b| !(b'!'..=b'~').contains(&b)) {
                s.out.error(&format!(
                    "ERR {name} cannot contain spaces, newlines or special characters."
                ));
            } else {
                s.out.ok();
            }
        }
        b"INFO" if argc == 2 => {
            let line = own_client_line(s);
            s.out.verbatim(&line);
        }
        b"LIST" => client_list(s, args),
        b"KILL" if argc >= 3 => client_kill(s, args),
        b"ID" | b"GETNAME" | b"SETNAME" | b"SETINFO" | b"INFO" | b"KILL" => {
            sub_arity_error(s, "client", arg(args, 1));
        }
        _ => subcommand_error(s, "CLIENT", args, CLIENT_HELP),
    }
}

/// CLIENT LIST [TYPE type | ID id [id ...]], with Redis 7.0's argument rules. Every RESP
/// connection is a `normal` client, so TYPE master, replica (slave) and pubsub list nothing.
/// Other connections show what they published after their last batch of commands.
fn client_list(s: &mut Session, args: &[Bytes]) {
    let option = arg(args, 2).to_ascii_uppercase();
    let ids: Option<Vec<u64>> = match (args.len(), option.as_slice()) {
        (2, _) => None,
        (4, b"TYPE") => match arg(args, 3).to_ascii_lowercase().as_slice() {
            b"normal" => None,
            b"master" | b"replica" | b"slave" | b"pubsub" => Some(Vec::new()),
            other => {
                return s
                    .out
                    .error_echo("ERR Unknown client type '", other, usize::MAX, "'");
            }
        },
        (n, b"ID") if n > 3 => {
            let mut ids = Vec::new();
            for id in args.get(3..).unwrap_or_default() {
                match parse_decimal(id).map(u64::try_from) {
                    Some(Ok(id)) => ids.push(id),
                    // Negative ids exist nowhere; Redis lists nothing for them.
                    Some(Err(_)) => {}
                    None => return s.out.error("ERR Invalid client ID"),
                }
            }
            Some(ids)
        }
        _ => return s.out.error(SYNTAX),
    };
    let mut text = String::new();
    for entry in s.shared.clients.all() {
        if ids.as_ref().is_some_and(|ids| !ids.contains(&entry.id)) {
            continue;
        }
        if entry.id == s.id() {
            text.push_str(&own_client_line(s));
        } else {
            text.push_str(&client_line(&entry, &entry.state(), s.shared.resp_addr));
        }
    }
    s.out.verbatim(&text);
}

/// CLIENT KILL ip:port (the old form: `+OK`, or `ERR No such client`), or CLIENT KILL with
/// filters `ID id`, `TYPE type`, `USER name`, `ADDR ip:port`, `LADDR ip:port`, `SKIPME
/// yes|no` (default yes: the calling connection is spared), `MAXAGE secs`, all of which must
/// match: replies the number of connections killed. Argument errors as Redis 7 gives them.
/// A killed connection closes after the replies of the batch it is running.
fn client_kill(s: &mut Session, args: &[Bytes]) {
    let rest = args.get(2..).unwrap_or_default();
    let laddr = s.shared.resp_addr.map(|a| a.to_string());
    if let [addr] = rest {
        let killed = s
            .shared
            .clients
            .kill(|e| e.peer.to_string().as_bytes() == addr.as_ref());
        return if killed == 0 {
            s.out.error("ERR No such client")
        } else {
            s.out.ok()
        };
    }
    let mut id = None;
    let mut addr: Option<&[u8]> = None;
    let mut local: Option<&[u8]> = None;
    let mut skip_me = true;
    let mut max_age: Option<u64> = None;
    let mut no_match = false;
    for pair in rest.chunks(2) {
        let [filter, value] = pair else {
            return s.out.error(SYNTAX);
        };
        match filter.to_ascii_uppercase().as_slice() {
            b"ID" => match parse_decimal(value).filter(|&n| n > 0) {
                Some(n) => id = u64::try_from(n).ok(),
                None => return s.out.error("ERR client-id should be greater than 0"),
            },
            b"TYPE" => match value.to_ascii_lowercase().as_slice() {
                b"normal" => {}
                b"master" | b"replica" | b"slave" | b"pubsub" => no_match = true,
                _ => {
                    return s
                        .out
                        .error_echo("ERR Unknown client type '", value, usize::MAX, "'");
                }
            },
            // Every connection is the `default` user (`--requirepass` is its password).
            b"USER" if value.as_ref() == b"default" => {}
            b"USER" => {
                return s
                    .out
                    .error_echo("ERR No such user '", value, usize::MAX, "'");
            }
            b"ADDR" => addr = Some(value),
            b"LADDR" => local = Some(value),
            b"SKIPME" => match value.to_ascii_lowercase().as_slice() {
                b"yes" => skip_me = true,
                b"no" => skip_me = false,
                _ => return s.out.error(SYNTAX),
            },
            b"MAXAGE" => match parse_decimal(value).map(u64::try_from) {
                Some(Ok(n)) => max_age = Some(n),
                Some(Err(_)) => max_age = Some(0),
                None => return s.out.error(NOT_INTEGER),
            },
            _ => return s.out.error(SYNTAX),
        }
    }
    let me = s.id();
    let killed = if no_match {
        0
    } else {
        s.shared.clients.kill(|e| {
            !(skip_me && e.id == me)
                && id.is_none_or(|id| e.id == id)
                && addr.is_none_or(|a| e.peer.to_string().as_bytes() == a)
                && local.is_none_or(|l| laddr.as_deref().map(str::as_bytes) == Some(l))
                && max_age.is_none_or(|age| e.created.elapsed().as_secs() >= age)
        })
    };
    s.out.integer(i64::try_from(killed).unwrap_or(i64::MAX));
}

/// FUNCTION FLUSH [ASYNC | SYNC]: there are no functions, so this only answers OK (test
/// harnesses send it).
pub(crate) fn function(s: &mut Session, args: &[Bytes]) {
    if arg(args, 1).eq_ignore_ascii_case(b"FLUSH") {
        // No functions are ever loaded: nothing to flush. The mode is checked as Redis does.
        match args.get(2) {
            None => s.out.ok(),
            Some(m)
                if args.len() == 3
                    && (m.eq_ignore_ascii_case(b"SYNC") || m.eq_ignore_ascii_case(b"ASYNC")) =>
            {
                s.out.ok();
            }
            Some(_) => s
                .out
                .error("ERR FUNCTION FLUSH only supports SYNC|ASYNC option"),
        }
    } else {
        subcommand_error(s, "FUNCTION", args, FUNCTION_HELP);
    }
}

/// INFO [section ...]: server, clients, memory, persistence, stats, cpu, keyspace, engine
/// (or all / everything / default).
pub(crate) fn info(s: &mut Session, args: &[Bytes]) {
    let wanted: Vec<String> = args
        .iter()
        .skip(1)
        .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
        .collect();
    let all = wanted.is_empty()
        || wanted
            .iter()
            .any(|w| w == "all" || w == "everything" || w == "default");
    let want = |section: &str| all || wanted.iter().any(|w| w == section);
    let mut text = String::new();
    let shared = std::sync::Arc::clone(&s.shared);
    let stats = &shared.stats;
    // Read once for the memory and cpu sections.
    let mut usage: Option<ProcessUsage> = None;
    if want("server") {
        let _ = write!(
            text,
            "# Server\r\nredis_version:{REDIS_VERSION}\r\nstrata_version:{}\r\nredis_mode:standalone\r\n\
             os:{}\r\narch_bits:64\r\nprocess_id:{}\r\nrun_id:{}\r\ntcp_port:{}\r\n\
             uptime_in_seconds:{}\r\nuptime_in_days:{}\r\nsync_mode:{}\r\ndata_dir:{}\r\n\r\n",
            env!("CARGO_PKG_VERSION"),
            std::env::consts::OS,
            std::process::id(),
            shared.run_id,
            shared.resp_addr.map_or(0, |a| a.port()),
            shared.started.elapsed().as_secs(),
            shared.started.elapsed().as_secs() / 86_400,
            shared.config.sync,
            shared.config.dir.display(),
        );
    }
    if want("clients") {
        let _ = write!(
            text,
            "# Clients\r\nconnected_clients:{}\r\nmaxclients:{}\r\nblocked_clients:0\r\n\r\n",
            stats.connected_clients.load(Ordering::Relaxed),
            shared.config.max_clients,
        );
    }
    if want("memory") {
        let usage = *usage.get_or_insert_with(ProcessUsage::now);
        let _ = write!(
            text,
            "# Memory\r\nused_memory:{rss}\r\nused_memory_human:{}\r\nused_memory_rss:{rss}\r\n\
             used_memory_peak:{peak}\r\nused_memory_peak_human:{}\r\nmaxmemory:0\r\n\
             maxmemory_policy:noeviction\r\n\r\n",
            human_bytes(usage.rss_bytes),
            human_bytes(usage.peak_rss_bytes),
            rss = usage.rss_bytes,
            peak = usage.peak_rss_bytes,
        );
    }
    if want("persistence") {
        // Writes are durable through the WAL as they are acknowledged (`sync_mode` says when
        // it is fsynced); there are no snapshots to load or save.
        text.push_str("# Persistence\r\nloading:0\r\nasync_loading:0\r\nrdb_bgsave_in_progress:0\r\naof_rewrite_in_progress:0\r\n\r\n");
    }
    if want("stats") {
        let _ = write!(
            text,
            "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\n\
             rejected_connections:{}\r\nkeyspace_hits:{}\r\nkeyspace_misses:{}\r\n\
             total_error_replies_protocol:{}\r\n\r\n",
            stats.connections_received.load(Ordering::Relaxed),
            stats.commands_processed.load(Ordering::Relaxed),
            stats.rejected_connections.load(Ordering::Relaxed),
            stats.keyspace_hits.load(Ordering::Relaxed),
            stats.keyspace_misses.load(Ordering::Relaxed),
            stats.protocol_errors.load(Ordering::Relaxed),
        );
    }
    if want("cpu") {
        let usage = *usage.get_or_insert_with(ProcessUsage::now);
        let _ = write!(
            text,
            "# CPU\r\nused_cpu_sys:{:.6}\r\nused_cpu_user:{:.6}\r\nused_cpu_sys_children:0.000000\r\n\
             used_cpu_user_children:0.000000\r\n\r\n",
            usage.system_secs, usage.user_secs,
        );
    }
    if want("keyspace") {
        text.push_str("# Keyspace\r\n");
        for db in shared.databases.open_databases() {
            match count_keys(&db) {
                Ok(0) => {}
                Ok(n) => {
                    let _ = write!(text, "{}:keys={n},expires=0,avg_ttl=0\r\n", db.name());
                }
                Err(e) => {
                    let _ = write!(
                        text,
                        "{}:error={}\r\n",
                        db.name(),
                        e.to_string().replace(['\r', '\n'], " ")
                    );
                }
            }
        }
        text.push_str("\r\n");
    }
    // The connection's database, or `db0` if some other connection has it open (a
    // connection opens `db0` only for its first command that needs it; INFO does not).
    let engine_db = if want("engine") {
        s.db_if_open()
            .cloned()
            .or_else(|| s.shared.databases.open_one(s.db_name()))
    } else {
        None
    };
    // The memtable budget is the server's, shown whichever database is open.
    let budget = s.shared.databases.memtable_budget();
    let budget_lines = format!(
        "memtable_budget_bytes:{}\r\nmemtable_budget_usage_bytes:{}\r\n",
        budget.map_or(0, |b| b.buffer_size()),
        budget.map_or(0, |b| b.memory_usage()),
    );
    if want("engine") && engine_db.is_none() {
        let _ = write!(
            text,
            "# Engine\r\ndatabase:{}\r\ndatabase_open:0\r\n{budget_lines}\r\n",
            s.db_name()
        );
    } else if let Some(db) = engine_db {
        let st = db.db().stats();
        let _ = write!(
            text,
            "# Engine\r\ndatabase:{}\r\nuser_bytes:{}\r\nwal_bytes:{}\r\nwal_syncs:{}\r\n\
             write_groups:{}\r\nflushes:{}\r\nflush_bytes:{}\r\ncompactions:{}\r\n\
             compaction_bytes_read:{}\r\ncompaction_bytes_written:{}\r\nwrite_amplification:{:.2}\r\n\
             stall_micros:{}\r\ndelay_micros:{}\r\nblock_cache_hits:{}\r\nblock_cache_misses:{}\r\n\
             block_cache_usage_bytes:{}\r\nblock_cache_capacity_bytes:{}\r\nopen_tables:{}\r\nopen_tables_capacity:{}\r\nbloom_checked:{}\r\nbloom_useful:{}\r\npending_compaction_bytes:{}\r\n\
             memtable_bytes:{}\r\nimmutable_memtables:{}\r\nlast_seqno:{}\r\ntable_bytes:{}\r\n\
             writes_stopped:{}\r\nwrites_resumable:{}\r\nbackground_retries:{}\r\n{}",
            db.name(),
            st.user_bytes,
            st.wal_bytes,
            st.wal_syncs,
            st.write_groups,
            st.flushes,
            st.flush_bytes,
            st.compactions,
            st.compaction_bytes_read,
            st.compaction_bytes_written,
            st.write_amplification(),
            st.stall_micros,
            st.delay_micros,
            st.block_cache_hits,
            st.block_cache_misses,
            st.block_cache_usage_bytes,
            st.block_cache_capacity_bytes,
            st.open_tables,
            st.open_tables_capacity,
            st.bloom_checked,
            st.bloom_useful,
            st.pending_compaction_bytes,
            st.memtable_bytes,
            st.immutable_memtables,
            st.last_seqno,
            st.table_bytes(),
            u8::from(st.writes_stopped.is_some()),
            u8::from(st.writes_resumable),
            st.background_retries,
            budget_lines,
        );
        if let Some(reason) = &st.writes_stopped {
            // One line (the reason never holds a line break, but make sure), and no `,`: a
            // client library (redis-py) reads a value with commas as a list of fields.
            let _ = write!(
                text,
                "writes_stopped_reason:{}\r\n",
                reason.replace(['\r', '\n'], " ").replace(',', ";")
            );
        }
        for (level, l) in st.levels.iter().enumerate() {
            let _ = write!(
                text,
                "level{level}:tables={},bytes={},target_bytes={}\r\n",
                l.files, l.bytes, l.target_bytes
            );
        }
        text.push_str("\r\n");
    }
    s.out.verbatim(&text);
}

/// The server process's resources, for `INFO memory` and `INFO cpu`.
#[derive(Debug, Clone, Copy, PartialEq)]
struct ProcessUsage {
    /// CPU time in user mode, seconds.
    user_secs: f64,
    /// CPU time in the kernel, seconds.
    system_secs: f64,
    /// Resident set size now, bytes.
    rss_bytes: u64,
    /// The largest resident set size so far, bytes.
    peak_rss_bytes: u64,
}

impl ProcessUsage {
    /// From Linux's `/proc/self/stat` (CPU times of all threads, in clock ticks) and
    /// `/proc/self/status` (`VmRSS`, `VmHWM`). Zeros where those files cannot be read (other
    /// systems).
    fn now() -> ProcessUsage {
        let ticks = rustix::param::clock_ticks_per_second().max(1);
        // Fields 14 and 15 (utime, stime) of `stat`, counted after the command name, which is
        // in parentheses and may hold spaces.
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
        let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        let mut fields = after_name.split_whitespace().skip(11);
        let mut cpu = || {
            let t = fields
                .next()
                .and_then(|f| f.parse::<u64>().ok())
                .unwrap_or(0);
            #[expect(clippy::cast_precision_loss, reason = "ticks of CPU time fit 52 bits")]
            let secs = t as f64 / ticks as f64;
            secs
        };
        let (user_secs, system_secs) = (cpu(), cpu());
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let kib = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                .map_or(0, |k| k.saturating_mul(1024))
        };
        let rss_bytes = kib("VmRSS");
        ProcessUsage {
            user_secs,
            system_secs,
            rss_bytes,
            peak_rss_bytes: kib("VmHWM").max(rss_bytes),
        }
    }
}

/// Bytes as Redis's `*_human` fields show them: `1.50M`, `812.00K`, `3B`.
fn human_bytes(n: u64) -> String {
    #[expect(clippy::cast_precision_loss, reason = "two decimals shown")]
    let f = n as f64;
    match n {
        0..1024 => format!("{n}B"),
        1024..1_048_576 => format!("{:.2}K", f / 1024.0),
        1_048_576..1_073_741_824 => format!("{:.2}M", f / 1_048_576.0),
        _ => format!("{:.2}G", f / 1_073_741_824.0),
    }
}

/// SQL "statement; ...": runs the statements on the current database. One statement's
/// reply: rows as an array whose first element is the array of column names, then one
/// array per row; a command's tag (`INSERT 0 2`) as a simple string. Several statements: an
/// array of those replies. Errors: `-ERR [SQLSTATE] message` (statements before it stay
/// applied).
pub(crate) fn sql(s: &mut Session, args: &[Bytes]) {
    use crate::sql::SqlError;
    let Ok(text) = std::str::from_utf8(arg(args, 1)) else {
        return s.out.error(
            "ERR [22021] invalid byte sequence for encoding \"UTF8\": SQL text must be UTF-8",
        );
    };
    let statements = crate::sql::text::split_statements(text);
    let mut outcomes = Vec::with_capacity(statements.len());
    let shared = std::sync::Arc::clone(&s.shared);
    // `SET statement_timeout` holds for the statements after it in this call (a RESP
    // connection keeps no SQL session between calls).
    let mut limit = None;
    for (i, stmt) in statements.iter().enumerate() {
        // Once shutdown has begun no new statement starts (as over PostgreSQL): the one
        // running then finishes, the ones after it are refused with 57P01.
        let result = if shared.stopping.load(std::sync::atomic::Ordering::Acquire) {
            Err(SqlError::Server(crate::error::ServerError::ShuttingDown))
        } else {
            run_one(s, stmt, &mut limit)
        };
        match result {
            Ok(o) => outcomes.push(o),
            Err(e) => {
                e.log_corruption();
                let mut message = format!("ERR [{}] {e}", e.sqlstate());
                if i > 0 {
                    // Each statement commits on its own: say that the ones before it did.
                    message.push_str(&format!(
                        " (statement {} of {}; the {i} before it ran, and their changes stay)",
                        i + 1,
                        statements.len()
                    ));
                }
                return s.out.error(&message);
            }
        }
    }
    match outcomes.as_slice() {
        [] => s.out.error("ERR empty SQL statement"),
        [one] => sql_reply(s, one),
        many => {
            s.out.array(many.len());
            for o in many {
                sql_reply(s, o);
            }
        }
    }
}

/// Runs one statement of a RESP `SQL` call. `limit` is the call's `statement_timeout`: a
/// statement running longer is stopped (57014) and changes nothing. No cancel request
/// reaches RESP; the shutdown stops a statement still running after its grace period, as
/// over PostgreSQL (57P01). Read-only transactions are refused (0A000): the call keeps no
/// session to hold the mode in, and accepting them would let writes through.
fn run_one(
    s: &Session,
    stmt: &str,
    limit: &mut Option<std::time::Duration>,
) -> Result<crate::sql::Outcome, crate::sql::SqlError> {
    use crate::sql::{Outcome, SqlError, read_only, timeout};
    use std::sync::atomic::{AtomicBool, Ordering};
    if let Some(change) = read_only::change(stmt)
        && change?.asks_read_only()
    {
        return Err(SqlError::NotSupported(
            "read-only transactions are not supported over RESP (the SQL command keeps no \
                 session); use a PostgreSQL connection, where they are honoured"
                .to_owned(),
        ));
    }
    if let Some(change) = timeout::change(stmt) {
        *limit = change?;
        if crate::sql::text::leading_words(stmt, 1)
            .first()
            .is_some_and(|w| w == "SET")
        {
            return Ok(Outcome::Command("SET".to_owned()));
        }
    }
    if timeout::is_show(stmt) {
        return Ok(crate::sql::text_row(
            "statement_timeout",
            timeout::show(*limit),
        ));
    }
    let interrupt = strata_query::Interrupt::new();
    let _running = s.shared.running_sql.register_statement(&interrupt);
    let timed_out = std::sync::Arc::new(AtomicBool::new(false));
    // The timer: a thread that interrupts the statement unless told first that it ended.
    let (done, ended) = std::sync::mpsc::channel::<()>();
    if let Some(limit) = *limit {
        let interrupt = interrupt.clone();
        let timed_out = std::sync::Arc::clone(&timed_out);
        std::thread::spawn(move || {
            if ended.recv_timeout(limit) == Err(std::sync::mpsc::RecvTimeoutError::Timeout) {
                timed_out.store(true, Ordering::Release);
                interrupt.interrupt();
            }
        });
    }
    let result = crate::sql::run(s.db(), stmt, &interrupt);
    drop(done);
    match result {
        Err(SqlError::Query(strata_query::QueryError::Interrupted))
            if timed_out.load(Ordering::Acquire) =>
        {
            Err(SqlError::StatementTimeout)
        }
        Err(SqlError::Query(strata_query::QueryError::Interrupted)) => {
            Err(SqlError::Server(crate::error::ServerError::ShuttingDown))
        }
        other => other,
    }
}

fn sql_reply(s: &mut Session, outcome: &crate::sql::Outcome) {
    use crate::sql::Outcome;
    match outcome {
        Outcome::Rows { columns, rows } => {
            s.out.array(rows.len() + 1);
            s.out.array(columns.len());
            for c in columns {
                s.out.bulk(c.name.as_bytes());
            }
            for row in rows {
                s.out.array(row.len());
                for v in row {
                    sql_value(s, v);
                }
            }
        }
        Outcome::Command(tag) => s.out.simple(tag),
        Outcome::Begin => s.out.simple("BEGIN"),
        Outcome::Commit { .. } => s.out.simple("COMMIT"),
        Outcome::Rollback { .. } => s.out.simple("ROLLBACK"),
        Outcome::Empty => s.out.null(),
        // RESP connections prepare no statements: nothing to remove.
        Outcome::Deallocate(Some(_)) => s.out.simple("DEALLOCATE"),
        Outcome::Deallocate(None) => s.out.simple("DEALLOCATE ALL"),
    }
}

fn sql_value(s: &mut Session, v: &strata_query::Value) {
    use strata_query::Value;
    match v {
        Value::Null => s.out.null(),
        Value::Bool(b) => s.out.boolean(*b),
        Value::Int(i) => s.out.integer(*i),
        // As docs/sql.md prints doubles (`3.0`, `1e16`), so a whole double does not read
        // as an integer in RESP2; `inf`, `-inf` and `nan` as Redis writes them.
        Value::Double(d) if d.is_finite() => s.out.double_text(&v.to_string()),
        Value::Double(d) => s.out.double(*d),
        Value::Text(t) => s.out.bulk(t.as_bytes()),
        Value::Blob(b) => s.out.bulk(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_usage_is_read() {
        // Burn some CPU and touch some memory, so neither figure can be zero.
        let v: Vec<u64> = (0..2_000_000u64).map(|i| i.wrapping_mul(i)).collect();
        assert!(v.iter().fold(0u64, |a, &b| a ^ b) != 1);
        let u = ProcessUsage::now();
        assert!(u.user_secs + u.system_secs > 0.0, "{u:?}");
        assert!(u.rss_bytes >= 16 << 20, "{u:?}");
        assert!(u.peak_rss_bytes >= u.rss_bytes, "{u:?}");
    }

    #[test]
    fn human_bytes_as_redis_shows_them() {
        assert_eq!(human_bytes(3), "3B");
        assert_eq!(human_bytes(1536), "1.50K");
        assert_eq!(human_bytes(5 << 20), "5.00M");
        assert_eq!(human_bytes(3 << 30), "3.00G");
    }

    #[test]
    fn select_maps_numbers_and_names() {
        use SelectTarget::{Named, Numbered};
        assert_eq!(database_for_select(b"0"), Ok(Numbered("db0".into())));
        assert_eq!(database_for_select(b"15"), Ok(Numbered("db15".into())));
        assert_eq!(database_for_select(b"run42"), Ok(Named("run42".into())));
        assert_eq!(database_for_select(b"abc"), Ok(Named("abc".into())));
    }

    #[test]
    fn select_refuses_what_redis_refuses_with_its_replies() {
        // Checked against redis-server 7.0.15.
        for (arg, reply) in [
            (&b"16"[..], "ERR DB index is out of range"),
            (b"-1", "ERR DB index is out of range"),
            (b"2147483647", "ERR DB index is out of range"),
            (b"2147483648", INT_RANGE),
            (b"99999999999", INT_RANGE),
            (b"-2147483649", INT_RANGE),
            (b"007", NOT_INTEGER),
            (b"+1", NOT_INTEGER),
            (b" 1", NOT_INTEGER),
            (b"1.0", NOT_INTEGER),
            (b"", NOT_INTEGER),
            (b"../x", NOT_INTEGER),
            (b"a b", NOT_INTEGER),
            (b"\xff", NOT_INTEGER),
        ] {
            assert_eq!(
                database_for_select(arg),
                Err(reply),
                "SELECT {}",
                String::from_utf8_lossy(arg)
            );
        }
    }

    #[test]
    fn password_comparison() {
        assert!(password_matches("secret", b"secret"));
        assert!(!password_matches("secret", b"secreT"));
        assert!(!password_matches("secret", b"secret2"));
        assert!(!password_matches("secret", b""));
    }
}
