// Device names and the one-line refusals of a device this build or machine cannot use.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ops/backend.h"
#include "ops/backend_registry.h"
#include "ops/device.h"
#include "util/user_error.h"

namespace sps {
namespace {

using ops::Device;

TEST(Device, ParsesCpuCudaAndAnIndex) {
  EXPECT_EQ(ops::parse_device("cpu", "--device"), Device{});
  EXPECT_EQ(ops::parse_device("cuda", "--device"), (Device{"cuda", 0}));
  EXPECT_EQ(ops::parse_device("cuda:3", "--device"), (Device{"cuda", 3}));
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
  std::string problem;
  const int count = ops::find_backend("cuda")->devices(&problem);
#if SPS_TEST_CUDA_BUILT
  if (count == 0) {
    EXPECT_EQ(problem.rfind("no GPU is usable here: ", 0), 0u) << problem;
  }
#else
  EXPECT_EQ(problem, "this sps was built without CUDA (configure with -DSPS_CUDA=ON on a machine "
                     "with the CUDA toolkit)");
#endif
  const std::string error = testing::error_of([] {
    ops::require_device(Device{"cuda", 0}, "--device", "sps analyze gradients");
  });
  if (count == 0) {
    EXPECT_EQ(error, "--device: cuda:0 asked for, but " + problem);
  } else {
    EXPECT_EQ(error,
              "--device: the CUDA backend does not run `sps analyze gradients` yet (docs/gpu.md "
              "says what runs on a GPU); use --device cpu");
  }
  EXPECT_EQ(error.find('\n'), std::string::npos);
  if (count > 0) {
    for (const char* command : {"sps train", "sps generate", "sps eval", "sps bench step",
                                "sps bench attention", "sps bench generate"})
      EXPECT_NO_THROW(ops::require_device(Device{"cuda", 0}, "--device", command));
    EXPECT_EQ(testing::error_of([&] {
                ops::require_device(Device{"cuda", count}, "--device", "sps train");
              }),
              "--device: cuda:" + std::to_string(count) + " asked for, but this machine has " +
                  std::to_string(count) + " GPU" + (count == 1 ? "" : "s") +
                  " (cuda:0 … cuda:" + std::to_string(count - 1) + ")");
  }
}

TEST(Device, VersionLineSaysWhetherCudaIsBuilt) {
  const std::string line = ops::find_backend("cuda")->describe();
  EXPECT_EQ(line.rfind(SPS_TEST_CUDA_BUILT ? "cuda runtime " : "cuda not built", 0), 0u) << line;
}

// The registry: the CPU first, every entry spelled by parse_device and described in its own
// lines; the layers above read capabilities, which follow the entry of the device's backend.
TEST(BackendRegistry, CpuFirstEveryEntryParsesAndCapabilitiesFollowTheBackend) {
  const std::vector<ops::BackendEntry>& entries = ops::backend_registry();
  ASSERT_GE(entries.size(), 2u);
  EXPECT_EQ(entries.front().name, "cpu");
  for (const ops::BackendEntry& e : entries) {
    EXPECT_EQ(ops::parse_device(e.name, "--device"), (Device{e.name, 0}));
    EXPECT_EQ(ops::find_backend(e.name), &e);
    EXPECT_FALSE(e.describe().empty()) << e.name;
    EXPECT_GT(e.capabilities.lm_head_rows, 0) << e.name;
    EXPECT_EQ(ops::device_of_local_rank(e.name), e.indexed) << e.name;
    if (e.indexed) {
      EXPECT_FALSE(ops::device_of_local_rank(e.name + ":1")) << e.name;
    }
  }
  EXPECT_EQ(ops::find_backend("gpu"), nullptr);
  const ops::BackendCapabilities& cpu = ops::capabilities(Device{});
  EXPECT_TRUE(cpu.host_memory);
  EXPECT_TRUE(cpu.packed_weights);
  EXPECT_FALSE(cpu.bf16_attention);
  EXPECT_EQ(cpu.lm_head_rows, 256);
  const ops::BackendCapabilities& cuda = ops::capabilities(Device{"cuda", 1});
  EXPECT_FALSE(cuda.host_memory);
  EXPECT_FALSE(cuda.packed_weights);
  EXPECT_EQ(cuda.lm_head_rows, 4096);
  // Every device is usable on the CPU, and it runs every command.
  std::string problem;
  EXPECT_EQ(ops::find_backend("cpu")->devices(&problem), 1);
  EXPECT_TRUE(problem.empty());
  EXPECT_EQ(&ops::backend_for(Device{}), &ops::cpu_backend<float>());
}

}  // namespace
}  // namespace sps
