//===- Npy.cpp - Reading and writing NumPy .npy files ---------------------===//
//
// The header is a Python dict literal; this parses exactly the subset NumPy
// writes ('descr', 'fortran_order', 'shape'; strings, booleans, tuples of
// integers) and rejects everything else with a message saying what to do.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/Npy.h"

#include "Support.h"

#include <cctype>
#include <cstring>

namespace kiln::runtime {

namespace {
constexpr char kNpyMagic[] = "\x93NUMPY";
constexpr size_t kNpyMagicSize = 6;

struct Descr {
  std::string_view text;
  DType dtype;
};

/// What Kiln writes for each dtype; parseDescr accepts more spellings.
constexpr Descr kDescrs[] = {
    {"<f4", DType::F32},  {"<f2", DType::F16}, {"<V2", DType::BF16},
    {"<f8", DType::F64},  {"|i1", DType::I8},  {"<i2", DType::I16},
    {"<i4", DType::I32},  {"<i8", DType::I64}, {"|u1", DType::U8},
    {"<u2", DType::U16},  {"<u4", DType::U32}, {"<u8", DType::U64},
    {"|b1", DType::Bool},
    // float8: raw bytes, as np.save writes ml_dtypes' float8 arrays. The
    // first entry is what '|V1' reads as; npyDTypeMatches lets it bind to
    // any float8 input.
    {"|V1", DType::F8E4M3FN}, {"|V1", DType::F8E4M3FNUZ},
    {"|V1", DType::F8E5M2},   {"|V1", DType::F8E5M2FNUZ},
};

Expected<DType> parseDescr(std::string_view descr) {
  if (descr == "bfloat16")
    return DType::BF16;
  if (descr.size() >= 2 && descr[0] == '>' && descr.substr(1) != "i1" &&
      descr.substr(1) != "u1" && descr.substr(1) != "b1")
    return makeError("big-endian data ('{}') is not supported; save "
                     "a.astype(a.dtype.newbyteorder('<'))",
                     descr);
  std::string_view body = descr;
  if (!body.empty() &&
      (body[0] == '<' || body[0] == '|' || body[0] == '=' || body[0] == '>'))
    body.remove_prefix(1);
  if (body == "O" || body.substr(0, 1) == "O")
    return makeError("object arrays ('{}') are not supported", descr);
  if (body == "?")
    return DType::Bool;
  for (const Descr &known : kDescrs)
    if (known.text.substr(1) == body)
      return known.dtype;
  return makeError("unsupported dtype '{}'", descr);
}

/// A cursor over the header's dict literal.
class HeaderParser {
public:
  explicit HeaderParser(std::string_view text) : text(text) {}

  void skipSpace() {
    while (pos < text.size() &&
           std::isspace(static_cast<unsigned char>(text[pos])))
      ++pos;
  }
  bool consume(char c) {
    skipSpace();
    if (pos < text.size() && text[pos] == c) {
      ++pos;
      return true;
    }
    return false;
  }
  bool peek(char c) {
    skipSpace();
    return pos < text.size() && text[pos] == c;
  }
  bool consumeWord(std::string_view word) {
    skipSpace();
    if (text.substr(pos, word.size()) != word)
      return false;
    pos += word.size();
    return true;
  }
  std::optional<std::string> quoted() {
    skipSpace();
    if (pos >= text.size() || (text[pos] != '\'' && text[pos] != '"'))
      return std::nullopt;
    char quote = text[pos++];
    size_t end = text.find(quote, pos);
    if (end == std::string_view::npos)
      return std::nullopt;
    std::string value(text.substr(pos, end - pos));
    pos = end + 1;
    return value;
  }
  std::optional<int64_t> integer() {
    skipSpace();
    size_t start = pos;
    int64_t value = 0;
    while (pos < text.size() &&
           std::isdigit(static_cast<unsigned char>(text[pos]))) {
      int digit = text[pos++] - '0';
      if (value > (INT64_MAX - digit) / 10)
        return std::nullopt;
      value = value * 10 + digit;
    }
    // Python 2 era files may write longs as "3L".
    if (pos > start && pos < text.size() && text[pos] == 'L')
      ++pos;
    return pos > start ? std::optional<int64_t>(value) : std::nullopt;
  }
  bool atEnd() {
    skipSpace();
    return pos == text.size();
  }

private:
  std::string_view text;
  size_t pos = 0;
};

struct Header {
  std::string descr;
  bool fortranOrder = false;
  Shape shape;
};

Expected<Header> parseHeader(std::string_view text) {
  HeaderParser in(text);
  Header header;
  bool haveDescr = false, haveOrder = false, haveShape = false;
  if (!in.consume('{'))
    return makeError("malformed header: expected '{{'");
  while (!in.consume('}')) {
    std::optional<std::string> key = in.quoted();
    if (!key || !in.consume(':'))
      return makeError("malformed header: expected a quoted key and ':'");
    if (*key == "descr") {
      if (in.peek('['))
        return makeError("structured arrays are not supported");
      std::optional<std::string> value = in.quoted();
      if (!value)
        return makeError("malformed header: 'descr' is not a string");
      header.descr = *value;
      haveDescr = true;
    } else if (*key == "fortran_order") {
      if (in.consumeWord("True"))
        header.fortranOrder = true;
      else if (in.consumeWord("False"))
        header.fortranOrder = false;
      else
        return makeError("malformed header: 'fortran_order' is not True or "
                         "False");
      haveOrder = true;
    } else if (*key == "shape") {
      if (!in.consume('('))
        return makeError("malformed header: 'shape' is not a tuple");
      while (!in.consume(')')) {
        std::optional<int64_t> dim = in.integer();
        if (!dim)
          return makeError("malformed header: 'shape' holds a non-integer or "
                           "negative dimension");
        header.shape.push_back(*dim);
        if (!in.consume(',') && !in.peek(')'))
          return makeError("malformed header: expected ',' or ')' in 'shape'");
      }
      haveShape = true;
    } else {
      return makeError("malformed header: unexpected key '{}'", *key);
    }
    if (!in.consume(',') && !in.peek('}'))
      return makeError("malformed header: expected ',' or '}}'");
  }
  if (!in.atEnd())
    return makeError("malformed header: text after the closing '}}'");
  if (!haveDescr || !haveOrder || !haveShape)
    return makeError("malformed header: it needs 'descr', 'fortran_order' and "
                     "'shape'");
  return header;
}
} // namespace

bool npyDTypeMatches(DType fromFile, DType wanted) {
  return fromFile == wanted || (isFloat8DType(fromFile) && isFloat8DType(wanted));
}

std::string_view npyDescr(DType dtype) {
  for (const Descr &known : kDescrs)
    if (known.dtype == dtype)
      return known.text;
  return "";
}

Expected<NpyArray> parseNpy(const uint8_t *bytes, size_t size,
                            std::string_view displayName) {
  // Header keys and dtype strings come from the file: printable() keeps a
  // control character in one from breaking the message over several lines.
  auto fail = [&](const Error &err) {
    return Error::failure(printable(err.message())).withContext(displayName);
  };
  if (size < kNpyMagicSize + 2 ||
      std::memcmp(bytes, kNpyMagic, kNpyMagicSize) != 0)
    return fail(makeError("not a .npy file (bad magic)"));
  uint8_t major = bytes[6], minor = bytes[7];
  if (major < 1 || major > 3)
    return fail(makeError("unsupported .npy version {}.{} (1.0, 2.0 and 3.0 "
                          "are supported)",
                          major, minor));
  size_t lengthBytes = major == 1 ? 2 : 4;
  size_t headerStart = 8 + lengthBytes;
  if (size < headerStart)
    return fail(makeError("truncated header"));
  uint32_t headerLength = bytes[8] | (uint32_t(bytes[9]) << 8);
  if (major != 1)
    headerLength |= (uint32_t(bytes[10]) << 16) | (uint32_t(bytes[11]) << 24);
  if (headerLength > size - headerStart)
    return fail(makeError("truncated header ({} bytes announced, {} present)",
                          headerLength, size - headerStart));
  Expected<Header> header = parseHeader(std::string_view(
      reinterpret_cast<const char *>(bytes + headerStart), headerLength));
  if (!header)
    return fail(header.error());
  if (header->fortranOrder)
    return fail(makeError("Fortran-order arrays are not supported; save "
                          "np.ascontiguousarray(a)"));
  Expected<DType> dtype = parseDescr(header->descr);
  if (!dtype)
    return fail(dtype.error());
  std::optional<uint64_t> expected = tensorByteSize(*dtype, header->shape);
  if (!expected)
    return fail(makeError("shape {} is too large", formatShape(header->shape)));
  size_t dataStart = headerStart + headerLength;
  uint64_t present = size - dataStart;
  if (present < *expected)
    return fail(makeError("truncated data: {} {} needs {} bytes, the file "
                          "has {}",
                          dtypeName(*dtype), formatShape(header->shape),
                          *expected, present));
  if (present > *expected)
    return fail(makeError("{} unexpected bytes after the data of {} {}",
                          present - *expected, dtypeName(*dtype),
                          formatShape(header->shape)));
  NpyArray array;
  array.dtype = *dtype;
  array.shape = std::move(header->shape);
  array.data.assign(bytes + dataStart, bytes + size);
  return array;
}

Expected<NpyArray> readNpy(const std::string &path) {
  Expected<Blob> file = mapFile(path);
  if (!file)
    return file.takeError();
  return parseNpy(file->data(), file->size(), path);
}

Expected<std::vector<uint8_t>> encodeNpy(DType dtype, const Shape &shape,
                                         const void *data, uint64_t size) {
  if (!dtypeFromCode(static_cast<uint32_t>(dtype)))
    return makeError("cannot encode .npy: unknown dtype code {}",
                     static_cast<unsigned>(dtype));
  std::optional<uint64_t> expected = tensorByteSize(dtype, shape);
  if (!expected || *expected != size)
    return makeError("cannot encode .npy: {} bytes given for {} {}", size,
                     dtypeName(dtype), formatShape(shape));
  std::string dims;
  for (int64_t dim : shape)
    dims += fmt::format("{}, ", dim);
  if (shape.size() > 1)
    dims.resize(dims.size() - 2); // "(2, 3)"; a 1-tuple keeps "(4,)"
  else if (shape.size() == 1)
    dims.resize(dims.size() - 1);
  std::string dict =
      fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}",
                  npyDescr(dtype), dims);
  // Like np.save: spare spaces so the first dimension can grow in place,
  // then padding so the data starts at a multiple of 64, and a newline.
  if (!shape.empty()) {
    size_t digits = std::to_string(shape[0]).size();
    if (digits < 21)
      dict.append(21 - digits, ' ');
  }
  uint8_t major = 1;
  size_t prefix = 10;
  if (((prefix + dict.size() + 1 + 63) & ~size_t(63)) - prefix > 0xFFFF) {
    major = 2;
    prefix = 12;
  }
  size_t total = (prefix + dict.size() + 1 + 63) & ~size_t(63);
  size_t headerLength = total - prefix;
  dict.append(headerLength - dict.size() - 1, ' ');
  dict.push_back('\n');

  std::vector<uint8_t> out;
  out.reserve(total + size);
  out.insert(out.end(), kNpyMagic, kNpyMagic + kNpyMagicSize);
  out.push_back(major);
  out.push_back(0);
  for (size_t i = 0; i < prefix - 8; ++i)
    out.push_back(static_cast<uint8_t>(headerLength >> (8 * i)));
  out.insert(out.end(), dict.begin(), dict.end());
  const auto *bytes = static_cast<const uint8_t *>(data);
  out.insert(out.end(), bytes, bytes + size);
  return out;
}

Error writeNpy(const std::string &path, DType dtype, const Shape &shape,
               const void *data, uint64_t size) {
  Expected<std::vector<uint8_t>> bytes = encodeNpy(dtype, shape, data, size);
  if (!bytes)
    return bytes.error().withContext(path);
  return writeFileAtomically(path, bytes->data(), bytes->size());
}

} // namespace kiln::runtime
