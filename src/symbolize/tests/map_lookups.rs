//! Looking frames and line ticks up in a parsed map.

use super::*;

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
