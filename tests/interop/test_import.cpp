// Importing the reference trainer's torch.save checkpoints (fixtures written by Debian's
// python3-torch, see fixtures/make_fixtures.py): weights equal to the source, the same
// logits as the fixture's PyTorch forward, and hostile archives refused with one line.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>

#include "interop/checkpoint_folder.h"
#include "interop/reference_checkpoint.h"
#include "interop/torch_archive.h"
#include "interop_fixtures.h"
#include "model/model.h"
#include "model/weights_io.h"
#include "train/checkpoint.h"
#include "train/optimizer.h"
#include "util/error.h"
#include "util/temp_dir.h"

namespace sps {
namespace {

using testing::interop_fixture;
using testing::read_f32_file;

constexpr int32_t kTokens[] = {5, 17, 61, 3, 40, 22, 9, 30};  // make_fixtures.py's TOKENS

std::string import_error(const std::string& path, const ImportOptions& options = {}) {
  try {
    import_reference_checkpoint(path, options);
  } catch (const UserError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    return message;
  }
  return "";
}

std::vector<double> logits_of(const ImportedCheckpoint& ckpt) {
  Model<float> model(ckpt.config);
  std::copy(ckpt.weights.begin(), ckpt.weights.end(), model.weights());
  const int64_t T = 8;
  std::vector<int32_t> x(kTokens, kTokens + T), y(T, 0);
  std::vector<double> logits(size_t(T * ckpt.config.vocab_size));
  model.forward(x.data(), y.data(), 1, T, {nullptr, logits.data()});
  return logits;
}

struct Variant {
  std::string file, logits, family;
  int64_t window;
};

void PrintTo(const Variant& v, std::ostream* os) { *os << v.file; }

class ImportFixture : public ::testing::TestWithParam<Variant> {};

TEST_P(ImportFixture, WeightsAndLogitsMatchTheSource) {
  const Variant& v = GetParam();
  const ImportedCheckpoint ckpt = import_reference_checkpoint(interop_fixture(v.file), {});
  EXPECT_EQ(ckpt.config.family, v.family);
  EXPECT_EQ(ckpt.config.window_size, v.window);
  EXPECT_EQ(ckpt.family_from, "config.model._target_");
  EXPECT_EQ(ckpt.config.n_layer, 2);
  EXPECT_EQ(ckpt.config.eos_token_id, 61);
  EXPECT_EQ(ckpt.config.pad_token_id, 63);
  const std::vector<float> want = read_f32_file(interop_fixture("weights.f32"));
  ASSERT_EQ(ckpt.weights.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(ckpt.weights[i], want[i]) << "element " << i;

  const std::vector<float> want_logits = read_f32_file(interop_fixture(v.logits));
  const std::vector<double> got = logits_of(ckpt);
  ASSERT_EQ(got.size(), want_logits.size());
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want_logits[i]));
  EXPECT_LT(worst, 2e-4) << v.file;
}

std::vector<Variant> variants() {
  std::vector<Variant> out;
  for (const auto& [label, family, window] : std::vector<std::tuple<std::string, std::string, int64_t>>{
           {"standard", "standard", 0}, {"sps", "sps", 2}, {"reverse_sps", "reverse_sps", 2},
           {"delayed_state", "delayed_state", 2}}) {
    for (const char* kind : {"fp32_compiled", "fp32_plain", "bf16_compiled", "bf16_plain"})
      out.push_back({label + "_" + kind + ".pt", "logits_" + label + ".f32", family, window});
  }
  out.push_back({"sps2x_fp32_compiled.pt", "logits_sps2x.f32", "sps", 8});
  out.push_back({"sps2x_bf16_plain.pt", "logits_sps2x.f32", "sps", 8});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ImportFixture, ::testing::ValuesIn(variants()),
                         [](const auto& info) {
                           std::string name = info.param.file.substr(0, info.param.file.size() - 3);
                           return name;
                         });

TEST(Import, LogitsDifferAcrossFamilies) {
  // The expected logits are not all alike, so a family mix-up cannot pass the test above.
  const auto a = read_f32_file(interop_fixture("logits_sps.f32"));
  const auto b = read_f32_file(interop_fixture("logits_delayed_state.f32"));
  const auto c = read_f32_file(interop_fixture("logits_standard.f32"));
  EXPECT_NE(a, b);
  EXPECT_NE(a, c);
}

TEST(Import, FamilyFromTheFlagWhenTheCheckpointDoesNotSay) {
  const std::string path = interop_fixture("sps_no_target.pt");
  EXPECT_NE(import_error(path).find("does not name its model class (config.model._target_); give --family"),
            std::string::npos);
  ImportOptions options;
  options.family = "sps";
  const ImportedCheckpoint ckpt = import_reference_checkpoint(path, options);
  EXPECT_EQ(ckpt.config.family, "sps");
  EXPECT_EQ(ckpt.family_from, "--family");
  EXPECT_EQ(ckpt.config.window_size, 2);  // model_args.window_size
}

TEST(Import, FlagsThatContradictTheCheckpointAreErrors) {
  ImportOptions family;
  family.family = "delayed_state";
  EXPECT_NE(import_error(interop_fixture("sps_fp32_plain.pt"), family).find("holds a sps model"),
            std::string::npos);
  ImportOptions window;
  window.window = 5;
  EXPECT_NE(import_error(interop_fixture("sps_fp32_plain.pt"), window).find("window_size 2"),
            std::string::npos);
}

TEST(Import, MismatchedTiedCopiesAreRefused) {
  const std::string e = import_error(interop_fixture("hostile_tied_mismatch.pt"));
  EXPECT_NE(e.find("model.lm_head.weight differs from model.transformer.wte.weight at [3, 5]"),
            std::string::npos) << e;
}

TEST(Import, OptimizerMomentsInTableOrder) {
  ImportOptions options;
  options.with_optimizer = true;
  const ImportedCheckpoint ckpt = import_reference_checkpoint(interop_fixture("sps_fp32_compiled.pt"), options);
  EXPECT_EQ(ckpt.optimizer_step, 2);
  EXPECT_EQ(ckpt.iter_num, 2);
  EXPECT_EQ(ckpt.exp_avg, read_f32_file(interop_fixture("exp_avg.f32")));
  EXPECT_EQ(ckpt.exp_avg_sq, read_f32_file(interop_fixture("exp_avg_sq.f32")));
  // A step-0 checkpoint has no moments to import.
  EXPECT_NE(import_error(interop_fixture("sps_fp32_plain.pt"), options).find("no moments yet"),
            std::string::npos);
}

// A copy of fixture `name` whose pickle `edit` changed in place (keeping its length).
std::string edited_fixture(const testing::TempDir& dir, const std::string& name,
                           const std::function<void(std::string&)>& edit) {
  auto records = testing::read_zip(interop_fixture(name));
  for (auto& [record, bytes] : records)
    if (record.ends_with("/data.pkl")) edit(bytes);
  const std::string path = dir.file(name);
  testing::write_zip(path, records);
  return path;
}

// What resuming needs besides the moments: the steps done, equal to the optimizer's count,
// and the tokens seen. The weights alone import without them.
TEST(Import, WithOptimizerNeedsTheStepAndTheTokensSeen) {
  testing::TempDir dir;
  ImportOptions options;
  options.with_optimizer = true;
  // After each key, its memo entry ('r' + 4 bytes), then BININT1 ('K') and the value.
  const std::string third_step = edited_fixture(dir, "sps_fp32_compiled.pt", [](std::string& pkl) {
    const size_t key = pkl.find("iter_num");
    ASSERT_EQ(pkl[key + 13], 'K');
    pkl[key + 14] = 3;
  });
  EXPECT_NE(import_error(third_step, options).find("iter_num is 3, but the optimizer made 2 updates"),
            std::string::npos) << import_error(third_step, options);
  const std::string no_tokens = edited_fixture(dir, "standard_fp32_compiled.pt", [](std::string& pkl) {
    pkl.replace(pkl.find("last_save_tokens"), 16, "last_save_tokenz");
  });
  EXPECT_NE(import_error(no_tokens, options).find("no last_save_tokens (the tokens seen)"),
            std::string::npos) << import_error(no_tokens, options);
  for (const std::string& path : {third_step, no_tokens}) EXPECT_EQ(import_error(path), "") << path;
}

// With the optimizer, a run folder whose one checkpoint `sps train --resume` finds.
TEST(Import, WritesARunFolderWithTheTrainerState) {
  testing::TempDir dir;
  ImportOptions options;
  options.with_optimizer = true;
  const ImportedCheckpoint ckpt = import_reference_checkpoint(interop_fixture("delayed_state_fp32_compiled.pt"), options);
  EXPECT_EQ(ckpt.tokens_seen, 64);  // make_fixtures.py: 2 steps × 4 sequences × T 8
  const std::string out = dir.file("imported");
  write_imported_checkpoint(out, ckpt, "delayed_state_fp32_compiled.pt");
  const std::string checkpoint = out + "/checkpoints/imported";
  EXPECT_EQ(find_newest_checkpoint(out), checkpoint);
  const ModelConfig config = load_model_config(checkpoint + "/config.yaml", {});
  EXPECT_EQ(config.family, "delayed_state");
  EXPECT_EQ(config.window_size, 2);
  Model<float> model(config);
  load_weights(checkpoint + "/model.safetensors", model.params(), model.weights());
  EXPECT_TRUE(std::equal(ckpt.weights.begin(), ckpt.weights.end(), model.weights()));
  AdamW optimizer(model.params(), OptimizerSettings{});
  optimizer.load(checkpoint + "/optimizer.safetensors");
  EXPECT_EQ(optimizer.step(), 2);
  EXPECT_TRUE(std::equal(ckpt.exp_avg.begin(), ckpt.exp_avg.end(), optimizer.exp_avg()));
  const TrainerState state = trainer_state_from_json(
      testing::read_whole_file(checkpoint + "/trainer_state.json"), checkpoint);
  EXPECT_EQ(state.step, 2);
  EXPECT_EQ(state.tokens, 64);
  EXPECT_EQ(state.reason, kImportedReason);
  // An existing folder is not replaced.
  EXPECT_THROW(write_imported_checkpoint(out, ckpt, "x.pt"), UserError);
  EXPECT_EQ(dir.entries(), 1u);
}

// Without it, a checkpoint folder of the weights alone: nothing to resume.
TEST(Import, WithoutTheOptimizerWritesNoTrainerState) {
  testing::TempDir dir;
  const ImportedCheckpoint ckpt = import_reference_checkpoint(interop_fixture("sps_fp32_compiled.pt"), {});
  const std::string out = dir.file("imported");
  write_imported_checkpoint(out, ckpt, "sps_fp32_compiled.pt");
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(out))
    files.push_back(entry.path().filename().string());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"config.yaml", "model.safetensors"}));
}

// --- Hostile archives -------------------------------------------------------------------

std::string archive_error(const std::string& path) { return import_error(path); }

TEST(ImportHostile, PickleCallingCodeIsRefusedBeforeAnythingRuns) {
  testing::TempDir dir;
  for (const auto& [module, name] : std::vector<std::pair<std::string, std::string>>{
           {"os", "system"}, {"builtins", "eval"}, {"subprocess", "Popen"}}) {
    testing::PickleBytes p;
    p.global(module, name).str("touch " + dir.file("pwned")).op('\x85').op('R');
    const std::string path = dir.file(name + ".pt");
    testing::write_zip(path, {{"archive/data.pkl", p.done()}, {"archive/version", "3\n"}});
    const std::string e = archive_error(path);
    EXPECT_NE(e.find("refused to load the global '" + module + "." + name + "'"), std::string::npos) << e;
    EXPECT_FALSE(std::filesystem::exists(dir.file("pwned")));
  }
}

// model_args sizes the weights; before they are allocated, every tensor must be there with
// its shape. Shapes of hundreds of terabytes with no tensors at all are refused in one line.
TEST(ImportHostile, ModelArgsCannotAskForMoreThanItsTensors) {
  testing::TempDir dir;
  testing::PickleBytes p;
  p.op('}').str("model_args").op('}');
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, int32_t>>{{"n_layer", 4096},
                                                    {"n_head", 64},
                                                    {"hidden_size", 65536},
                                                    {"intermediate_size", 65536},
                                                    {"vocab_size", 50304},
                                                    {"block_size", 1024},
                                                    {"eos_token_id", 50256},
                                                    {"pad_token_id", 50303}})
    p.str(key).int4(value).op('s');
  p.op('s').str("model").op('}').op('s');
  const std::string path = dir.file("huge.pt");
  testing::write_zip(path, {{"archive/data.pkl", p.done()}});
  ImportOptions options;
  options.family = "standard";
  EXPECT_EQ(import_error(path, options), path + ": model.transformer.wte.weight is missing");
}

TEST(ImportHostile, StorageOffsetPastTheEnd) {
  testing::TempDir dir;
  testing::PickleBytes p;
  p.op('}').op('(').str("model").op('}').op('(').str("w").tensor("0", 4, 3, 4).op('u').op('u');
  const std::string path = dir.file("offset.pt");
  testing::write_zip(path, {{"archive/data.pkl", p.done()}, {"archive/data/0", std::string(16, '\0')}});
  EXPECT_NE(archive_error(path).find("reaches past the end of its storage"), std::string::npos);
}

TEST(ImportHostile, StorageRecordShorterThanThePickleSays) {
  testing::TempDir dir;
  testing::PickleBytes p;
  p.op('}').op('(').str("model").op('}').op('(').str("w").tensor("0", 4, 0, 4).op('u').op('u');
  const std::string path = dir.file("short.pt");
  testing::write_zip(path, {{"archive/data.pkl", p.done()}, {"archive/data/0", std::string(8, '\0')}});
  TorchArchive archive(path);
  const PickleValue* model = archive.document().find(archive.document().root(), "model");
  const PickleValue* w = archive.document().find(*model, "w");
  try {
    archive.read_floats(w->tensor, "w");
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("holds 8 bytes, the pickle expects 16"), std::string::npos) << e.what();
  }
}

TEST(ImportHostile, StorageSizeThatWrapsAroundIsRefused) {
  // 2^62 + 4 floats are 2^64 + 16 bytes: a 16-byte record must not pass for it.
  testing::TempDir dir;
  testing::PickleBytes p;
  p.op('}').op('(').str("model").op('}').op('(').str("w").tensor("0", (int64_t{1} << 62) + 4, 0, 4).op('u').op('u');
  const std::string path = dir.file("wrap.pt");
  testing::write_zip(path, {{"archive/data.pkl", p.done()}, {"archive/data/0", std::string(16, '\0')}});
  TorchArchive archive(path);
  const PickleValue* model = archive.document().find(archive.document().root(), "model");
  EXPECT_THROW(archive.read_floats(archive.document().find(*model, "w")->tensor, "w"), UserError);
}

TEST(ImportHostile, ZipBombIsRefusedBeforeInflating) {
  testing::TempDir dir;
  const std::string path = dir.file("bomb.pt");
  testing::write_zip(path, {{"archive/data.pkl", std::string(kMaxPickleBytes + 1, '\0')}}, /*deflate=*/true);
  EXPECT_LT(std::filesystem::file_size(path), 1u << 20);
  EXPECT_NE(archive_error(path).find("would inflate to 67108865 bytes, over the limit"), std::string::npos);
}

TEST(ImportHostile, TruncatedArchive) {
  testing::TempDir dir;
  const std::string bytes = testing::read_whole_file(interop_fixture("standard_fp32_plain.pt"));
  const std::string path = dir.file("truncated.pt");
  testing::write_whole_file(path, bytes.substr(0, bytes.size() / 2));
  EXPECT_NE(archive_error(path).find("not a readable torch.save archive"), std::string::npos);
}

TEST(ImportHostile, NotATorchArchive) {
  testing::TempDir dir;
  const std::string path = dir.file("other.zip");
  testing::write_zip(path, {{"readme.txt", "hello"}});
  EXPECT_NE(archive_error(path).find("has one PREFIX/data.pkl, this zip has 0"), std::string::npos);
}

}  // namespace
}  // namespace sps
