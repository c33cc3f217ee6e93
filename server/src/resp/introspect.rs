//! `COMMAND` (`COUNT`, `LIST`, `INFO`, `DOCS`) and `CONFIG GET`: the server describing
//! itself, in Redis 7's reply shapes. Everything `COMMAND` says comes from the one command
//! table ([`super::table`]).

use bytes::Bytes;

use super::admin::{NUMBERED_DATABASES, sub_arity_error, subcommand_error};
use super::commands::arg;
use super::session::Session;
use super::table::{Arg, ArgType, COMMANDS, CommandSpec, SubSpec, lookup};
use crate::config::SyncMode;

/// `COMMAND` flags of a command (a subcommand reports its container's).
fn command_flags(c: &CommandSpec) -> Vec<&'static str> {
    let mut flags = vec![if c.write { "write" } else { "readonly" }];
    if c.fast {
        flags.push("fast");
    }
    if c.no_auth {
        flags.push("no_auth");
    }
    flags
}

/// ACL categories, derived from the flags and the group as Redis assigns them.
fn acl_categories(c: &CommandSpec) -> Vec<&'static str> {
    let mut cats = Vec::new();
    if c.keys.0 > 0 {
        cats.push(if c.write { "@write" } else { "@read" });
    } else if c.write {
        cats.push("@write");
    }
    match c.group {
        "string" => cats.push("@string"),
        "generic" => cats.push("@keyspace"),
        "connection" => cats.push("@connection"),
        "scripting" => cats.push("@scripting"),
        _ => {}
    }
    cats.push(if c.fast { "@fast" } else { "@slow" });
    cats
}

/// One key specification (Redis 7) from the key positions: keys from index `first`, up to
/// `last` (negative: from the end), every `step`.
fn key_specs(s: &mut Session, c: &CommandSpec) {
    let (first, last, step) = c.keys;
    if first <= 0 {
        s.out.array(0);
        return;
    }
    s.out.array(1);
    s.out.map(3);
    s.out.bulk(b"flags");
    let flags: &[&str] = if c.write {
        &["RW", "update"]
    } else {
        &["RO", "access"]
    };
    s.out.set(flags.len());
    for f in flags {
        s.out.simple(f);
    }
    s.out.bulk(b"begin_search");
    s.out.map(2);
    s.out.bulk(b"type");
    s.out.bulk(b"index");
    s.out.bulk(b"spec");
    s.out.map(1);
    s.out.bulk(b"index");
    s.out.integer(i64::from(first));
    s.out.bulk(b"find_keys");
    s.out.map(2);
    s.out.bulk(b"type");
    s.out.bulk(b"range");
    s.out.bulk(b"spec");
    s.out.map(3);
    s.out.bulk(b"lastkey");
    s.out
        .integer(i64::from(if last < 0 { last } else { last - first }));
    s.out.bulk(b"keystep");
    s.out.integer(i64::from(step));
    s.out.bulk(b"limit");
    s.out.integer(0);
}

/// `COMMAND INFO` entry: name, arity, flags, first/last/step key, ACL categories, tips, key
/// specs, subcommands.
fn command_info(s: &mut Session, c: &CommandSpec) {
    s.out.array(10);
    s.out.bulk(c.name.to_ascii_lowercase().as_bytes());
    s.out.integer(i64::from(c.arity));
    status_set(s, &command_flags(c));
    s.out.integer(i64::from(c.keys.0));
    s.out.integer(i64::from(c.keys.1));
    s.out.integer(i64::from(c.keys.2));
    status_set(s, &acl_categories(c));
    s.out.set(0); // tips
    key_specs(s, c);
    s.out.array(c.subcommands.len());
    for sub in c.subcommands {
        subcommand_info(s, c, sub);
    }
}

/// `COMMAND INFO` entry of subcommand `sub` of container `c` (its flags and categories).
fn subcommand_info(s: &mut Session, c: &CommandSpec, sub: &SubSpec) {
    s.out.array(10);
    s.out.bulk(sub.name.as_bytes());
    s.out.integer(i64::from(sub.arity));
    status_set(s, &command_flags(c));
    s.out.integer(0);
    s.out.integer(0);
    s.out.integer(0);
    status_set(s, &acl_categories(c));
    s.out.set(0);
    s.out.array(0);
    s.out.array(0);
}

/// The container and subcommand named `container|sub` (any case), as `COMMAND LIST` names
/// them.
fn lookup_subcommand(name: &[u8]) -> Option<(&'static CommandSpec, &'static SubSpec)> {
    let bar = name.iter().position(|&b| b == b'|')?;
    let container = lookup(&name[..bar])?;
    let sub = container
        .subcommands
        .iter()
        .find(|sub| sub.name.as_bytes().eq_ignore_ascii_case(name))?;
    Some((container, sub))
}

fn status_set(s: &mut Session, items: &[&str]) {
    s.out.set(items.len());
    for i in items {
        s.out.simple(i);
    }
}

/// `COMMAND DOCS` argument: name, type, then what applies of key_spec_index, token, since,
/// flags and nested arguments.
fn arg_doc(s: &mut Session, a: &Arg) {
    let flags: Vec<&str> = [(a.optional, "optional"), (a.multiple, "multiple")]
        .into_iter()
        .filter_map(|(on, f)| on.then_some(f))
        .collect();
    let fields = 2
        + usize::from(a.kind == ArgType::Key)
        + usize::from(a.token.is_some())
        + usize::from(a.since.is_some())
        + usize::from(!flags.is_empty())
        + usize::from(!a.args.is_empty());
    s.out.map(fields);
    s.out.bulk(b"name");
    s.out.bulk(a.name.as_bytes());
    s.out.bulk(b"type");
    s.out.bulk(a.kind.name().as_bytes());
    if a.kind == ArgType::Key {
        s.out.bulk(b"key_spec_index");
        s.out.integer(0);
    }
    if let Some(token) = a.token {
        s.out.bulk(b"token");
        s.out.bulk(token.as_bytes());
    }
    if let Some(since) = a.since {
        s.out.bulk(b"since");
        s.out.bulk(since.as_bytes());
    }
    if !flags.is_empty() {
        s.out.bulk(b"flags");
        status_set(s, &flags);
    }
    if !a.args.is_empty() {
        s.out.bulk(b"arguments");
        arg_docs(s, a.args);
    }
}

fn arg_docs(s: &mut Session, args: &[Arg]) {
    s.out.array(args.len());
    for a in args {
        arg_doc(s, a);
    }
}

/// The documentation map shared by commands and subcommands.
fn doc_map(s: &mut Session, doc: &Doc<'_>) {
    let fields = 4 + usize::from(!doc.args.is_empty()) + usize::from(!doc.subs.is_empty());
    s.out.map(fields);
    for (k, v) in [
        ("summary", doc.summary),
        ("since", doc.since),
        ("group", doc.group),
        ("complexity", doc.complexity),
    ] {
        s.out.bulk(k.as_bytes());
        s.out.bulk(v.as_bytes());
    }
    if !doc.args.is_empty() {
        s.out.bulk(b"arguments");
        arg_docs(s, doc.args);
    }
    if !doc.subs.is_empty() {
        s.out.bulk(b"subcommands");
        s.out.map(doc.subs.len());
        for sub in doc.subs {
            s.out.bulk(sub.name.as_bytes());
            doc_map(s, &Doc::of_sub(sub, doc.group));
        }
    }
}

/// What `COMMAND DOCS` says about a command or subcommand.
struct Doc<'a> {
    summary: &'a str,
    since: &'a str,
    group: &'a str,
    complexity: &'a str,
    args: &'a [Arg],
    subs: &'a [SubSpec],
}

impl<'a> Doc<'a> {
    fn of(c: &'a CommandSpec) -> Self {
        Doc {
            summary: c.summary,
            since: c.since,
            group: c.group,
            complexity: c.complexity,
            args: c.args,
            subs: c.subcommands,
        }
    }

    fn of_sub(sub: &'a SubSpec, group: &'a str) -> Self {
        Doc {
            summary: sub.summary,
            since: sub.since,
            group,
            complexity: sub.complexity,
            args: sub.args,
            subs: &[],
        }
    }
}

/// `COMMAND HELP`.
const COMMAND_HELP: &[&str] = &[
    "(no subcommand)",
    "    Return details about all commands.",
    "COUNT",
    "    Return the total number of commands.",
    "LIST",
    "    Return a list of all command names (FILTERBY is not supported).",
    "INFO [<command-name> ...]",
    "    Return details about the given commands, or all of them.",
    "DOCS [<command-name> ...]",
    "    Return documentation details about the given commands, or all of them.",
];

/// `CONFIG HELP`.
const CONFIG_HELP: &[&str] = &[
    "GET <pattern> [<pattern> ...]",
    "    Return parameters matching the glob-like <pattern> and their values.",
];

/// COMMAND [COUNT | LIST | INFO [name...] | DOCS [name...]]
pub(crate) fn command(s: &mut Session, args: &[Bytes]) {
    if args.len() == 1 {
        s.out.array(COMMANDS.len());
        for c in COMMANDS {
            command_info(s, c);
        }
        return;
    }
    let sub = arg(args, 1).to_ascii_uppercase();
    let names = args.get(2..).unwrap_or_default();
    match sub.as_slice() {
        b"COUNT" if args.len() == 2 => {
            s.out
                .integer(i64::try_from(COMMANDS.len()).unwrap_or(i64::MAX));
        }
        b"LIST" if args.len() == 2 => {
            // As Redis: top-level commands and every `container|sub`.
            let total =
                COMMANDS.len() + COMMANDS.iter().map(|c| c.subcommands.len()).sum::<usize>();
            s.out.array(total);
            for c in COMMANDS {
                s.out.bulk(c.name.to_ascii_lowercase().as_bytes());
                for sub in c.subcommands {
                    s.out.bulk(sub.name.as_bytes());
                }
            }
        }
        b"INFO" => {
            if names.is_empty() {
                s.out.array(COMMANDS.len());
                for c in COMMANDS {
                    command_info(s, c);
                }
            } else {
                s.out.array(names.len());
                for n in names {
                    match (lookup(n), lookup_subcommand(n)) {
                        (Some(c), _) => command_info(s, c),
                        (None, Some((c, sub))) => subcommand_info(s, c, sub),
                        (None, None) => s.out.null(),
                    }
                }
            }
        }
        b"DOCS" => {
            // Unknown names are left out, as Redis does.
            let found: Vec<&CommandSpec> = if names.is_empty() {
                COMMANDS.iter().collect()
            } else {
                names.iter().filter_map(|n| lookup(n)).collect()
            };
            s.out.map(found.len());
            for c in found {
                s.out.bulk(c.name.to_ascii_lowercase().as_bytes());
                doc_map(s, &Doc::of(c));
            }
        }
        b"COUNT" => sub_arity_error(s, "command", arg(args, 1)),
        b"LIST" => s
            .out
            .error("ERR COMMAND LIST FILTERBY is not supported by strata"),
        _ => subcommand_error(s, "COMMAND", args, COMMAND_HELP),
    }
}

/// Redis's `appendfsync` value for a sync mode: `always` fsyncs before each reply, `batch`
/// fsyncs periodically in the background (Redis's `everysec`, here every
/// `--sync-interval-ms`), `none` leaves it to the operating system (`no`).
pub(crate) fn appendfsync(mode: SyncMode) -> &'static str {
    match mode {
        SyncMode::Always => "always",
        SyncMode::Batch => "everysec",
        SyncMode::None => "no",
    }
}

/// True when `pattern` has glob metacharacters.
fn is_glob(pattern: &[u8]) -> bool {
    pattern
        .iter()
        .any(|b| matches!(b, b'*' | b'?' | b'[' | b'\\'))
}

/// CONFIG GET parameter [parameter ...]: Redis's names with Strata's values; each pattern
/// is a glob, matched case-insensitively; a parameter matched twice is listed once. CONFIG
/// SET, RESETSTAT and REWRITE are refused.
pub(crate) fn config(s: &mut Session, args: &[Bytes]) {
    let sub = arg(args, 1).to_ascii_uppercase();
    match sub.as_slice() {
        b"GET" if args.len() >= 3 => {
            let cfg = &s.shared.config;
            let params: Vec<(&str, String)> = vec![
                ("appendfsync", appendfsync(cfg.sync).to_owned()),
                ("appendonly", "yes".into()),
                ("databases", NUMBERED_DATABASES.to_string()),
                ("dir", cfg.dir.display().to_string()),
                ("maxclients", cfg.max_clients.to_string()),
                (
                    "port",
                    s.shared.resp_addr.map_or(0, |a| a.port()).to_string(),
                ),
                ("proto-max-bulk-len", cfg.limits.max_bulk_bytes.to_string()),
                ("save", String::new()),
                ("strata-sync", cfg.sync.to_string()),
                (
                    "strata-sync-interval-ms",
                    cfg.sync_interval.as_millis().to_string(),
                ),
                (
                    "timeout",
                    cfg.idle_timeout.map_or(0, |d| d.as_secs()).to_string(),
                ),
            ];
            let patterns: Vec<Vec<u8>> = args
                .iter()
                .skip(2)
                .map(|p| p.to_ascii_lowercase())
                .collect();
            // A parameter asked for by its exact name is answered under the name as given
            // (`CONFIG GET APPENDFSYNC` answers `APPENDFSYNC`), as Redis does.
            let mut reply: Vec<(&[u8], &str)> = Vec::new();
            for (name, value) in &params {
                let asked = args
                    .iter()
                    .skip(2)
                    .zip(&patterns)
                    .find(|(_, p)| crate::glob::matches(p, name.as_bytes()));
                if let Some((given, lower)) = asked {
                    let shown = if is_glob(lower) {
                        name.as_bytes()
                    } else {
                        given
                    };
                    reply.push((shown, value));
                }
            }
            s.out.map(reply.len());
            for (name, value) in reply {
                s.out.bulk(name);
                s.out.bulk(value.as_bytes());
            }
        }
        b"SET" | b"RESETSTAT" | b"REWRITE" => s
            .out
            .error("ERR CONFIG SET is not supported: restart strata serve with new options"),
        b"GET" => sub_arity_error(s, "config", arg(args, 1)),
        _ => subcommand_error(s, "CONFIG", args, CONFIG_HELP),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sync_modes_map_to_redis_appendfsync_values() {
        assert_eq!(appendfsync(SyncMode::Always), "always");
        assert_eq!(appendfsync(SyncMode::Batch), "everysec");
        assert_eq!(appendfsync(SyncMode::None), "no");
    }

    #[test]
    fn glob_detection() {
        assert!(is_glob(b"append*"));
        assert!(is_glob(b"t?meout"));
        assert!(!is_glob(b"appendfsync"));
    }
}
