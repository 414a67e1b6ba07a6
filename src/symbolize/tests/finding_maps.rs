//! Finding a script's map: its annotation, data: and file: URLs, sources resolved against the map.

use super::*;

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
