// `sps convert` as a program: exit statuses, one-line errors, nothing written on failure.
#include <gtest/gtest.h>

#include <filesystem>

#include "interop_fixtures.h"
#include "model/config.h"
#include "run_command.h"
#include "util/temp_dir.h"

namespace sps {
namespace {

namespace fs = std::filesystem;
using testing::interop_fixture;
using testing::TempDir;

std::string quoted(const std::string& s) { return "'" + s + "'"; }

int convert(const std::string& args, std::string* err) {
  return testing::run_command(quoted(SPS_BINARY) + " convert " + args + " 2>&1 >/dev/null", err);
}

TEST(ConvertCli, ImportsAReferenceCheckpoint) {
  TempDir dir;
  const std::string out = dir.file("model");
  std::string err;
  ASSERT_EQ(convert(quoted(interop_fixture("reverse_sps_fp32_compiled.pt")) + " --to sps --out " +
                        quoted(out) + " --with-optimizer",
                    &err),
            0)
      << err;
  EXPECT_TRUE(fs::exists(out + "/model.safetensors"));
  EXPECT_TRUE(fs::exists(out + "/optimizer.safetensors"));
  const ModelConfig config = load_model_config(out + "/config.yaml", {});
  EXPECT_EQ(config.family, "reverse_sps");
  EXPECT_EQ(config.window_size, 2);
  EXPECT_EQ(dir.entries(), 1u);  // no temporary folder left
}

TEST(ConvertCli, BadInputIsOneLineAndExitTwoWithNothingWritten) {
  TempDir dir;
  testing::PickleBytes p;
  p.global("os", "system").str("touch " + dir.file("pwned")).op('\x85').op('R');
  const std::string hostile = dir.file("hostile.pt");
  testing::write_zip(hostile, {{"archive/data.pkl", p.done()}});
  const std::string out = dir.file("out");
  for (const std::string& input :
       {hostile, interop_fixture("hostile_tied_mismatch.pt"), interop_fixture("weights.f32"),
        dir.file("missing.pt")}) {
    std::string err;
    EXPECT_EQ(convert(quoted(input) + " --to sps --out " + quoted(out), &err), 2) << input;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
    EXPECT_EQ(err.rfind("sps: ", 0), 0u) << err;
    EXPECT_FALSE(fs::exists(out));
  }
  EXPECT_FALSE(fs::exists(dir.file("pwned")));
  EXPECT_EQ(dir.entries(), 1u);  // only the hostile input
}

}  // namespace
}  // namespace sps
