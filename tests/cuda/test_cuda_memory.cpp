// The CUDA backend's memory ops against the host, on a real GPU. Without one (the build
// machines have the toolkit but no GPU) every test is skipped; scripts/gpu-check.sh runs
// them where there is one.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "cuda/cuda_fixtures.h"
#include "model/model_fixtures.h"
#include "ops/backend.h"
#include "ops/cuda/memory.h"
#include "util/user_error.h"

namespace sps {
namespace {

TEST(CudaMemory, FillAndAddMatchTheHostExactly) {
  SPS_REQUIRE_GPU();
  // Sizes around the block size and beyond the grid-stride limit (4096 blocks of 256).
  for (int64_t n : {int64_t(1), int64_t(255), int64_t(257), int64_t(4096 * 256 + 3)}) {
    std::vector<float> x(n), y(n);
    for (int64_t i = 0; i < n; ++i) x[i] = float(i % 97) * 0.25f, y[i] = float(i % 13) - 6.0f;
    testing::DeviceFloats dx(n), dy(n);
    ops::cuda::copy_to_device(dx.data, x.data(), n * 4);
    ops::cuda::copy_to_device(dy.data, y.data(), n * 4);
    ops::cuda::add(dy.data, dx.data, n);
    std::vector<float> expected(n);
    for (int64_t i = 0; i < n; ++i) expected[i] = y[i] + x[i];
    EXPECT_EQ(dy.read(), expected) << n;
    ops::cuda::fill(dx.data, n, -1.5f);
    EXPECT_EQ(dx.read(), std::vector<float>(n, -1.5f)) << n;
  }
}

TEST(CudaMemory, AnAllocationTooLargeIsOneLine) {
  SPS_REQUIRE_GPU();
  const std::string error =
      testing::error_of([] { ops::cuda::device_allocate(size_t(1) << 50); });  // 1 PiB
  EXPECT_NE(error.find("cannot allocate 1048576.00 GiB of device memory"), std::string::npos)
      << error;
  EXPECT_EQ(error.find('\n'), std::string::npos);
}

// The backend the model runs on: DeviceBuffers in GPU memory and copies within it.
TEST(CudaBackend, BuffersRoundTripAndCopy) {
  SPS_REQUIRE_GPU();
  const ops::Backend<float>& gpu = ops::backend_for({"cuda", 0});
  EXPECT_FALSE(gpu.host_accessible());
  EXPECT_EQ(gpu.device().name(), "cuda:0");
  ops::DeviceBuffer<float> a(gpu), b(gpu);
  const std::vector<float> host = {1, 2, 3, 4, 5};
  a.upload(host.data(), 5);
  b.reset(5);
  gpu.copy(b.data(), a.data(), 5 * sizeof(float));
  gpu.fill(b.data() + 3, 2, 9.0f);
  std::vector<float> back(5);
  b.download(back.data(), 5);
  EXPECT_EQ(back, (std::vector<float>{1, 2, 3, 9, 9}));
}

// A model that does not fit the GPU is refused in one line naming it, before allocating.
TEST(CudaBackend, AModelBeyondTheGpuIsRefusedNamingIt) {
  SPS_REQUIRE_GPU();
  ModelConfig c = testing::micro_config("sps", 2);
  c.n_layer = 4096;
  c.hidden_size = 8192;
  c.intermediate_size = 16384;
  c.n_head = 64;
  const std::string error = testing::error_of([&] {
    Model<float> model(c, ops::backend_for({"cuda", 0}));
  });
  EXPECT_NE(error.find("of memory is available on cuda:0"), std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
}

}  // namespace
}  // namespace sps
