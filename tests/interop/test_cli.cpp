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

// GPT-2-style tokenizer files for the fixtures' vocabulary (V = 64, EOS = 61).
std::string write_tokenizer(const TempDir& dir) {
  std::string encoder = "{";
  for (int id = 0; id < 61; ++id) encoder += "\"t" + std::to_string(id) + "\": " + std::to_string(id) + ", ";
  encoder += "\"<|endoftext|>\": 61}";
  fs::create_directory(dir.file("tok"));
  testing::write_whole_file(dir.file("tok/encoder.json"), encoder);
  testing::write_whole_file(dir.file("tok/vocab.bpe"), "#version: 0.2\nt 1\n");
  return dir.file("tok");
}

TEST(ConvertCli, ExportsAnImportedStandardModel) {
  TempDir dir;
  const std::string tok = write_tokenizer(dir), ckpt = dir.file("ckpt");
  std::string err;
  ASSERT_EQ(convert(quoted(interop_fixture("standard_bf16_plain.pt")) + " --to sps --out " + quoted(ckpt), &err), 0) << err;
  // From the sps checkpoint folder and straight from the reference checkpoint.
  ASSERT_EQ(convert(quoted(ckpt) + " --to gguf --precision bf16 --tokenizer " + quoted(tok) + " --out " +
                        quoted(dir.file("a.gguf")), &err), 0) << err;
  ASSERT_EQ(convert(quoted(interop_fixture("standard_fp32_compiled.pt")) + " --to gguf --tokenizer " +
                        quoted(tok) + " --out " + quoted(dir.file("b.gguf")), &err), 0) << err;
  EXPECT_EQ(testing::read_whole_file(dir.file("b.gguf")).substr(0, 4), "GGUF");
  EXPECT_LT(fs::file_size(dir.file("a.gguf")), fs::file_size(dir.file("b.gguf")));
  ASSERT_EQ(convert(quoted(ckpt) + " --to hf --tokenizer " + quoted(tok) + " --out " + quoted(dir.file("hf")), &err), 0) << err;
  EXPECT_TRUE(fs::exists(dir.file("hf/config.json")));
  EXPECT_TRUE(fs::exists(dir.file("hf/model.safetensors")));
}

TEST(ConvertCli, InterleavedFamiliesDoNotExportToGguf) {
  TempDir dir;
  const std::string tok = write_tokenizer(dir);
  std::string err;
  EXPECT_EQ(convert(quoted(interop_fixture("sps_fp32_plain.pt")) + " --to gguf --tokenizer " + quoted(tok) +
                        " --out " + quoted(dir.file("x.gguf")), &err), 2);
  EXPECT_NE(err.find("only the standard family exports to GGUF"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(dir.file("x.gguf")));
}

}  // namespace
}  // namespace sps
