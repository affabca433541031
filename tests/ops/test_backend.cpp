// DeviceBuffer and the CPU backend's memory; backend_for's choice and refusals.
#include <gtest/gtest.h>

#include <cstdint>
#include <new>
#include <vector>

#include "ops/backend.h"
#include "ops/backend_registry.h"
#include "util/user_error.h"

namespace sps {
namespace {

TEST(DeviceBuffer, ResizesUploadsDownloadsAndMoves) {
  const ops::Backend<float>& cpu = ops::cpu_backend<float>();
  ops::DeviceBuffer<float> a(cpu);
  EXPECT_EQ(a.data(), nullptr);
  a.reset(5);
  EXPECT_EQ(a.size(), 5u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % 64, 0u);
  const std::vector<float> host = {1, 2, 3, 4, 5, 6, 7};
  a.upload(host.data(), 7);  // grows
  EXPECT_EQ(a.size(), 7u);
  float* before = a.data();
  a.reserve(3);  // already larger: kept
  EXPECT_EQ(a.data(), before);
  std::vector<float> back(3);
  a.download(back.data(), 3, 4);
  EXPECT_EQ(back, (std::vector<float>{5, 6, 7}));
  cpu.fill(a.data() + 1, 2, -1.0f);
  cpu.copy(a.data() + 4, a.data(), 3 * sizeof(float));
  std::vector<float> all(7);
  a.download(all.data(), 7);
  EXPECT_EQ(all, (std::vector<float>{1, -1, -1, 4, 1, -1, -1}));
  ops::DeviceBuffer<float> b(std::move(a));
  EXPECT_EQ(b.data(), before);
  EXPECT_EQ(a.data(), nullptr);  // NOLINT(bugprone-use-after-move): moved-from is empty
  b.reset(0);
  EXPECT_EQ(b.size(), 0u);
}

template <typename E>
void expect_aligned_for_every_size() {
  ops::DeviceBuffer<E> b(ops::cpu_backend<float>());
  for (size_t n : {size_t(1), size_t(3), size_t(16), size_t(17), size_t(1000), size_t(1) << 20}) {
    b.reset(n);
    ASSERT_EQ(b.size(), n);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 64, 0u) << n << " elements";
    b.data()[n - 1] = E(7);  // the last element is inside the allocation (ASan checks the bound)
    EXPECT_EQ(b.data()[n - 1], E(7));
  }
}

TEST(DeviceBuffer, StartsOnA64ByteBoundaryOnTheCpuForEverySize) {
  expect_aligned_for_every_size<float>();
  expect_aligned_for_every_size<double>();
  expect_aligned_for_every_size<int32_t>();
}

TEST(DeviceBuffer, ImpossibleSizeThrowsBadAlloc) {
  ops::DeviceBuffer<double> b(ops::cpu_backend<float>());
  EXPECT_THROW(b.reset(SIZE_MAX / 4), std::bad_alloc);
  EXPECT_EQ(b.size(), 0u);
  EXPECT_EQ(b.data(), nullptr);
}

TEST(Backend, CpuIsTheCpuBackendAndAnUnusableGpuIsRefused) {
  EXPECT_EQ(&ops::backend_for(ops::Device{}), &ops::cpu_backend<float>());
  EXPECT_TRUE(ops::cpu_backend<float>().host_accessible());
  std::string problem;
  const ops::Device absent{"cuda", ops::find_backend("cuda")->devices(&problem)};
  const std::string error = testing::error_of([&] { ops::backend_for(absent); });
  EXPECT_NE(error.find(absent.name()), std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
}

// The GEMM rate's product is linear_forward's, timed once per run.
TEST(Backend, TimedGemmIsLinearForwardsProduct) {
  const ops::Backend<float>& cpu = ops::cpu_backend<float>();
  const int64_t n = 33;
  std::vector<float> a(n * n), b(n * n), timed(n * n, -1), plain(n * n, -2);
  for (int64_t i = 0; i < n * n; ++i) {
    a[i] = float(i % 7) - 3;
    b[i] = float(i % 5) * 0.5f;
  }
  const std::vector<double> seconds = cpu.time_gemm(timed.data(), a.data(), b.data(), n, 4);
  ASSERT_EQ(seconds.size(), 4u);
  for (const double s : seconds) EXPECT_GE(s, 0);
  cpu.linear_forward(plain.data(), a.data(), b.data(), n, n, n, false);
  EXPECT_EQ(timed, plain);
}

}  // namespace
}  // namespace sps
