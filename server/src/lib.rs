//! # strata-server
//!
//! `strata serve`: many Strata databases behind two existing wire protocols, so existing
//! clients work unchanged.
//!
//! - **RESP** (the Redis protocol, RESP2 and RESP3 after `HELLO 3`) for key/value access:
//!   redis-cli, redis-py, redis-benchmark. String commands, `SCAN`, `INFO`, `SQL`.
//! - **PostgreSQL** wire protocol (simple and extended query) for the SQL layer
//!   (`strata-query`): psql, psycopg, tokio-postgres.
//!
//! Each database is one engine [`strata_engine::Db`] in `DIR/<name>/`, created on first use:
//! PostgreSQL clients choose it with the connection's database name, RESP clients with
//! `SELECT` (`SELECT 3` is `db3`). `docs/server.md` is the user guide and
//! `docs/protocol.md` the framing specification.
//!
//! It is not Redis: only string values, no expiry, no transactions (`MULTI`), no pub/sub.
//!
//! ```no_run
//! # fn main() -> Result<(), strata_server::ServerError> {
//! let config = strata_server::Config::ephemeral("/tmp/strata-data");
//! let server = strata_server::spawn(config)?; // its own thread and runtime
//! println!("RESP on {:?}", server.resp_addr());
//! server.shutdown()?; // finishes in-flight commands, syncs and closes the databases
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

#[cfg(feature = "cli")]
pub mod cli;
pub mod config;
pub mod databases;
pub mod error;
pub mod glob;
mod pg;
pub mod protocol;
mod resp;
mod server;
pub mod sql;

pub use config::{Config, SyncMode};
pub use error::ServerError;
pub use server::{RunningServer, Server, serve, spawn};
