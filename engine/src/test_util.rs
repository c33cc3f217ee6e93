//! Helpers shared by the engine's unit tests.

use std::path::Path;

/// Flips two bytes a third of the way into the table file at `path`: inside a data block of
/// any table with more than a few blocks, so reading that block fails its CRC check.
pub(crate) fn damage_data_block(path: &Path) -> std::io::Result<()> {
    let mut bytes = std::fs::read(path)?;
    let mid = bytes.len() / 3;
    for b in bytes.iter_mut().skip(mid).take(2) {
        *b ^= 0xff;
    }
    std::fs::write(path, bytes)
}
