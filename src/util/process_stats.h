#pragma once
// Wall-clock timing and process memory, for benchmarks and metrics.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

namespace sps {

inline double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

inline double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

int64_t peak_rss_bytes();     // high-water mark of resident memory
int64_t current_rss_bytes();  // resident memory now

}  // namespace sps
