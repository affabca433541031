#include "util/process_stats.h"

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "util/error.h"
#include "util/read_file.h"

namespace sps {

int64_t peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return int64_t(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

int64_t current_rss_bytes() {
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return int64_t(resident) * sysconf(_SC_PAGESIZE);
}

namespace {

// The number after `key` in /proc/meminfo, in bytes; -1 if absent.
int64_t meminfo_bytes(const char* key) {
  FILE* f = std::fopen("/proc/meminfo", "r");
  if (!f) return -1;
  char line[256];
  int64_t value = -1;
  const size_t key_length = std::strlen(key);
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, key, key_length) == 0) {
      long long kib = 0;
      if (std::sscanf(line + key_length, " %lld", &kib) == 1) value = int64_t(kib) * 1024;
      break;
    }
  std::fclose(f);
  return value;
}

// A cgroup v2 file holding one number ("max" reads as none); -1 if absent.
int64_t cgroup_number(const char* path) {
  FILE* f = std::fopen(path, "r");
  if (!f) return -1;
  long long value = -1;
  if (std::fscanf(f, "%lld", &value) != 1) value = -1;
  std::fclose(f);
  return int64_t(value);
}

std::string gib(double bytes) { return fmt::format("{:.2f} GiB", bytes / double(int64_t{1} << 30)); }

}  // namespace

int64_t available_memory_bytes() {
  int64_t available = meminfo_bytes("MemAvailable:");
  const int64_t limit = cgroup_number("/sys/fs/cgroup/memory.max");
  const int64_t used = cgroup_number("/sys/fs/cgroup/memory.current");
  if (limit >= 0 && used >= 0) {
    const int64_t left = std::max<int64_t>(0, limit - used);
    available = available < 0 ? left : std::min(available, left);
  }
  return available;
}

void require_memory(__int128 bytes, const std::string& what, int64_t available,
                    const std::string& where) {
  if (bytes > INT64_MAX) fail("{}: needs more than 2^63 bytes", what);
  if (available >= 0 && bytes > available)
    fail("{}: needs {} but {} of memory is available{}", what, gib(double(bytes)),
         gib(double(available)), where.empty() ? "" : " on " + where);
}

void release_memory_pages(void* data, size_t bytes) {
  const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
  const uintptr_t from = (uintptr_t(data) + page - 1) / page * page;
  const uintptr_t to = (uintptr_t(data) + bytes) / page * page;
  if (to > from) ::madvise(reinterpret_cast<void*>(from), to - from, MADV_DONTNEED);
}

CpuTimes parse_cpu_times(const std::string& proc_stat, const std::string& self_stat) {
  CpuTimes t;
  // "cpu  user nice system idle iowait irq softirq steal guest guest_nice": guest time is
  // inside user already.
  std::istringstream line(proc_stat.substr(0, proc_stat.find('\n')));
  std::string label;
  int64_t field[8];
  if (!(line >> label) || label != "cpu") return t;
  for (int64_t& v : field)
    if (!(line >> v)) return t;
  t.total = t.busy = 0;
  for (int i = 0; i < 8; ++i) t.total += field[i];
  t.busy = t.total - field[3] - field[4];
  // After the command name in parentheses (which may hold spaces and parentheses): state,
  // then fields 4 to 13, then utime and stime (fields 14 and 15 of proc(5)).
  const size_t close = self_stat.rfind(')');
  if (close == std::string::npos) return t;
  std::istringstream rest(self_stat.substr(close + 1));
  std::string skip;
  for (int i = 3; i <= 13; ++i) rest >> skip;
  int64_t utime = 0, stime = 0;
  if (rest >> utime >> stime) t.own = utime + stime;
  return t;
}

CpuTimes cpu_times_now() {
  try {
    return parse_cpu_times(read_file("/proc/stat"), read_file("/proc/self/stat"));
  } catch (const UserError&) {
    return {};  // no /proc: unknown
  }
}

double others_cpu_share(const CpuTimes& before, const CpuTimes& after) {
  if (before.total < 0 || after.total < 0 || before.own < 0 || after.own < 0) return -1;
  const int64_t total = after.total - before.total;
  if (total <= 0) return -1;
  const int64_t others = (after.busy - before.busy) - (after.own - before.own);
  return std::clamp(double(others) / double(total), 0.0, 1.0);
}

}  // namespace sps
