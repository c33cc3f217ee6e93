//! Which server twemproxy (nutcracker) sends a key to, computed the way nutcracker 0.4/0.5
//! does it for `distribution: ketama` with `hash: fnv1a_64`, so `strata rebalance` can find
//! the keys a topology change moves (docs/scale-out.md).
//!
//! **Continuum.** Each server gets `floor(weight / total_weight * 40 * servers) * 4` points
//! (160 for equal weights, computed in `f32` exactly as nutcracker does). For `n` in
//! `0..points/4`, the MD5 digest of `"<name>-<n>"` gives four points: its bytes 0..4, 4..8,
//! 8..12 and 12..16, each read as a little-endian u32. The name is the server's name in the
//! configuration (`- 127.0.0.1:7001:1 strata1`), else `host:port` (just `host` for port
//! 11211). Points are sorted by value; a tie between two servers (about one pool in 10^5)
//! is broken by configuration order here, by `qsort` in nutcracker.
//!
//! **Key hash.** nutcracker's `fnv1a_64` is FNV-1a over the key bytes, truncated to 32 bits:
//! the offset basis `0xcbf29ce484222325` and the prime `0x100000001b3` are cut to their low
//! 32 bits and the arithmetic is 32-bit. Each byte is widened through C's `char`, which is
//! signed on x86: bytes 0x80..=0xFF become `0xFFFFFF80..` before the xor (on ARM, where
//! `char` is unsigned, they do not; we follow the `char` of the machine we run on, so run
//! `strata rebalance` on the same architecture as the proxy when keys hold such bytes).
//!
//! **Dispatch.** With `hash_tag: "{}"`, only the part between the first `{` and the next `}`
//! is hashed, when that part is not empty. An empty key hashes to 0. The owner is the server
//! of the first point whose value is `>= hash`, wrapping to the first point. A pool with one
//! server sends everything to it.

use md5::{Digest, Md5};

/// Points per server at equal weights (`KETAMA_POINTS_PER_SERVER`).
const POINTS_PER_SERVER: u32 = 160;

/// Points made from one MD5 digest.
const POINTS_PER_HASH: u32 = 4;

/// A server as the continuum sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Node {
    /// The name hashed onto the continuum.
    pub(crate) name: String,
    /// Relative weight, at least 1.
    pub(crate) weight: u32,
}

/// The sorted points of a pool: `(point, server index)`.
#[derive(Debug, Clone)]
pub(crate) struct Continuum {
    points: Vec<(u32, usize)>,
    servers: usize,
    hash_tag: Option<[u8; 2]>,
}

impl Continuum {
    /// Builds the continuum of `nodes` (in configuration order). `hash_tag` is the pool's
    /// two-character `hash_tag`, if any.
    ///
    /// # Errors
    /// No nodes, or a node of weight 0 (nutcracker refuses both).
    pub(crate) fn new(nodes: &[Node], hash_tag: Option<[u8; 2]>) -> anyhow::Result<Continuum> {
        anyhow::ensure!(!nodes.is_empty(), "a pool needs at least one server");
        let mut total_weight: u32 = 0;
        for n in nodes {
            anyhow::ensure!(n.weight > 0, "server {} has weight 0", n.name);
            total_weight = total_weight
                .checked_add(n.weight)
                .ok_or_else(|| anyhow::anyhow!("the weights of the pool overflow"))?;
        }
        let count = u32::try_from(nodes.len())?;
        let mut points = Vec::new();
        for (index, node) in nodes.iter().enumerate() {
            for n in 0..points_for(node.weight, total_weight, count) / POINTS_PER_HASH {
                let digest: [u8; 16] = Md5::digest(format!("{}-{n}", node.name).as_bytes()).into();
                for chunk in digest.chunks_exact(4) {
                    let value = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
                    points.push((value, index));
                }
            }
        }
        points.sort_unstable();
        Ok(Continuum {
            points,
            servers: nodes.len(),
            hash_tag,
        })
    }

    /// Index (in configuration order) of the server that owns `key`.
    pub(crate) fn owner(&self, key: &[u8]) -> usize {
        if self.servers == 1 {
            return 0;
        }
        // nutcracker's `server_pool_hash` gives an empty key hash 0 (the first point of the
        // continuum) without hashing it.
        let part = self.hashed_part(key);
        let hash = if part.is_empty() { 0 } else { fnv1a_64(part) };
        let i = self.points.partition_point(|&(value, _)| value < hash);
        self.points
            .get(i)
            .or_else(|| self.points.first())
            .map_or(0, |&(_, server)| server)
    }

    /// The part of `key` that is hashed: the hash-tagged part when there is one.
    fn hashed_part<'k>(&self, key: &'k [u8]) -> &'k [u8] {
        let Some([open, close]) = self.hash_tag else {
            return key;
        };
        let Some(start) = key.iter().position(|&b| b == open) else {
            return key;
        };
        let rest = key.get(start + 1..).unwrap_or_default();
        match rest.iter().position(|&b| b == close) {
            Some(len) if len > 0 => rest.get(..len).unwrap_or(key),
            _ => key,
        }
    }
}

/// nutcracker's point count for a server: `floorf((float)(pct * 160 / 4 * (float)n +
/// 1e-10)) * 4` with `pct = (float)weight / (float)total`, evaluated in the same `f32` steps.
#[expect(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "replicates nutcracker's float arithmetic; the result is at most 160 * servers"
)]
#[expect(
    clippy::cast_precision_loss,
    reason = "weights and server counts are small, as in nutcracker's (float) casts"
)]
fn points_for(weight: u32, total_weight: u32, servers: u32) -> u32 {
    let pct = weight as f32 / total_weight as f32;
    let scaled = pct * POINTS_PER_SERVER as f32 / 4.0 * servers as f32;
    let rounded = (f64::from(scaled) + 0.000_000_000_1) as f32;
    (rounded.floor() as u32) * POINTS_PER_HASH
}

/// nutcracker's `hash_fnv1a_64`: FNV-1a with 32-bit arithmetic, each byte widened through
/// C's `char` (sign-extended where `char` is signed).
pub(crate) fn fnv1a_64(key: &[u8]) -> u32 {
    const BASIS: u32 = 0x8422_2325; // low 32 bits of 0xcbf29ce484222325
    const PRIME: u32 = 0x0000_01b3; // low 32 bits of 0x100000001b3
    let mut hash = BASIS;
    for &b in key {
        hash ^= widen_c_char(b);
        hash = hash.wrapping_mul(PRIME);
    }
    hash
}

/// C's `(uint32_t)(char)b` on this machine.
fn widen_c_char(b: u8) -> u32 {
    let char_is_signed = std::ffi::c_char::MIN != 0;
    if char_is_signed && b >= 0x80 {
        0xFFFF_FF00 | u32::from(b)
    } else {
        u32::from(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(names: &[&str]) -> Vec<Node> {
        names
            .iter()
            .map(|n| Node {
                name: (*n).to_string(),
                weight: 1,
            })
            .collect()
    }

    /// Owners observed with Debian's nutcracker 0.5.0 (x86-64): keys SET through the proxy,
    /// then found with EXISTS on each node.
    #[test]
    fn owners_match_those_of_a_running_nutcracker() {
        let named = Continuum::new(&nodes(&["node1", "node2", "node3"]), None).expect("ketama");
        for (key, owner) in [
            ("key:000000", 1),
            ("key:001234", 1),
            ("key:002500", 2),
            ("key:003777", 0),
            ("key:005000", 1),
            ("key:008191", 0),
            ("key:009999", 0),
            ("key:012345", 2),
            ("key:015000", 2),
            ("key:019999", 1),
            ("hello", 1),
        ] {
            assert_eq!(named.owner(key.as_bytes()), owner, "{key}");
        }
        if std::ffi::c_char::MIN != 0 {
            // "été:0" then a lone 0xFF byte: bytes that C's signed char sign-extends.
            assert_eq!(named.owner(b"\xc3\xa9t\xc3\xa9:0\xff"), 2);
        }
        // Unnamed servers (named host:port), weights 1:2:3, hash_tag "{}".
        let weighted: Vec<Node> = (4..=6)
            .map(|i| Node {
                name: format!("127.0.0.1:1700{i}"),
                weight: i - 3,
            })
            .collect();
        let weighted = Continuum::new(&weighted, Some(*b"{}")).expect("ketama");
        for (key, owner) in [
            ("key:000000", 0),
            ("key:001234", 1),
            ("key:002500", 0),
            ("key:003777", 1),
            ("key:015000", 2),
            ("user:{0}:x", 2),
            ("user:{11}:x", 2),
        ] {
            assert_eq!(weighted.owner(key.as_bytes()), owner, "{key}");
        }
    }

    #[test]
    fn equal_weights_give_160_points_per_server() {
        for servers in 1..=16u32 {
            assert_eq!(points_for(1, servers, servers), 160, "{servers} servers");
        }
        let c = Continuum::new(&nodes(&["a", "b", "c"]), None).expect("continuum");
        assert_eq!(c.points.len(), 480);
        assert!(c.points.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn weights_scale_the_point_count() {
        // 1:3 over two servers: 25% of 320 points and 75% of them.
        assert_eq!(points_for(1, 4, 2), 80);
        assert_eq!(points_for(3, 4, 2), 240);
    }

    /// Regression: the empty key went by the hash of `""` where nutcracker sends it to the
    /// first point of the continuum (hash 0), so `rebalance` moved it off the node the proxy
    /// reads it from (seen with nutcracker 0.5.0: `SET "" x` lands on the first point's node).
    #[test]
    fn the_empty_key_goes_to_the_first_point() {
        let c = Continuum::new(&nodes(&["node1", "node2", "node3"]), None).expect("ketama");
        let first = c.points.first().map(|&(_, server)| server).expect("points");
        assert_eq!(c.owner(b""), first);
        let tagged = Continuum::new(&nodes(&["a", "b"]), Some(*b"{}")).expect("ketama");
        let first = tagged
            .points
            .first()
            .map(|&(_, server)| server)
            .expect("points");
        assert_eq!(tagged.owner(b""), first);
    }

    #[test]
    fn fnv1a_64_is_the_32_bit_truncation_nutcracker_uses() {
        assert_eq!(fnv1a_64(b""), 0x8422_2325);
        // One byte: (basis ^ 'a') * prime, in 32 bits.
        assert_eq!(fnv1a_64(b"a"), (0x8422_2325u32 ^ 0x61).wrapping_mul(0x1b3));
    }

    #[test]
    fn owner_wraps_past_the_last_point() {
        let c = Continuum {
            points: vec![(100, 0), (200, 1)],
            servers: 2,
            hash_tag: None,
        };
        // Keys are not chosen by hash here; check the search directly.
        let find = |hash: u32| {
            let i = c.points.partition_point(|&(v, _)| v < hash);
            c.points.get(i).or(c.points.first()).map(|p| p.1)
        };
        assert_eq!(find(0), Some(0));
        assert_eq!(find(100), Some(0));
        assert_eq!(find(101), Some(1));
        assert_eq!(find(201), Some(0));
    }

    #[test]
    fn hash_tags_hash_only_the_tagged_part() {
        let c = Continuum::new(&nodes(&["a", "b", "c"]), Some(*b"{}")).expect("continuum");
        assert_eq!(c.hashed_part(b"user:{42}:name"), b"42");
        assert_eq!(c.hashed_part(b"user:{}:name"), b"user:{}:name");
        assert_eq!(c.hashed_part(b"user:{42"), b"user:{42");
        assert_eq!(c.hashed_part(b"plain"), b"plain");
        assert_eq!(c.owner(b"x{7}y"), c.owner(b"z{7}"));
    }

    #[test]
    fn adding_a_server_moves_keys_only_to_it() {
        let three = Continuum::new(&nodes(&["s1", "s2", "s3"]), None).expect("continuum");
        let four = Continuum::new(&nodes(&["s1", "s2", "s3", "s4"]), None).expect("continuum");
        let mut moved = 0;
        for i in 0..20_000 {
            let key = format!("key:{i:06}");
            let (before, after) = (three.owner(key.as_bytes()), four.owner(key.as_bytes()));
            if before != after {
                assert_eq!(after, 3, "{key} moved from {before} to {after}");
                moved += 1;
            }
        }
        // About a quarter of the keys move to the new server.
        assert!((3_000..7_000).contains(&moved), "{moved} keys moved");
    }

    #[test]
    fn a_single_server_owns_every_key() {
        let c = Continuum::new(&nodes(&["only"]), None).expect("continuum");
        assert_eq!(c.owner(b"anything"), 0);
    }

    #[test]
    fn empty_pools_and_zero_weights_are_refused() {
        assert!(Continuum::new(&[], None).is_err());
        let zero = [Node {
            name: "a".into(),
            weight: 0,
        }];
        assert!(Continuum::new(&zero, None).is_err());
    }
}
