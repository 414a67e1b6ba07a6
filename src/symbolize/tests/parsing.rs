//! The map parser: read as the sourcemap crate reads it, refused by what it expands to.

use super::*;

/// The `sourcemap` crate's reading of a map, as `Loaded` holds it: sorted mappings, the
/// sources prefixed with `sourceRoot` and resolved, the names.
fn crate_reading(json: &str, base: &Base) -> Option<(Vec<crate::symbolize::map::Mapping>, Vec<String>, Vec<String>)> {
  let sm = match sourcemap::decode_slice(json.as_bytes()).ok()? {
    sourcemap::DecodedMap::Regular(sm) => sm,
    _ => return None,
  };
  let mappings = sm
    .tokens()
    .map(|t| {
      let r = t.get_raw_token();
      crate::symbolize::map::Mapping {
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
    let key = |m: &crate::symbolize::map::Mapping| (m.dst_line, m.dst_col, m.src, m.src_line, m.src_col, m.name);
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
