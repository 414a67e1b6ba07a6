use super::*;
use std::io::Read;

fn gunzip(bytes: &[u8]) -> Vec<u8> {
  let mut out = Vec::new();
  flate2::read::GzDecoder::new(bytes).read_to_end(&mut out).unwrap();
  out
}

/// Bytes that deflate does not shrink to nothing (a little repetition, not all).
fn input(len: usize) -> Vec<u8> {
  let mut x = 0x2545_f491_4f6c_dd1du64;
  (0..len)
    .map(|i| {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      if i % 3 == 0 {
        b'a'
      } else {
        (x % 64) as u8
      }
    })
    .collect()
}

/// Small chunks under Miri (which interprets deflate ~1,000× slower), so that it still
/// runs the threaded path with more buffers than the queue holds.
const TEST_CHUNK: usize = if cfg!(miri) { 64 } else { CHUNK };
const PIECE: usize = if cfg!(miri) { 10 } else { 1000 };

/// The same bytes as one GzEncoder fed the same pieces on one thread, whether the
/// output stays in one buffer, fills a few or many (more than the queue holds).
#[test]
fn pipelined_gzip_is_the_serial_gzip() {
  let c = TEST_CHUNK;
  let levels = if cfg!(miri) {
    vec![Compression::fast()]
  } else {
    vec![Compression::fast(), Compression::default()]
  };
  // Under Miri, which runs this slowly, five chunks and a part stand for many.
  let lens: &[usize] = if cfg!(miri) {
    &[0, 10, c - 1, c, c + 1, 5 * c + 123]
  } else {
    &[0, 10, c - 1, c, c + 1, 5 * c + 123, 40 * c]
  };
  for &len in lens {
    let data = input(len);
    for &level in &levels {
      let piped = gzip_in(c, level, |pipe| {
        for piece in data.chunks(PIECE) {
          pipe.buf().extend_from_slice(piece);
          pipe.flush_full()?;
        }
        Ok(())
      })
      .unwrap();
      let mut serial = GzEncoder::new(Vec::new(), level);
      let mut pending = Vec::new();
      for piece in data.chunks(PIECE) {
        pending.extend_from_slice(piece);
        if pending.len() >= c {
          serial.write_all(&pending).unwrap();
          pending.clear();
        }
      }
      serial.write_all(&pending).unwrap();
      assert_eq!(piped, serial.finish().unwrap(), "{len} bytes at {level:?}");
      assert_eq!(gunzip(&piped), data);
    }
  }
}

/// `Write` goes through the same pipe (serde_json writes in small pieces).
#[test]
fn writes_of_any_size_arrive_whole_and_in_order() {
  let data = input(3 * TEST_CHUNK + 17);
  let piped = gzip_in(TEST_CHUNK, Compression::fast(), |pipe| {
    let (mut at, mut i) = (0, 0usize);
    while at < data.len() {
      // 0 to a third of a chunk at a time, empty writes included.
      i += 1;
      let end = (at + (i * 7919) % (TEST_CHUNK / 3 + 1)).min(data.len());
      pipe.write_all(&data[at..end])?;
      at = end;
    }
    Ok(())
  })
  .unwrap();
  assert_eq!(gunzip(&piped), data);
}

/// The encoder's error is the result, and the deflate thread still ends (the scope
/// would hang if it did not).
#[test]
fn an_encoder_error_ends_the_pipe() {
  let err = gzip_in(TEST_CHUNK, Compression::fast(), |pipe| {
    pipe.write_all(&input(3 * TEST_CHUNK))?;
    Err(io::Error::other("the encoder gave up"))
  })
  .unwrap_err();
  assert_eq!(err.to_string(), "the encoder gave up");
}
