//===- Json.cpp - JSON for the runtime: nlohmann::json, used one way ------===//

#include "Json.h"

#include "Support.h"

namespace kiln::runtime {

Expected<Json> parseJson(std::string_view text, std::string_view source,
                         const Json::parser_callback_t &callback) {
  try {
    return Json::parse(text.begin(), text.end(), callback);
  } catch (const Json::exception &e) {
    // "[json.exception.parse_error.101] parse error at line 1, column 3: ..."
    std::string_view what = e.what();
    if (size_t end = what.find("] "); what.substr(0, 1) == "[" &&
                                      end != std::string_view::npos)
      what.remove_prefix(end + 2);
    return makeError("{}: not valid JSON: {}", source, what);
  }
}

std::string dumpJson(const Json &value, int indent) {
  return value.dump(indent, ' ', /*ensure_ascii=*/false,
                    Json::error_handler_t::replace);
}

} // namespace kiln::runtime
