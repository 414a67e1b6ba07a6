use super::*;

#[test]
fn layouts_are_found_by_major_and_minor() {
  assert_eq!(layout_for("13.6.233.17-node.53").map(|l| l.cped), Some(632));
  assert_eq!(layout_for("14.6.202.34-node.34").map(|l| l.cped), Some(680));
  assert!(layout_for("11.3.244.8-node.25").is_none(), "Node 20 keeps its hooks");
  assert!(layout_for("garbage").is_none());
}
