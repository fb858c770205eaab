//===- Npy.cpp - Reading and writing NumPy .npy files ---------------------===//
//
// The header is a Python dict literal; this parses exactly the subset NumPy
// writes ('descr', 'fortran_order', 'shape'; strings, booleans, tuples of
// integers) and rejects everything else with a message saying what to do.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/Npy.h"

#include "Support.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <optional>

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

/// The width (code points per element) of a NumPy Unicode descr ('<U7',
/// '|U1'); nothing for any other descr ('>U7' is left to parseDescr's
/// big-endian error).
std::optional<uint64_t> unicodeWidth(std::string_view descr) {
  if (descr.size() < 3 || (descr[0] != '<' && descr[0] != '|' &&
                           descr[0] != '=') || descr[1] != 'U')
    return std::nullopt;
  uint64_t width = 0;
  for (char c : descr.substr(2)) {
    if (c < '0' || c > '9' || width > (uint64_t(1) << 32))
      return std::nullopt;
    width = width * 10 + uint64_t(c - '0');
  }
  return width;
}

void appendUtf8(std::string &out, uint32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

/// Fixed-width UTF-32 elements, each padded with NULs, as UTF-8 strings
/// (the padding dropped, as NumPy drops it).
Expected<NpyArray> parseUnicode(const uint8_t *data, uint64_t present,
                                uint64_t width, Shape shape) {
  // Width 0 stores no bytes, so nothing would bound the element count by
  // the file's size (kiln-fuzz-npy: '<U0' of shape (9, 444424, 4444423)
  // asked for 1.8e13 strings). NumPy itself writes '<U1' for empty strings.
  if (width == 0)
    return makeError("'<U0' (strings of width 0) is not supported; an "
                     "array of empty strings is '<U1'");
  std::optional<uint64_t> count = elementCount(shape);
  if (!count || *count > UINT64_MAX / 4 / width)
    return makeError("shape {} is too large", formatShape(shape));
  uint64_t expected = *count * width * 4;
  if (present != expected)
    return makeError("{} data bytes for a '<U{}' array of shape {} ({} "
                     "expected)",
                     present, width, formatShape(shape), expected);
  NpyArray array;
  array.isString = true;
  array.shape = std::move(shape);
  array.strings.resize(*count);
  for (uint64_t i = 0; i < *count; ++i) {
    std::string &text = array.strings[i];
    uint64_t end = width;
    auto codeAt = [&](uint64_t k) {
      uint32_t c;
      std::memcpy(&c, data + (i * width + k) * 4, 4);
      return c;
    };
    while (end > 0 && codeAt(end - 1) == 0)
      --end;
    for (uint64_t k = 0; k < end; ++k) {
      uint32_t c = codeAt(k);
      if (c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
        return makeError("element {} holds {:#x}, not a Unicode code point",
                         i, c);
      appendUtf8(text, c);
    }
  }
  return array;
}

/// UTF-8 to code points; nothing when `text` is not valid UTF-8.
std::optional<std::vector<uint32_t>> decodeUtf8(const std::string &text) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < text.size();) {
    auto byte = static_cast<unsigned char>(text[i]);
    size_t length = utf8SequenceLength(byte);
    if (length == 0 || i + length > text.size())
      return std::nullopt;
    uint32_t c = length == 1 ? byte : byte & (0x7F >> length);
    for (size_t k = 1; k < length; ++k) {
      auto next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xC0) != 0x80)
        return std::nullopt;
      c = (c << 6) | (next & 0x3F);
    }
    out.push_back(c);
    i += length;
  }
  return out;
}

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
  if (std::optional<uint64_t> width = unicodeWidth(header->descr)) {
    Expected<NpyArray> strings =
        parseUnicode(bytes + headerStart + headerLength,
                     size - headerStart - headerLength, *width,
                     std::move(header->shape));
    if (!strings)
      return fail(strings.error());
    return strings;
  }
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

Expected<std::vector<uint8_t>>
encodeNpyStrings(const Shape &shape, const std::vector<std::string> &strings) {
  std::optional<uint64_t> count = elementCount(shape);
  if (!count || *count != strings.size())
    return makeError("cannot encode .npy: {} strings given for shape {}",
                     strings.size(), formatShape(shape));
  std::vector<std::vector<uint32_t>> codes;
  size_t width = 1; // NumPy writes '<U1' for an array of empty strings
  for (size_t i = 0; i < strings.size(); ++i) {
    std::optional<std::vector<uint32_t>> decoded = decodeUtf8(strings[i]);
    if (!decoded)
      return makeError("cannot encode .npy: string {} is not valid UTF-8", i);
    width = std::max(width, decoded->size());
    codes.push_back(std::move(*decoded));
  }
  std::vector<uint32_t> elements(strings.size() * width, 0);
  for (size_t i = 0; i < codes.size(); ++i)
    std::copy(codes[i].begin(), codes[i].end(), elements.begin() + i * width);
  std::string dims;
  for (int64_t dim : shape)
    dims += fmt::format("{}, ", dim);
  if (shape.size() > 1)
    dims.resize(dims.size() - 2);
  else if (shape.size() == 1)
    dims.resize(dims.size() - 1);
  std::string dict = fmt::format(
      "{{'descr': '<U{}', 'fortran_order': False, 'shape': ({}), }}", width,
      dims);
  size_t prefix = 10;
  size_t total = (prefix + dict.size() + 1 + 63) & ~size_t(63);
  if (total - prefix > 0xFFFF)
    return makeError("cannot encode .npy: shape {} makes too long a header",
                     formatShape(shape));
  size_t headerLength = total - prefix;
  dict.append(headerLength - dict.size() - 1, ' ');
  dict.push_back('\n');
  std::vector<uint8_t> out(kNpyMagic, kNpyMagic + kNpyMagicSize);
  out.push_back(1);
  out.push_back(0);
  out.push_back(static_cast<uint8_t>(headerLength));
  out.push_back(static_cast<uint8_t>(headerLength >> 8));
  out.insert(out.end(), dict.begin(), dict.end());
  const auto *raw = reinterpret_cast<const uint8_t *>(elements.data());
  out.insert(out.end(), raw, raw + elements.size() * 4);
  return out;
}

Error writeNpyStrings(const std::string &path, const Shape &shape,
                      const std::vector<std::string> &strings) {
  Expected<std::vector<uint8_t>> bytes = encodeNpyStrings(shape, strings);
  if (!bytes)
    return bytes.error().withContext(path);
  return writeFileAtomically(path, bytes->data(), bytes->size());
}

Error writeNpy(const std::string &path, DType dtype, const Shape &shape,
               const void *data, uint64_t size) {
  Expected<std::vector<uint8_t>> bytes = encodeNpy(dtype, shape, data, size);
  if (!bytes)
    return bytes.error().withContext(path);
  return writeFileAtomically(path, bytes->data(), bytes->size());
}

} // namespace kiln::runtime
