use super::*;
use crate::parallel::PARALLEL_CONTEXTS;
use crate::trace::{Context, Trace};

#[test]
fn columns_carry_every_contexts_labels_as_columns_js_slices_in_utf16_units() {
  check_columns(5000, 3);
}

#[test]
fn columns_of_many_contexts_made_in_two_halves_are_the_contexts_in_order() {
  // Past PARALLEL_CONTEXTS the second half's columns are made on a thread of their own
  // and appended: key sets seen only in the first half, only in the second, and in both
  // must still name each context's own keys.
  check_columns(3 * PARALLEL_CONTEXTS, 5);
}

/// `n` contexts as columns, read back as JS reads them; `key_set_count` distinct key sets.
fn check_columns(n: usize, key_set_count: usize) {
  // More contexts than a piece holds, key sets that change, values of every width.
  let widths = ["GET /a", "", "é", "日本語", "😀 grin", "e\u{301}", "\u{10ffff}"];
  let contexts: Vec<Context> = (0..n)
    .map(|i| {
      let mut set = vec![
        ("endpoint".to_string(), format!("{} {i}", widths[i % widths.len()])),
        ("method".to_string(), widths[i % 3].to_string()),
        ("span_id".to_string(), format!("{:016x}", i)),
      ];
      if i % 3 == 0 {
        set.push(("tenant".to_string(), widths[i % widths.len()].repeat(i % 5)));
      }
      if i % 1000 == 999 {
        set = vec![("1".to_string(), "numeric key".to_string())];
      }
      if n > PARALLEL_CONTEXTS && i < n / 8 && i % 11 == 5 {
        set = vec![("early".to_string(), format!("{i}"))];
      }
      if n > PARALLEL_CONTEXTS && i > n * 7 / 8 && i % 13 == 5 {
        set = vec![
          ("late".to_string(), "é".repeat(i % 4)),
          ("z".to_string(), format!("{i}")),
        ];
      }
      Context::new(set)
    })
    .collect();
  let trace = Trace {
    contexts: contexts.clone(),
    ..Trace::default()
  };
  let p = trace.columns();
  let key_sets: Vec<Vec<String>> = serde_json::from_str(&p.key_sets).unwrap();
  assert_eq!(key_sets.len(), key_set_count, "{key_sets:?}");
  assert_eq!(p.context_keys.len(), n);
  assert!(p.values.len() >= 3, "{n} contexts take several pieces");
  assert_eq!(p.piece_contexts.iter().sum::<u32>() as usize, n);
  assert!(p.piece_contexts.iter().all(|n| *n as usize <= CONTEXTS_PER_PIECE));
  // The repeating values ("method"'s three, "tenant"'s and "1"'s few) go to JS once (in
  // each half's table), and the values of the unique keys never.
  assert!(p.shared.len() <= 2 * (3 + 7 * 5 + 1), "{:?} shared values", p.shared);
  for method in &widths[..3] {
    assert!(p.shared.iter().any(|s| s == method), "{method:?} is shared");
  }
  // What JS does: slice each piece's UTF-16 code units at the value ends, or take a
  // shared value.
  let (mut c, mut v) = (0usize, 0usize);
  for (piece, &in_piece) in p.values.iter().zip(&p.piece_contexts) {
    let units: Vec<u16> = piece.encode_utf16().collect();
    let mut at = 0usize;
    for _ in 0..in_piece {
      let keys = &key_sets[p.context_keys[c] as usize];
      let mut got = Vec::new();
      for k in keys {
        let end = p.value_ends[v];
        v += 1;
        if end < 0 {
          got.push((k.clone(), p.shared[(-1 - end) as usize].clone()));
          continue;
        }
        let end = end as usize;
        got.push((k.clone(), String::from_utf16(&units[at..end]).unwrap()));
        at = end;
      }
      assert_eq!(got, contexts[c].labels.to_set(), "context {c}");
      c += 1;
    }
    assert_eq!(at, units.len(), "a piece holds exactly its values");
  }
  assert_eq!((c, v), (n, p.value_ends.len()));
}
