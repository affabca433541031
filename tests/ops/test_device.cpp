// Device names and the one-line refusals of a device this build or machine cannot use.
#include <gtest/gtest.h>

#include <string>

#include "ops/device.h"
#include "util/user_error.h"

namespace sps {
namespace {

using ops::Device;

TEST(Device, ParsesCpuCudaAndAnIndex) {
  EXPECT_EQ(ops::parse_device("cpu", "--device"), Device{});
  EXPECT_EQ(ops::parse_device("cuda", "--device"), (Device{Device::Kind::cuda, 0}));
  EXPECT_EQ(ops::parse_device("cuda:3", "--device"), (Device{Device::Kind::cuda, 3}));
  EXPECT_EQ(ops::parse_device("cuda:3", "--device").name(), "cuda:3");
}

TEST(Device, RefusesAnythingElseNamingTheFlag) {
  for (const char* bad : {"", "gpu", "CUDA", "cuda:", "cuda:-1", "cuda:1x", "cuda:0:1", "cpu:0",
                          "cuda:99999999999"})
    EXPECT_EQ(testing::error_of([&] { ops::parse_device(bad, "system.device"); }),
              "system.device: '" + std::string(bad) +
                  "' is not a device; expected cpu, cuda or cuda:N (N = 0, 1, …)")
        << bad;
}

TEST(Device, PrecisionIsFp32OrBf16) {
  EXPECT_EQ(ops::parse_precision("fp32", "system.precision"), ops::Precision::fp32);
  EXPECT_EQ(ops::parse_precision("bf16", "system.precision"), ops::Precision::bf16);
  for (const char* bad : {"", "fp16", "BF16", "bfloat16", "fp32 "})
    EXPECT_EQ(testing::error_of([&] { ops::parse_precision(bad, "system.precision"); }),
              "system.precision: '" + std::string(bad) +
                  "' is not a precision; expected fp32 or bf16")
        << bad;
}

TEST(Device, PrecisionNameIsWhatParsePrecisionReads) {
  for (ops::Precision p : {ops::Precision::fp32, ops::Precision::bf16})
    EXPECT_EQ(ops::parse_precision(ops::precision_name(p), "x"), p);
  EXPECT_STREQ(ops::precision_name(ops::Precision::bf16), "bf16");
}

TEST(Device, CpuIsAlwaysUsable) {
  EXPECT_NO_THROW(ops::require_device(Device{}, "--device", "sps train"));
}

// What a CUDA device request says depends on the build and the machine; each answer is one
// line naming the flag, and none of them lets a command go on while kernels are missing
// (the analyses have none yet; training, generation, evaluation and the benchmarks have
// every op).
TEST(Device, CudaRequestSaysWhyItCannotRun) {
  const ops::CudaStatus status = ops::cuda_status();
  const std::string error = testing::error_of([] {
    ops::require_device(Device{Device::Kind::cuda, 0}, "--device", "sps analyze gradients");
  });
  if (!status.built)
    EXPECT_EQ(error, "--device: cuda:0 asked for, but this sps was built without CUDA (configure "
                     "with -DSPS_CUDA=ON on a machine with the CUDA toolkit)");
  else if (!status.problem.empty())
    EXPECT_EQ(error, "--device: cuda:0 asked for, but no GPU is usable here: " + status.problem);
  else
    EXPECT_EQ(error,
              "--device: the CUDA backend does not run `sps analyze gradients` yet (docs/gpu.md "
              "says what runs on a GPU); use --device cpu");
  EXPECT_EQ(error.find('\n'), std::string::npos);
  if (status.built && status.problem.empty()) {
    for (const char* command : {"sps train", "sps generate", "sps eval", "sps bench step",
                                "sps bench attention", "sps bench generate"})
      EXPECT_NO_THROW(ops::require_device(Device{Device::Kind::cuda, 0}, "--device", command));
    const int count = int(status.gpus.size());
    EXPECT_EQ(testing::error_of([&] {
                ops::require_device(Device{Device::Kind::cuda, count}, "--device", "sps train");
              }),
              "--device: cuda:" + std::to_string(count) + " asked for, but this machine has " +
                  std::to_string(count) + " GPU" + (count == 1 ? "" : "s") + " (cuda:0 … cuda:" +
                  std::to_string(count - 1) + ")");
  }
}

TEST(Device, VersionLineSaysWhetherCudaIsBuilt) {
  const ops::CudaStatus status = ops::cuda_status();
  const std::string line = ops::describe_cuda(status);
  EXPECT_EQ(line.rfind(status.built ? "cuda runtime " : "cuda not built", 0), 0u) << line;
#if SPS_TEST_CUDA_BUILT
  EXPECT_TRUE(status.built);
#endif
}

}  // namespace
}  // namespace sps
