//! OTLP profiles (`opentelemetry/proto/profiles/v1development`, proto v1.10 as the
//! `opentelemetry-proto` crate generates it): a trace as an `ExportProfilesServiceRequest`,
//! the body of `POST /v1development/profiles`.
//!
//! One resource, one scope, and per sample type one profile (v1development has a single
//! sample type per profile): `wall/nanoseconds`, and `cpu/nanoseconds` when CPU time was
//! collected. Every sample keeps its timestamp; its labels become sample attributes, except
//! `trace_id` and `span_id`, which become the sample's link (the dictionary's link table)
//! when both are valid ids. Where a request has both tracers' ids (`dialect.rs`), the link
//! is OpenTelemetry's (`otel_trace_id`, `otel_span_id`) and dd-trace's are left out. Tables
//! share one dictionary, each with its zero value first.

use crate::formats::dialect::{second_ids, OTEL_SPAN_ID, OTEL_TRACE_ID};
use crate::formats::pprof::Timing;
use crate::trace::{Marker, Trace};
use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::profiles::v1development::{
  Function, KeyValueAndUnit, Line, Link, Location, Mapping, Profile, ProfilesDictionary, ResourceProfiles, Sample,
  ScopeProfiles, Stack, ValueType,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message;
use serde::Deserialize;
use std::collections::HashMap;
use std::hash::Hash;

/// What the exporter knows and the trace does not.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OtlpOptions {
  /// Resource attributes, in order (`service.name` first).
  pub resource: Vec<(String, String)>,
  pub scope_name: String,
  pub scope_version: String,
  /// One 32-hex-digit id per profile written (wall, then cpu); missing ones are left empty.
  #[serde(default)]
  pub profile_ids: Vec<String>,
}

/// A table whose entries are interned by a key; entry 0 is the zero value.
struct Table<K, V> {
  ids: HashMap<K, i32>,
  items: Vec<V>,
}

impl<K: Hash + Eq, V: Default> Table<K, V> {
  fn new(zero_key: K) -> Self {
    let mut ids = HashMap::new();
    ids.insert(zero_key, 0);
    Table {
      ids,
      items: vec![V::default()],
    }
  }

  fn id(&mut self, key: K, make: impl FnOnce(&K) -> V) -> i32 {
    if let Some(id) = self.ids.get(&key) {
      return *id;
    }
    let id = self.items.len() as i32;
    self.items.push(make(&key));
    self.ids.insert(key, id);
    id
  }
}

fn hex_bytes(s: &str, len: usize) -> Option<Vec<u8>> {
  if s.len() != len * 2 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
    return None;
  }
  let bytes: Vec<u8> = (0..len)
    .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap_or(0))
    .collect();
  bytes.iter().any(|b| *b != 0).then_some(bytes)
}

fn string_value(v: &str) -> Option<AnyValue> {
  Some(AnyValue {
    value: Some(any_value::Value::StringValue(v.to_owned())),
  })
}

fn ms_to_ns(ms: f64) -> i64 {
  (ms * 1e6).round() as i64
}

/// The trace as an OTLP `ExportProfilesServiceRequest`.
pub fn request(trace: &Trace, timing: &Timing, options: &OtlpOptions) -> ExportProfilesServiceRequest {
  let mut strings: Table<String, String> = Table::new(String::new());
  let mut s = |v: &str| strings.id(v.to_owned(), |k| k.clone());

  // Functions and locations: one each per frame, then the pseudo-frames.
  let mut function_table = vec![Function::default()];
  let mut location_table = vec![Location::default()];
  let mut add = |s: &mut dyn FnMut(&str) -> i32, name: &str, file: &str, line: Option<u32>, column: Option<u32>| {
    let name = s(if name.is_empty() { "(anonymous)" } else { name });
    function_table.push(Function {
      name_strindex: name,
      system_name_strindex: name,
      filename_strindex: s(file),
      start_line: line.map_or(0, i64::from),
    });
    let function_index = function_table.len() as i32 - 1;
    location_table.push(Location {
      lines: vec![Line {
        function_index,
        line: line.map_or(0, i64::from),
        column: column.map_or(0, i64::from),
      }],
      ..Location::default()
    });
    location_table.len() as i32 - 1
  };
  for f in &trace.frames {
    let file = f
      .resource_id
      .and_then(|r| trace.resources.get(r as usize))
      .map_or("", String::as_str);
    add(&mut s, &f.name, file, f.line, f.column);
  }
  // Frame i is location i + 1.
  let idle = add(&mut s, "(idle)", "", None, None);
  let gc = add(&mut s, "(garbage collector)", "", None, None);
  let program = add(&mut s, "(program)", "", None, None);
  let root = add(&mut s, "(root)", "", None, None);

  // Per context: its attributes and its link.
  let mut attributes: Table<(i32, String), KeyValueAndUnit> = Table::new((0, String::new()));
  let mut links: Table<(Vec<u8>, Vec<u8>), Link> = Table::new((Vec::new(), Vec::new()));
  let contexts: Vec<(Vec<i32>, i32)> = trace
    .contexts
    .iter()
    .map(|c| {
      let get = |key: &str| c.labels.get(key);
      // Both tracers' ids: OpenTelemetry's are the ones an OTLP backend joins.
      let both = second_ids(&c.labels);
      let (trace_key, span_key) = if both {
        (OTEL_TRACE_ID, OTEL_SPAN_ID)
      } else {
        ("trace_id", "span_id")
      };
      let link = match (
        get(trace_key).and_then(|t| hex_bytes(t, 16)),
        get(span_key).and_then(|v| hex_bytes(v, 8)),
      ) {
        (Some(t), Some(sp)) => Some(links.id((t, sp), |(t, sp)| Link {
          trace_id: t.clone(),
          span_id: sp.clone(),
        })),
        _ => None,
      };
      let attrs = c
        .labels
        .iter()
        .filter(|(k, _)| {
          let linked = link.is_some() && (*k == trace_key || *k == span_key);
          let other_tracer = both && (*k == "trace_id" || *k == "span_id");
          !linked && !other_tracer
        })
        .map(|(k, v)| {
          let key = s(k);
          attributes.id((key, v.to_owned()), |(key, v)| KeyValueAndUnit {
            key_strindex: *key,
            value: string_value(v),
            unit_strindex: 0,
          })
        })
        .collect();
      (attrs, link.unwrap_or(0))
    })
    .collect();

  // Stacks, leaf first (as pprof), interned.
  let mut stacks: Table<Vec<i32>, Stack> = Table::new(Vec::new());
  let unix_ns = |ms: f64| {
    ((timing.time_origin_unix_ms.trunc() as i64) * 1_000_000 + ms_to_ns(timing.time_origin_unix_ms.fract() + ms)) as u64
  };
  let mut wall = Vec::with_capacity(trace.samples.len());
  let mut cpu = Vec::new();
  let mut prev_ms = timing.start_ms;
  // A weighted trace (a heap profile): each sample's bytes and objects, no time line.
  let weight = trace.weight.as_ref();
  for (i, sample) in trace.samples.iter().enumerate() {
    let wall_ns = ms_to_ns((sample.timestamp - prev_ms).max(0.0));
    prev_ms = sample.timestamp;
    let mut path: Vec<i32> = trace.frames_leaf_first(sample.stack_id).map(|f| f as i32 + 1).collect();
    match sample.marker {
      Some(Marker::Idle) => path.insert(0, idle),
      Some(Marker::Gc) => path.insert(0, gc),
      Some(Marker::Other) => path.insert(0, program),
      None if path.is_empty() => path.push(root),
      None => {}
    }
    let stack_index = stacks.id(path, |p| Stack {
      location_indices: p.clone(),
    });
    let (attribute_indices, link_index) = sample
      .context_id
      .and_then(|c| contexts.get(c as usize))
      .cloned()
      .unwrap_or_default();
    if let Some(w) = weight {
      let bytes = w.values.get(i).copied().unwrap_or(0.0).round() as i64;
      let objects = w.counts.as_ref().and_then(|c| c.get(i)).copied().unwrap_or(0.0).round() as i64;
      let out = Sample {
        stack_index,
        attribute_indices,
        link_index,
        values: vec![bytes],
        timestamps_unix_nano: Vec::new(),
      };
      cpu.push(Sample {
        values: vec![objects],
        ..out.clone()
      });
      wall.push(out);
      continue;
    }
    let at_ns = unix_ns(sample.timestamp);
    let out = Sample {
      stack_index,
      attribute_indices,
      link_index,
      values: vec![wall_ns],
      timestamps_unix_nano: vec![at_ns],
    };
    if timing.cpu {
      if let Some(cpu_ms) = sample.cpu_time {
        cpu.push(Sample {
          values: vec![ms_to_ns(cpu_ms)],
          ..out.clone()
        });
      }
    }
    wall.push(out);
  }

  let mut s = |v: &str| strings.id(v.to_owned(), |k| k.clone());
  let value_type = |s: &mut dyn FnMut(&str) -> i32, t: &str, u: &str| ValueType {
    type_strindex: s(t),
    unit_strindex: s(u),
  };
  let wall_type = value_type(&mut s, "wall", "nanoseconds");
  let cpu_type = value_type(&mut s, "cpu", "nanoseconds");
  let profile_id = |i: usize| {
    options
      .profile_ids
      .get(i)
      .and_then(|h| hex_bytes(h, 16))
      .unwrap_or_default()
  };
  let profile = |sample_type: ValueType, samples: Vec<Sample>, id: Vec<u8>| Profile {
    sample_type: Some(sample_type),
    samples,
    time_unix_nano: unix_ns(timing.start_ms),
    duration_nano: ms_to_ns((timing.end_ms - timing.start_ms).max(0.0)) as u64,
    period_type: Some(wall_type),
    period: timing.period_ns,
    profile_id: id,
    ..Profile::default()
  };
  let profiles = if let Some(w) = weight {
    // The heap: `inuse_space/bytes` and `inuse_objects/count` (as pprof's heap profile),
    // the sampling interval in bytes as period, after the CPU profiles' ids.
    let space = value_type(&mut s, &w.kind, &w.unit);
    let objects = value_type(&mut s, w.count_kind.as_deref().unwrap_or("inuse_objects"), "count");
    let heap = |sample_type: ValueType, samples: Vec<Sample>, id: Vec<u8>| Profile {
      period_type: Some(space),
      ..profile(sample_type, samples, id)
    };
    vec![heap(space, wall, profile_id(2)), heap(objects, cpu, profile_id(3))]
  } else {
    let mut profiles = vec![profile(wall_type, wall, profile_id(0))];
    if timing.cpu {
      profiles.push(profile(cpu_type, cpu, profile_id(1)));
    }
    profiles
  };

  ExportProfilesServiceRequest {
    resource_profiles: vec![ResourceProfiles {
      resource: Some(Resource {
        attributes: options
          .resource
          .iter()
          .map(|(k, v)| KeyValue {
            key: k.clone(),
            value: string_value(v),
            ..KeyValue::default()
          })
          .collect(),
        ..Resource::default()
      }),
      scope_profiles: vec![ScopeProfiles {
        scope: Some(InstrumentationScope {
          name: options.scope_name.clone(),
          version: options.scope_version.clone(),
          ..InstrumentationScope::default()
        }),
        profiles,
        schema_url: String::new(),
      }],
      schema_url: String::new(),
    }],
    dictionary: Some(ProfilesDictionary {
      mapping_table: vec![Mapping::default()],
      location_table,
      function_table,
      link_table: links.items,
      string_table: strings.items,
      attribute_table: attributes.items,
      stack_table: stacks.items,
    }),
  }
}

/// The trace as the protobuf bytes of an OTLP `ExportProfilesServiceRequest`.
pub fn encode(trace: &Trace, timing: &Timing, options: &OtlpOptions) -> Vec<u8> {
  request(trace, timing, options).encode_to_vec()
}

#[cfg(test)]
mod tests;
