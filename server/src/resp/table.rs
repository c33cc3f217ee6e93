//! The command table: every RESP command's [`CommandSpec`], the one place that says how a
//! command runs (arity, write, heavy, batchable, allowed before AUTH) and what `COMMAND`,
//! `COMMAND INFO`, `COMMAND COUNT`, `COMMAND LIST` and `COMMAND DOCS` report about it
//! (summary, since, group, complexity, arguments, subcommands), so the two never disagree.
//!
//! Arity follows Redis: `n` = exactly `n` arguments including the name, `-n` = at least `n`.
//! Arguments ([`Arg`]) follow the tree `COMMAND DOCS` replies in Redis 7 (types `key`,
//! `string`, `integer`, `pattern`, `pure-token`, `oneof`, `block`; flags `optional`,
//! `multiple`), which redis-cli 7.2+ turns into argument hints. `since` is the Redis version
//! that introduced the command (for the Strata extensions `DATABASES` and `SQL`, the Strata
//! version); `complexity` describes Strata's implementation, not Redis's.

use bytes::Bytes;

use super::session::Session;
use super::{admin, commands, generic, introspect, keyspace, strings};

/// Handler of one command; arity is checked before it runs.
pub(crate) type Handler = fn(&mut Session, &[Bytes]);

/// The type of an argument, as `COMMAND DOCS` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ArgType {
    /// A key name.
    Key,
    /// Any string.
    String,
    /// A signed integer.
    Integer,
    /// A glob-style pattern.
    Pattern,
    /// A fixed word (`NX`); its `token` is the word.
    PureToken,
    /// Exactly one of the nested arguments.
    OneOf,
    /// The nested arguments, in order.
    Block,
}

impl ArgType {
    /// The name `COMMAND DOCS` uses.
    pub(crate) fn name(self) -> &'static str {
        match self {
            ArgType::Key => "key",
            ArgType::String => "string",
            ArgType::Integer => "integer",
            ArgType::Pattern => "pattern",
            ArgType::PureToken => "pure-token",
            ArgType::OneOf => "oneof",
            ArgType::Block => "block",
        }
    }
}

/// One argument of a command (`COMMAND DOCS` `arguments`).
#[derive(Debug)]
pub(crate) struct Arg {
    pub name: &'static str,
    pub kind: ArgType,
    /// The word that introduces it (`MATCH pattern`), or a pure token's word.
    pub token: Option<&'static str>,
    /// Redis version that added it, when later than the command.
    pub since: Option<&'static str>,
    pub optional: bool,
    pub multiple: bool,
    /// Nested arguments of a `oneof` or `block`.
    pub args: &'static [Arg],
}

const fn arg(name: &'static str, kind: ArgType) -> Arg {
    Arg {
        name,
        kind,
        token: None,
        since: None,
        optional: false,
        multiple: false,
        args: &[],
    }
}

const fn key(name: &'static str) -> Arg {
    arg(name, ArgType::Key)
}

const fn string(name: &'static str) -> Arg {
    arg(name, ArgType::String)
}

const fn integer(name: &'static str) -> Arg {
    arg(name, ArgType::Integer)
}

const fn pattern(name: &'static str) -> Arg {
    arg(name, ArgType::Pattern)
}

/// A pure token: the word itself, named in lower case.
const fn word(name: &'static str, token: &'static str) -> Arg {
    arg(name, ArgType::PureToken).token(token)
}

const fn oneof(name: &'static str, args: &'static [Arg]) -> Arg {
    Arg {
        args,
        ..arg(name, ArgType::OneOf)
    }
}

const fn block(name: &'static str, args: &'static [Arg]) -> Arg {
    Arg {
        args,
        ..arg(name, ArgType::Block)
    }
}

impl Arg {
    const fn token(mut self, token: &'static str) -> Self {
        self.token = Some(token);
        self
    }
    const fn since(mut self, version: &'static str) -> Self {
        self.since = Some(version);
        self
    }
    const fn optional(mut self) -> Self {
        self.optional = true;
        self
    }
    const fn multiple(mut self) -> Self {
        self.multiple = true;
        self
    }
}

/// A subcommand of a container command (`CONFIG GET`): documentation only; the container's
/// handler runs it.
#[derive(Debug)]
pub(crate) struct SubSpec {
    /// Lower-case `container|sub`, as Redis names subcommands.
    pub name: &'static str,
    pub arity: i32,
    pub since: &'static str,
    pub complexity: &'static str,
    pub summary: &'static str,
    pub args: &'static [Arg],
}

const fn sub(
    name: &'static str,
    arity: i32,
    since: &'static str,
    complexity: &'static str,
    summary: &'static str,
    args: &'static [Arg],
) -> SubSpec {
    SubSpec {
        name,
        arity,
        since,
        complexity,
        summary,
        args,
    }
}

/// Static description of a command.
#[derive(Debug)]
pub(crate) struct CommandSpec {
    /// Upper-case name.
    pub name: &'static str,
    /// Redis arity: `n` = exactly n arguments (name included), `-n` = at least n.
    pub arity: i32,
    pub handler: Handler,
    /// Modifies data.
    pub write: bool,
    /// May take long (whole key space, opening a database, SQL): runs on the blocking pool.
    pub heavy: bool,
    /// Allowed before AUTH.
    pub no_auth: bool,
    /// Uses the selected database: a connection opens `db0` (its first database) for the
    /// first such command, not at connect.
    pub database: bool,
    /// May join the pending blind-write batch (the handler flushes it otherwise).
    pub batchable: bool,
    /// O(1)-ish (reported as `fast` by COMMAND).
    pub fast: bool,
    /// First key, last key, step (COMMAND's key positions; 0 = no keys).
    pub keys: (i32, i32, i32),
    pub group: &'static str,
    pub summary: &'static str,
    pub since: &'static str,
    pub complexity: &'static str,
    pub args: &'static [Arg],
    pub subcommands: &'static [SubSpec],
}

const fn spec(
    name: &'static str,
    arity: i32,
    handler: Handler,
    group: &'static str,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        handler,
        write: false,
        heavy: false,
        no_auth: false,
        database: true,
        batchable: false,
        fast: false,
        keys: (0, 0, 0),
        group,
        summary: "",
        since: "1.0.0",
        complexity: "O(1)",
        args: &[],
        subcommands: &[],
    }
}

impl CommandSpec {
    const fn write(mut self) -> Self {
        self.write = true;
        self
    }
    const fn heavy(mut self) -> Self {
        self.heavy = true;
        self
    }
    const fn no_auth(mut self) -> Self {
        self.no_auth = true;
        self
    }
    const fn no_database(mut self) -> Self {
        self.database = false;
        self
    }
    const fn batchable(mut self) -> Self {
        self.batchable = true;
        self
    }
    const fn fast(mut self) -> Self {
        self.fast = true;
        self
    }
    const fn keys(mut self, first: i32, last: i32, step: i32) -> Self {
        self.keys = (first, last, step);
        self
    }
    const fn doc(mut self, summary: &'static str) -> Self {
        self.summary = summary;
        self
    }
    const fn since(mut self, version: &'static str) -> Self {
        self.since = version;
        self
    }
    const fn complexity(mut self, text: &'static str) -> Self {
        self.complexity = text;
        self
    }
    const fn args(mut self, args: &'static [Arg]) -> Self {
        self.args = args;
        self
    }
    const fn subcommands(mut self, subs: &'static [SubSpec]) -> Self {
        self.subcommands = subs;
        self
    }
}

/// A point lookup in the LSM tree: memtables, then at most one table per level (bloom
/// filters skip most).
const POINT: &str = "O(log N) where N is the number of keys (one LSM-tree lookup)";
const PER_KEY: &str = "O(K log N) where K is the number of keys given";
const WHOLE: &str = "O(N) where N is the number of keys in the database (a full scan)";
const STRATA_VERSION: &str = env!("CARGO_PKG_VERSION");

const KEY: &[Arg] = &[key("key")];
const KEYS: &[Arg] = &[key("key").multiple()];
const FLUSH_MODE: &[Arg] = &[oneof(
    "async",
    &[
        word("async", "ASYNC").since("4.0.0"),
        word("sync", "SYNC").since("6.2.0"),
    ],
)
.optional()];

/// The optional `NX | XX | GT | LT` of the `EXPIRE` family (Redis 7.0).
const EXPIRY_CONDITION: Arg = oneof(
    "condition",
    &[
        word("nx", "NX"),
        word("xx", "XX"),
        word("gt", "GT"),
        word("lt", "LT"),
    ],
)
.since("7.0.0")
.optional();

/// A command of the `EXPIRE` family (`key time [condition]`), which Strata refuses: keys
/// never expire.
const fn expiry_setter(
    name: &'static str,
    since: &'static str,
    args: &'static [Arg],
) -> CommandSpec {
    spec(name, -3, generic::expire, "generic")
        .write()
        .fast()
        .keys(1, 1, 1)
        .doc("Refused: keys never expire in Strata.")
        .since(since)
        .args(args)
}

/// Every command, sorted by name (binary search).
pub(crate) static COMMANDS: &[CommandSpec] = &[
    spec("APPEND", 3, commands::append, "string")
        .write()
        .fast()
        .keys(1, 1, 1)
        .doc("Appends a string to the value of a key. Creates the key if it doesn't exist.")
        .since("2.0.0")
        .complexity("O(log N + M) where M is the length of the new value (it is rewritten)")
        .args(&[key("key"), string("value")]),
    spec("AUTH", -2, admin::auth, "connection")
        .no_database()
        .no_auth()
        .fast()
        .doc("Authenticates the connection.")
        .args(&[
            string("username").since("6.0.0").optional(),
            string("password"),
        ]),
    spec("CLIENT", -2, admin::client, "connection")
        .no_database()
        .doc("A container for client connection commands.")
        .since("2.4.0")
        .complexity("Depends on subcommand.")
        .subcommands(&[
            sub(
                "client|getname",
                2,
                "2.6.9",
                "O(1)",
                "Returns the name of the connection.",
                &[],
            ),
            sub(
                "client|id",
                2,
                "5.0.0",
                "O(1)",
                "Returns the unique client ID of the connection.",
                &[],
            ),
            sub(
                "client|info",
                2,
                "6.2.0",
                "O(1)",
                "Returns information about the connection.",
                &[],
            ),
            sub(
                "client|kill",
                -3,
                "2.4.0",
                "O(N) where N is the number of client connections",
                "Terminates open connections.",
                &[oneof(
                    "filter",
                    &[
                        string("old-format"),
                        block(
                            "new-format",
                            &[
                                integer("client-id").token("ID").optional(),
                                oneof(
                                    "client-type",
                                    &[
                                        word("normal", "NORMAL"),
                                        word("master", "MASTER"),
                                        word("slave", "SLAVE"),
                                        word("replica", "REPLICA"),
                                        word("pubsub", "PUBSUB"),
                                    ],
                                )
                                .token("TYPE")
                                .optional(),
                                string("username").token("USER").optional(),
                                string("addr").token("ADDR").optional(),
                                string("laddr").token("LADDR").optional(),
                                oneof("skipme", &[word("yes", "YES"), word("no", "NO")])
                                    .token("SKIPME")
                                    .optional(),
                                integer("maxage").token("MAXAGE").optional(),
                            ],
                        )
                        .multiple(),
                    ],
                )],
            ),
            sub(
                "client|list",
                -2,
                "2.4.0",
                "O(N) where N is the number of client connections",
                "Lists open connections.",
                &[],
            ),
            sub(
                "client|setinfo",
                4,
                "7.2.0",
                "O(1)",
                "Accepts client library name and version (ignored).",
                &[oneof(
                    "attr",
                    &[
                        string("libname").token("LIB-NAME"),
                        string("libver").token("LIB-VER"),
                    ],
                )],
            ),
            sub(
                "client|setname",
                3,
                "2.6.9",
                "O(1)",
                "Sets the connection name.",
                &[string("connection-name")],
            ),
        ]),
    spec("COMMAND", -1, introspect::command, "server")
        .no_database()
        .doc("Returns detailed information about all commands.")
        .since("2.8.13")
        .complexity("O(N) where N is the number of commands")
        .subcommands(&[
            sub(
                "command|count",
                2,
                "2.8.13",
                "O(1)",
                "Returns the number of commands.",
                &[],
            ),
            sub(
                "command|docs",
                -2,
                "7.0.0",
                "O(N) where N is the number of commands to look up",
                "Returns documentary information about one, multiple or all commands.",
                &[string("command-name").optional().multiple()],
            ),
            sub(
                "command|info",
                -2,
                "2.8.13",
                "O(N) where N is the number of commands to look up",
                "Returns information about one, multiple or all commands.",
                &[string("command-name").optional().multiple()],
            ),
            sub(
                "command|list",
                -2,
                "7.0.0",
                "O(N) where N is the number of commands",
                "Returns a list of command names.",
                &[],
            ),
        ]),
    spec("CONFIG", -2, introspect::config, "server")
        .no_database()
        .doc("A container for server configuration commands.")
        .since("2.0.0")
        .complexity("Depends on subcommand.")
        .subcommands(&[sub(
            "config|get",
            -3,
            "2.0.0",
            "O(N) where N is the number of parameters",
            "Returns the effective values of configuration parameters (glob patterns).",
            &[block("parameter", &[pattern("parameter")]).multiple()],
        )]),
    spec("COPY", -3, generic::copy, "generic")
        .write()
        .heavy()
        .keys(1, 2, 1)
        .doc("Copies the value of a key to a new key (in this or another database).")
        .since("6.2.0")
        .complexity(POINT)
        .args(&[
            key("source"),
            key("destination"),
            integer("destination-db").token("DB").optional(),
            word("replace", "REPLACE").optional(),
        ]),
    spec("DATABASES", -1, keyspace::databases, "server")
        .no_database()
        .heavy()
        .doc(
            "Strata extension: lists every database under the data directory, or creates \
             one (DATABASES CREATE name).",
        )
        .since(STRATA_VERSION)
        .complexity("O(D) where D is the number of databases")
        .args(&[oneof(
            "action",
            &[word("list", "LIST"), string("name").token("CREATE")],
        )
        .optional()]),
    spec("DBSIZE", 1, keyspace::dbsize, "server")
        .heavy()
        .doc("Returns the number of keys in the database (exact, counted by a scan).")
        .complexity(WHOLE),
    spec("DECR", 2, commands::decr, "string")
        .write()
        .fast()
        .keys(1, 1, 1)
        .doc("Decrements the integer value of a key by one.")
        .complexity(POINT)
        .args(KEY),
    spec("DECRBY", 3, commands::decrby, "string")
        .write()
        .fast()
        .keys(1, 1, 1)
        .doc("Decrements a number from the integer value of a key.")
        .complexity(POINT)
        .args(&[key("key"), integer("decrement")]),
    spec("DEL", -2, commands::del, "generic")
        .write()
        .keys(1, -1, 1)
        .doc("Deletes one or more keys.")
        .complexity(PER_KEY)
        .args(KEYS),
    spec("ECHO", 2, admin::echo, "connection")
        .no_database()
        .fast()
        .doc("Returns the given string.")
        .args(&[string("message")]),
    spec("EXISTS", -2, commands::exists, "generic")
        .fast()
        .keys(1, -1, 1)
        .doc("Determines whether one or more keys exist.")
        .complexity(PER_KEY)
        .args(KEYS),
    expiry_setter("EXPIRE", "1.0.0", &[key("key"), integer("seconds"), EXPIRY_CONDITION]),
    expiry_setter("EXPIREAT", "1.2.0", &[key("key"), integer("unix-time-seconds"), EXPIRY_CONDITION]),
    spec("EXPIRETIME", 2, generic::expiretime, "generic")
        .fast()
        .keys(1, 1, 1)
        .doc("Returns -1 for an existing key (no expiry), -2 for a missing one.")
        .since("7.0.0")
        .complexity(POINT)
        .args(KEY),
    spec("FLUSHALL", -1, keyspace::flushall, "server")
        .no_database()
        .write()
        .heavy()
        .doc("Removes all keys from all databases (SQL tables are kept).")
        .complexity("O(N) where N is the number of keys in all open databases")
        .args(FLUSH_MODE),
    spec("FLUSHDB", -1, keyspace::flushdb, "server")
        .write()
        .heavy()
        .doc("Remove all keys from the current database (SQL tables are kept).")
        .complexity(WHOLE)
        .args(FLUSH_MODE),
    spec("FUNCTION", -2, admin::function, "scripting")
        .no_database()
        .doc("FUNCTION FLUSH only (there are no functions).")
        .since("7.0.0")
        .complexity("Depends on subcommand.")
        .subcommands(&[sub(
            "function|flush",
            -2,
            "7.0.0",
            "O(1)",
            "Deletes all functions (there are none).",
            FLUSH_MODE,
        )]),
    spec("GET", 2, commands::get, "string")
        .fast()
        .keys(1, 1, 1)
        .doc("Returns the string value of a key.")
        .complexity(POINT)
        .args(KEY),
    spec("GETBIT", 3, strings::getbit, "bitmap")
        .fast()
        .keys(1, 1, 1)
        .doc("Returns a bit value by offset.")
        .since("2.2.0")
        .complexity(POINT)
        .args(&[key("key"), integer("offset")]),
    spec("GETDEL", 2, commands::getdel, "string")
        .write()
        .fast()
        .keys(1, 1, 1)
        .doc("Returns the string value of a key after deleting the key.")
        .since("6.2.0")
        .complexity(POINT)
        .args(KEY),
    spec("GETEX", -2, strings::getex, "string")
        .write()
        .fast()
        .keys(1, 1, 1)
        .doc("Returns the string value of a key (PERSIST accepted; expiry options refused).")
        .since("6.2.0")
        .complexity(POINT)
        .args(&[
            key("key"),
            oneof(
                "expiration",
                &[
                    integer("seconds").token("EX"),
                    integer("milliseconds").token("PX"),
                    integer("unix-time-seconds").token("EXAT"),
                    integer("unix-time-milliseconds").token("PXAT"),
                    word("persist", "PERSIST"),
                ],
            )
            .optional(),
        ]),
    spec("GETRANGE", 4, strings::getrange, "string")
        .keys(1, 1, 1)
        .doc("Returns a substring of the string stored at a key.")
        .since("2.4.0")
        .complexity("O(log N + M) where M is the length of the value (it is read whole)")
        .args(&[key("key"), integer("start"), integer("end")]),
    spec("GETSET", 3, strings::getset, "string")
        .write()
        .fast()
        .keys(1, 1, 1)
        .doc("Returns the previous string value of a key after setting it to a new value.")
        .complexity(POINT)
        .args(&[key("key"), string("value")]),
    spec("HELLO", -1, admin::hello, "connection")
        .no_database()
        .no_auth()
        .fast()
        .doc("Handshakes with the server.")
        .since("6.0.0")
        .args(&[block(
            "arguments",
            &[
                integer("protover"),
                block(
                    "username_password",
                    &[string("username"), string("password")],
                )
                .token("AUTH")
                .optional(),
                string("clientname").token("SETNAME").optional(),
            ],
        )
        .optional()]),
    spec("INCR", 2, commands::incr, "string")
        .write()
        .fast()
        .keys(1, 1, 1)
        .doc("Increments the integer value of a key by one.")
        .complexity(POINT)
        .args(KEY),
    spec("INCRBY", 3, commands::incrby, "string")
        .write()
        .fast()
        .keys(1, 1, 1)
        .doc("Increments the integer value of a key by a number.")
        .complexity(POINT)
        .args(&[key("key"), integer("increment")]),
    spec("INCRBYFLOAT", 3, strings::incrbyfloat, "string")
        .write()
        .fast()
        .keys(1, 1, 1)
        .doc("Increments the floating point value of a key by a number (exact for decimals).")
        .since("2.6.0")
        .complexity(POINT)
        .args(&[key("key"), string("increment")]),
    spec("INFO", -1, admin::info, "server")
        .no_database()
        .heavy()
        .doc("Returns information and statistics about the server and the engine.")
        .complexity("O(1); the keyspace section counts keys: O(N) in all open databases")
        .args(&[string("section").optional().multiple()]),
    spec("KEYS", 2, keyspace::keys, "generic")
        .heavy()
        .doc("Returns all key names that match a pattern.")
        .complexity(WHOLE)
        .args(&[pattern("pattern")]),
    spec("LCS", -3, strings::lcs, "string")
        .heavy()
        .keys(1, 2, 1)
        .doc("Finds the longest common substring of two values.")
        .since("7.0.0")
        .complexity("O(N*M) where N and M are the lengths of the two values")
        .args(&[
            key("key1"),
            key("key2"),
            word("len", "LEN").optional(),
            word("idx", "IDX").optional(),
            integer("min-match-len").token("MINMATCHLEN").optional(),
            word("withmatchlen", "WITHMATCHLEN").optional(),
        ]),
    spec("MGET", -2, commands::mget, "string")
        .fast()
        .keys(1, -1, 1)
        .doc("Atomically returns the string values of one or more keys.")
        .complexity(PER_KEY)
        .args(KEYS),
    spec("MOVE", 3, generic::move_key, "generic")
        .write()
        .heavy()
        .keys(1, 1, 1)
        .doc("Moves a key to another database.")
        .complexity(POINT)
        .args(&[key("key"), integer("db")]),
    spec("MSET", -3, commands::mset, "string")
        .write()
        .batchable()
        .keys(1, -1, 2)
        .doc("Atomically creates or modifies the string values of one or more keys.")
        .since("1.0.1")
        .complexity("O(K) where K is the number of keys to set (one batch)")
        .args(&[block("key_value", &[key("key"), string("value")]).multiple()]),
    spec("MSETNX", -3, strings::msetnx, "string")
        .write()
        .keys(1, -1, 2)
        .doc("Sets the values of one or more keys only when none of the keys exists.")
        .since("1.0.1")
        .complexity(PER_KEY)
        .args(&[block("key_value", &[key("key"), string("value")]).multiple()]),
    spec("PERSIST", 2, generic::persist, "generic")
        .write()
        .fast()
        .keys(1, 1, 1)
        .doc("Returns 0: no key has an expiry to remove.")
        .since("2.2.0")
        .args(KEY),
    expiry_setter("PEXPIRE", "2.6.0", &[key("key"), integer("milliseconds"), EXPIRY_CONDITION]),
    expiry_setter("PEXPIREAT", "2.6.0", &[key("key"), integer("unix-time-milliseconds"), EXPIRY_CONDITION]),
    spec("PEXPIRETIME", 2, generic::expiretime, "generic")
        .fast()
        .keys(1, 1, 1)
        .doc("Returns -1 for an existing key (no expiry), -2 for a missing one.")
        .since("7.0.0")
        .complexity(POINT)
        .args(KEY),
    spec("PING", -1, admin::ping, "connection")
        .no_database()
        .fast()
        .doc("Returns the server's liveliness response.")
        .args(&[string("message").optional()]),
    spec("PSETEX", 4, strings::setex, "string")
        .write()
        .keys(1, 1, 1)
        .doc("Refused: keys never expire in Strata.")
        .since("2.6.0")
        .args(&[key("key"), integer("milliseconds"), string("value")]),
    spec("PTTL", 2, commands::pttl, "generic")
        .fast()
        .keys(1, 1, 1)
        .doc("Returns -1 for an existing key (no expiry), -2 for a missing one.")
        .since("2.6.0")
        .complexity(POINT)
        .args(KEY),
    spec("QUIT", -1, admin::quit, "connection")
        .no_database()
        .no_auth()
        .fast()
        .doc("Closes the connection."),
    spec("RANDOMKEY", 1, generic::randomkey, "generic")
        .doc("Returns a random key name from the database (not uniformly random).")
        .complexity("O(log N)"),
    spec("RENAME", 3, generic::rename, "generic")
        .write()
        .keys(1, 2, 1)
        .doc("Renames a key and overwrites the destination.")
        .complexity(POINT)
        .args(&[key("key"), key("newkey")]),
    spec("RENAMENX", 3, generic::renamenx, "generic")
        .write()
        .fast()
        .keys(1, 2, 1)
        .doc("Renames a key only when the target key name doesn't exist.")
        .complexity(POINT)
        .args(&[key("key"), key("newkey")]),
    spec("SCAN", -2, keyspace::scan, "generic")
        .heavy()
        .doc("Iterates over the key names in the database.")
        .since("2.8.0")
        .complexity("O(COUNT) per call; O(N) for a complete iteration")
        .args(&[
            integer("cursor"),
            pattern("pattern").token("MATCH").optional(),
            integer("count").token("COUNT").optional(),
            string("type").token("TYPE").since("6.0.0").optional(),
        ]),
    spec("SELECT", 2, admin::select, "connection")
        .no_database()
        .heavy()
        .doc(
            "Changes the selected database (0-15 = db0-db15, or the name of an existing \
             database).",
        )
        .args(&[integer("index")]),
    spec("SET", -3, commands::set, "string")
        .write()
        .batchable()
        .keys(1, 1, 1)
        .doc("Sets the string value of a key (NX, XX, GET; no expiry).")
        .complexity(POINT)
        .args(&[
            key("key"),
            string("value"),
            oneof("condition", &[word("nx", "NX"), word("xx", "XX")])
                .since("2.6.12")
                .optional(),
            word("get", "GET").since("6.2.0").optional(),
            word("keepttl", "KEEPTTL").since("6.0.0").optional(),
        ]),
    spec("SETBIT", 4, strings::setbit, "bitmap")
        .write()
        .keys(1, 1, 1)
        .doc("Sets or clears the bit at offset of the string value. Creates the key if it doesn't exist.")
        .since("2.2.0")
        .complexity("O(log N + M) where M is the length of the value (it is rewritten)")
        .args(&[key("key"), integer("offset"), integer("value")]),
    spec("SETEX", 4, strings::setex, "string")
        .write()
        .keys(1, 1, 1)
        .doc("Refused: keys never expire in Strata.")
        .since("2.0.0")
        .args(&[key("key"), integer("seconds"), string("value")]),
    spec("SETNX", 3, strings::setnx, "string")
        .write()
        .fast()
        .keys(1, 1, 1)
        .doc("Set the string value of a key only when the key doesn't exist.")
        .complexity(POINT)
        .args(&[key("key"), string("value")]),
    spec("SETRANGE", 4, strings::setrange, "string")
        .write()
        .keys(1, 1, 1)
        .doc("Overwrites a part of a string value with another by an offset. Creates the key if it doesn't exist.")
        .since("2.2.0")
        .complexity("O(log N + M) where M is the length of the value (it is rewritten)")
        .args(&[key("key"), integer("offset"), string("value")]),
    spec("SHUTDOWN", -1, admin::shutdown, "server")
        .no_database()
        .doc("Stops the server as SIGTERM does: no new connections, in-flight commands finished, WALs synced, databases closed.")
        .args(&[
            oneof(
                "save-selector",
                &[word("nosave", "NOSAVE"), word("save", "SAVE")],
            )
            .optional(),
            word("now", "NOW").optional().since("7.0.0"),
            word("force", "FORCE").optional().since("7.0.0"),
            word("abort", "ABORT").optional().since("7.0.0"),
        ]),
    spec("SQL", 2, admin::sql, "strata")
        .write()
        .heavy()
        .doc("Strata extension: runs SQL on the current database.")
        .since(STRATA_VERSION)
        .complexity("Depends on the statement.")
        .args(&[string("statements")]),
    spec("STRLEN", 2, commands::strlen, "string")
        .fast()
        .keys(1, 1, 1)
        .doc("Returns the length of a string value.")
        .since("2.2.0")
        .complexity(POINT)
        .args(KEY),
    spec("SUBSTR", 4, strings::getrange, "string")
        .keys(1, 1, 1)
        .doc("Returns a substring of the string stored at a key (the old name of GETRANGE).")
        .since("1.0.0")
        .complexity("O(log N + M) where M is the length of the value (it is read whole)")
        .args(&[key("key"), integer("start"), integer("end")]),
    spec("TOUCH", -2, generic::touch, "generic")
        .fast()
        .keys(1, -1, 1)
        .doc("Returns the number of specified keys that exist (there is no access time to update).")
        .since("3.2.1")
        .complexity(PER_KEY)
        .args(KEYS),
    spec("TTL", 2, commands::ttl, "generic")
        .fast()
        .keys(1, 1, 1)
        .doc("Returns -1 for an existing key (no expiry), -2 for a missing one.")
        .complexity(POINT)
        .args(KEY),
    spec("TYPE", 2, commands::key_type, "generic")
        .fast()
        .keys(1, 1, 1)
        .doc("Determines the type of value stored at a key.")
        .complexity(POINT)
        .args(KEY),
    spec("UNLINK", -2, commands::del, "generic")
        .write()
        .keys(1, -1, 1)
        .doc("Deletes one or more keys (as DEL: deletes are not reclaimed in the foreground).")
        .since("4.0.0")
        .complexity(PER_KEY)
        .args(KEYS),
];

/// The spec of command `name` (case-insensitive).
///
/// Runs for every command, twice for a pipelined one (`Session::batch_may_block`, then
/// `execute`), so it compares names as integers: a name of up to 16 bytes, upper-cased and
/// zero-padded, packed big-endian into a `u128`, sorts as the name does (no command name
/// holds a zero byte). A binary search of byte strings made 5% of the server's CPU under
/// pipelined GETs.
pub(crate) fn lookup(name: &[u8]) -> Option<&'static CommandSpec> {
    static PACKED: std::sync::LazyLock<Vec<u128>> =
        std::sync::LazyLock::new(|| COMMANDS.iter().map(|c| pack(c.name.as_bytes())).collect());
    // The padding is zeros: a name with a zero byte (`GET\0`) must not pass for a shorter one.
    if name.len() > 16 || name.contains(&0) {
        return None;
    }
    let key = pack(name);
    PACKED
        .binary_search(&key)
        .ok()
        .and_then(|i| COMMANDS.get(i))
}

/// `name` (at most 16 bytes) upper-cased and zero-padded as a big-endian `u128`.
fn pack(name: &[u8]) -> u128 {
    let mut bytes = [0u8; 16];
    if let Some(dst) = bytes.get_mut(..name.len()) {
        dst.copy_from_slice(name);
    }
    bytes.make_ascii_uppercase();
    #[expect(
        clippy::big_endian_bytes,
        reason = "big-endian integers compare in the bytes' order"
    )]
    let packed = u128::from_be_bytes(bytes);
    packed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_table_is_sorted_and_upper_case() {
        for pair in COMMANDS.windows(2) {
            if let [a, b] = pair {
                assert!(a.name < b.name, "{} before {}", a.name, b.name);
            }
        }
        for c in COMMANDS {
            assert_eq!(c.name, c.name.to_ascii_uppercase());
            // `lookup` packs names into integers, zero-padded.
            assert!(c.name.len() <= 16 && !c.name.contains('\0'));
            assert!(!c.summary.is_empty(), "{} has no summary", c.name);
        }
    }

    #[test]
    fn lookup_is_case_insensitive() {
        assert_eq!(lookup(b"get").map(|c| c.name), Some("GET"));
        assert_eq!(lookup(b"gEtDeL").map(|c| c.name), Some("GETDEL"));
        assert!(lookup(b"nosuchcommand").is_none());
        assert!(lookup(b"averyveryverylongname").is_none());
        assert!(lookup(b"").is_none());
        assert!(lookup(b"GET\0").is_none());
        assert!(lookup(b"\0").is_none());
        for c in COMMANDS {
            assert_eq!(lookup(c.name.as_bytes()).map(|f| f.name), Some(c.name));
            let lower = c.name.to_ascii_lowercase();
            assert_eq!(lookup(lower.as_bytes()).map(|f| f.name), Some(c.name));
            let longer = format!("{}X", c.name);
            assert_ne!(lookup(longer.as_bytes()).map(|f| f.name), Some(c.name));
        }
    }

    fn args_are_well_formed(command: &str, args: &[Arg]) {
        for a in args {
            assert!(!a.name.is_empty(), "{command}: unnamed argument");
            let nested = matches!(a.kind, ArgType::OneOf | ArgType::Block);
            assert_eq!(
                nested,
                !a.args.is_empty(),
                "{command} {}: only oneof and block arguments nest",
                a.name
            );
            if a.kind == ArgType::PureToken {
                assert!(
                    a.token.is_some(),
                    "{command} {}: pure token without a word",
                    a.name
                );
            }
            args_are_well_formed(command, a.args);
        }
    }

    #[test]
    fn every_command_is_documented_consistently() {
        for c in COMMANDS {
            assert!(
                !c.since.is_empty() && !c.complexity.is_empty(),
                "{}",
                c.name
            );
            args_are_well_formed(c.name, c.args);
            // A command taking keys documents a key argument, and the other way round.
            let documents_key = c
                .args
                .iter()
                .any(|a| a.kind == ArgType::Key || a.args.iter().any(|n| n.kind == ArgType::Key));
            assert_eq!(
                documents_key,
                c.keys.0 > 0,
                "{}: key positions vs arguments",
                c.name
            );
            // Exact arity means every argument is there once: count them.
            if c.arity > 0 && c.subcommands.is_empty() {
                let required = c.args.iter().filter(|a| !a.optional && !a.multiple).count();
                assert_eq!(
                    i32::try_from(required + 1).ok(),
                    Some(c.arity),
                    "{}: arity vs documented arguments",
                    c.name
                );
            }
            for s in c.subcommands {
                let (container, _) = s.name.split_once('|').expect("container|sub");
                assert_eq!(container, c.name.to_ascii_lowercase());
                args_are_well_formed(s.name, s.args);
            }
        }
    }
}
