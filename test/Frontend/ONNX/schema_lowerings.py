"""The ops whose input or output minimum, or whose required inputs, a
version after the newest libonnx 1.12 knows (ai.onnx 17, ai.onnx.ml 3)
lowered, in the schemas of the onnx Python package installed. Past those
opsets SchemaArity.cpp checks only the minimum of the newest schema libonnx
has, so each op printed here must be exempt there (schema-arity.test
checks that the list is what SchemaArity.cpp exempts)."""
import onnx.defs as d

LIMITS = {"": 17, "ai.onnx.ml": 3}


def required(schema):
    single = d.OpSchema.FormalParameterOption.Single
    return {i for i, p in enumerate(schema.inputs) if p.option == single}


lowered = set()
for schema in d.get_all_schemas_with_history():
    limit = LIMITS.get(schema.domain)
    if limit is None or schema.since_version <= limit:
        continue
    try:
        old = d.get_schema(schema.name, limit, schema.domain)
    except d.SchemaError:
        continue  # new after libonnx 1.12: libonnx has no schema to check
    if (schema.min_input < old.min_input or schema.min_output < old.min_output
            or not required(schema) >= required(old)):
        lowered.add(f"{schema.domain or 'ai.onnx'}.{schema.name}")
print("lowered after libonnx 1.12:", ", ".join(sorted(lowered)) or "none")
