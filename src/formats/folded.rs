//! Folded stacks (`outer;...;leaf N`), as flamegraph.pl, inferno and speedscope read them.

use super::{name, path, pseudo};
use crate::trace::Trace;
use std::collections::BTreeMap;

/// Folded stacks: `outer;...;leaf count`, one line per distinct stack, sorted.
pub fn to_folded(t: &Trace) -> String {
  let mut counts: BTreeMap<String, u64> = BTreeMap::new();
  for s in &t.samples {
    let path = path(t, s.stack_id);
    let line = if path.is_empty() {
      pseudo(s.marker).to_owned()
    } else {
      path
        .iter()
        .map(|f| name(t, *f).replace(';', ":"))
        .collect::<Vec<_>>()
        .join(";")
    };
    *counts.entry(line).or_default() += 1;
  }
  counts.into_iter().map(|(stack, n)| format!("{stack} {n}\n")).collect()
}
