#include "util/process_stats.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "util/error.h"

namespace sps {
namespace {

// /proc/stat's totals and /proc/self/stat's own time, a command name with spaces and
// parentheses included; other work is the busy time that is not this process's.
TEST(ProcessStats, CpuTimesAreParsedAndOthersShareIsTheRest) {
  const std::string stat = "cpu  100 20 30 800 10 5 5 30 7 0\ncpu0 50 10 15 400 5 2 3 15 3 0\n";
  const std::string self = "4242 (a (b) c) R 1 2 3 4 5 6 7 8 9 10 40 12 0 0 20 0\n";
  const CpuTimes t = parse_cpu_times(stat, self);
  EXPECT_EQ(t.total, 1000);  // guest time is part of user already
  EXPECT_EQ(t.busy, 190);    // idle and iowait left out, steal counted
  EXPECT_EQ(t.own, 52);
  EXPECT_EQ(parse_cpu_times("intr 1 2\n", self).total, -1);
  EXPECT_EQ(parse_cpu_times(stat, "no command name").own, -1);
  CpuTimes later = t;
  later.total += 200;
  later.busy += 120;
  later.own += 70;
  EXPECT_DOUBLE_EQ(others_cpu_share(t, later), 0.25);  // (120 − 70) / 200
  EXPECT_EQ(others_cpu_share(t, t), -1);               // no time passed
  EXPECT_EQ(others_cpu_share(CpuTimes{}, later), -1);
}

// A child process that spins counts as other work; the machine's readings are real.
TEST(ProcessStats, ASpinningChildIsOtherWork) {
  const CpuTimes before = cpu_times_now();
  ASSERT_GT(before.total, 0);
  ASSERT_GE(before.own, 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(600);
    volatile uint64_t x = 0;
    while (std::chrono::steady_clock::now() < end) x = x + 1;
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  const double others = others_cpu_share(before, cpu_times_now());
  // One of this machine's CPUs busy for the whole interval, at least; more if others work.
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  EXPECT_GE(others, 0.5 / double(cpus)) << cpus << " CPUs";
  EXPECT_LE(others, 1.0);
}

TEST(ProcessStats, AvailableMemoryIsReadAndBounded) {
  const int64_t available = available_memory_bytes();
  ASSERT_GT(available, 0);  // Linux has /proc/meminfo
  EXPECT_NO_THROW(require_memory(1 << 20, "a small buffer"));
  try {
    require_memory(__int128(available) * 2, "model config: the activations");
    FAIL() << "expected a refusal";
  } catch (const UserError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.rfind("model config: the activations: needs ", 0), 0u) << message;
    EXPECT_NE(message.find(" GiB but "), std::string::npos) << message;
    EXPECT_NE(message.find(" GiB of memory is available"), std::string::npos) << message;
  }
  EXPECT_THROW(require_memory(__int128(1) << 70, "absurd"), UserError);
}

// A device's memory is checked against what it reports, and the message names the device.
TEST(ProcessStats, DeviceMemoryIsNamed) {
  const std::string error = [] {
    try {
      require_memory(__int128(3) << 30, "the weights", int64_t(1) << 30, "cuda:1");
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  }();
  EXPECT_EQ(error, "the weights: needs 3.00 GiB but 1.00 GiB of memory is available on cuda:1");
  EXPECT_NO_THROW(require_memory(__int128(3) << 30, "unknown", -1, "cuda:1"));
}

}  // namespace
}  // namespace sps
