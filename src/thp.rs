//! Transparent huge pages (THP) off for the `strata` process, as redis-server does by default
//! (its `disable-thp yes`).
//!
//! The allocator (mimalloc) asks the kernel for huge pages on its arenas (`MADV_HUGEPAGE`), so
//! with THP in `madvise` mode (this machine's; in `always` mode, any large region) each first
//! touch of a 2 MiB region faults in and zeroes a whole huge page. Measured on the 2-core
//! development VM (docs/benchmarks.md, "Transparent huge pages off"): those faults took 14% of
//! a `strata serve` under unpipelined `SET`s and up to 58% of a `strata load`, whose wall time
//! then swung between 0.16 and 0.53 s from run to run (0.17 to 0.19 s without THP); the
//! server's 500,000 pipelined `GET`s of genomic reads, which fill the block cache, took about
//! half the time without THP. The kernel serves huge pages from large free blocks, which a VM
//! with free page reporting has often handed back to its host, so each such fault also waits
//! for the host.
//!
//! `--transparent-huge-pages` keeps the kernel's setting instead.

/// True when the command line holds `--transparent-huge-pages` (before `--`, the end of
/// options). Read from the raw arguments, before clap parses them: the parse's first
/// allocations would otherwise fault in huge pages of the allocator's arena, which mimalloc
/// advises for them before `main`. Measured with `thp_fault_alloc` of /proc/vmstat over 20
/// runs of `strata get`: 3 huge-page faults (6 MiB) per command with the call after the
/// parse, 2 now (made before `main`, by the runtime's first allocations). Clap then accepts
/// the flag as usual, anywhere a global flag may stand.
pub(crate) fn keep_requested() -> bool {
    std::env::args_os()
        .skip(1)
        .take_while(|a| a != "--")
        .any(|a| a == "--transparent-huge-pages")
}

/// Asks the kernel not to back this process's memory with transparent huge pages
/// (`prctl(PR_SET_THP_DISABLE, 1)`, Linux 3.15+; inherited by child processes). Memory already
/// mapped keeps the pages it has; later faults get 4 KiB pages.
///
/// # Errors
/// The OS error of `prctl` (`EINVAL` on a kernel without the option). On other systems than
/// Linux, does nothing and returns `Ok`.
pub(crate) fn disable_transparent_huge_pages() -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `prctl` with `PR_SET_THP_DISABLE` takes four integer arguments and no
        // pointer; it sets one flag of this process's memory map that only decides the page
        // size of later page faults, so it cannot affect memory safety. Exercised by the test
        // below, which reads the flag back from /proc.
        #[expect(unsafe_code, reason = "a prctl call; see SAFETY")]
        let rc = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[cfg(target_os = "linux")]
    #[test]
    fn disabling_shows_in_proc_status() -> anyhow::Result<()> {
        super::disable_transparent_huge_pages()?;
        let status = std::fs::read_to_string("/proc/self/status")?;
        // "THP_enabled:" is in /proc/PID/status since Linux 5.0.
        if let Some(line) = status.lines().find(|l| l.starts_with("THP_enabled:")) {
            assert_eq!(line.split_whitespace().nth(1), Some("0"), "{line}");
        }
        // PR_GET_THP_DISABLE answers 1 once the flag is set (any kernel with the option).
        // SAFETY: as in `disable_transparent_huge_pages`: integer arguments only, and a read.
        #[expect(unsafe_code, reason = "a prctl call reading the flag back")]
        let got = unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) };
        assert_eq!(got, 1);
        Ok(())
    }
}
