// `sps convert` as a program: exit statuses, one-line errors, nothing written on failure.
#include <gtest/gtest.h>

#include <filesystem>

#include "interop_fixtures.h"
#include "interop/checkpoint_folder.h"
#include "model/config.h"
#include "model/params.h"
#include "tokenizer/bpe.h"
#include "train/checkpoint.h"
#include "run_command.h"
#include "util/safetensors_edits.h"
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
                        quoted(out),
                    &err),
            0)
      << err;
  EXPECT_TRUE(fs::exists(out + "/model.safetensors"));
  const ModelConfig config = load_model_config(out + "/config.yaml", {});
  EXPECT_EQ(config.family, "reverse_sps");
  EXPECT_EQ(config.window_size, 2);
  // The weights alone: no optimizer, no trainer state, nothing for `sps train --resume`.
  for (const auto& entry : fs::recursive_directory_iterator(out)) {
    const std::string name = entry.path().filename();
    EXPECT_TRUE(name == "model.safetensors" || name == "config.yaml") << entry.path();
  }
  EXPECT_EQ(dir.entries(), 1u);  // no temporary folder left
}

// --with-optimizer writes a run folder that `sps train --resume` continues at the imported
// step, after checking the recipe against the imported model and tokens per step.
TEST(ConvertCli, TrainResumesAnImportWithTheOptimizer) {
  TempDir dir;
  testing::write_micro_data(dir.path().string());
  const std::string recipe = dir.file("recipe.yaml");
  testing::write_whole_file(recipe, testing::fixture_sps_recipe(dir.path().string(), 6));
  const std::string run = dir.file("run");
  std::string out;
  ASSERT_EQ(testing::run_command(quoted(SPS_BINARY) + " convert " + quoted(interop_fixture("sps_fp32_compiled.pt")) +
                                     " --to sps --with-optimizer --out " + quoted(run) + " 2>&1",
                                 &out),
            0)
      << out;
  EXPECT_NE(out.find(run + ": a run folder at step 2 (64 tokens, 32 per step); continue it with sps "
                           "train --config RECIPE system.out_dir=" + run + " --resume\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("note: from there on the data come in sps's sampler order, not the reference "
                     "trainer's"),
            std::string::npos)
      << out;
  const std::string train = quoted(SPS_BINARY) + " train --config " + quoted(recipe) +
                            " system.out_dir=" + quoted(run) + " --resume ";
  const std::string imported = run + "/checkpoints/imported";
  std::string err;
  EXPECT_EQ(testing::run_command(train + "model.n_layer=3 2>&1 >/dev/null", &err), 2);
  EXPECT_EQ(err, "sps: " + imported + ": the checkpoint belongs to another config: model.n_layer is 2 "
                 "there, 3 here (the recipe must describe the imported model)\n");
  EXPECT_EQ(testing::run_command(train + "training.global_batch_size=8 2>&1 >/dev/null", &err), 2);
  EXPECT_EQ(err, "sps: " + imported + "/trainer_state.json: 64 tokens after 2 steps, but "
                 "training.global_batch_size × model.block_size = 8 × 8 tokens per step make 128\n");

  ASSERT_EQ(testing::run_command(train + "--stop-after 1 2>&1", &out), 0) << out;
  EXPECT_NE(out.find("resumed from " + imported + " at step 2 (64 tokens)\n"), std::string::npos) << out;
  EXPECT_NE(out.find("an imported checkpoint:"), std::string::npos) << out;
  const TrainerState state = trainer_state_from_json(
      testing::read_whole_file(run + "/checkpoints/latest/trainer_state.json"), "latest");
  EXPECT_EQ(state.step, 3);
  EXPECT_EQ(state.tokens, 96);
  ASSERT_EQ(testing::run_command(train + "2>&1", &out), 0) << out;
  EXPECT_TRUE(fs::exists(run + "/checkpoints/final/model.safetensors")) << out;
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

// A byte-level BPE rank file (256 bytes + 4 merges: EOS 260) and a standard model of
// V = 320 saved as an sps checkpoint folder.
struct SmallModel {
  std::string rank_file, checkpoint;
  explicit SmallModel(const TempDir& dir) : rank_file(dir.file("small.tok")), checkpoint(dir.file("small")) {
    std::vector<std::string> tokens;
    for (int b = 0; b < 256; ++b) tokens.emplace_back(1, char(b));
    for (const char* t : {"ab", "abc", "cd", "abcd"}) tokens.emplace_back(t);
    BpeTokenizer::from_ranks(tokens, "small").save_rank_file(rank_file);
    ImportedCheckpoint ckpt;
    ckpt.config.n_layer = 2, ckpt.config.n_head = 2, ckpt.config.hidden_size = 8;
    ckpt.config.intermediate_size = 16, ckpt.config.vocab_size = 320, ckpt.config.block_size = 8;
    ckpt.config.eos_token_id = 260, ckpt.config.predict_token_id = 261, ckpt.config.pad_token_id = 319;
    const ParamTable table(ckpt.config);
    ckpt.weights.resize(size_t(table.total()));
    init_parameters(ckpt.weights.data(), table, ckpt.config, 1);
    write_imported_checkpoint(checkpoint, ckpt, "test");
  }
};

TEST(ConvertCli, ExportsAStandardModel) {
  TempDir dir;
  const SmallModel small(dir);
  std::string err;
  ASSERT_EQ(convert(quoted(small.checkpoint) + " --to gguf --precision bf16 --tokenizer " + quoted(small.rank_file) +
                        " --out " + quoted(dir.file("a.gguf")), &err), 0) << err;
  ASSERT_EQ(convert(quoted(small.checkpoint) + " --to gguf --tokenizer " + quoted(small.rank_file) + " --out " +
                        quoted(dir.file("b.gguf")), &err), 0) << err;
  EXPECT_EQ(testing::read_whole_file(dir.file("b.gguf")).substr(0, 4), "GGUF");
  EXPECT_LT(fs::file_size(dir.file("a.gguf")), fs::file_size(dir.file("b.gguf")));
  ASSERT_EQ(convert(quoted(small.checkpoint) + " --to hf --tokenizer " + quoted(small.rank_file) + " --out " +
                        quoted(dir.file("hf")), &err), 0) << err;
  EXPECT_TRUE(fs::exists(dir.file("hf/config.json")));
  EXPECT_NE(testing::read_whole_file(dir.file("hf/merges.txt")).find("abc d\n"), std::string::npos);
  // A tokenizer whose EOS is not the model's is refused.
  EXPECT_EQ(convert(quoted(small.checkpoint) + " --to gguf --tokenizer gpt2 --out " + quoted(dir.file("c.gguf")), &err), 2);
  EXPECT_FALSE(fs::exists(dir.file("c.gguf")));
}

// What is converted is what was saved: a config edited away from the weights' own model, or a
// damaged weight, stops the conversion in one line and nothing is written.
TEST(ConvertCli, TheCheckpointMustAgreeWithItselfAndBeIntact) {
  TempDir dir;
  const SmallModel small(dir);
  const std::string weights = small.checkpoint + "/model.safetensors",
                    config = small.checkpoint + "/config.yaml", out = dir.file("c.gguf");
  const std::string args = quoted(small.checkpoint) + " --to gguf --tokenizer " +
                           quoted(small.rank_file) + " --out " + quoted(out);
  const std::string yaml = testing::read_whole_file(config);
  std::string edited = yaml, err;
  edited.replace(edited.find("n_head: 2"), 9, "n_head: 1");
  testing::write_whole_file(config, edited);
  EXPECT_EQ(convert(args, &err), 2);
  EXPECT_EQ(err, "sps: " + weights + " was saved with model.n_head = 2, but " + config +
                     " says 1; the model stored with the weights decides (restore the config's "
                     "value)\n");
  testing::write_whole_file(config, yaml);
  testing::flip_tensor_bit(weights, "transformer.wte.weight", 7, 6);
  EXPECT_EQ(convert(args, &err), 2);
  EXPECT_EQ(err, "sps: " + weights +
                     ": tensor 'transformer.wte.weight' does not match its checksum: the file is "
                     "damaged\n");
  EXPECT_FALSE(fs::exists(out));
  testing::flip_tensor_bit(weights, "transformer.wte.weight", 7, 6);
  ASSERT_EQ(convert(args, &err), 0) << err;
}

// A small archive cannot make the importer ask for much more memory than it is: a data.pkl
// that inflates far past its archive, and one whose values would take far more than it.
TEST(ConvertCli, SmallArchivesCannotAskForMuchMemory) {
  TempDir dir;
  const std::string out = dir.file("out");
  // A pickle of one 5 MiB string deflates to a few kilobytes.
  std::string text = "\x80\x02X";
  for (int i = 0; i < 4; ++i) text += char(((5 << 20) >> (8 * i)) & 0xFF);
  const std::string inflating = dir.file("inflating.pt");
  testing::write_zip(inflating, {{"archive/data.pkl", text + std::string(5 << 20, 'a') + "."}},
                     /*deflate=*/true);
  std::string err;
  EXPECT_EQ(convert(quoted(inflating) + " --to sps --out " + quoted(out), &err), 2);
  EXPECT_NE(err.find("record archive/data.pkl would inflate to 5242888 bytes, over the limit of "),
            std::string::npos)
      << err;
  // Stored as is, 2 MB of them would build 2 million values (hundreds of MB).
  const std::string values = dir.file("values.pt");
  testing::write_zip(values, {{"archive/data.pkl", "\x80\x02" + std::string(2 << 20, 'N')}});
  EXPECT_EQ(convert(quoted(values) + " --to sps --out " + quoted(out), &err), 2);
  EXPECT_NE(err.find("reading this pickle would take more than"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_FALSE(fs::exists(out));
}

TEST(ConvertCli, InterleavedFamiliesDoNotExportToGguf) {
  TempDir dir;
  std::string err;
  EXPECT_EQ(convert(quoted(interop_fixture("sps_fp32_plain.pt")) + " --to gguf --out " + quoted(dir.file("x.gguf")), &err), 2);
  EXPECT_NE(err.find("only the standard family exports to GGUF"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(dir.file("x.gguf")));
}

}  // namespace
}  // namespace sps
