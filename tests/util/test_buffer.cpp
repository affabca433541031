// Buffer: uninitialised, 64-byte aligned storage for work buffers.
#include <gtest/gtest.h>

#include <cstdint>
#include <new>

#include "util/buffer.h"

namespace sps {
namespace {

template <typename T>
void expect_aligned_for_every_size() {
  Buffer<T> b;
  for (size_t n : {size_t(1), size_t(3), size_t(16), size_t(17), size_t(1000), size_t(1) << 20}) {
    b.reset(n);
    ASSERT_EQ(b.size(), n);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 64, 0u) << n << " elements";
    b[n - 1] = T(7);  // the last element is inside the allocation (ASan checks the bound)
    EXPECT_EQ(b[n - 1], T(7));
  }
  b.reset(0);
  EXPECT_EQ(b.size(), 0u);
  EXPECT_EQ(b.data(), nullptr);
}

TEST(Buffer, StartsOnA64ByteBoundaryForEverySize) {
  expect_aligned_for_every_size<float>();
  expect_aligned_for_every_size<double>();
  expect_aligned_for_every_size<int32_t>();
}

TEST(Buffer, ImpossibleSizeThrowsBadAlloc) {
  Buffer<double> b;
  EXPECT_THROW(b.reset(SIZE_MAX / 4), std::bad_alloc);
  EXPECT_EQ(b.size(), 0u);
}

}  // namespace
}  // namespace sps
