//===- HostStringOps.h - Cast, StringSplit, RegexFullMatch, ... -*- C++ -*-===//
//
// Internal to runtime/lib: the host ops that read or write string
// contents (HostSteps.cpp dispatches the rest).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_LIB_HOSTSTRINGOPS_H
#define KILN_RUNTIME_LIB_HOSTSTRINGOPS_H

#include "kiln/runtime/HostSteps.h"

#include "Support.h"

#include <map>
#include <string>

namespace kiln::runtime {

/// "<step>: <message>": an error of one host step, naming it (HostSteps.cpp
/// and HostStringOps.cpp).
Error stepError(const HostStep &step, const std::string &message);

/// The attribute checks of verifyHostStep: Cast's `to`, RegexFullMatch's
/// pattern (compiled with RE2), StringNormalizer's case_change_action,
/// LabelEncoder's table (keys unique, each value and the default of the
/// `to` type).
Error verifyStringOpAttributes(const HostStep &step);

/// Cast, StringSplit, RegexFullMatch, StringNormalizer and LabelEncoder.
Error runStringOp(const HostStep &step,
                  std::map<std::string, HostValue, std::less<>> &values);

/// A number as Cast writes it: integers in decimal; floats as the shortest
/// text that reads back to the same value, positional for magnitudes in
/// [1e-4, 1e16) (with ".0" when integral: "10000000000.0") and scientific
/// otherwise ("1e+16", "1.5e-05"), as NumPy's astype(str) does (the ONNX
/// reference, which wrote the node tests); NaN and infinities as "NaN",
/// "INF", "-INF" (the spelling ONNX's Cast reserves).
std::string formatHostNumber(DType dtype, const uint8_t *element);

/// Parses `text` into one element of `dtype`; false when it is not a
/// number of that type (floats take "INF", "+INF", "-INF", "NaN" in any
/// case, as strtod does).
bool parseHostNumber(const std::string &text, DType dtype, uint8_t *element);

} // namespace kiln::runtime

#endif // KILN_RUNTIME_LIB_HOSTSTRINGOPS_H
