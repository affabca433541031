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

// How busy the machine was over an interval, from /proc/stat (every CPU's time, in clock
// ticks) and /proc/self/stat (this process's): the share of all CPUs' time that other work
// took, so that a benchmark says when it shared the machine. A VM's steal time (the host
// running other guests) counts as other work. Unknown (-1) where /proc cannot be read.
struct CpuTimes {
  int64_t total = -1;  // every CPU's time, idle included
  int64_t busy = -1;   // of it, not idle and not waiting for I/O (steal included)
  int64_t own = -1;    // this process's user and system time
};
CpuTimes cpu_times_now();
// The parts of the two files (exposed for tests): /proc/stat's first line, and /proc/self/stat.
CpuTimes parse_cpu_times(const std::string& proc_stat, const std::string& self_stat);
// Other work's share of all CPUs' time between two readings, in [0, 1]; -1 when unknown.
double others_cpu_share(const CpuTimes& before, const CpuTimes& after);

// Gives the whole pages inside [data, data + bytes) of private anonymous memory back to the
// system: resident memory drops, and their contents read as zeros afterwards.
void release_memory_pages(void* data, size_t bytes);

}  // namespace sps
