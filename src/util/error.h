#pragma once
// Errors for people: bad input (files, configs, flags, ids) raises UserError with one clear
// line; the CLI prints it and exits with status 2. Broken internal invariants use
// SPS_ASSERT, which stays on in release builds.
#include <fmt/format.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <string_view>

namespace sps {

class UserError : public std::runtime_error {
 public:
  explicit UserError(const std::string& message) : std::runtime_error(message) {}
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw UserError(fmt::format(format, std::forward<Args>(args)...));
}

// A score or loss that must be a number: NaN or Inf means broken weights or data, and must
// never reach a results file as a value.
inline double finite_or_fail(double value, std::string_view what) {
  if (!std::isfinite(value))
    fail("{} is {}, not a finite number (non-finite weights or activations)", what, value);
  return value;
}

[[noreturn]] void assertion_failed(const char* expr, const char* file, int line);

}  // namespace sps

#define SPS_ASSERT(expr) \
  ((expr) ? (void)0 : ::sps::assertion_failed(#expr, __FILE__, __LINE__))
