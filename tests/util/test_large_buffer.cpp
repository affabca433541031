// allocate_large_buffer: 2 MiB alignment from 2 MiB up (what lets the kernel back the buffer
// with transparent huge pages), 64 bytes below, and every byte of the request usable.
#include "util/large_buffer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace sps::testing {
namespace {

TEST(LargeBuffer, AlignsToHugePagesFromTheirSizeUp) {
  constexpr size_t kHugePage = size_t(2) << 20;
  for (const size_t bytes : {size_t(0), size_t(1), size_t(100), kHugePage - 1, kHugePage,
                             kHugePage + 1, 3 * kHugePage + 12345}) {
    SCOPED_TRACE(bytes);
    void* p = allocate_large_buffer(bytes);
    ASSERT_NE(p, nullptr);
    const size_t alignment = bytes >= kHugePage ? kHugePage : 64;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % alignment, 0u);
    std::memset(p, 0xab, bytes);  // the whole request is ours (AddressSanitizer checks)
    if (bytes > 0) {
      EXPECT_EQ(static_cast<unsigned char*>(p)[bytes - 1], 0xab);
    }
    std::free(p);
  }
}

}  // namespace
}  // namespace sps::testing
