//! Tests of source-map lookup, parsing, the cache and mapping a trace. Over 600 lines: test cases, each short.

use super::cache::{Cache, Key, Outcome, Slot};
use super::locate::{self, Base, Scan};
use super::map::{byte_of_utf16, identifier_before, utf16_len, Loaded, Text};
use super::*;
use crate::trace::{LineTicks, Sample, Stack};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

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

#[test]
fn the_annotation_is_the_last_comment_of_the_script() {
  let found = |s: &str| locate::annotation(s.as_bytes(), true);
  let url = |u: &str| Scan::Found(u.into());
  assert_eq!(found("f();\n//# sourceMappingURL=app.js.map\n"), url("app.js.map"));
  assert_eq!(
    found("f();\r\n//# sourceMappingURL=app.js.map  \r\n\n  \n"),
    url("app.js.map")
  );
  assert_eq!(found("f();\n//@ sourceMappingURL=old.map"), url("old.map"));
  assert_eq!(found("f();\n/*# sourceMappingURL=a.css.map */\n"), url("a.css.map"));
  // Comment lines after it are allowed (a license banner, a second tool's comment).
  assert_eq!(found("f();\n//# sourceMappingURL=a.map\n// built by x\n"), url("a.map"));
  // The last one wins.
  assert_eq!(
    found("//# sourceMappingURL=first.map\n//# sourceMappingURL=last.map\n"),
    url("last.map")
  );
  // Code after it: the comment belongs to something else (a concatenated file).
  assert_eq!(found("//# sourceMappingURL=a.map\nf();\n"), Scan::None);
  // Not a comment: inside a string of the script's code.
  assert_eq!(found("const s = '//# sourceMappingURL=a.map';\n"), Scan::None);
  assert_eq!(found("//# sourceMappingURL=\n"), Scan::None);
  assert_eq!(found("//# sourceMappingURL=a b.map\n"), Scan::None);
  assert_eq!(found(""), Scan::None);
  assert_eq!(found("\n\n"), Scan::None);
  // A tail of a file whose last line starts before it (an inline map): read more.
  assert_eq!(locate::annotation(b"AAAA;AAAA\n", false), Scan::Truncated);
  assert_eq!(
    locate::annotation(b"x\n//# sourceMappingURL=a.map\n", false),
    url("a.map")
  );
}

#[test]
fn data_urls_decode_base64_and_percent_encoded_json() {
  let json = br#"{"version":3,"sources":["a.ts"],"names":[],"mappings":"AAAA"}"#;
  let b64 = data_encoding::BASE64.encode(json);
  for prefix in [
    "application/json;base64,",
    "application/json;charset=utf-8;base64,",
    "application/json;charset=utf8;base64,",
  ] {
    assert_eq!(
      locate::decode_data_url(&format!("{prefix}{b64}")).unwrap(),
      json,
      "{prefix}"
    );
  }
  let pct = "application/json,%7B%22version%22%3A3%7D";
  assert_eq!(locate::decode_data_url(pct).unwrap(), br#"{"version":3}"#);
  assert!(locate::decode_data_url("text/plain;base64,AAAA")
    .unwrap_err()
    .contains("text/plain"));
  assert!(locate::decode_data_url("application/json;base64,@@@@")
    .unwrap_err()
    .contains("base64"));
  assert!(locate::decode_data_url("application/json;base64").is_err());
}

#[test]
fn file_urls_and_paths_convert_as_node_does() {
  let p = Path::new("/tmp/a b/c#d?e%f/é.ts");
  let u = url(p);
  assert_eq!(u, "file:///tmp/a%20b/c%23d%3Fe%25f/%C3%A9.ts");
  assert_eq!(locate::file_url_to_path(&u).unwrap(), p);
  assert_eq!(
    locate::file_url_to_path("file://localhost/x/y.js").unwrap(),
    Path::new("/x/y.js")
  );
  assert_eq!(
    locate::file_url_to_path("file:///x/y.js?v=1#z").unwrap(),
    Path::new("/x/y.js")
  );
  assert_eq!(locate::file_url_to_path("file://other-host/x.js"), None);
  assert_eq!(locate::file_url_to_path("node:fs"), None);
  assert_eq!(locate::file_url_to_path("file:///x%00y"), None);
  assert_eq!(locate::normalize(Path::new("/a/b/../../../c/./d")), Path::new("/c/d"));
}

#[test]
fn sources_resolve_against_the_maps_directory() {
  let b = base("/app/dist");
  assert_eq!(locate::resolve_source("../src/app.ts", &b), "file:///app/src/app.ts");
  assert_eq!(locate::resolve_source("app.ts", &b), "file:///app/dist/app.ts");
  assert_eq!(locate::resolve_source("/abs/app.ts", &b), "file:///abs/app.ts");
  assert_eq!(locate::resolve_source("file:///x/../y/app.ts", &b), "file:///y/app.ts");
  assert_eq!(
    locate::resolve_source("webpack://app/./src/a.ts", &b),
    "webpack://app/./src/a.ts"
  );
  assert_eq!(
    locate::resolve_source("my%20dir/a.ts", &b),
    "file:///app/dist/my%20dir/a.ts"
  );
}

#[test]
fn a_functions_name_is_found_just_before_it() {
  let at = |before: &str, name: &str| identifier_before(before, name);
  assert_eq!(at("function i", "i"), Some(9));
  assert_eq!(at("  async run", "run"), Some(8));
  assert_eq!(at("var a=", "a"), Some(4));
  assert_eq!(at("var a = async ", "a"), Some(4));
  assert_eq!(at("x.onload = function ", "onload"), Some(2));
  assert_eq!(at("{go: async function*", "go"), Some(1));
  assert_eq!(at("const ab=", "b"), None, "a name's tail is not the name");
  assert_eq!(at("if (a==", "a"), None);
  assert_eq!(at("return ", "a"), None);
  assert_eq!(at("", "a"), None);
}

#[test]
fn columns_of_long_lines_with_other_scripts_find_their_bytes() {
  // Minified lines are long; a column's byte comes from the nearest mark, not a scan.
  let line: String = (0..5000)
    .map(|i| match i % 7 {
      0 => 'é',
      1 => '😀',
      _ => 'a',
    })
    .collect();
  let text = Text::new(format!("ascii line\r\n{line}\u{2028}y"));
  let source = text.line(1).unwrap();
  assert_eq!(source, line);
  let total = utf16_len(source);
  for col in (0..=total + 2).step_by(13) {
    assert_eq!(text.byte_of(1, source, col), byte_of_utf16(source, col), "column {col}");
  }
  assert_eq!(text.byte_of(0, text.line(0).unwrap(), 5), Some(5));
  assert_eq!(text.line(2), Some("y"));
}

#[test]
fn a_function_maps_by_the_mapping_on_its_own_line() {
  let json = map_json(&[
    (0, 0, 9, 0, Some("a.ts"), None),        // line 0: module code
    (2, 4, 2, 4, Some("a.ts"), None),        // line 2: `function f(` at col 4
    (2, 13, 2, 20, Some("a.ts"), None),      // its body
    (4, 6, 7, 0, None, None),                // line 4: generated code (no source)
    (5, 10, 8, 3, Some("b.ts"), Some("nm")), // line 5: starts after col 0
  ]);
  let m = Loaded::parse(json.as_bytes(), &base("/d"), "x".into()).unwrap();
  let at = |l, c| m.function_at(l, c, "f").map(|o| (o.url.to_string(), o.line, o.column));
  assert_eq!(at(2, 12), Some(("file:///d/a.ts".into(), 2, 4)));
  assert_eq!(at(2, 4), Some(("file:///d/a.ts".into(), 2, 4)));
  // Nothing on line 3: not the mapping of line 2.
  assert_eq!(at(3, 5), None);
  // Before the first mapping of line 5: the first one after it on the line.
  assert_eq!(at(5, 2), Some(("file:///d/b.ts".into(), 8, 3)));
  // A mapping without a source: the frame is code the tool added.
  assert_eq!(at(4, 9), None);
  // The script's top level (1:1) with two sources and nothing at 0:0 mapped... line 0 is.
  assert_eq!(at(0, 0), Some(("file:///d/a.ts".into(), 9, 0)));
  // One source, nothing at 0:0: its start.
  let one = Loaded::parse(
    map_json(&[(3, 0, 1, 0, Some("only.ts"), None)]).as_bytes(),
    &base("/d"),
    "x".into(),
  )
  .unwrap();
  let top = one.function_at(0, 0, "").unwrap();
  assert_eq!((&*top.url, top.line, top.column), ("file:///d/only.ts", 0, 0));
  assert_eq!(one.function_at(0, 5, "g"), None);
}

#[test]
fn a_line_tick_maps_when_its_line_comes_from_one_original_line() {
  let json = map_json(&[
    (0, 0, 0, 0, Some("lib.ts"), None),
    (0, 5, 10, 0, Some("a.ts"), None),
    (0, 9, 11, 0, Some("a.ts"), None),
    (0, 20, 12, 0, Some("a.ts"), None),
  ]);
  let m = Loaded::parse(json.as_bytes(), &base("/d"), "x".into()).unwrap();
  // Sources are numbered in the order the builder met them: lib.ts 0, a.ts 1.
  // Line 0 holds a.ts lines 10 to 12 (minified): which one a tick was on is unknown.
  assert_eq!(m.line_of(0, 0, 1), None);
  assert_eq!(m.line_of(0, 6, 1), None);
  // From column 10 on (a function starting there), only line 12.
  assert_eq!(m.line_of(0, 10, 1), Some(12));
  assert_eq!(m.line_of(0, 0, 0), Some(0));
  assert_eq!(m.line_of(0, 21, 1), None);
  assert_eq!(m.line_of(1, 0, 1), None);
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

/// The `sourcemap` crate's reading of a map, as `Loaded` holds it: sorted mappings, the
/// sources prefixed with `sourceRoot` and resolved, the names.
fn crate_reading(json: &str, base: &Base) -> Option<(Vec<super::map::Mapping>, Vec<String>, Vec<String>)> {
  let sm = match sourcemap::decode_slice(json.as_bytes()).ok()? {
    sourcemap::DecodedMap::Regular(sm) => sm,
    _ => return None,
  };
  let mappings = sm
    .tokens()
    .map(|t| {
      let r = t.get_raw_token();
      super::map::Mapping {
        dst_line: r.dst_line,
        dst_col: r.dst_col,
        src: r.src_id,
        src_line: r.src_line,
        src_col: r.src_col,
        name: r.name_id,
      }
    })
    .collect();
  let sources = (0..sm.get_source_count())
    .map(|i| locate::resolve_source(sm.get_source(i).unwrap_or(""), base))
    .collect();
  let names = sm.names().map(str::to_owned).collect();
  Some((mappings, sources, names))
}

#[test]
fn the_parser_reads_maps_as_the_sourcemap_crate_does() {
  // Random maps the crate writes (and some edits of them): the same mappings, sources and
  // names, in the same order.
  let mut x = 0x9e37_79b9_7f4a_7c15u64;
  let mut rand = move |n: u64| {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    x % n
  };
  let b = base("/app/dist");
  for round in 0..400 {
    let sources = ["a.ts", "../src/b.ts", "/abs/c.ts", "webpack://x/d.ts", "", "e f%20g.ts"];
    let names = ["hot", "", "ünï", "a\"b"];
    let mut tokens = Vec::new();
    for _ in 0..rand(60) {
      let src = (rand(4) > 0).then(|| sources[rand(sources.len() as u64) as usize]);
      let name = (src.is_some() && rand(3) == 0).then(|| names[rand(names.len() as u64) as usize]);
      tokens.push((
        rand(30) as u32,
        rand(200) as u32,
        rand(500) as u32,
        rand(80) as u32,
        src,
        name,
      ));
    }
    let mut json = map_json(&tokens);
    if round % 3 == 0 {
      let root = ["/root", "src/", "https://cdn.example/r", ""][round % 4];
      json = json.replacen('{', &format!("{{\"sourceRoot\":{root:?},"), 1);
    }
    let ours = Loaded::parse(json.as_bytes(), &b, "x".into()).unwrap();
    let (mappings, sources, names) = crate_reading(&json, &b).unwrap();
    let key = |m: &super::map::Mapping| (m.dst_line, m.dst_col, m.src, m.src_line, m.src_col, m.name);
    let mut theirs = mappings;
    theirs.sort_by_key(key);
    let mut mine = ours.mappings.clone();
    mine.sort_by_key(key);
    assert_eq!(mine, theirs, "{json}");
    assert_eq!(
      ours.sources.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
      sources,
      "{json}"
    );
    assert_eq!(
      ours.names.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
      names,
      "{json}"
    );
  }
}

#[test]
fn a_map_is_refused_by_what_it_expands_to() {
  let b = base("/d");
  let parse = |json: String| Loaded::parse(json.as_bytes(), &b, "x".into());
  let strings = |n: usize, s: &str| format!("[{}]", vec![format!("{s:?}"); n].join(","));
  // sourceRoot × sources: 64 KiB × 4,000 (250 MiB resolved, from a 100 KiB map).
  let root = "r".repeat(64 << 10);
  let err = parse(format!(
    r#"{{"version":3,"sourceRoot":"{root}","sources":{},"mappings":"AAAA"}}"#,
    strings(4000, "a")
  ))
  .err()
  .unwrap();
  assert!(
    err.contains("sources expand to more than 16 MiB (sourceRoot × sources)"),
    "{err}"
  );
  // A root that normalizes away costs its work all the same.
  let dots = "a/../".repeat(20 << 10);
  let err = parse(format!(
    r#"{{"version":3,"sourceRoot":"{dots}","sources":{},"mappings":"AAAA"}}"#,
    strings(2000, "a")
  ))
  .err()
  .unwrap();
  assert!(err.contains("sources expand"), "{err}");
  // (Index maps' sections count together: __test__/sourcemaps-bounds.test.js; each case
  // here resolves 16 MiB of URLs, slow in a debug build.)
  // Names: 1.1 million empty ones (in a map of 3.3 MB).
  let err = parse(format!(
    r#"{{"version":3,"sources":["a"],"names":{},"mappings":"AAAAA"}}"#,
    strings(1_100_000, "")
  ))
  .err()
  .unwrap();
  assert!(err.contains("names expand to more than 16 MiB"), "{err}");
  // Mappings: counted in the text (over all sections) before any is decoded.
  let many = "A,".repeat(limits::MAP_MAPPINGS / 2 + 1);
  let two = format!(
    r#"{{"version":3,"sections":[{{"offset":{{"line":0,"column":0}},"map":{{"mappings":"{many}"}}}},{{"offset":{{"line":1,"column":0}},"map":{{"mappings":"{many}"}}}}]}}"#
  );
  let err = parse(two).err().unwrap();
  assert!(
    err.contains("it has 4,000,002 mappings; maps are used up to 4,000,000"),
    "{err}"
  );
  // Nesting.
  let mut deep = r#"{"version":3,"sources":["a"],"mappings":"AAAA"}"#.to_string();
  for _ in 0..6 {
    deep = format!(r#"{{"version":3,"sections":[{{"offset":{{"line":0,"column":0}},"map":{deep}}}]}}"#);
  }
  assert!(parse(deep).err().unwrap().contains("nested too deep"));
  // Every bound's message is one the warnings know as a bound (and a broken map is not).
  for reason in [
    "its sources expand to more than 16 MiB (sourceRoot × sources)",
    "its names expand to more than 16 MiB",
    "it has 4,000,002 mappings; maps are used up to 4,000,000",
    "the source map file:///a.map is 40.0 MiB; maps are read up to 32.0 MiB",
    "the script is 70.0 MiB; a script with an inline map is read up to 64.0 MiB",
    "the source map file:///a.map grew past 32.0 MiB while read",
  ] {
    assert!(super::over_a_bound(reason), "{reason}");
  }
  assert!(!super::over_a_bound("not a valid source map: expected value"));
  assert!(!super::over_a_bound("the source map file:///a.map is not there"));
}

#[test]
fn what_parsing_accepts_besides() {
  let b = base("/d");
  // Escapes in mappings and sources, a `)]}'` header, a byte order mark, names that are
  // numbers, sources that are null.
  let json =
    "\u{feff})]}'\n{\"version\":3,\"sources\":[null,\"a\\u002ets\"],\"names\":[7,\"x\"],\"mappings\":\"\\u0041CAAC\"}";
  let m = Loaded::parse(json.as_bytes(), &b, "x".into()).unwrap();
  assert_eq!(&*m.sources[1], "file:///d/a.ts");
  assert_eq!(&*m.names[0], "7");
  assert_eq!(m.mappings.len(), 1);
  assert_eq!((m.mappings[0].src, m.mappings[0].name), (1, 1));
  // Out-of-range references, bad digits, too many fields: not a valid map.
  for bad in ["AAAA,ACAA", "AAAAC", "AA", "AAAAAA", "A!AA", "g"] {
    let json = format!(r#"{{"version":3,"sources":["a"],"names":[],"mappings":"{bad}"}}"#);
    let err = Loaded::parse(json.as_bytes(), &b, "x".into()).err();
    assert!(
      err.as_deref().is_some_and(|e| e.contains("not a valid source map")),
      "{bad}: {err:?}"
    );
  }
}

#[test]
fn sources_content_is_kept_when_asked_and_within_bounds() {
  let b = base("/d");
  let json =
    r#"{"version":3,"sources":["a.ts","b.ts","c.ts"],"sourcesContent":["one\ntwo","",null],"mappings":"AAAA;ACAA"}"#;
  let kept = Loaded::parse_with_content(json.as_bytes(), &b, "x".into()).unwrap();
  assert_eq!(kept.content(0), Some("one\ntwo"));
  assert_eq!(kept.content(1), Some(""));
  assert_eq!((kept.content(2), kept.content(3)), (None, None));
  assert!(!kept.content_not_asked());
  let plain = Loaded::parse(json.as_bytes(), &b, "x".into()).unwrap();
  assert!(plain.content_not_asked() && plain.content(0).is_none());
  assert!(plain.bytes() < kept.bytes());
  // Over its bound (the map with its text over what the cache holds): the map is used,
  // without the text.
  let json = r#"{"version":3,"sources":["a.ts"],"sourcesContent":["0123456789"],"mappings":"AAAA"}"#;
  let within = |limit| super::parse::parse_within(json.as_bytes(), &b, "x".into(), true, limit).unwrap();
  assert_eq!(within(1 << 20).content(0), Some("0123456789"));
  let over = within(5);
  assert!(over.content(0).is_none());
  assert!(
    !over.content_not_asked(),
    "not parsed again for it: it would be over again"
  );
  let just = within(within(1 << 20).bytes() - 1);
  assert!(just.content(0).is_none(), "the text and the rest together are bounded");
  assert_eq!(over.mappings.len(), 1);
  // An index map's sections: each section's texts go with its own sources.
  let json = r#"{"version":3,"sections":[
    {"offset":{"line":0,"column":0},"map":{"version":3,"sources":["a.ts"],"sourcesContent":["A"],"mappings":"AAAA"}},
    {"offset":{"line":1,"column":0},"map":{"version":3,"sources":["b.ts","c.ts"],"mappings":"AAAA"}},
    {"offset":{"line":2,"column":0},"map":{"version":3,"sources":["d.ts"],"sourcesContent":["D"],"mappings":"AAAA"}}]}"#;
  let m = Loaded::parse_with_content(json.as_bytes(), &b, "x".into()).unwrap();
  assert_eq!(
    (0..4).map(|i| m.content(i)).collect::<Vec<_>>(),
    vec![Some("A"), None, None, Some("D")]
  );
}

#[test]
fn source_text_comes_from_loaded_scripts_and_maps_content_only() {
  let dir = tmp("text");
  // app.js (loaded), secret.txt (named by a trace, never loaded), a map with content.
  let app = dir.join("app.js");
  std::fs::write(&app, "function f() {\r\n  hot();\u{2028}  other();\n}\n").unwrap();
  let secret = dir.join("secret.txt");
  std::fs::write(&secret, "password=1\n").unwrap();
  let gen = write_script(
    &dir,
    "gen.js",
    "function g() {\n  x();\n}\n",
    r#"{"version":3,"sources":["orig.ts"],"sourcesContent":["// one\nconst g = () => {\n  x(); // two\n};"],"mappings":"AACA;AACA"}"#,
  );
  let resources = vec![url(&app), url(&secret), gen];
  let trace = || Trace {
    resources: resources.clone(),
    frames: (0..3).map(|r| frame("f", Some(r), 1, 11)).collect(),
    stacks: (0..3)
      .map(|f| Stack {
        frame_id: f,
        parent_id: None,
      })
      .collect(),
    samples: (0..3).map(sample).collect(),
    line_ticks: (0..3)
      .flat_map(|s| {
        [2, 3].map(|line| LineTicks {
          stack_id: s,
          line,
          ticks: 1,
        })
      })
      .collect(),
    ..Trace::default()
  };
  // A trace from this process's recording: app.js and secret.txt are its scripts (as V8
  // named them); the map adds orig.ts.
  let mut t = trace();
  let scripts: std::collections::HashSet<String> = [url(&app)].into_iter().collect();
  let contents = map_frames(&mut t, &[], true);
  text::add(&mut t, Some(&scripts), &contents);
  let text = t.source_text.clone().unwrap();
  let lines = |u: &str| text.get(u).cloned().unwrap_or_default();
  assert_eq!(
    lines(&url(&app)),
    [
      (1, "function f() {".to_string()),
      (2, "  hot();".into()),
      (3, "  other();".into())
    ]
    .into()
  );
  assert!(
    lines(&url(&secret)).is_empty(),
    "a file the trace names, not a script of it"
  );
  assert_eq!(
    lines(&url(&dir.join("orig.ts"))),
    [(2, "const g = () => {".to_string()), (3, "  x(); // two".into())].into()
  );
  // The same trace as a profile from elsewhere: the maps' text only.
  let mut t = trace();
  build(&mut t, Some(&[]), TextFrom::Maps);
  assert_eq!(
    t.source_text.unwrap().keys().cloned().collect::<Vec<_>>(),
    vec![url(&dir.join("orig.ts"))]
  );
  // build with the recording's scripts: every resource before mapping (app.js, secret.txt
  // as V8's own scripts here).
  let mut t = trace();
  build(&mut t, None, TextFrom::MapsAndScripts);
  assert!(t.source_text.unwrap().contains_key(&url(&secret)));
  // A trace that carries text keeps it; one without line ticks gets none.
  let mut t = trace();
  t.source_text = Some([("file:///x.js".to_string(), [(1, "kept".to_string())].into())].into());
  build(&mut t, Some(&[]), TextFrom::MapsAndScripts);
  assert_eq!(t.source_text.unwrap().len(), 1);
  let mut t = Trace {
    line_ticks: vec![],
    ..trace()
  };
  build(&mut t, Some(&[]), TextFrom::MapsAndScripts);
  assert_eq!(t.source_text, None);
}

#[test]
fn source_text_is_bounded_and_survives_a_round_trip() {
  let dir = tmp("text-bounds");
  let long = dir.join("long.js");
  std::fs::write(&long, format!("{}\n{}\n", "é".repeat(500), "y".repeat(10))).unwrap();
  let huge = dir.join("huge.js");
  std::fs::File::create(&huge)
    .unwrap()
    .set_len(text::FILE_BYTES + 1)
    .unwrap();
  let resources = vec![url(&long), url(&huge)];
  let mut t = Trace {
    resources: resources.clone(),
    frames: vec![frame("f", Some(0), 1, 1), frame("g", Some(1), 1, 1)],
    stacks: (0..2)
      .map(|f| Stack {
        frame_id: f,
        parent_id: None,
      })
      .collect(),
    samples: vec![sample(0), sample(1)],
    line_ticks: (1..=text::LINES as u32 + 10)
      .map(|line| LineTicks {
        stack_id: 0,
        line,
        ticks: 1,
      })
      .chain([LineTicks {
        stack_id: 1,
        line: 1,
        ticks: 1,
      }])
      .collect(),
    ..Trace::default()
  };
  build(&mut t, None, TextFrom::MapsAndScripts);
  let text = t.source_text.clone().unwrap();
  let lines = &text[&url(&long)];
  assert_eq!(lines[&1], format!("{}…", "é".repeat(text::LINE_CHARS)));
  assert_eq!(lines[&2], "y".repeat(10));
  assert_eq!(lines.len(), 3, "lines past the end have none: {:?}", lines.keys());
  assert!(!text.contains_key(&url(&huge)), "a file over the bound is not read");
  // At most LINES lines a trace.
  let many = dir.join("many.js");
  std::fs::write(&many, "x\n".repeat(text::LINES + 100)).unwrap();
  let mut m = Trace {
    resources: vec![url(&many)],
    frames: vec![frame("f", Some(0), 1, 1)],
    stacks: vec![Stack {
      frame_id: 0,
      parent_id: None,
    }],
    samples: vec![sample(0)],
    line_ticks: (1..=text::LINES as u32 + 50)
      .map(|line| LineTicks {
        stack_id: 0,
        line,
        ticks: 1,
      })
      .collect(),
    ..Trace::default()
  };
  build(&mut m, None, TextFrom::MapsAndScripts);
  assert_eq!(m.source_text.unwrap()[&url(&many)].len(), text::LINES);
  // Through JSON and back, and lenient about a malformed one.
  let back = crate::formats::read_input(t.to_json().as_bytes()).unwrap().trace;
  assert_eq!(back.source_text, t.source_text);
  let json = r#"{"resources":[],"frames":[],"stacks":[],"samples":[],"sourceText":{"file:///a.js":{"x":1}}}"#;
  assert_eq!(
    crate::formats::read_input(json.as_bytes()).unwrap().trace.source_text,
    None
  );
}
