//! Gzip of an output that is encoded as it is compressed: the encoder fills 64 KiB
//! buffers and a second thread deflates them, so a stop's pprof (or trace) is ready in
//! about the longer of the two instead of their sum.
//!
//! The second thread starts only when a first buffer fills (a small output is compressed
//! where it was encoded), and only while the build runs; if it cannot start, the buffers
//! are compressed on the encoding thread, as before. Either way the bytes are the same:
//! the same input reaches deflate in the same pieces.

use flate2::write::GzEncoder;
use flate2::Compression;
use std::io::{self, Write};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::thread::{Scope, ScopedJoinHandle};

/// What deflate is handed at a time: calling it per small piece costs more than encoding.
pub const CHUNK: usize = 1 << 16;
/// Full buffers waiting for the deflate thread (bounds the memory the pipe holds).
const QUEUED: usize = 2;

/// The gzip'd bytes of what `produce` writes into the pipe, at `level`.
pub fn gzip<F>(level: Compression, produce: F) -> io::Result<Vec<u8>>
where
  F: FnOnce(&mut Pipe<'_, '_>) -> io::Result<()>,
{
  gzip_in(CHUNK, level, produce)
}

/// `gzip`, handing deflate `chunk` bytes at a time (the tests' small chunks let Miri run
/// the threaded path).
fn gzip_in<F>(chunk: usize, level: Compression, produce: F) -> io::Result<Vec<u8>>
where
  F: FnOnce(&mut Pipe<'_, '_>) -> io::Result<()>,
{
  std::thread::scope(|scope| {
    let mut pipe = Pipe {
      buf: Vec::with_capacity(chunk * 2),
      chunk,
      level,
      scope,
      out: Out::Unstarted,
    };
    let produced = produce(&mut pipe);
    let finished = pipe.finish();
    // An error of the deflate side explains a failed send better than the send does.
    match (produced, finished) {
      (_, Err(e)) => Err(e),
      (Err(e), Ok(_)) => Err(e),
      (Ok(()), Ok(bytes)) => Ok(bytes),
    }
  })
}

enum Out<'scope> {
  /// Nothing sent yet: the output may fit in one buffer.
  Unstarted,
  Thread {
    to: SyncSender<Vec<u8>>,
    deflate: ScopedJoinHandle<'scope, io::Result<Vec<u8>>>,
  },
  /// No thread could start: deflate here.
  Here(Box<GzEncoder<Vec<u8>>>),
}

/// Where an encoder writes: `buf()` to append to, then `flush_full()` (or `Write`).
pub struct Pipe<'scope, 'env> {
  buf: Vec<u8>,
  chunk: usize,
  level: Compression,
  scope: &'scope Scope<'scope, 'env>,
  out: Out<'scope>,
}

impl<'scope> Pipe<'scope, '_> {
  /// The buffer being filled: append to it, then call `flush_full`.
  pub fn buf(&mut self) -> &mut Vec<u8> {
    &mut self.buf
  }

  /// Hands the buffer on once it holds a chunk.
  pub fn flush_full(&mut self) -> io::Result<()> {
    if self.buf.len() < self.chunk {
      return Ok(());
    }
    let full = std::mem::replace(&mut self.buf, Vec::with_capacity(self.chunk * 2));
    self.send(full)
  }

  fn send(&mut self, chunk: Vec<u8>) -> io::Result<()> {
    if let Out::Unstarted = self.out {
      self.out = self.start();
    }
    match &mut self.out {
      Out::Thread { to, .. } => to.send(chunk).map_err(|_| io::Error::other("the gzip thread stopped")),
      Out::Here(gz) => gz.write_all(&chunk),
      Out::Unstarted => unreachable!("started above"),
    }
  }

  fn start(&self) -> Out<'scope> {
    let (to, from) = sync_channel::<Vec<u8>>(QUEUED);
    let level = self.level;
    let spawned = std::thread::Builder::new()
      .name("selfprof-gzip".into())
      .spawn_scoped(self.scope, move || {
        let mut gz = GzEncoder::new(Vec::new(), level);
        for chunk in from {
          gz.write_all(&chunk)?;
        }
        gz.finish()
      });
    match spawned {
      Ok(deflate) => Out::Thread { to, deflate },
      Err(_) => Out::Here(Box::new(GzEncoder::new(Vec::new(), level))),
    }
  }

  /// The gzip'd bytes: what is left in the buffer deflated, the stream ended.
  fn finish(mut self) -> io::Result<Vec<u8>> {
    let rest = std::mem::take(&mut self.buf);
    match self.out {
      Out::Unstarted => {
        let mut gz = GzEncoder::new(Vec::new(), self.level);
        gz.write_all(&rest)?;
        gz.finish()
      }
      Out::Here(mut gz) => {
        gz.write_all(&rest)?;
        gz.finish()
      }
      Out::Thread { to, deflate } => {
        let sent = to.send(rest);
        drop(to); // the deflate thread's loop ends with the last chunk
        let bytes = deflate
          .join()
          .unwrap_or_else(|_| Err(io::Error::other("the gzip thread panicked")))?;
        sent.map_err(|_| io::Error::other("the gzip thread stopped"))?;
        Ok(bytes)
      }
    }
  }
}

impl Write for Pipe<'_, '_> {
  fn write(&mut self, data: &[u8]) -> io::Result<usize> {
    self.buf.extend_from_slice(data);
    self.flush_full()?;
    Ok(data.len())
  }

  fn flush(&mut self) -> io::Result<()> {
    Ok(())
  }
}

#[cfg(test)]
mod tests;
