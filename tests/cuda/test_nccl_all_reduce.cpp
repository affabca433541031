// The GPUs' all-reduce (NCCL): every process of a job takes the same path, and a job of one
// process sums in place on the GPU. Several GPUs are checked by the `processes` stage of
// scripts/gpu-check.sh where a machine has them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda_fixtures.h"
#include "ops/cuda/nccl_all_reduce.h"

namespace sps {
namespace {

ops::JobLink one_process(bool others_agree) {
  ops::JobLink job;
  job.broadcast = [](void*, size_t) {};
  job.all = [others_agree](bool mine) { return mine && others_agree; };
  return job;
}

// NCCL loads here (no GPU needed) or the build has none; either way, when another process
// cannot take the device path, this one does not either, and says why.
TEST(NcclAllReduce, NoProcessTakesTheDevicePathUnlessEveryOneCan) {
  std::string why;
  EXPECT_EQ(ops::cuda::make_nccl_all_reduce(one_process(false), &why), nullptr);
  EXPECT_TRUE(why == "another process cannot load NCCL" || why.find("NCCL") != std::string::npos)
      << why;
}

TEST(NcclAllReduce, OneProcessSumsInPlaceOnTheGpu) {
  SPS_REQUIRE_GPU();
  std::string why;
  const auto reduce = ops::cuda::make_nccl_all_reduce(one_process(true), &why);
  ASSERT_NE(reduce, nullptr) << why;
  const std::vector<float> values = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f};
  testing::DeviceArray<float> data(values);
  reduce->sum(data.data, int64_t(values.size()));
  reduce->wait();
  EXPECT_EQ(data.read(), values);
}

}  // namespace
}  // namespace sps
