//! The RESP connections of the server, for `CLIENT LIST` and `CLIENT KILL`.
//!
//! Each connection registers a [`ClientEntry`] when it starts and removes it when it ends
//! ([`Registration`]'s drop). The connection publishes what `CLIENT LIST` shows (name,
//! database, last command, protocol version, last activity) after each batch of commands,
//! under the entry's own mutex, so listing never waits for a running command. `CLIENT KILL`
//! marks entries and wakes their connections: a connection checks its mark before each
//! command, so it runs none of the rest of its pipeline, writes the replies it has, and
//! closes (as Redis closes a killed client after its current command and drops the commands
//! still in its input buffer; a client that kills itself gets the reply to `CLIENT KILL`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::databases::Database;

/// What `CLIENT LIST` shows of a connection that changes while it runs.
#[derive(Debug, Clone)]
pub(crate) struct ClientState {
    /// `CLIENT SETNAME`'s name.
    pub name: Option<Bytes>,
    /// The selected database.
    pub db: Option<Arc<Database>>,
    /// The last command run, lower case.
    pub last_command: &'static str,
    /// 2 or 3 (`HELLO 3`).
    pub resp: u8,
    /// When the last batch of commands finished.
    pub last_active: Instant,
}

/// One connection in the registry.
#[derive(Debug)]
pub(crate) struct ClientEntry {
    /// `CLIENT ID`.
    pub id: u64,
    /// The client's address.
    pub peer: SocketAddr,
    /// When the connection was accepted.
    pub created: Instant,
    state: Mutex<ClientState>,
    killed: AtomicBool,
    kill: Notify,
}

impl ClientEntry {
    /// A copy of the published state.
    pub fn state(&self) -> ClientState {
        self.state.lock().clone()
    }

    /// Replaces the published state.
    pub fn publish(&self, state: ClientState) {
        *self.state.lock() = state;
    }

    /// True once `CLIENT KILL` chose this connection.
    pub fn is_killed(&self) -> bool {
        self.killed.load(Ordering::Relaxed)
    }

    /// Completes once the connection has been killed (at once if it was killed before the
    /// call: the wake-up is kept until someone waits).
    pub async fn killed(&self) {
        self.kill.notified().await;
    }
}

/// Every RESP connection of the server, by id.
#[derive(Debug, Default)]
pub(crate) struct ClientRegistry {
    clients: Mutex<BTreeMap<u64, Arc<ClientEntry>>>,
}

impl ClientRegistry {
    /// Registers a connection; it stays listed until the returned registration is dropped.
    pub fn register(
        self: &Arc<Self>,
        id: u64,
        peer: SocketAddr,
        state: ClientState,
    ) -> Registration {
        let entry = Arc::new(ClientEntry {
            id,
            peer,
            created: Instant::now(),
            state: Mutex::new(state),
            killed: AtomicBool::new(false),
            kill: Notify::new(),
        });
        self.clients.lock().insert(id, Arc::clone(&entry));
        Registration {
            registry: Arc::clone(self),
            entry,
        }
    }

    /// Every registered connection, by increasing id (the order of `CLIENT LIST`).
    pub fn all(&self) -> Vec<Arc<ClientEntry>> {
        self.clients.lock().values().cloned().collect()
    }

    /// Wakes the connections that `kill` selects so they close; returns how many.
    pub fn kill(&self, mut kill: impl FnMut(&ClientEntry) -> bool) -> usize {
        let chosen: Vec<Arc<ClientEntry>> = self
            .clients
            .lock()
            .values()
            .filter(|e| kill(e))
            .cloned()
            .collect();
        for entry in &chosen {
            entry.killed.store(true, Ordering::Relaxed);
            entry.kill.notify_one();
        }
        chosen.len()
    }
}

/// A connection's place in the registry; dropping it removes the connection.
#[derive(Debug)]
pub(crate) struct Registration {
    registry: Arc<ClientRegistry>,
    /// The connection's entry.
    pub entry: Arc<ClientEntry>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.registry.clients.lock().remove(&self.entry.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::databases::Databases;

    fn state(db: &Arc<Database>) -> ClientState {
        ClientState {
            name: None,
            db: Some(Arc::clone(db)),
            last_command: "NULL",
            resp: 2,
            last_active: Instant::now(),
        }
    }

    #[tokio::test]
    async fn registered_until_dropped_and_killed_ones_wake() {
        let dir = tempfile::tempdir().expect("tempdir");
        let dbs = Databases::new(&Config::ephemeral(dir.path())).expect("registry");
        let db = dbs.get_or_open("db0").expect("open");
        let registry = Arc::new(ClientRegistry::default());
        let peer: SocketAddr = "127.0.0.1:5000".parse().expect("address");
        let a = registry.register(1, peer, state(&db));
        let b = registry.register(2, peer, state(&db));
        let ids = |r: &ClientRegistry| r.all().iter().map(|e| e.id).collect::<Vec<_>>();
        assert_eq!(ids(&registry), [1, 2]);
        assert_eq!(registry.kill(|e| e.id == 2), 1);
        assert!(b.entry.is_killed() && !a.entry.is_killed());
        // The wake-up was kept for the connection's next wait.
        tokio::time::timeout(std::time::Duration::from_secs(5), b.entry.killed())
            .await
            .expect("woken");
        drop(b);
        assert_eq!(ids(&registry), [1]);
        let mut published = state(&db);
        published.name = Some(Bytes::from_static(b"worker"));
        a.entry.publish(published);
        assert_eq!(a.entry.state().name.as_deref(), Some(&b"worker"[..]));
        assert_eq!(registry.kill(|_| false), 0);
    }
}
