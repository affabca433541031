#pragma once
// Wall-clock timing and process memory, for benchmarks and metrics.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
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

// Memory this process can still take: the system's MemAvailable, lowered to what a cgroup
// limit leaves; -1 when neither can be read.
int64_t available_memory_bytes();

// Refuses (UserError, one line: needed vs available) to allocate `bytes` for `what` when
// more than `available` (this process's memory by default; a device's, named by `where`);
// a size past 64 bits is refused too. A negative `available` is unknown: nothing refused.
void require_memory(__int128 bytes, const std::string& what,
                    int64_t available = available_memory_bytes(), const std::string& where = "");

// Gives the whole pages inside [data, data + bytes) of private anonymous memory back to the
// system: resident memory drops, and their contents read as zeros afterwards.
void release_memory_pages(void* data, size_t bytes);

}  // namespace sps
