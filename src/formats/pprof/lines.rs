//! The source lines each sample's count is put at, from the trace's line ticks.

use super::Weight;
use crate::trace::Trace;
use std::collections::HashMap;

/// The source lines each sample's count is put at in pprof, from the trace's line ticks:
/// per sample, `(line, count)` pieces (`None`: no line, the frame's own location), empty
/// for samples on stacks without line ticks.
///
/// V8 counts lines per stack, not per sample, so the line of one sample is not known. The
/// counts of each stack's samples (in time order) are dealt to its lines, and to "no line"
/// for what V8 gave none, so that the per-line counts equal the trace's line ticks exactly.
/// A sample of count 1 (every trace from V8) goes to the line furthest behind its share so
/// far, which spreads each line's samples evenly; a larger count (a decoded pprof's) is
/// split in proportion to what each line has left. So per-line totals are V8's, while the
/// line of a single sample (and the lines per label) are an apportionment.
pub struct LinePieces {
  /// Pieces of sample i: `pieces[offsets[i]..offsets[i + 1]]`.
  offsets: Vec<u32>,
  pieces: Vec<(Option<u32>, i64)>,
}

impl LinePieces {
  pub fn of(&self, sample: usize) -> &[(Option<u32>, i64)] {
    match (self.offsets.get(sample), self.offsets.get(sample + 1)) {
      (Some(&a), Some(&b)) => &self.pieces[a as usize..b as usize],
      _ => &[],
    }
  }

  pub fn deal(trace: &Trace, weights: Option<&[Weight]>) -> Option<LinePieces> {
    if trace.line_ticks.is_empty() {
      return None;
    }
    let count = |i: usize| weights.and_then(|w| w.get(i)).map_or(1, |w| w.count.max(0) as u64);
    let mut by_stack: HashMap<u32, Vec<usize>> = HashMap::new();
    for (i, s) in trace.samples.iter().enumerate() {
      if let (Some(stack), None) = (s.stack_id, s.marker) {
        by_stack.entry(stack).or_default().push(i);
      }
    }
    let mut ticks: HashMap<u32, Vec<(u32, u64)>> = HashMap::new();
    for l in &trace.line_ticks {
      ticks.entry(l.stack_id).or_default().push((l.line, l.ticks));
    }
    // (sample, line, count), for the samples on stacks with line ticks.
    let mut dealt: Vec<(usize, Option<u32>, i64)> = Vec::new();
    for (stack, lines) in ticks {
      let Some(samples) = by_stack.get(&stack) else {
        continue;
      };
      let n: u64 = samples.iter().map(|&i| count(i)).sum();
      let sum: u64 = lines.iter().map(|t| t.1).sum();
      let lines = if sum > n {
        crate::trace::scale_ticks(&lines, n, sum)
      } else {
        lines
      };
      let mut quota: Vec<(Option<u32>, u64)> = lines.iter().map(|&(l, t)| (Some(l), t)).collect();
      let with_line: u64 = quota.iter().map(|q| q.1).sum();
      quota.push((None, n - with_line));
      let mut given = vec![0u64; quota.len()];
      let mut units: u64 = 0;
      for &i in samples {
        let w = count(i);
        let mut got = vec![0u64; quota.len()];
        if w <= 64 {
          for _ in 0..w {
            // How far behind its share each bucket is, times n.
            let behind =
              |b: usize| i128::from(quota[b].1) * i128::from(units + 1) - i128::from(given[b]) * i128::from(n);
            let b = (0..quota.len())
              .max_by(|&a, &b| behind(a).cmp(&behind(b)).then(b.cmp(&a)))
              .unwrap_or(0);
            given[b] += 1;
            got[b] += 1;
            units += 1;
          }
        } else {
          let left = u128::from(n - units);
          let rem: Vec<u128> = (0..quota.len()).map(|b| u128::from(quota[b].1 - given[b])).collect();
          let mut order: Vec<(usize, u128)> = Vec::with_capacity(quota.len());
          let mut spare = w;
          for b in 0..quota.len() {
            let q = u128::from(w) * rem[b];
            got[b] = (q / left) as u64;
            spare -= got[b];
            order.push((b, q % left));
          }
          order.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
          for (b, _) in order.into_iter().take(spare as usize) {
            got[b] += 1;
          }
          for b in 0..quota.len() {
            given[b] += got[b];
          }
          units += w;
        }
        dealt.extend(
          (0..quota.len())
            .filter(|&b| got[b] > 0)
            .map(|b| (i, quota[b].0, got[b] as i64)),
        );
      }
    }
    dealt.sort_by_key(|d| d.0);
    let mut offsets = Vec::with_capacity(trace.samples.len() + 1);
    let mut at = 0;
    for i in 0..=trace.samples.len() {
      while at < dealt.len() && dealt[at].0 < i {
        at += 1;
      }
      offsets.push(at as u32);
    }
    let pieces = dealt.into_iter().map(|(_, line, count)| (line, count)).collect();
    Some(LinePieces { offsets, pieces })
  }
}
