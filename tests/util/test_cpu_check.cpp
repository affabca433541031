#include "util/cpu_check.h"

#include <gtest/gtest.h>

#include <string>

namespace sps {
namespace {

TEST(CpuCheck, ListsTheMissingFeaturesInOrder) {
  const CpuFeature features[] = {{"avx2", false}, {"fma", true}, {"avx512f", false}};
  char out[64];
  EXPECT_EQ(missing_cpu_features(features, 3, out, sizeof(out)), 2);
  EXPECT_EQ(std::string(out), "avx2, avx512f");
}

TEST(CpuCheck, NothingMissingWritesAnEmptyList) {
  const CpuFeature features[] = {{"avx2", true}, {"fma", true}};
  char out[64] = "stale";
  EXPECT_EQ(missing_cpu_features(features, 2, out, sizeof(out)), 0);
  EXPECT_EQ(std::string(out), "");
}

TEST(CpuCheck, ALongListIsCutToTheBuffer) {
  const CpuFeature features[] = {{"avx512f", false}, {"avx512bw", false}, {"avx512vl", false}};
  char out[12];
  EXPECT_EQ(missing_cpu_features(features, 3, out, sizeof(out)), 3);
  EXPECT_EQ(std::string(out), "avx512f, av");
}

// The tests were built for the machine that runs them: the check must let them through
// (it exits with status 2 otherwise, failing this test).
TEST(CpuCheck, ThisCpuRunsThisBuild) { require_build_cpu_features(); }

}  // namespace
}  // namespace sps
