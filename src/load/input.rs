//! Standard input, a pipe or any stream a load reads, read on a thread of its own so that an
//! interrupt ends a load that waits for input: a `read` of the stream itself blocks until input
//! comes, whatever the signal handler sets, while the load's side of [`StreamInput`] waits for
//! the next chunk with the interrupt flag in view.

use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender};
use std::time::Duration;

use super::Interrupted;

/// Bytes the reading thread asks for at a time.
const CHUNK_BYTES: usize = 1 << 20;

/// Chunks read ahead of the load (each at most [`CHUNK_BYTES`]).
const CHUNKS_AHEAD: usize = 4;

/// How often a wait for input looks at the interrupt flag.
const POLL: Duration = Duration::from_millis(50);

/// The load's end of a stream read on its own thread; see the module docs. Reading fails with
/// an [`Interrupted`] error (wrapped in an [`std::io::Error`]) once the flag is set while it
/// waits. The thread ends at the end of the input, at a read error, or when this is dropped
/// and its next read returns; a thread blocked in a read at the end of the process is not
/// waited for.
pub(crate) struct StreamInput {
    chunks: Receiver<std::io::Result<Vec<u8>>>,
    current: Vec<u8>,
    at: usize,
    done: bool,
    interrupt: Arc<AtomicBool>,
}

impl StreamInput {
    /// Starts reading `source` on a thread named `strata-load-input`.
    ///
    /// # Errors
    /// The thread could not be started.
    pub(crate) fn start(
        source: impl Read + Send + 'static,
        interrupt: Arc<AtomicBool>,
    ) -> std::io::Result<StreamInput> {
        let (send, chunks) = std::sync::mpsc::sync_channel(CHUNKS_AHEAD);
        std::thread::Builder::new()
            .name("strata-load-input".into())
            .spawn(move || read_chunks(source, &send))?;
        Ok(StreamInput {
            chunks,
            current: Vec::new(),
            at: 0,
            done: false,
            interrupt,
        })
    }

    /// Waits (interruptibly) until a chunk is at hand or the input has ended. Returns false at
    /// the end of the input.
    fn fill(&mut self) -> std::io::Result<bool> {
        while self.at == self.current.len() {
            if self.done {
                return Ok(false);
            }
            if self.interrupt.load(Ordering::Relaxed) {
                return Err(std::io::Error::other(Interrupted));
            }
            match self.chunks.recv_timeout(POLL) {
                Ok(Ok(chunk)) => {
                    self.done = chunk.is_empty();
                    self.current = chunk;
                    self.at = 0;
                }
                Ok(Err(e)) => {
                    self.done = true;
                    return Err(e);
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    self.done = true;
                    return Err(std::io::Error::other("the input thread ended early"));
                }
            }
        }
        Ok(true)
    }

    /// Up to `n` first bytes not read yet, without consuming them (fewer when the first chunk
    /// is shorter); empty at the end of the input. Waits for input as `read` does.
    ///
    /// # Errors
    /// As `read`.
    pub(crate) fn peek(&mut self, n: usize) -> std::io::Result<&[u8]> {
        if !self.fill()? {
            return Ok(&[]);
        }
        let rest = &self.current[self.at..];
        Ok(&rest[..rest.len().min(n)])
    }
}

impl Read for StreamInput {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if out.is_empty() || !self.fill()? {
            return Ok(0);
        }
        let rest = &self.current[self.at..];
        let n = rest.len().min(out.len());
        out[..n].copy_from_slice(&rest[..n]);
        self.at += n;
        Ok(n)
    }
}

/// The reading thread: sends each chunk read, then an empty chunk at the end of the input (or
/// the error). Stops when the receiver is gone.
fn read_chunks(mut source: impl Read, send: &SyncSender<std::io::Result<Vec<u8>>>) {
    let mut buf = vec![0u8; CHUNK_BYTES];
    loop {
        let chunk = match source.read(&mut buf) {
            Ok(n) => Ok(buf[..n].to_vec()),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => Err(e),
        };
        let last = !matches!(&chunk, Ok(c) if !c.is_empty());
        if send.send(chunk).is_err() || last {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, reason = "a panic is how a test fails")]

    use super::*;

    #[test]
    fn a_stream_is_read_whole_and_peeked_without_consuming() {
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        let flag = Arc::new(AtomicBool::new(false));
        let mut input =
            StreamInput::start(std::io::Cursor::new(data.clone()), flag).expect("start");
        assert_eq!(input.peek(3).expect("peek"), &data[..3]);
        let mut got = Vec::new();
        input.read_to_end(&mut got).expect("read");
        assert_eq!(got, data);
        assert!(input.peek(3).expect("peek at the end").is_empty());
    }

    /// A reader that blocks until its sender is dropped, as a pipe with no writer activity.
    struct Blocked(std::sync::mpsc::Receiver<()>);

    impl Read for Blocked {
        fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
            self.0.recv().unwrap_or_default();
            Ok(0)
        }
    }

    #[test]
    fn an_interrupt_ends_a_wait_for_input() {
        let (_hold, blocked) = std::sync::mpsc::channel();
        let flag = Arc::new(AtomicBool::new(false));
        let mut input = StreamInput::start(Blocked(blocked), Arc::clone(&flag)).expect("start");
        let setter = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            flag.store(true, Ordering::Relaxed);
        });
        let started = std::time::Instant::now();
        let err = input.read(&mut [0u8; 16]).expect_err("interrupted");
        assert!(
            err.get_ref().is_some_and(|e| e.is::<Interrupted>()),
            "{err}"
        );
        assert!(started.elapsed() < Duration::from_secs(5));
        setter.join().expect("join");
    }
}
