//! What the process and machine are doing: memory, disk writes, load. Linux `/proc` only; on
//! other systems the readers return `None`.

use std::path::Path;

/// A `kB` field of `/proc/self/status` (such as `VmHWM` or `VmRSS`), in bytes.
fn status_kib_field(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|line| {
        let rest = line.strip_prefix(field)?.strip_prefix(':')?;
        let kib: u64 = rest.trim().trim_end_matches("kB").trim().parse().ok()?;
        kib.checked_mul(1024)
    })
}

/// Peak resident set size of the process since start or the last [`reset_peak_rss`], in bytes.
pub fn peak_rss_bytes() -> Option<u64> {
    status_kib_field("VmHWM")
}

/// Current resident set size of the process, in bytes.
pub fn rss_bytes() -> Option<u64> {
    status_kib_field("VmRSS")
}

/// Resets the peak RSS to the current RSS (Linux 4.0+, writing `5` to `/proc/self/clear_refs`),
/// so one engine's peak can be measured after another's. Returns whether it worked.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Bytes this process has caused to be written to storage (`write_bytes` of `/proc/self/io`),
/// counting all its threads: page-cache writes count when dirtied, whoever flushes them.
pub fn process_write_bytes() -> Option<u64> {
    let io = std::fs::read_to_string("/proc/self/io").ok()?;
    io.lines()
        .find_map(|line| line.strip_prefix("write_bytes:")?.trim().parse().ok())
}

/// Total size of the regular files under `dir`, in bytes (space used on disk, before
/// filesystem rounding).
pub fn dir_size_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_size_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// The 1-, 5- and 15-minute load averages, as `/proc/loadavg` prints them.
pub fn load_average() -> Option<String> {
    let s = std::fs::read_to_string("/proc/loadavg").ok()?;
    Some(s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
}

/// The CPU model name and the number of CPUs the process may use.
pub fn cpu_summary() -> String {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("model name")?
                    .split(':')
                    .nth(1)
                    .map(str::trim)
                    .map(String::from)
            })
        })
        .unwrap_or_else(|| "unknown CPU".to_string());
    let cpus = std::thread::available_parallelism().map_or(0, std::num::NonZero::get);
    format!("{model}, {cpus} CPUs")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_readers_work_on_linux() {
        if cfg!(target_os = "linux") {
            assert!(rss_bytes().is_some_and(|b| b > 0));
            assert!(peak_rss_bytes().is_some_and(|b| b > 0));
            assert!(process_write_bytes().is_some());
        }
    }

    #[test]
    fn dir_size_counts_nested_files() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        std::fs::write(dir.path().join("a"), [0u8; 100])?;
        std::fs::create_dir(dir.path().join("sub"))?;
        std::fs::write(dir.path().join("sub").join("b"), [0u8; 28])?;
        assert_eq!(dir_size_bytes(dir.path()), 128);
        Ok(())
    }
}
