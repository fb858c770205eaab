//===- Error.h - Errors as values for the Kiln runtime ----------*- C++ -*-===//
//
// The runtime never lets an exception cross its public API: every operation
// that can fail returns an Error (success or a one-line message) or an
// Expected<T> (a value or an Error). Messages name what is at fault: the
// artifact section, the tensor, the kernel, or the CUDA call.
//
// Stability: stable (as Runtime.h).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_ERROR_H
#define KILN_RUNTIME_ERROR_H

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace kiln::runtime {

/// Success, or a failure carrying a one-line message. Like llvm::Error, it
/// converts to `true` when it holds a failure:
///
///   if (Error err = session.run())
///     return err;
class [[nodiscard]] Error {
public:
  /// Success.
  Error() = default;
  static Error success() { return Error(); }
  /// A failure with the given message (which should not be empty).
  static Error failure(std::string message) {
    Error err;
    err.failedFlag = true;
    err.text = std::move(message);
    return err;
  }

  bool failed() const { return failedFlag; }
  explicit operator bool() const { return failedFlag; }
  const std::string &message() const { return text; }

  /// The same failure with "<context>: " in front; success stays success.
  Error withContext(std::string_view context) const {
    if (!failedFlag)
      return *this;
    return failure(std::string(context) + ": " + text);
  }

private:
  bool failedFlag = false;
  std::string text;
};

/// A value of type T, or the Error that prevented computing it.
template <typename T> class [[nodiscard]] Expected {
public:
  Expected(T value) : value(std::move(value)) {}
  Expected(Error err) : err(std::move(err)) {
    assert(this->err.failed() && "an Expected needs a value or a failure");
  }

  /// True when a value is present.
  explicit operator bool() const { return value.has_value(); }
  bool hasValue() const { return value.has_value(); }

  T &operator*() { return *value; }
  const T &operator*() const { return *value; }
  T *operator->() { return &*value; }
  const T *operator->() const { return &*value; }
  T &get() { return *value; }
  const T &get() const { return *value; }
  /// Moves the value out (the Expected must hold one).
  T take() { return std::move(*value); }

  const Error &error() const { return err; }
  /// The error, or success when a value is present.
  Error takeError() { return std::move(err); }

private:
  std::optional<T> value;
  Error err;
};

} // namespace kiln::runtime

#endif // KILN_RUNTIME_ERROR_H
