//===- Json.h - JSON for the runtime: nlohmann::json, used one way -*- C++ -*-===//
//
// Internal to runtime/lib. Every JSON file the runtime writes or reads
// (profiles, traces, safetensors headers) goes through nlohmann::json
// (Debian nlohmann-json3-dev, header-only; docs/runtime.md "Formats"):
// objects keep their members in the order they were added, so files read in
// the order the docs list them; parse errors become the runtime's one-line
// Errors; writing never throws (bytes that are not UTF-8 become U+FFFD).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_LIB_JSON_H
#define KILN_RUNTIME_LIB_JSON_H

#include "kiln/runtime/Error.h"

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace kiln::runtime {

using Json = nlohmann::ordered_json;

/// `text` parsed, or "SOURCE: not valid JSON: WHAT" naming the line and
/// column. `callback` (nlohmann's parser callback) may inspect or drop
/// values as they are parsed.
Expected<Json> parseJson(std::string_view text, std::string_view source,
                         const Json::parser_callback_t &callback = nullptr);

/// `value` as text: compact when `indent` < 0, else one member per line.
std::string dumpJson(const Json &value, int indent = -1);

} // namespace kiln::runtime

#endif // KILN_RUNTIME_LIB_JSON_H
