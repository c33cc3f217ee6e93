//! The server's error type and the one place where errors become wire error codes: RESP
//! error prefixes here ([`resp_engine_error`]), PostgreSQL SQLSTATEs in `pg::errors`.
//! Clients never see `Debug` text.

use std::net::SocketAddr;
use std::path::PathBuf;

/// What can stop the server from starting, or a database from opening.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// The data directory could not be created.
    #[error("cannot create data directory {}: {source}", path.display())]
    Dir {
        /// The directory.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The data directory is itself a database (it holds a `CURRENT` file, as the SQL
    /// shell's `./strata-data` does): the server keeps one database per subdirectory, and
    /// would put them inside that database's directory.
    #[error(
        "{} is a database directory (it has a CURRENT file), not a directory of databases: \
         `strata serve --dir DIR` keeps each database in DIR/NAME. Use another directory; to \
         serve this database, move it into one: `mkdir srv && mv {} srv/mydb && strata serve \
         --dir srv` (then `psql -d mydb`)",
        path.display(),
        path.display()
    )]
    DirIsDatabase {
        /// The directory.
        path: PathBuf,
    },
    /// Another server serves the directory (it holds [`crate::databases::SERVER_LOCK`]).
    #[error(
        "another `strata serve` is serving {} (it holds {}); stop it first, or give this one \
         another --dir",
        path.display(),
        crate::databases::SERVER_LOCK
    )]
    DirInUse {
        /// The directory.
        path: PathBuf,
    },
    /// A listener could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// An invalid database name.
    #[error("{0}")]
    BadName(String),
    /// The engine failed to open or close database `name`.
    #[error("database {name}: {source}")]
    Engine {
        /// The database.
        name: String,
        /// The engine's error.
        #[source]
        source: strata_engine::Error,
    },
    /// Opening another database would pass `--max-databases`.
    #[error("too many open databases: {max} are open (--max-databases); {name} was not opened")]
    TooManyDatabases {
        /// The database asked for.
        name: String,
        /// The limit.
        max: usize,
    },
    /// The server is shutting down and opens no more databases.
    #[error("the server is shutting down")]
    ShuttingDown,
    /// The async runtime could not be started.
    #[error("cannot start the runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

/// Logs `e` at error level when it means damaged data. The engine logs corruption at debug
/// level only and leaves reporting it to whoever surfaces the error: here, the reply to the
/// client and this line in the server's log.
pub(crate) fn log_corruption(e: &strata_engine::Error) {
    if e.is_corruption() {
        tracing::error!(error = %e, "storage corruption met serving a command");
    }
}

/// The RESP error line (without `-`) for an engine error.
pub fn resp_engine_error(e: &strata_engine::Error) -> String {
    log_corruption(e);
    match e {
        strata_engine::Error::InvalidArgument(_) => format!("ERR {e}"),
        strata_engine::Error::Closed => "ERR the database is closed (server shutting down)".into(),
        _ => format!("ERR storage error: {e}"),
    }
}

/// The RESP error line for a [`ServerError`] met while serving a command.
pub fn resp_server_error(e: &ServerError) -> String {
    if let ServerError::Engine { source, .. } = e {
        log_corruption(source);
    }
    match e {
        ServerError::BadName(msg) => format!("ERR {msg}"),
        ServerError::Engine {
            source: strata_engine::Error::Locked { .. },
            name,
        } => format!("ERR database {name} is locked by another process"),
        ServerError::ShuttingDown => "ERR the server is shutting down".into(),
        other => format!("ERR {other}"),
    }
}
