//! The hot lines' text: maps' sourcesContent and loaded scripts, within bounds.

use super::*;

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
