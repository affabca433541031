// The binary's own flags, common to every command.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "ops/backend_registry.h"
#include "run_command.h"

namespace sps::testing {
namespace {

const std::string kSps = SPS_BINARY;

TEST(SpsCli, VersionNamesTheRevisionBuildAndLibraries) {
  std::string out;
  ASSERT_EQ(run_command(kSps + " --version", &out), 0);
  EXPECT_EQ(out.rfind("sps 0.", 0), 0u) << out;
  for (const char* line : {"\nrevision ", "\nbuild ", "\nblas OpenBLAS ", "\ncpu kernels: ",
                           "\ncpu bf16 GEMMs: ", "\ncuda "})
    EXPECT_NE(out.find(line), std::string::npos) << line << " missing in:\n" << out;
  // Built from a git checkout, the revision is the HEAD the binary was built at.
  std::string head;
  if (run_command("git -C '" SPS_SOURCE_DIR "' rev-parse --short=12 HEAD 2>/dev/null", &head) == 0 &&
      head.size() >= 12) {
    EXPECT_NE(out.find("\nrevision " + head.substr(0, 12) + "\n"), std::string::npos) << out;
  }
}

TEST(SpsCli, NoCommandIsOneLineAndStatus2) {
  std::string out;
  EXPECT_EQ(run_command(kSps + " 2>&1", &out), 2);
  EXPECT_EQ(out.rfind("sps: ", 0), 0u) << out;
}

// --device on every command that runs a model: a device this build or machine cannot use is
// one line naming the flag (or recipe key), exit status 2, before any work starts. Where a
// GPU is usable, the commands the CUDA backend runs go on to their own checks (the dry run
// passes; a missing file or a bad size is what the others report), and analyze is refused.
TEST(SpsCli, DeviceThatCannotRunIsOneLineAndStatus2) {
  const std::string recipe = SPS_SOURCE_DIR "/configs/experiments/tiny_standard.yaml";
  std::string problem;
  const bool gpu_usable = ops::find_backend("cuda")->devices(&problem) > 0;
  const std::string train = "train --config " + recipe + " --dry-run";
  for (const std::string& command : std::vector<std::string>{
           train, "eval --checkpoint nowhere", "generate --checkpoint nowhere --prompt hi",
           "serve --checkpoint nowhere", "bench gemm --precision fp16",
           "bench step --config nowhere.yaml", "bench attention --head-dim 3",
           "bench generate --config nowhere.yaml", "bench serve --checkpoint nowhere",
           "analyze gradients --checkpoint nowhere --out nowhere.json"}) {
    std::string out;
    const int status = run_command(kSps + " " + command + " --device cuda:0 2>&1", &out);
    const bool runs_on_gpu = command.rfind("analyze ", 0) != 0;
    if (runs_on_gpu && gpu_usable) {
      EXPECT_EQ(status, command == train ? 0 : 2) << out;
      EXPECT_EQ(out.find("--device"), std::string::npos) << command << ": " << out;
    } else {
      EXPECT_EQ(status, 2) << command;
      EXPECT_EQ(out.rfind("sps: --device: ", 0), 0u) << command << ": " << out;
      EXPECT_EQ(out.find('\n'), out.size() - 1) << command << ": " << out;
    }
    EXPECT_EQ(run_command(kSps + " " + command + " --device gpu 2>&1", &out), 2) << command;
    EXPECT_EQ(out, "sps: --device: 'gpu' is not a device; expected cpu, cuda or cuda:N (N = 0, "
                   "1, …)\n")
        << command;
  }
  std::string out;
  EXPECT_EQ(run_command(kSps + " train --config " + recipe + " system.device=tpu --dry-run 2>&1",
                        &out),
            2);
  EXPECT_EQ(out, "sps: " + recipe +
                     ": system.device: 'tpu' is not a device; expected cpu, cuda or cuda:N (N = "
                     "0, 1, …)\n");
  EXPECT_EQ(run_command(kSps + " train --config " + recipe + " --device cpu --dry-run 2>&1", &out),
            0)
      << out;
  // bf16 GEMM operands run on the CPU too; the tensor-core attention is a GPU's alone.
  const std::string train_cmd = kSps + " train --config " + recipe;
  EXPECT_EQ(run_command(train_cmd + " system.precision=bf16 --dry-run 2>&1", &out), 0) << out;
  EXPECT_EQ(run_command(train_cmd + " system.precision=fp16 --dry-run 2>&1", &out), 2);
  EXPECT_EQ(out, "sps: " + recipe +
                     ": system.precision: 'fp16' is not a precision; expected fp32 or bf16\n");
  EXPECT_EQ(run_command(kSps + " bench attention --precision bf16 2>&1", &out), 2);
  EXPECT_EQ(out, "sps: --precision: bf16 here is --device cuda's; on the CPU backend sps bench "
                 "attention computes in fp32\n");
  EXPECT_EQ(run_command(kSps + " bench gemm --precision fp16 2>&1", &out), 2);
  EXPECT_EQ(out, "sps: --precision: 'fp16' is not a precision; expected fp32 or bf16\n");
  // A list is bench step's alone, and each entry is checked.
  EXPECT_EQ(run_command(kSps + " bench gemm --precision fp32,bf16 2>&1", &out), 2);
  EXPECT_EQ(out, "sps: --precision: 'fp32,bf16' is not a precision; expected fp32 or bf16\n");
  EXPECT_EQ(run_command(kSps + " bench step --config " SPS_SOURCE_DIR
                               "/configs/models/micro.yaml --precision fp32,fp16 2>&1",
                        &out),
            2);
  EXPECT_EQ(out, "sps: --precision: 'fp16' is not a precision; expected fp32 or bf16\n");
}

// bench step --precision fp32,bf16 --rounds R: each precision timed in every round, reported
// with the median of its rounds' medians and its speed against the first.
TEST(SpsCli, BenchStepComparesPrecisionsOverRounds) {
  std::string out;
  ASSERT_EQ(run_command(kSps + " bench step --config " SPS_SOURCE_DIR
                               "/configs/models/micro.yaml --batch 2 --warmup 1 --steps 1 "
                               "--precision fp32,bf16 --rounds 3 --json",
                        &out),
            0)
      << out;
  std::vector<nlohmann::json> reports;
  for (size_t begin = 0, end; (end = out.find('\n', begin)) != std::string::npos; begin = end + 1)
    reports.push_back(nlohmann::json::parse(out.substr(begin, end - begin)));
  ASSERT_EQ(reports.size(), 2u) << out;
  EXPECT_EQ(reports[0]["precision"], "fp32");
  EXPECT_EQ(reports[1]["precision"], "bf16");
  for (const nlohmann::json& r : reports) {
    std::vector<double> rounds = r["round_step_seconds"].get<std::vector<double>>();
    ASSERT_EQ(rounds.size(), 3u) << r.dump();
    std::sort(rounds.begin(), rounds.end());
    EXPECT_EQ(r["step_seconds"].get<double>(), rounds[1]) << r.dump();
  }
  EXPECT_EQ(reports[0]["speed_vs_first"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(
      reports[1]["speed_vs_first"].get<double>(),
      reports[0]["step_seconds"].get<double>() / reports[1]["step_seconds"].get<double>());
  // Both precisions compute the same loss up to bf16's rounding of the GEMM operands.
  EXPECT_NEAR(reports[1]["loss"].get<double>(), reports[0]["loss"].get<double>(), 3e-2);
}

// bf16 on the CPU: the step and the GEMM benchmarks say which path the GEMMs take (the line
// `sps --version` prints) and run it; the step allocates nothing per step.
TEST(SpsCli, Bf16BenchmarksRunOnTheCpuAndNameTheirPath) {
  std::string version, out;
  ASSERT_EQ(run_command(kSps + " --version", &version), 0);
  const size_t at = version.find("\ncpu bf16 GEMMs: ");
  ASSERT_NE(at, std::string::npos) << version;
  const std::string line = version.substr(at + 5, version.find('\n', at + 1) - at - 5);
  // The path without the rates measured at start-up, which differ from process to process.
  const std::string path = line.substr(0, line.find(" ("));
  ASSERT_NE(path.size(), line.size()) << line;
  ASSERT_EQ(run_command(kSps + " bench step --config " SPS_SOURCE_DIR
                               "/configs/models/micro.yaml --batch 2 --warmup 1 --steps 1 "
                               "--precision bf16 2>&1",
                        &out),
            0)
      << out;
  EXPECT_NE(out.find(" threads, bf16, median of "), std::string::npos) << out;
  EXPECT_NE(out.find("\n  " + path + " ("), std::string::npos) << path << " not in:\n" << out;
  EXPECT_NE(out.find("allocations per step 0\n"), std::string::npos) << out;
  ASSERT_EQ(run_command(kSps + " bench gemm --precision bf16 --size 64 --repeats 1 2>&1", &out), 0)
      << out;
  EXPECT_EQ(out.rfind(path + " (", 0), 0u) << out;
  EXPECT_NE(out.find(")\noneDNN 2."), std::string::npos) << out;
  EXPECT_NE(out.find("\n64×64×64 "), std::string::npos) << out;
  EXPECT_NE(out.find("\n64×768×2304 "), std::string::npos) << out;
}

// bench linear times the packed linear alone in each weight type and row count given, names
// the build of it this process runs, and refuses an unknown weight type in one line.
TEST(SpsCli, BenchLinearTimesEachWeightTypeAndRowCount) {
  std::string out;
  ASSERT_EQ(run_command(kSps + " bench linear --layers 1 --rows 1,3 --repeats 1 2>&1", &out), 0)
      << out;
  EXPECT_NE(out.find("; packed linear: "), std::string::npos) << out;
  for (const char* row : {"\n    1      f32", "\n    1     bf16", "\n    3     int8"})
    EXPECT_NE(out.find(row), std::string::npos) << row << " not in:\n" << out;
  EXPECT_EQ(run_command(kSps + " bench linear --weight-type int4 2>&1", &out), 2);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_NE(out.find("int4"), std::string::npos) << out;
  // --shape: weights of one shape (40 columns: a narrow last panel too); bad shapes and too
  // many s blocks are one line each.
  ASSERT_EQ(run_command(kSps + " bench linear --shape 40x96 --layers 3 --rows 2 --repeats 1 "
                               "--weight-type f32 2>&1", &out), 0) << out;
  EXPECT_NE(out.find("3 weights of 40 × 96 (out × in)"), std::string::npos) << out;
  EXPECT_NE(out.find("\n    2      f32 "), std::string::npos) << out;
  const std::pair<const char*, const char*> bad_shapes[] = {
      {"40", "At least 2 required but received 1"},
      {"40x", "At least 2 required but received 1"},
      {"x96", "At least 2 required but received 1"},
      {"40x96x2", "At Most 2 required but received 3"},
      {"0x96", "Value 0 not in range 1 to 65536"},
      {"40x-1", "Value -1 not in range 1 to 65536"},
      {"40x70000", "Value 70000 not in range 1 to 65536"},
      {"ax96", "Value a not in range 1 to 65536"}};
  for (const auto& [bad, why] : bad_shapes) {
    EXPECT_EQ(run_command(kSps + " bench linear --shape " + std::string(bad) + " 2>&1", &out), 2);
    EXPECT_EQ(out, "sps: --shape: " + std::string(why) + "\n") << bad;
  }
  EXPECT_EQ(run_command(kSps + " bench linear --layers 97 2>&1", &out), 2);
  EXPECT_EQ(out, "sps: --layers: at most 96 s-scale blocks (more with --shape)\n");
}

// bench attention --decode times one decode step's attention for standard and sps, over an f32
// and a bf16 cache, names the attention's build, counts the score pairs of the layout it
// says (standard: each cached row and its own; sps: the input row sees the cached rows, the
// full ring and its own, the predict row those and the input's), and refuses an unknown
// cache type in one line.
TEST(SpsCli, BenchDecodeAttentionCountsEachFamilysPairs) {
  for (const char* kv : {"f32", "bf16"}) {
    std::string out;
    ASSERT_EQ(run_command(kSps + " bench attention --decode --tokens 64 --window 8 --heads 2 " +
                              "--head-dim 16 --layers 2 --batch 3 --repeats 1 --kv-type " + kv +
                              " 2>&1",
                          &out),
              0)
        << out;
    EXPECT_NE(out.find("; attention: "), std::string::npos) << out;
    const int64_t per_head = 2 * 3 * 2;  // layers · batch · heads
    const auto row = [](const char* family, int64_t pairs) {
      return fmt::format("\n{:<10} {:>12} ", family, pairs);
    };
    const std::string standard = row("standard", per_head * (64 + 1));
    const std::string sps = row("sps", per_head * ((64 + 8 + 1) + (64 + 8 + 2)));
    EXPECT_NE(out.find(standard), std::string::npos) << standard << " not in:\n" << out;
    EXPECT_NE(out.find(sps), std::string::npos) << sps << " not in:\n" << out;
  }
  std::string out;
  EXPECT_EQ(run_command(kSps + " bench attention --decode --kv-type f16 2>&1", &out), 2);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_NE(out.find("f16"), std::string::npos) << out;
}

// SPS_PACKED_LINEAR pins the build of the packed linear the process runs (the start-up timing
// chooses otherwise): `baseline` runs everywhere; a name this binary or CPU lacks is refused
// in one line naming the variable and what it may be.
TEST(SpsCli, PackedLinearVariableChoosesTheBuild) {
  std::string out;
  ASSERT_EQ(run_command("SPS_PACKED_LINEAR=baseline " + kSps + " --version 2>&1", &out), 0) << out;
  EXPECT_NE(out.find("; packed linear: baseline build,"), std::string::npos) << out;
  EXPECT_NE(out.find("; attention: baseline build,"), std::string::npos) << out;  // its width
  ASSERT_EQ(run_command("SPS_PACKED_LINEAR=baseline " + kSps +
                            " bench linear --layers 1 --rows 16 --repeats 1 2>&1",
                        &out),
            0)
      << out;
  EXPECT_NE(out.find("; packed linear: baseline build,"), std::string::npos) << out;
  EXPECT_EQ(run_command("SPS_PACKED_LINEAR=avx9000 " + kSps + " --version 2>&1", &out), 2);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_NE(out.find("SPS_PACKED_LINEAR: expected a build"), std::string::npos) << out;
  EXPECT_NE(out.find("(baseline"), std::string::npos) << out;
  EXPECT_NE(out.find("'avx9000'"), std::string::npos) << out;
}

}  // namespace
}  // namespace sps::testing
