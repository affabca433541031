#pragma once
// Where the independent golden vectors live (../shared/golden beside the repository), and
// what a test does without them: skip on a developer's machine, fail under CI (CI=true),
// where a missing set would otherwise turn the exactness tests into silent skips.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace sps::testing {

// SPS_GOLDEN_DIR, when set, names another place (a GPU machine that runs a bundle of the
// test binaries: scripts/gpu-check.sh).
inline std::string golden_dir() {
  const char* dir = std::getenv("SPS_GOLDEN_DIR");
  return dir && *dir ? std::string(dir) : std::string(SPS_SOURCE_DIR) + "/../shared/golden";
}
inline const std::string kGoldenDir = golden_dir();

inline bool golden_available() { return std::filesystem::exists(kGoldenDir + "/cases.json"); }

inline bool running_under_ci() {
  const char* ci = std::getenv("CI");
  return ci && std::string(ci) == "true";
}

}  // namespace sps::testing

// In a test or its SetUp: return early (skip, or fail under CI) when the set is absent.
#define SPS_REQUIRE_GOLDEN()                                                          \
  do {                                                                                \
    if (!::sps::testing::golden_available()) {                                        \
      if (::sps::testing::running_under_ci())                                         \
        FAIL() << "CI=true and no golden vectors at " << ::sps::testing::kGoldenDir;  \
      GTEST_SKIP() << "no golden vectors at " << ::sps::testing::kGoldenDir;          \
    }                                                                                 \
  } while (0)
