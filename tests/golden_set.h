#pragma once
// Where the independent golden vectors live (tests/golden, README.md there), and what a test
// does without them: fail, so that a missing or moved set can never turn the exactness tests
// into silent skips.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace sps::testing {

// SPS_GOLDEN_DIR, when set, names another place (a GPU machine that runs the test binaries
// of a bundle built elsewhere: scripts/gpu-check.sh).
inline std::string golden_dir() {
  const char* dir = std::getenv("SPS_GOLDEN_DIR");
  return dir && *dir ? std::string(dir) : std::string(SPS_SOURCE_DIR) + "/tests/golden";
}
inline const std::string kGoldenDir = golden_dir();

inline bool golden_available() { return std::filesystem::exists(kGoldenDir + "/cases.json"); }

}  // namespace sps::testing

// In a test or its SetUp: fail and return when the set is absent.
#define SPS_REQUIRE_GOLDEN()                                                    \
  do {                                                                          \
    if (!::sps::testing::golden_available())                                    \
      FAIL() << "no golden vectors at " << ::sps::testing::kGoldenDir;          \
  } while (0)
