//! Reading the pool `strata rebalance` needs from a nutcracker (twemproxy) configuration
//! file: its servers, `hash`, `distribution`, `hash_tag`, `auto_eject_hosts`, `redis_db` and
//! `redis_auth`.
//!
//! The file is YAML, but nutcracker configurations use a small, fixed shape, and that is all
//! this reads (anything else is an error naming the line, never a guess):
//!
//! ```text
//! pool:                         # a pool name at column 0, ending with ':'
//!   key: value                  # indented pool settings; values may be quoted
//!   servers:                    # then indented list items, one server each:
//!     - host:port:weight [name] #   `127.0.0.1:7001:1 strata1`
//! ```
//!
//! Comments (`#` at the start of a line or after a space) and blank lines are ignored.

use std::path::Path;

use anyhow::Context;

use super::client::Login;
use super::ketama::{Continuum, Node};

/// nutcracker leaves the port out of an unnamed server's ketama name on this port.
const KETAMA_DEFAULT_PORT: u16 = 11211;

/// One `servers:` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Server {
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) weight: u32,
    /// The name on the continuum: the entry's name, else `host:port` (`host` on port 11211).
    pub(crate) name: String,
}

impl Server {
    /// `host:port`, to connect to.
    pub(crate) fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// One pool of a configuration file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pool {
    pub(crate) name: String,
    /// `hash:` (nutcracker's default is `fnv1a_64`).
    pub(crate) hash: String,
    /// `distribution:` (nutcracker's default is `ketama`).
    pub(crate) distribution: String,
    pub(crate) hash_tag: Option<[u8; 2]>,
    pub(crate) auto_eject_hosts: bool,
    /// `redis_db` and `redis_auth`: what nutcracker sends its servers on connect.
    pub(crate) login: Login,
    pub(crate) servers: Vec<Server>,
}

impl Pool {
    /// The continuum nutcracker builds for this pool.
    ///
    /// # Errors
    /// A hash or distribution other than `fnv1a_64` and `ketama` (the only ones modelled).
    pub(crate) fn continuum(&self) -> anyhow::Result<Continuum> {
        anyhow::ensure!(
            self.hash == "fnv1a_64",
            "pool {}: hash {} is not supported (use fnv1a_64)",
            self.name,
            self.hash
        );
        anyhow::ensure!(
            self.distribution == "ketama",
            "pool {}: distribution {} is not supported (use ketama)",
            self.name,
            self.distribution
        );
        let nodes: Vec<Node> = self
            .servers
            .iter()
            .map(|s| Node {
                name: s.name.clone(),
                weight: s.weight,
            })
            .collect();
        Continuum::new(&nodes, self.hash_tag)
    }
}

/// Reads `path` and returns the pool named `name`, or the only pool when `name` is `None`.
///
/// # Errors
/// I/O errors, lines outside the supported shape, a missing pool, or several pools and no
/// name.
pub(crate) fn read_pool(path: &Path, name: Option<&str>) -> anyhow::Result<Pool> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let pools = parse(&text).with_context(|| format!("in {}", path.display()))?;
    match name {
        Some(n) => pools
            .into_iter()
            .find(|p| p.name == n)
            .with_context(|| format!("no pool named {n} in {}", path.display())),
        None => {
            let mut pools = pools.into_iter();
            match (pools.next(), pools.next()) {
                (Some(p), None) => Ok(p),
                (None, _) => anyhow::bail!("no pool in {}", path.display()),
                (Some(_), Some(_)) => anyhow::bail!(
                    "{} has several pools: choose one with --pool",
                    path.display()
                ),
            }
        }
    }
}

/// Parses every pool of a configuration.
pub(crate) fn parse(text: &str) -> anyhow::Result<Vec<Pool>> {
    let mut pools: Vec<Pool> = Vec::new();
    let mut in_servers = false;
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        let line = strip_comment(raw).trim_end();
        if line.trim().is_empty() {
            continue;
        }
        let indented = line.starts_with([' ', '\t']);
        let line = line.trim_start();
        if !indented {
            let name = line
                .strip_suffix(':')
                .filter(|n| !n.is_empty() && !n.contains(':'))
                .with_context(|| format!("line {line_no}: expected `pool_name:`"))?;
            pools.push(Pool {
                name: name.to_string(),
                hash: "fnv1a_64".to_string(),
                distribution: "ketama".to_string(),
                hash_tag: None,
                auto_eject_hosts: false,
                login: Login::default(),
                servers: Vec::new(),
            });
            in_servers = false;
            continue;
        }
        let pool = pools
            .last_mut()
            .with_context(|| format!("line {line_no}: a setting before any pool name"))?;
        if let Some(item) = line.strip_prefix('-') {
            anyhow::ensure!(in_servers, "line {line_no}: a list item outside `servers:`");
            let server = parse_server(unquote(item.trim()))
                .with_context(|| format!("line {line_no}: bad server {:?}", item.trim()))?;
            pool.servers.push(server);
            continue;
        }
        let (key, value) = line
            .split_once(':')
            .with_context(|| format!("line {line_no}: expected `key: value`"))?;
        let value = unquote(value.trim());
        in_servers = false;
        match key.trim() {
            "servers" => {
                anyhow::ensure!(
                    value.is_empty(),
                    "line {line_no}: list the servers on the following lines, one `- ` each"
                );
                in_servers = true;
            }
            "hash" => pool.hash = value.to_string(),
            "distribution" => pool.distribution = value.to_string(),
            "auto_eject_hosts" => pool.auto_eject_hosts = value == "true",
            "redis_db" => {
                pool.login.db = value
                    .parse()
                    .with_context(|| format!("line {line_no}: redis_db must be a number"))?;
            }
            "redis_auth" => pool.login.password = Some(value.to_string()),
            "hash_tag" => {
                let tag: [u8; 2] = value.as_bytes().try_into().map_err(|_| {
                    anyhow::anyhow!("line {line_no}: hash_tag must be two characters")
                })?;
                pool.hash_tag = Some(tag);
            }
            // Settings that do not affect where keys go.
            _ => {}
        }
    }
    for p in &pools {
        anyhow::ensure!(!p.servers.is_empty(), "pool {} lists no servers", p.name);
    }
    Ok(pools)
}

/// Drops a `#` comment: at the start of the line or after whitespace (so `#` may appear
/// inside a value such as a hash tag only when quoted).
fn strip_comment(line: &str) -> &str {
    let bytes = line.as_bytes();
    let mut quote: Option<u8> = None;
    for (i, &b) in bytes.iter().enumerate() {
        match (quote, b) {
            (None, b'"' | b'\'') => quote = Some(b),
            (Some(q), _) if b == q => quote = None,
            (None, b'#') if i == 0 || bytes[i - 1].is_ascii_whitespace() => {
                return line.get(..i).unwrap_or(line);
            }
            _ => {}
        }
    }
    line
}

/// Removes one pair of matching quotes around `value`.
fn unquote(value: &str) -> &str {
    for q in ['"', '\''] {
        if let Some(inner) = value.strip_prefix(q).and_then(|v| v.strip_suffix(q)) {
            return inner;
        }
    }
    value
}

/// Parses `host:port:weight [name]`.
fn parse_server(entry: &str) -> anyhow::Result<Server> {
    let mut parts = entry.split_whitespace();
    let address = parts.next().context("empty entry")?;
    let explicit_name = parts.next();
    anyhow::ensure!(parts.next().is_none(), "expected `host:port:weight [name]`");
    anyhow::ensure!(
        !address.starts_with('/'),
        "Unix socket servers are not supported"
    );
    let (rest, weight) = address
        .rsplit_once(':')
        .context("expected `host:port:weight`")?;
    let (host, port) = rest
        .rsplit_once(':')
        .context("expected `host:port:weight`")?;
    anyhow::ensure!(!host.is_empty(), "empty host");
    let port: u16 = port.parse().context("bad port")?;
    let weight: u32 = weight.parse().context("bad weight")?;
    anyhow::ensure!(weight > 0, "weight must be at least 1");
    let name = match explicit_name {
        Some(n) => n.to_string(),
        None if port == KETAMA_DEFAULT_PORT => host.to_string(),
        None => format!("{host}:{port}"),
    };
    Ok(Server {
        host: host.to_string(),
        port,
        weight,
        name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = "\
# three Strata nodes
strata:
  listen: 127.0.0.1:22121
  hash: fnv1a_64          # the key hash
  distribution: ketama
  hash_tag: \"{}\"
  redis: true
  redis_db: 3
  redis_auth: secret
  auto_eject_hosts: false
  servers:
    - 127.0.0.1:7001:1 strata1
    - 127.0.0.1:7002:1 strata2
    - 127.0.0.1:7003:2

other:
  distribution: modula
  servers:
   - cache.local:11211:1
";

    #[test]
    fn pools_servers_and_names_are_read() {
        let pools = parse(CONFIG).expect("parse");
        assert_eq!(pools.len(), 2);
        let p = &pools[0];
        assert_eq!(p.name, "strata");
        assert_eq!(
            (p.hash.as_str(), p.distribution.as_str()),
            ("fnv1a_64", "ketama")
        );
        assert_eq!(p.hash_tag, Some(*b"{}"));
        assert!(!p.auto_eject_hosts);
        assert_eq!(p.login.db, 3);
        assert_eq!(p.login.password.as_deref(), Some("secret"));
        assert_eq!(pools[1].login, Login::default());
        let names: Vec<_> = p.servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["strata1", "strata2", "127.0.0.1:7003"]);
        assert_eq!(p.servers[2].weight, 2);
        assert_eq!(p.servers[0].addr(), "127.0.0.1:7001");
        assert!(p.continuum().is_ok());
        // Port 11211 is left out of an unnamed server's name, as nutcracker does.
        assert_eq!(pools[1].servers[0].name, "cache.local");
        assert!(pools[1].continuum().is_err(), "modula is not modelled");
    }

    #[test]
    fn defaults_are_nutcrackers() {
        let pools = parse("p:\n  servers:\n    - h:1:1\n").expect("parse");
        assert_eq!(pools[0].hash, "fnv1a_64");
        assert_eq!(pools[0].distribution, "ketama");
        assert_eq!(pools[0].hash_tag, None);
    }

    #[test]
    fn malformed_lines_are_errors_with_their_number() {
        for (text, line) in [
            ("p:\n  servers:\n    - 127.0.0.1:7001\n", "line 3"),
            ("p:\n  servers:\n    - h:x:1\n", "line 3"),
            ("p:\n  servers:\n    - h:1:0\n", "line 3"),
            ("p:\n  - h:1:1\n", "line 2"),
            ("  hash: fnv1a_64\n", "line 1"),
            ("p:\n  hash_tag: \"{\"\n  servers:\n    - h:1:1\n", "line 2"),
            ("p:\n  servers:\n    - /tmp/sock:1\n", "line 3"),
        ] {
            let err = format!("{:#}", parse(text).expect_err(text));
            assert!(err.contains(line), "{text:?}: {err}");
        }
        assert!(parse("p:\n  hash: fnv1a_64\n").is_err(), "no servers");
    }

    #[test]
    fn comments_end_at_hash_signs_outside_quotes() {
        assert_eq!(strip_comment("a: b # c"), "a: b ");
        assert_eq!(strip_comment("hash_tag: \"#x\" # c"), "hash_tag: \"#x\" ");
        assert_eq!(strip_comment("# all"), "");
        assert_eq!(strip_comment("a#b"), "a#b");
    }
}
