use super::*;

fn written() -> Vec<u8> {
  let mut w = HeapWriter::default();
  let root = w.name(b"(root)");
  let main = w.name(b"main");
  let hog = w.name("hög".as_bytes());
  let r = w.node(-1, root, -1, -1, -1, 0.0, 0.0);
  let m = w.node(r, main, 0, 0, 13, 0.0, 0.0);
  w.node(m, hog, 0, 4, 12, 1048576.0, 1.0);
  w.node(m, main, 1, 9, 2, 2048.0, 3.0);
  assert_eq!(w.name(b"main"), main, "names are interned");
  w.finish()
}

#[test]
fn the_binary_form_reads_back_with_its_scripts_urls() {
  let urls = vec!["file:///a.js".to_string(), String::new()];
  let heap = FlatHeap::from_binary(&written(), &urls).unwrap();
  assert_eq!(heap.nodes.len(), 4);
  let name = |i: usize| heap.strings[heap.nodes[i].name as usize].as_str();
  let url = |i: usize| heap.nodes[i].url.map(|u| heap.strings[u as usize].as_str());
  assert_eq!((name(0), url(0), heap.nodes[0].parent), ("(root)", None, -1));
  assert_eq!(
    (name(2), url(2), heap.nodes[2].line, heap.nodes[2].column),
    ("hög", Some("file:///a.js"), 4, 12)
  );
  assert_eq!((heap.nodes[2].bytes, heap.nodes[2].objects), (1048576.0, 1.0));
  assert_eq!(url(3), None, "a script with no URL is no resource");
  // As a weighted trace, the same as its JSON form would be.
  let t = crate::formats::heap::from_flat(&heap, 5.0).unwrap();
  let w = t.weight.as_ref().unwrap();
  assert_eq!(w.values, vec![1048576.0, 2048.0]);
  assert_eq!(w.counts.as_ref().unwrap(), &vec![1.0, 3.0]);
  assert_eq!(t.resources, vec!["file:///a.js".to_string()]);
}

#[test]
fn a_bad_binary_form_is_an_error_not_a_panic() {
  let good = written();
  let urls = vec!["file:///a.js".to_string(), String::new()];
  let e = |bytes: &[u8], urls: &[String]| FlatHeap::from_binary(bytes, urls).err().unwrap().0;
  assert!(e(b"", &urls).contains("cut short"));
  assert!(e(b"SPH2\0\0\0\0", &urls).contains("not selfprof's binary form"));
  assert!(e(&good[..good.len() - 1], &urls).contains("nodes in"));
  assert!(e(&good, &urls[..1]).contains("names script 1 of 1"));
  let mut many = good.clone();
  many[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
  assert!(e(&many, &urls).contains("names in"));
  // Every truncation and every byte changed: an error or a profile, never a panic.
  for n in 0..good.len() {
    let _ = FlatHeap::from_binary(&good[..n], &urls);
    for b in [0u8, 0x7f, 0xff] {
      let mut bad = good.clone();
      bad[n] = b;
      if let Ok(heap) = FlatHeap::from_binary(&bad, &urls) {
        let _ = crate::formats::heap::from_flat(&heap, 0.0);
      }
    }
  }
}
