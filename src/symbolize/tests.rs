//! Tests of mapping a trace through source maps, and of the cache, with the helpers the
//! files under `tests/` share (finding a map, looking it up, parsing it, source text).

use super::cache::{Cache, Key, Outcome, Slot};
use super::locate::{self, Base, Scan};
use super::map::{byte_of_utf16, identifier_before, utf16_len, Loaded, Text};
use super::*;
use crate::trace::{LineTicks, Sample, Stack};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

mod finding_maps;
mod map_lookups;
mod parsing;
mod source_text;

/// A fresh directory for one test.
fn tmp(name: &str) -> PathBuf {
  static N: AtomicUsize = AtomicUsize::new(0);
  let dir = std::env::temp_dir().join(format!(
    "selfprof-symbolize-{}-{}-{name}",
    std::process::id(),
    N.fetch_add(1, Ordering::Relaxed)
  ));
  let _ = std::fs::remove_dir_all(&dir);
  std::fs::create_dir_all(&dir).unwrap();
  dir
}

/// `(dst_line, dst_col, src_line, src_col, source, name)`, 0-based.
type Token<'a> = (u32, u32, u32, u32, Option<&'a str>, Option<&'a str>);

/// A map's JSON from its mappings.
fn map_json(tokens: &[Token]) -> String {
  let mut b = sourcemap::SourceMapBuilder::new(None);
  for &(dl, dc, sl, sc, src, name) in tokens {
    b.add(dl, dc, sl, sc, src, name, false);
  }
  let mut out = Vec::new();
  b.into_sourcemap().to_writer(&mut out).unwrap();
  String::from_utf8(out).unwrap()
}

fn url(p: &Path) -> String {
  locate::path_to_file_url(p)
}

fn frame(name: &str, resource: Option<u32>, line: u32, column: u32) -> Frame {
  Frame {
    name: name.into(),
    resource_id: resource,
    line: resource.map(|_| line),
    column: resource.map(|_| column),
  }
}

fn sample(stack: u32) -> Sample {
  Sample {
    timestamp: stack as f64,
    stack_id: Some(stack),
    marker: None,
    context_id: None,
    cpu_time: None,
  }
}

fn base(dir: &str) -> Base {
  Base {
    dir: PathBuf::from(dir),
  }
}

/// A script and its map file in `dir`, the script ending with its comment.
fn write_script(dir: &Path, name: &str, code: &str, map: &str) -> String {
  let script = dir.join(name);
  std::fs::write(&script, format!("{code}\n//# sourceMappingURL={name}.map\n")).unwrap();
  std::fs::write(dir.join(format!("{name}.map")), map).unwrap();
  url(&script)
}

#[test]
fn frames_of_a_mapped_script_take_their_original_place_and_merge() {
  let dir = tmp("merge");
  let src = dir.join("src");
  std::fs::create_dir_all(&src).unwrap();
  // out/app.js lines: 0 helper (no source), 1 `function hot(` (a.ts 4), 2 a copy of it
  // (inlined twice by a bundler: also a.ts 4), 3 `function cold(` (a.ts 9).
  let out = dir.join("out");
  std::fs::create_dir_all(&out).unwrap();
  let map = map_json(&[
    (0, 0, 0, 0, None, None),
    (1, 0, 4, 0, Some("../src/a.ts"), None),
    (1, 20, 5, 2, Some("../src/a.ts"), None),
    (2, 0, 4, 0, Some("../src/a.ts"), None),
    (2, 20, 5, 2, Some("../src/a.ts"), None),
    (3, 0, 9, 0, Some("../src/a.ts"), None),
  ]);
  let app = write_script(
    &out,
    "app.js",
    "h();\nfunction hot(){}\nfunction hot(){}\nfunction cold(){}",
    &map,
  );
  let mut t = Trace {
    resources: vec!["node:internal/x".into(), app.clone()],
    frames: vec![
      frame("main", Some(0), 1, 1),
      frame("__helper", Some(1), 1, 2),
      frame("hot", Some(1), 2, 13),
      frame("hot", Some(1), 3, 13),
      frame("cold", Some(1), 4, 14),
      frame("JSON.parse", None, 0, 0),
    ],
    stacks: vec![
      Stack {
        frame_id: 0,
        parent_id: None,
      },
      Stack {
        frame_id: 1,
        parent_id: Some(0),
      },
      Stack {
        frame_id: 2,
        parent_id: Some(1),
      },
      Stack {
        frame_id: 3,
        parent_id: Some(1),
      },
      Stack {
        frame_id: 4,
        parent_id: Some(2),
      },
      Stack {
        frame_id: 5,
        parent_id: Some(4),
      },
    ],
    samples: (0..6).map(sample).collect(),
    line_ticks: vec![
      LineTicks {
        stack_id: 2,
        line: 2,
        ticks: 3,
      },
      LineTicks {
        stack_id: 3,
        line: 3,
        ticks: 4,
      },
      LineTicks {
        stack_id: 4,
        line: 1,
        ticks: 5,
      }, // app.js:1 has no a.ts mapping
      LineTicks {
        stack_id: 1,
        line: 1,
        ticks: 6,
      }, // an unmapped frame's ticks stay
    ],
    ..Trace::default()
  };
  symbolize(&mut t, &[]);
  crate::formats::check(&t).unwrap();
  let a_ts = url(&src.join("a.ts"));
  assert_eq!(
    t.resources,
    vec!["node:internal/x".to_string(), app.clone(), a_ts.clone()]
  );
  assert_eq!(
    t.frames,
    vec![
      frame("main", Some(0), 1, 1),
      frame("__helper", Some(1), 1, 2),
      frame("hot", Some(2), 5, 1),
      frame("cold", Some(2), 10, 1),
      frame("JSON.parse", None, 0, 0),
    ]
  );
  // The two copies of `hot` are one frame, and so their stacks one stack.
  assert_eq!(t.stacks.len(), 5);
  let stack_of: Vec<u32> = t.samples.iter().map(|s| s.stack_id.unwrap()).collect();
  assert_eq!(stack_of, vec![0, 1, 2, 2, 3, 4]);
  assert_eq!(
    t.line_ticks,
    vec![
      LineTicks {
        stack_id: 1,
        line: 1,
        ticks: 6
      },
      LineTicks {
        stack_id: 2,
        line: 6,
        ticks: 7
      },
    ]
  );
  let info = t.source_maps.as_ref().unwrap();
  assert_eq!(
    (info.mapped_frames, info.unmapped_frames, info.dropped_line_ticks),
    (3, 1, 5)
  );
  assert_eq!(
    info.scripts,
    vec![ScriptInfo {
      url: app.clone(),
      map: Some(format!("{app}.map")),
      error: None
    }]
  );
  let generated: Vec<(u32, u32, u32)> = info.generated.iter().map(|g| (g.frame_id, g.line, g.column)).collect();
  assert_eq!(generated, vec![(2, 2, 13), (2, 3, 13), (3, 4, 14)]);
  // The JSON a reader sees.
  let json: serde_json::Value = serde_json::from_str(&t.to_json()).unwrap();
  assert_eq!(json["sourceMaps"]["mappedFrames"], 3);
  assert_eq!(json["sourceMaps"]["generated"][0]["frameId"], 2);
  // Read back and mapped again: already mapped, left alone.
  let again: Trace = serde_json::from_str(&t.to_json()).unwrap();
  let mut again2 = again.clone();
  symbolize(&mut again2, &[]);
  assert_eq!(again2, again);
}

#[test]
fn minified_names_come_from_the_maps_names() {
  let dir = tmp("names");
  // `function i(n){...}var a=n=>n.map(i);` with names for `i` (hotLoop) and `a` (arrow),
  // and `n` (xs), the parameter the arrow's position falls on, which is not its name.
  let code = "function i(n){return n}var a=n=>n.map(i);";
  let map = map_json(&[
    (0, 0, 2, 0, Some("a.ts"), None),
    (0, 9, 2, 16, Some("a.ts"), Some("hotLoop")),
    (0, 23, 7, 0, Some("a.ts"), None),
    (0, 27, 7, 6, Some("a.ts"), Some("arrow")),
    (0, 29, 7, 15, Some("a.ts"), Some("xs")),
  ]);
  let app = write_script(&dir, "app.min.js", code, &map);
  let mut t = Trace {
    resources: vec![app],
    frames: vec![
      frame("i", Some(0), 1, 11),
      frame("a", Some(0), 1, 30),
      frame("e.i", Some(0), 1, 11),
    ],
    stacks: vec![
      Stack {
        frame_id: 0,
        parent_id: None,
      },
      Stack {
        frame_id: 1,
        parent_id: None,
      },
    ],
    samples: vec![sample(0), sample(1)],
    ..Trace::default()
  };
  symbolize(&mut t, &[]);
  let names: Vec<&str> = t.frames.iter().map(|f| f.name.as_str()).collect();
  assert_eq!(names, vec!["hotLoop", "arrow", "e.hotLoop"]);
  assert_eq!((t.frames[0].line, t.frames[0].column), (Some(3), Some(17)));
  assert_eq!((t.frames[1].line, t.frames[1].column), (Some(8), Some(16)));
  let info = t.source_maps.unwrap();
  assert_eq!(info.generated[0].name.as_deref(), Some("i"));
  assert_eq!(info.generated[1].name.as_deref(), Some("a"));
}

#[test]
fn a_map_beside_the_script_serves_when_it_has_no_comment() {
  let dir = tmp("beside");
  let script = dir.join("bundle.js");
  std::fs::write(&script, "function f(){}\n").unwrap();
  std::fs::write(dir.join("bundle.js.map"), map_json(&[(0, 0, 5, 0, Some("f.ts"), None)])).unwrap();
  let mut t = Trace {
    resources: vec![url(&script)],
    frames: vec![frame("f", Some(0), 1, 11)],
    stacks: vec![Stack {
      frame_id: 0,
      parent_id: None,
    }],
    samples: vec![sample(0)],
    ..Trace::default()
  };
  symbolize(&mut t, &[]);
  assert_eq!(t.resources, vec![url(&dir.join("f.ts"))]);
  assert_eq!(t.frames[0].line, Some(6));
}

#[test]
fn maps_that_cannot_be_used_leave_frames_as_they_were_and_say_why() {
  let dir = tmp("broken");
  let write = |name: &str, code: &str| {
    let p = dir.join(name);
    std::fs::write(&p, code).unwrap();
    url(&p)
  };
  let missing = write("missing.js", "f()\n//# sourceMappingURL=gone.js.map\n");
  let malformed = write("malformed.js", "f()\n//# sourceMappingURL=malformed.js.map\n");
  std::fs::write(
    dir.join("malformed.js.map"),
    "{\"version\":3,\"mappings\":\"!!!!\",\"sources\":[]}",
  )
  .unwrap();
  let huge = write("huge.js", "f()\n//# sourceMappingURL=huge.js.map\n");
  // Sparse: over the limit without writing it.
  std::fs::File::create(dir.join("huge.js.map"))
    .unwrap()
    .set_len(limits::MAP_BYTES + 1)
    .unwrap();
  let remote = write(
    "remote.js",
    "f()\n//# sourceMappingURL=https://cdn.example/remote.js.map\n",
  );
  let directory = write("dir.js", "f()\n//# sourceMappingURL=sub\n");
  std::fs::create_dir_all(dir.join("sub")).unwrap();
  let index = write("index.js", "f()\n//# sourceMappingURL=index.js.map\n");
  std::fs::write(
    dir.join("index.js.map"),
    r#"{"version":3,"sections":[{"offset":{"line":0,"column":0},"url":"other.js.map"}]}"#,
  )
  .unwrap();
  let bad_inline = write(
    "inline.js",
    "f()\n//# sourceMappingURL=data:application/json;base64,e30=\n",
  );
  let no_map = write("plain.js", "function f() {}\n");
  let resources = vec![missing, malformed, huge, remote, directory, index, bad_inline, no_map];
  let n = resources.len() as u32;
  let mut t = Trace {
    resources: resources.clone(),
    frames: (0..n).map(|r| frame("f", Some(r), 1, 2)).collect(),
    stacks: (0..n)
      .map(|f| Stack {
        frame_id: f,
        parent_id: None,
      })
      .collect(),
    samples: (0..n).map(sample).collect(),
    ..Trace::default()
  };
  let before = t.clone();
  symbolize(&mut t, &[]);
  assert_eq!(
    Trace {
      source_maps: None,
      ..t.clone()
    },
    before,
    "frames, stacks and samples unchanged"
  );
  let info = t.source_maps.unwrap();
  assert_eq!(info.mapped_frames, 0);
  let errors: Vec<String> = info
    .scripts
    .iter()
    .map(|s| s.error.clone().unwrap_or_default())
    .collect();
  assert_eq!(info.scripts.len(), 7, "{errors:?}");
  assert!(errors[0].contains("gone.js.map is not there"), "{}", errors[0]);
  assert!(errors[1].contains("not a valid source map"), "{}", errors[1]);
  assert!(errors[2].contains("maps are read up to 32.0 MiB"), "{}", errors[2]);
  assert!(errors[3].contains("not a file (not fetched)"), "{}", errors[3]);
  assert!(errors[4].contains("is not a file"), "{}", errors[4]);
  assert!(errors[5].contains("sections point to other files"), "{}", errors[5]);
  // `{}` is a valid map with nothing in it: used, and nothing maps.
  assert_eq!(info.scripts[6].map.as_deref(), Some("inline"));
  assert_eq!(info.unmapped_frames, 1);
}

#[test]
fn a_script_or_map_that_changes_is_read_again() {
  let dir = tmp("stale");
  let app = write_script(
    &dir,
    "app.js",
    "function f(){}",
    &map_json(&[(0, 0, 1, 0, Some("a.ts"), None)]),
  );
  let trace = Trace {
    resources: vec![app.clone()],
    frames: vec![frame("f", Some(0), 1, 11)],
    stacks: vec![Stack {
      frame_id: 0,
      parent_id: None,
    }],
    samples: vec![sample(0)],
    ..Trace::default()
  };
  let line = |t: &Trace| {
    let mut t = t.clone();
    symbolize(&mut t, &[]);
    t.frames[0].line
  };
  assert_eq!(line(&trace), Some(2));
  assert_eq!(line(&trace), Some(2), "from the cache");
  // A rebuilt map (a longer one: another size) without touching the script.
  std::fs::write(
    dir.join("app.js.map"),
    map_json(&[(0, 0, 41, 0, Some("a.ts"), Some("renamed_f"))]),
  )
  .unwrap();
  assert_eq!(line(&trace), Some(42));
}

#[test]
fn a_runtime_map_serves_a_script_compiled_in_memory() {
  let dir = tmp("runtime");
  let ts = dir.join("app.ts");
  std::fs::write(&ts, "export function hot(n: number) {}\n").unwrap();
  // What tsx ran for app.ts: its code on line 2 (line 1 is a wrapper).
  let json = map_json(&[(1, 100, 0, 7, Some(&url(&ts)), None)]);
  let mut t = Trace {
    resources: vec![url(&ts)],
    frames: vec![frame("hot", Some(0), 2, 113), frame("", Some(0), 1, 1)],
    stacks: vec![Stack {
      frame_id: 0,
      parent_id: None,
    }],
    samples: vec![sample(0)],
    ..Trace::default()
  };
  let mut off = t.clone();
  symbolize(&mut off, &[]);
  assert_eq!(off.source_maps, None, "on disk, app.ts names no map");
  symbolize(&mut t, &[RuntimeMap { url: url(&ts), json }]);
  assert_eq!((t.frames[0].line, t.frames[0].column), (Some(1), Some(8)));
  assert_eq!(
    t.frames[1],
    frame("", Some(0), 1, 1),
    "the top level maps to the only source's start"
  );
  assert_eq!(t.source_maps.unwrap().scripts[0].map.as_deref(), Some("runtime"));
}

#[test]
fn the_cache_holds_to_its_bounds() {
  let json = map_json(&[(0, 0, 0, 0, Some("a.ts"), None), (1, 0, 1, 0, Some("a.ts"), None)]);
  let loaded = || Arc::new(Loaded::parse(json.as_bytes(), &base("/d"), "x".into()).unwrap());
  let one = loaded().bytes();
  let mut c = Cache::default();
  (c.max_maps, c.max_bytes, c.max_others) = (3, one * 10, 5);
  let slot = |o| Slot {
    outcome: o,
    script: None,
    map_file: None,
  };
  for i in 0..10 {
    c.put(Key::Runtime(format!("m{i}"), 0, 0), slot(Outcome::Map(loaded())));
    c.put(Key::Runtime(format!("n{i}"), 0, 0), slot(Outcome::NoMap));
  }
  let s = c.stats();
  assert_eq!((s.maps, s.others, s.bytes), (3, 5, 3 * one));
  // Least recently used out: m9, m8, m7 are in; using m7 keeps it over m8.
  assert!(c.get(&Key::Runtime("m6".into(), 0, 0), |_| true).is_none());
  assert!(c.get(&Key::Runtime("m7".into(), 0, 0), |_| true).is_some());
  c.put(Key::Runtime("m10".into(), 0, 0), slot(Outcome::Map(loaded())));
  assert!(c.get(&Key::Runtime("m8".into(), 0, 0), |_| true).is_none());
  assert!(c.get(&Key::Runtime("m7".into(), 0, 0), |_| true).is_some());
  // By bytes: room for two.
  c.max_bytes = one * 2;
  c.put(Key::Runtime("m11".into(), 0, 0), slot(Outcome::Map(loaded())));
  assert_eq!(c.stats().maps, 2);
  // A map over the bytes bound alone is not kept.
  c.max_bytes = one - 1;
  c.put(Key::Runtime("big".into(), 0, 0), slot(Outcome::Map(loaded())));
  assert!(c.get(&Key::Runtime("big".into(), 0, 0), |_| true).is_none());
  // A stale slot is dropped on sight.
  c.max_bytes = one * 10;
  c.put(Key::Runtime("s".into(), 0, 0), slot(Outcome::NoMap));
  assert!(c.get(&Key::Runtime("s".into(), 0, 0), |_| false).is_none());
  assert!(c.get(&Key::Runtime("s".into(), 0, 0), |_| true).is_none());
}

#[test]
fn hostile_maps_never_panic() {
  // Byte-level mutations of a real map (with names, sources, an index map) through the
  // parser and every lookup, without the panic guard the trace build has.
  let seeds = [
    map_json(&[
      (0, 0, 2, 0, Some("a.ts"), None),
      (0, 9, 2, 16, Some("a.ts"), Some("hotLoop")),
      (3, 4, 7, 6, Some("b.ts"), Some("arrow")),
    ]),
    r#"{"version":3,"sections":[{"offset":{"line":1,"column":2},"map":{"version":3,"sources":["a.ts"],"names":["x"],"mappings":"AAAAA,CAAC;;AACA"}}]}"#.to_string(),
    r#"{"version":3,"sources":[null,"b"],"names":[1,{}],"mappings":"A,AAAA,gBAAgB;;;;+/+/+/+/+/+/+/;AAAAA","sourceRoot":"/r"}"#.to_string(),
  ];
  let mut x = 0x2545_f491_4f6c_dd1du64;
  let mut rand = move || {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    x
  };
  let alphabet = b"{}[]\",:;0123456789+/=ABCDgfhijklmnopqrstuvwxyz-.\\ \n";
  let mut parsed = 0;
  for i in 0..20_000 {
    let mut b = seeds[i % seeds.len()].clone().into_bytes();
    for _ in 0..=(rand() % 6) {
      if b.is_empty() {
        break;
      }
      let at = (rand() as usize) % b.len();
      match rand() % 3 {
        0 => b[at] = alphabet[(rand() as usize) % alphabet.len()],
        1 => {
          b.remove(at);
        }
        _ => b.insert(at, alphabet[(rand() as usize) % alphabet.len()]),
      }
    }
    if let Ok(mut m) = Loaded::parse(&b, &base("/d"), "x".into()) {
      parsed += 1;
      m.set_text("function i(n){}\nvar a=n=>n\n\u{2028}x".into());
      for (l, c) in [(0, 0), (0, 10), (1, 6), (3, 4), (u32::MAX, u32::MAX), (5, 1 << 30)] {
        let _ = m.function_at(l, c, "i");
        let _ = m.function_at(l, c, "a.b.");
        let _ = m.line_of(l, c, 0);
        let _ = m.line_of(l, c, u32::MAX);
      }
    }
  }
  assert!(parsed > 2_000, "the mutations reach the lookups ({parsed} parsed)");
}

#[test]
fn a_malformed_source_maps_extension_is_left_out_when_read() {
  let json = r#"{"resources":[],"frames":[],"stacks":[],"samples":[],"sourceMaps":{"generated":[{"frameId":-1}]}}"#;
  let t = crate::formats::read_input(json.as_bytes()).unwrap().trace;
  assert_eq!(t.source_maps, None);
  let json = r#"{"resources":[],"frames":[],"stacks":[],"samples":[],"sourceMaps":{"mappedFrames":2,"scripts":[{"url":"file:///a.js","map":"inline"}]}}"#;
  let t = crate::formats::read_input(json.as_bytes()).unwrap().trace;
  assert_eq!(t.source_maps.unwrap().scripts[0].map.as_deref(), Some("inline"));
}

#[test]
fn a_trace_without_maps_is_untouched() {
  let dir = tmp("none");
  let js = dir.join("plain.js");
  std::fs::write(&js, "function f() {}\n").unwrap();
  let mut t = Trace {
    resources: vec![url(&js), "node:fs".into(), "file:///nonexistent/x.js".into()],
    frames: vec![
      frame("f", Some(0), 1, 11),
      frame("g", Some(1), 1, 1),
      frame("h", Some(2), 1, 1),
    ],
    stacks: vec![Stack {
      frame_id: 0,
      parent_id: None,
    }],
    samples: vec![sample(0)],
    ..Trace::default()
  };
  let before = t.clone();
  symbolize(&mut t, &[]);
  assert_eq!(t, before);
  assert!(!t.to_json().contains("sourceMaps"));
}
