// scripts/gpu-check.sh's plan, on a machine without a GPU: a dry run (every stage on the CPU
// at small shapes) from a bundle of this build's sps and a stand-in test_cuda, with stand-ins
// for nvidia-smi, cuobjdump and compute-sanitizer on PATH. Every stage's command line runs,
// fp32 and bf16, the report and logs.tgz come back as a lent GPU machine returns files, and
// the failure paths (a failing or crashing test rerun by name, a stage that times out, tests
// that were skipped, a failing cuobjdump, a foreign mpirun, a short budget) say what they
// should. It tests the plan, not the GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "run_command.h"
#include "util/temp_dir.h"

namespace sps::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

void write_script(const std::string& path, const std::string& text,
                  const std::string& shell = "/bin/sh") {
  std::ofstream(path) << "#!" << shell << "\n" << text;
  fs::permissions(path, fs::perms::owner_all);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// gtest's output for the filter given. Not in a rerun with CUDA_LAUNCH_BLOCKING=1:
// FAKE_FAILURES=1, a parameterised test and a plain one fail, as gtest lists them;
// FAKE_CRASH=1, a test starts and the process dies without a result line; FAKE_HANG=1, a
// test starts and never ends. FAKE_SKIP=1: every test skips (no GPU seen).
constexpr const char* kFakeTestCuda = R"(filter=
for a in "$@"; do case $a in --gtest_filter=*) filter=${a#--gtest_filter=} ;; esac; done
echo "Note: Google Test filter = $filter"
echo "CUDA_LAUNCH_BLOCKING=${CUDA_LAUNCH_BLOCKING:-}"
if [ -z "${CUDA_LAUNCH_BLOCKING:-}" ] && [ "${FAKE_CRASH:-}" = 1 ]; then
  echo '[ RUN      ] CudaOps.RmsNormMatchesTheCpuBackend'
  echo '[       OK ] CudaOps.RmsNormMatchesTheCpuBackend (1 ms)'
  echo '[ RUN      ] CudaOps.TopKAtSmallShapes'
  echo 'an illegal memory access was encountered'
  exit 139
fi
if [ -z "${CUDA_LAUNCH_BLOCKING:-}" ] && [ "${FAKE_HANG:-}" = 1 ]; then
  echo '[ RUN      ] CudaModel.TrainingStepsMatchTheCpuBackend'
  exec sleep 60
fi
if [ "${FAKE_SKIP:-}" = 1 ]; then
  echo '[ RUN      ] Fake.Test'
  echo '[  SKIPPED ] Fake.Test (0 ms)'
  echo '[==========] 1 test from 1 test suite ran. (0 ms total)'
  echo '[  PASSED  ] 0 tests.'
  echo '[  SKIPPED ] 1 test, listed below:'
  echo '[  SKIPPED ] Fake.Test'
  exit 0
fi
if [ "${FAKE_FAILURES:-}" = 1 ] && [ -z "${CUDA_LAUNCH_BLOCKING:-}" ]; then
  echo '[ RUN      ] AllCases/CudaGolden.FloatMatches/sps_w0'
  echo '[  FAILED  ] AllCases/CudaGolden.FloatMatches/sps_w0, where GetParam() = sps_w0 (5 ms)'
  echo '[ RUN      ] CudaOps.RmsNormMatchesTheCpuBackend'
  echo '[  FAILED  ] CudaOps.RmsNormMatchesTheCpuBackend (1 ms)'
  echo '[==========] 3 tests from 2 test suites ran. (6 ms total)'
  echo '[  PASSED  ] 1 test.'
  echo '[  FAILED  ] 2 tests, listed below:'
  echo '[  FAILED  ] AllCases/CudaGolden.FloatMatches/sps_w0, where GetParam() = sps_w0'
  echo '[  FAILED  ] CudaOps.RmsNormMatchesTheCpuBackend'
  echo
  echo ' 2 FAILED TESTS'
  exit 1
fi
echo '[ RUN      ] Fake.Test'
echo '[       OK ] Fake.Test (0 ms)'
echo '[==========] 1 test from 1 test suite ran. (0 ms total)'
echo '[  PASSED  ] 1 test.'
)";

// A GPU machine's tools: one H200; a binary with sm_80 and sm_90a code and no local memory
// (--dump-sass fails with FAKE_FAILURES=1, --list-elf with FAKE_LIST_FAILURE=1);
// compute-sanitizer runs its program.
void write_fake_tools(const std::string& dir) {
  fs::create_directories(dir);
  write_script(dir + "/nvidia-smi", R"(case "$*" in
  -L) echo 'GPU 0: NVIDIA H200 (UUID: GPU-fake)' ;;
  *) echo '0, NVIDIA H200, 143771 MiB, 580.159.03, 9.0' ;;
esac
)");
  write_script(dir + "/cuobjdump", R"(case $1 in
  --list-elf) [ "${FAKE_LIST_FAILURE:-}" = 1 ] && exit 1
    printf 'ELF file    1: sps.1.sm_80.cubin\nELF file    2: sps.2.sm_90a.cubin\n' ;;
  --dump-sass) [ "${FAKE_FAILURES:-}" = 1 ] && exit 1
    printf '\tFunction : _Z6kernelPf\n\t/*0000*/ MOV R1, c[0x0][0x28] ;\n' ;;
  *) exit 2 ;;
esac
)");
  write_script(dir + "/compute-sanitizer", R"(echo "compute-sanitizer $*"
while [ $# -gt 0 ]; do
  case $1 in
    --tool | --report-api-errors | --target-processes | --error-exitcode) shift 2 ;;
    -*) shift ;;
    *) break ;;
  esac
done
exec "$@"
)");
}

// A stand-in for the machine's `find` that takes 2 s per search (the check's library search).
void write_slow_find(const std::string& dir) {
  fs::create_directories(dir);
  write_script(dir + "/find", "sleep 2\ncommand -p find \"$@\"\n");
}

// A stand-in for `timeout` that stops the kernels stage after 2 s whatever its limit (a bash
// script: the stage's functions are bash's exported functions, which sh drops from the
// environment).
void write_short_timeout(const std::string& dir) {
  fs::create_directories(dir);
  write_script(dir + "/timeout", R"(case "$*" in
  *stage_kernels) shift 2; command -p timeout --kill-after=1 2 "$@" ;;
  *) command -p timeout "$@" ;;
esac
)",
               "/usr/bin/env bash");
}

// A bundle as scripts/gpu-bundle.sh packs one: sps (here, this build's, run through a script
// that adds each call's arguments to the line list sps-calls beside it), test_cuda (the
// stand-in), lib/ and the MPI version the bundle was built with.
std::string make_bundle(const TempDir& dir, const std::string& name,
                        const std::string& mpi_version) {
  const std::string root = dir / (name + "-files");
  fs::create_directories(root + "/lib");
  write_script(root + "/sps",
               "echo \"$*\" >>\"$(dirname \"$0\")/sps-calls\"\nexec '" SPS_BINARY "' \"$@\"\n");
  write_script(root + "/test_cuda", kFakeTestCuda);
  if (!mpi_version.empty()) std::ofstream(root + "/mpi-version") << mpi_version << "\n";
  const std::string bundle = dir / (name + ".tar.gz");
  EXPECT_EQ(run_command("tar -C '" + root + "' -czf '" + bundle + "' ."), 0);
  return bundle;
}

// This machine's mpirun's first line ("" without one).
std::string mpirun_version() {
  std::string text;
  if (run_command("mpirun --version 2>/dev/null", &text) != 0) return "";
  return text.substr(0, text.find('\n'));
}

// Runs the check; its exit status, the console in *console.
int run_check(const TempDir& dir, const std::string& arguments, std::string* console,
              const std::string& environment = "") {
  // One thread per process: the check's CPU runs are small, and two processes share the cores.
  return run_command(
      environment + " OMP_NUM_THREADS=1 PATH='" + dir.file("tools") +
          "':\"$PATH\" bash '" SPS_SOURCE_DIR "/scripts/gpu-check.sh' --dry-run --out '" +
          dir.file("out") + "' --work '" + dir.file("work") + "' " + arguments + " 2>&1",
      console);
}

int count_of(const std::string& text, const std::string& part) {
  int n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

std::map<std::string, json> stages_of(const json& report) {
  std::map<std::string, json> stages;
  for (const json& stage : report["stages"]) stages[stage["stage"]] = stage;
  return stages;
}

TEST(GpuCheckCli, DryRunRunsEveryStageAndReturnsTheReportAndLogsAsALentMachineDoes) {
  TempDir dir;
  write_fake_tools(dir / "tools");
  const std::string mpi = mpirun_version();
  const std::string bundle = make_bundle(dir, "bundle", mpi);
  std::string console;
  ASSERT_EQ(run_check(dir, "--bundle '" + bundle + "'", &console), 0) << console;

  // What comes back from $OUT: at most 8 files, at most two folders down, plain names.
  std::vector<std::string> returned;
  const std::regex plain("[A-Za-z0-9._-]+");
  for (const auto& entry : fs::recursive_directory_iterator(dir / "out")) {
    const fs::path relative = fs::relative(entry.path(), dir / "out");
    for (const fs::path& part : relative)
      EXPECT_TRUE(std::regex_match(part.string(), plain)) << relative;
    EXPECT_LE(std::distance(relative.begin(), relative.end()), 3) << relative;
    if (entry.is_regular_file()) returned.push_back(relative.string());
  }
  std::sort(returned.begin(), returned.end());
  EXPECT_EQ(returned, (std::vector<std::string>{"gpu-check.json", "logs.tgz"}));

  // Every stage ran and passed, in the planned order (processes: skipped without mpirun).
  const json report = json::parse(read_file(dir.file("out/gpu-check.json")));
  const std::vector<std::string> expected = {
      "gpu",        "build",          "version",   "kernels",       "golden", "model",
      "train",      "eval",           "processes", "device-errors", "sass",   "bench-attention",
      "bench-step", "bench-generate", "racecheck", "memcheck"};
  EXPECT_EQ(report["planned"].get<std::vector<std::string>>(), expected);
  std::vector<std::string> ran;
  for (const json& stage : report["stages"]) {
    ran.push_back(stage["stage"]);
    const std::string want = stage["stage"] == "processes" && mpi.empty() ? "skipped" : "passed";
    EXPECT_EQ(stage["status"], want) << stage.dump(1);
  }
  EXPECT_EQ(ran, expected);
  EXPECT_EQ(report["device"], "cpu");
  EXPECT_EQ(report["dry_run"], true);
  EXPECT_EQ(report["budget_seconds"], 580);  // a bundle's default
  // The first pass's limits fit a lent GPU's 600 s per command, with room for the machine.
  int first_pass = 0;
  for (const json& stage : report["stages"])
    if (stage["stage"] != "racecheck" && stage["stage"] != "memcheck")
      first_pass += int(stage["limit"]);
  EXPECT_LE(first_pass, 540);

  // logs.tgz holds every stage's log and the runs' small files, no checkpoint or token file.
  std::string listing;
  ASSERT_EQ(run_command("tar -tzf '" + dir.file("out/logs.tgz") + "'", &listing), 0);
  for (const std::string& name : expected)
    EXPECT_NE(listing.find("./" + name + ".log\n"), std::string::npos) << name;
  EXPECT_NE(listing.find("./train/cpu/metrics.jsonl\n"), std::string::npos) << listing;
  EXPECT_EQ(listing.find("checkpoints"), std::string::npos) << listing;
  EXPECT_EQ(listing.find(".bin\n"), std::string::npos) << listing;
  EXPECT_EQ(listing.find(".safetensors"), std::string::npos) << listing;
  // memcheck leaves library-internal API errors out.
  EXPECT_NE(report["stages"].back()["output_tail"].get<std::string>().find(
                "--tool memcheck --report-api-errors no"),
            std::string::npos);

  // bf16 as well as fp32: the train stage's comparison of bf16 operands with the CPU's fp32
  // (within 3e-2, and not equal), and bench gemm and bench step on bf16 operands (the CPU's
  // attention is fp32 only: bench attention runs once).
  const std::string train = read_file(dir.file("work/logs/train.log"));
  EXPECT_NE(train.find("\nbf16: final val NLL "), std::string::npos) << train;
  const std::string step = read_file(dir.file("work/logs/bench-step.log"));
  EXPECT_NE(step.find("sps bf16"), std::string::npos) << step;  // bench gemm's bf16 table
  EXPECT_NE(step.find("\"precision\":\"bf16\""), std::string::npos) << step;

  // The report's revision is the binary's, asked once (not at each of the report's rewrites):
  // sps --version runs for the build stage's check that it starts, the version stage and
  // the revision.
  std::string version;
  ASSERT_EQ(run_command("'" SPS_BINARY "' --version", &version), 0);
  EXPECT_NE(version.find("revision " + report["revision"].get<std::string>() + "\n"),
            std::string::npos)
      << report["revision"];
  EXPECT_EQ(count_of("\n" + read_file(dir.file("work/bin/bundle/sps-calls")), "\n--version\n"), 3);
}

// scripts/gpu-bundle.sh packs this build as it packs a portable one for a lent GPU machine:
// the bundle fits what a call may carry there (64 MiB with the tree), holds both binaries,
// their libraries and the MPI version, and sps starts from it through the check's scripts
// with the bundle's libraries alone.
TEST(GpuCheckCli, ABundleOfThisBuildFitsWhatALentMachineCarriesAndStarts) {
  const fs::path build = fs::path(SPS_BINARY).parent_path();
  if (!fs::exists(build / "test_cuda")) GTEST_SKIP() << "no test_cuda in this build (no nvcc)";
  TempDir dir;
  write_fake_tools(dir / "tools");
  const std::string bundle = dir / "bundle.tar.gz";
  std::string console;
  ASSERT_EQ(run_command("bash '" SPS_SOURCE_DIR "/scripts/gpu-bundle.sh' --from '" +
                            build.string() + "' '" + bundle + "' 2>&1",
                        &console),
            0)
      << console;
  EXPECT_LT(fs::file_size(bundle), 48u << 20) << "leave room for the tree in 64 MiB";
  std::string listing;
  ASSERT_EQ(run_command("tar -tzf '" + bundle + "'", &listing), 0);
  for (const char* name : {"./sps\n", "./test_cuda\n", "./lib/libdnnl.so.2\n", "./lib/libzip.so.4\n"})
    EXPECT_NE(listing.find(name), std::string::npos) << name << " not in:\n" << listing;
  EXPECT_EQ(listing.find("libcublas"), std::string::npos) << listing;
  if (!mpirun_version().empty()) {
    EXPECT_NE(listing.find("./mpi-version\n"), std::string::npos) << listing;
  }
  EXPECT_EQ(run_command("bash '" SPS_SOURCE_DIR "/scripts/gpu-bundle.sh' --from '" + dir.path().string() +
                            "' x.tar.gz 2>&1",
                        &console),
            2);
  EXPECT_NE(console.find("--from " + dir.path().string() + ": expected a build folder"), std::string::npos)
      << console;

  ASSERT_EQ(run_check(dir, "--bundle '" + bundle + "' --only version", &console), 0) << console;
  const json report = json::parse(read_file(dir.file("out/gpu-check.json")));
  EXPECT_EQ(stages_of(report)["version"]["status"], "passed") << report.dump(1);
  EXPECT_NE(read_file(dir.file("work/logs/version.log")).find("\nrevision "), std::string::npos);
}

// memcheck runs the small tests that reach every kernel (racecheck's among them), not the
// golden cases, whole models or NCCL: the filter its dry run hands test_cuda, applied to this
// build's test_cuda.
TEST(GpuCheckCli, MemcheckRunsTheSmallTests) {
  if (!SPS_TEST_CUDA_BUILT) GTEST_SKIP() << "this build has no test_cuda";
  TempDir dir;
  write_fake_tools(dir / "tools");
  std::string console;
  ASSERT_EQ(
      run_check(dir, "--bundle '" + make_bundle(dir, "bundle", "") + "' --only racecheck,memcheck",
                &console),
      0)
      << console;
  const auto tests_of = [&](const std::string& stage) {
    const std::string output = read_file(dir.file("work/logs/" + stage + ".out"));
    const std::string note = "Note: Google Test filter = ";
    const size_t at = output.find(note) + note.size();
    const std::string filter = output.substr(at, output.find('\n', at) - at);
    std::string listing;
    EXPECT_EQ(run_command("'" + (fs::path(SPS_BINARY).parent_path() / "test_cuda").string() +
                              "' --gtest_list_tests --gtest_filter='" + filter + "'",
                          &listing),
              0);
    std::vector<std::string> tests;  // Suite.Test, parameterised ones without their parameter
    std::istringstream lines(listing);
    std::string suite;
    for (std::string line; std::getline(lines, line);) {
      if (line.empty()) continue;
      if (line[0] != ' ') {
        suite = line.substr(line.find('/') == std::string::npos ? 0 : line.find('/') + 1);
        continue;
      }
      tests.push_back(suite + line.substr(2, line.find_first_of(" /", 2) - 2));
    }
    return tests;
  };
  const std::vector<std::string> memcheck = tests_of("memcheck");
  for (const std::string& test : memcheck)
    for (const std::string suite : {"CudaGolden.", "CudaModel.", "NcclAllReduce."})
      EXPECT_NE(test.rfind(suite, 0), 0u) << test;
  for (const std::string& test : tests_of("racecheck"))
    EXPECT_NE(std::find(memcheck.begin(), memcheck.end(), test), memcheck.end()) << test;
  for (const std::string test : {"CudaMemory.FillAndAddMatchTheHostExactly",
                                 "CudaLinear.Bf16OperandsMatchTheCpuOnRoundedOperands",
                                 "CudaOps.EmbeddingMatchesTheCpuBackendWithRepeatedTokens"})
    EXPECT_NE(std::find(memcheck.begin(), memcheck.end(), test), memcheck.end()) << test;
}

// A failing test is rerun by its full name (parameterised too, never the count line) with
// every launch synchronous; a cuobjdump that fails fails its stage; a bundle built with
// another MPI skips the processes stage; a sanitizer without the time it needs is skipped.
TEST(GpuCheckCli, DryRunFailurePathsSayWhatFailedAndWhy) {
  TempDir dir;
  write_fake_tools(dir / "tools");
  const std::string bundle = make_bundle(dir, "other-mpi", "mpirun (Open MPI) 0.0.1");
  std::string console;
  EXPECT_EQ(run_check(dir, "--bundle '" + bundle + "' --only kernels,sass,processes", &console,
                      "FAKE_FAILURES=1"),
            1)
      << console;
  const std::map<std::string, json> stages =
      stages_of(json::parse(read_file(dir.file("out/gpu-check.json"))));
  ASSERT_EQ(stages.size(), 5u) << console;  // gpu and build run first
  EXPECT_EQ(stages.at("kernels")["status"], "failed");
  const std::string kernels = read_file(dir.file("work/logs/kernels.log"));
  EXPECT_NE(kernels.find("rerun: CUDA_LAUNCH_BLOCKING=1 test_cuda --gtest_filter="
                         "AllCases/CudaGolden.FloatMatches/sps_w0:"
                         "CudaOps.RmsNormMatchesTheCpuBackend\n"),
            std::string::npos)
      << kernels;
  EXPECT_NE(read_file(dir.file("work/logs/kernels-rerun.out"))
                .find("Note: Google Test filter = AllCases/CudaGolden.FloatMatches/sps_w0:"
                      "CudaOps.RmsNormMatchesTheCpuBackend\nCUDA_LAUNCH_BLOCKING=1\n"),
            std::string::npos);
  EXPECT_EQ(stages.at("sass")["status"], "failed");
  EXPECT_NE(read_file(dir.file("work/logs/sass.log")).find("cuobjdump --dump-sass failed"),
            std::string::npos);
  EXPECT_EQ(
      run_check(dir, "--bundle '" + bundle + "' --only sass", &console, "FAKE_LIST_FAILURE=1"), 1)
      << console;
  EXPECT_EQ(stages_of(json::parse(read_file(dir.file("out/gpu-check.json")))).at("sass")["status"],
            "failed");
  EXPECT_NE(read_file(dir.file("work/logs/sass.log")).find("cuobjdump --list-elf failed"),
            std::string::npos);
  EXPECT_EQ(stages.at("processes")["status"], "skipped");
  if (!mpirun_version().empty()) {
    EXPECT_NE(read_file(dir.file("work/logs/processes.log"))
                  .find("the bundle's MPI is 'mpirun (Open MPI) 0.0.1'"),
              std::string::npos);
  }

  // 50 s of budget, 15 kept for the report: racecheck (at least 45 s) and memcheck (60 s) are
  // skipped.
  EXPECT_EQ(
      run_check(dir, "--bundle '" + bundle + "' --only racecheck,memcheck --budget 50", &console),
      0)
      << console;
  const std::map<std::string, json> short_of_time =
      stages_of(json::parse(read_file(dir.file("out/gpu-check.json"))));
  for (const auto& [name, needs] : {std::pair{"racecheck", "45s"}, std::pair{"memcheck", "60s"}}) {
    const json& stage = short_of_time.at(name);
    EXPECT_EQ(stage["status"], "skipped") << stage.dump(1);
    EXPECT_NE(stage["output_tail"].get<std::string>().find(std::string("the stage needs ") + needs),
              std::string::npos)
        << stage.dump(1);
  }

  // A test that crashes prints no FAILED line: the one that started last without a result is
  // rerun. And the budget's clock starts before the library search (here 4 s: the run
  // without it takes 1 or 2).
  write_slow_find(dir / "slow-find");
  EXPECT_EQ(run_check(dir, "--bundle '" + bundle + "' --only kernels", &console,
                      "FAKE_CRASH=1 PATH='" + dir.file("slow-find") + "':\"$PATH\""),
            1)
      << console;
  const json crashed = json::parse(read_file(dir.file("out/gpu-check.json")));
  EXPECT_GE(int(crashed["seconds"]), 4) << crashed.dump(1);
  EXPECT_NE(read_file(dir.file("work/logs/kernels.log"))
                .find("rerun: CUDA_LAUNCH_BLOCKING=1 test_cuda "
                      "--gtest_filter=CudaOps.TopKAtSmallShapes\n"),
            std::string::npos)
      << read_file(dir.file("work/logs/kernels.log"));

  // Sanitizer stages whose tests all skip (the GPU not seen) fail as the other CUDA test
  // stages do, and rerun nothing.
  EXPECT_EQ(run_check(dir, "--bundle '" + bundle + "' --only racecheck,memcheck", &console,
                      "FAKE_SKIP=1"),
            1)
      << console;
  const std::map<std::string, json> sanitizers =
      stages_of(json::parse(read_file(dir.file("out/gpu-check.json"))));
  for (const std::string name : {"racecheck", "memcheck"}) {
    EXPECT_EQ(sanitizers.at(name)["status"], "failed") << name;
    EXPECT_NE(
        sanitizers.at(name)["output_tail"].get<std::string>().find(name + ": tests were skipped"),
        std::string::npos)
        << name;
    EXPECT_FALSE(fs::exists(dir.file("work/logs/" + name + "-rerun.out"))) << name;
  }

  // A CUDA test stage that times out reports its tests' output so far.
  write_short_timeout(dir / "short-timeout");
  EXPECT_EQ(run_check(dir, "--bundle '" + bundle + "' --only kernels", &console,
                      "FAKE_HANG=1 PATH='" + dir.file("short-timeout") + "':\"$PATH\""),
            1)
      << console;
  const json kernels_stage =
      stages_of(json::parse(read_file(dir.file("out/gpu-check.json")))).at("kernels");
  EXPECT_EQ(kernels_stage["status"], "timed out after 100s") << kernels_stage.dump(1);
  EXPECT_NE(kernels_stage["output_tail"].get<std::string>().find(
                "timed out; the end of kernels.out:\nNote: Google Test filter = "),
            std::string::npos)
      << kernels_stage.dump(1);
  EXPECT_NE(kernels_stage["output_tail"].get<std::string>().find(
                "[ RUN      ] CudaModel.TrainingStepsMatchTheCpuBackend"),
            std::string::npos)
      << kernels_stage.dump(1);

  // Bad arguments: one line, status 2.
  EXPECT_EQ(run_check(dir, "--budget soon", &console), 2);
  EXPECT_EQ(console, "gpu-check.sh: --budget must be whole seconds, got 'soon'\n");
}

}  // namespace
}  // namespace sps::testing
