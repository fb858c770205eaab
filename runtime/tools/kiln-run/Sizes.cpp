//===- Sizes.cpp - kiln-run --sizes: sizes of symbolic dims ---------------===//

#include "Sizes.h"

#include <fmt/core.h>

#include <cerrno>
#include <cstdlib>

namespace kiln::runtime::tools {

Expected<SizeFlag> parseSizeFlag(const std::string &text) {
  size_t equals = text.find('=');
  auto bad = [&](const std::string &why) {
    return Error::failure(fmt::format(
        "--sizes '{}': {} (expected NAME=SIZE[,SIZE...], e.g. N=1,8,32)", text,
        why));
  };
  if (equals == std::string::npos || equals == 0)
    return bad("no NAME=");
  SizeFlag flag;
  flag.symbol = text.substr(0, equals);
  size_t start = equals + 1;
  while (true) {
    size_t end = std::min(text.find(',', start), text.size());
    std::string value = text.substr(start, end - start);
    char *stop = nullptr;
    errno = 0;
    long long parsed = std::strtoll(value.c_str(), &stop, 10);
    if (value.empty() || *stop != '\0' || errno != 0 || parsed < 1)
      return bad(fmt::format("'{}' is not a size (an integer >= 1)", value));
    flag.values.push_back(parsed);
    if (end == text.size())
      break;
    start = end + 1;
  }
  return flag;
}

Expected<std::vector<SymbolSizes>>
sizesToRun(const Artifact &artifact, const std::vector<SizeFlag> &flags) {
  SymbolSizes base = compiledSizes(artifact);
  std::string known;
  for (const SymbolicDim &dim : artifact.symbolicDims)
    known += (known.empty() ? "" : ", ") + dim.name;
  size_t swept = SIZE_MAX;
  std::vector<bool> given(base.size(), false);
  for (size_t f = 0; f < flags.size(); ++f) {
    const SizeFlag &flag = flags[f];
    size_t index = SIZE_MAX;
    for (size_t s = 0; s < artifact.symbolicDims.size(); ++s)
      if (artifact.symbolicDims[s].name == flag.symbol)
        index = s;
    if (index == SIZE_MAX)
      return Error::failure(fmt::format(
          "--sizes names '{}', which is not a symbolic dim of the artifact "
          "({})",
          flag.symbol,
          known.empty() ? "it has none: compile with kilnc --dim"
                        : "its symbolic dims: " + known));
    if (given[index])
      return Error::failure(
          fmt::format("--sizes gives '{}' twice", flag.symbol));
    given[index] = true;
    if (flag.values.size() > 1) {
      if (swept != SIZE_MAX)
        return Error::failure("--sizes: only one symbol may take several "
                              "values");
      swept = f;
    } else {
      base[index] = flag.values[0];
    }
  }
  std::vector<SymbolSizes> runs;
  if (swept == SIZE_MAX) {
    runs.push_back(base);
    return runs;
  }
  size_t index = 0;
  while (artifact.symbolicDims[index].name != flags[swept].symbol)
    ++index;
  for (int64_t value : flags[swept].values) {
    runs.push_back(base);
    runs.back()[index] = value;
  }
  return runs;
}

std::string describeSizes(const Artifact &artifact, const SymbolSizes &sizes) {
  std::string text;
  for (size_t s = 0; s < artifact.symbolicDims.size() && s < sizes.size(); ++s)
    text += fmt::format("{}{}={}", text.empty() ? "" : ",",
                        artifact.symbolicDims[s].name, sizes[s]);
  return text;
}

} // namespace kiln::runtime::tools
