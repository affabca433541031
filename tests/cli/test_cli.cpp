// The binary's own flags, common to every command.
#include <gtest/gtest.h>

#include <string>

#include "run_command.h"

namespace sps::testing {
namespace {

const std::string kSps = SPS_BINARY;

TEST(SpsCli, VersionNamesTheRevisionBuildAndLibraries) {
  std::string out;
  ASSERT_EQ(run_command(kSps + " --version", &out), 0);
  EXPECT_EQ(out.rfind("sps 0.", 0), 0u) << out;
  for (const char* line : {"\nrevision ", "\nbuild ", "\nblas OpenBLAS ", "\ncuda "})
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

}  // namespace
}  // namespace sps::testing
