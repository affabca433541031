#include "util/process_stats.h"

#include <gtest/gtest.h>

#include "util/error.h"

namespace sps {
namespace {

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
