"""Decodes OTLP profiles requests with the opentelemetry-proto package (an independent
decoder: Python protobuf runtime, descriptors from the opentelemetry-proto release) and
prints them resolved through the dictionary as JSON, one object per input file.

usage: python otlp_decode.py FILE...
"""
import json
import sys

from opentelemetry.proto.collector.profiles.v1development.profiles_service_pb2 import (
    ExportProfilesServiceRequest,
)


def any_value(v):
    kind = v.WhichOneof("value")
    return None if kind is None else getattr(v, kind)


def decode(data):
    req = ExportProfilesServiceRequest()
    req.ParseFromString(data)
    d = req.dictionary
    s = d.string_table
    zero = {
        "string": s[0] == "" if len(s) else False,
        "function": len(d.function_table) > 0 and d.function_table[0].ByteSize() == 0,
        "location": len(d.location_table) > 0 and d.location_table[0].ByteSize() == 0,
        "mapping": len(d.mapping_table) > 0 and d.mapping_table[0].ByteSize() == 0,
        "stack": len(d.stack_table) > 0 and d.stack_table[0].ByteSize() == 0,
        "link": len(d.link_table) > 0 and d.link_table[0].ByteSize() == 0,
        "attribute": len(d.attribute_table) > 0 and d.attribute_table[0].ByteSize() == 0,
    }

    def frame(loc_index):
        loc = d.location_table[loc_index]
        line = loc.lines[0]
        fn = d.function_table[line.function_index]
        return {"name": s[fn.name_strindex], "file": s[fn.filename_strindex], "line": line.line, "column": line.column}

    out = {"zero": zero, "resources": []}
    for rp in req.resource_profiles:
        res = {"attributes": {kv.key: any_value(kv.value) for kv in rp.resource.attributes}, "scopes": []}
        for sp in rp.scope_profiles:
            scope = {"name": sp.scope.name, "version": sp.scope.version, "profiles": []}
            for p in sp.profiles:
                samples = []
                for smp in p.samples:
                    link = None
                    if smp.link_index:
                        lk = d.link_table[smp.link_index]
                        link = {"trace_id": lk.trace_id.hex(), "span_id": lk.span_id.hex()}
                    samples.append({
                        "stack": [frame(i) for i in d.stack_table[smp.stack_index].location_indices],
                        "values": list(smp.values),
                        "timestamps": [str(t) for t in smp.timestamps_unix_nano],
                        "attributes": {s[d.attribute_table[i].key_strindex]: any_value(d.attribute_table[i].value) for i in smp.attribute_indices},
                        "link": link,
                    })
                scope["profiles"].append({
                    "sample_type": [s[p.sample_type.type_strindex], s[p.sample_type.unit_strindex]],
                    "period_type": [s[p.period_type.type_strindex], s[p.period_type.unit_strindex]],
                    "period": p.period,
                    "time_unix_nano": str(p.time_unix_nano),
                    "duration_nano": str(p.duration_nano),
                    "profile_id": p.profile_id.hex(),
                    "samples": samples,
                })
            res["scopes"].append(scope)
        out["resources"].append(res)
    return out


if __name__ == "__main__":
    print(json.dumps([decode(open(f, "rb").read()) for f in sys.argv[1:]]))
