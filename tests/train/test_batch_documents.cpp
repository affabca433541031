// Documents per global batch (train/batch_documents.h, docs/data.md): the figure against a
// naive count over every token of every window, the warning's threshold, and the record a
// run writes.
#include <gtest/gtest.h>

#include <set>

#include "data/sampler.h"
#include "train/batch_documents.h"
#include "train/train_config.h"
#include "train/training_data.h"
#include "train_fixtures.h"
#include "util/temp_dir.h"

namespace sps {
namespace {

using testing::micro_recipe;

TrainConfig micro_config(const testing::TempDir& dir, int64_t steps,
                         const std::vector<std::string>& overrides) {
  testing::write_micro_data(dir.path().string());
  const std::string recipe = dir.file("recipe.yaml");
  testing::write_whole_file(recipe, micro_recipe(dir.path().string(), "standard", steps));
  return load_train_config(recipe, overrides);
}

// Every step's global batch, document ids from a prefix count of EOS, a set per batch.
double naive_documents_per_batch(const TokenFile& file, const TrainConfig& config, int ranks,
                                 int64_t max_steps) {
  const int64_t T = config.model.block_size, eos = config.model.eos_token_id;
  std::vector<int64_t> document(size_t(file.size()));
  for (int64_t i = 1; i < file.size(); ++i)
    document[size_t(i)] = document[size_t(i - 1)] + (file.at(i - 1) == uint32_t(eos) ? 1 : 0);
  const int64_t steps = config.total_steps();
  const int64_t sampled = std::min(steps, max_steps);
  const int64_t per_rank = config.training.global_batch_size / ranks;
  int64_t total = 0;
  for (int64_t k = 0; k < sampled; ++k) {
    const int64_t step = k * steps / sampled;
    std::set<int64_t> seen;
    for (int r = 0; r < ranks; ++r) {
      const WindowSampler sampler(file.size(), training_sampler_config(config, r, ranks), "t");
      for (int64_t w = 0; w < per_rank; ++w) {
        const int64_t p = sampler.position(step * per_rank + w);
        for (int64_t q = p; q <= p + T; ++q) seen.insert(document[size_t(q)]);
      }
    }
    total += int64_t(seen.size());
  }
  return double(total) / double(sampled);
}

TEST(DocumentsPerBatch, EqualsANaiveCountOverEveryToken) {
  testing::TempDir dir;
  struct Case {
    std::vector<std::string> overrides;
    int ranks;
    int64_t max_steps;
  };
  const std::vector<Case> cases = {
      {{}, 1, 100},                               // chunks of 7 windows
      {{"training.chunk_size_units=1"}, 1, 100},  // every window on its own
      {{"training.chunk_size_units=1"}, 2, 100},  // two processes share the batch
      {{"training.sampler_type=sequential"}, 2, 100},
      {{"training.chunk_size_units=50"}, 1, 7},       // 7 of the 30 steps, spread
      {{"training.sampler_start_offset=5"}, 1, 100},  // windows off the unit grid
  };
  for (const Case& c : cases) {
    const TrainConfig config = micro_config(dir, 30, c.overrides);
    const TokenFile file(config.data.train_bin, TokenDType::uint16);
    const double naive = naive_documents_per_batch(file, config, c.ranks, c.max_steps);
    EXPECT_EQ(
        mean_documents_per_batch(file, config.model.eos_token_id, config, c.ranks, c.max_steps),
        naive)
        << ::testing::PrintToString(c.overrides) << " ranks " << c.ranks;
    EXPECT_GT(naive, 1.0);
  }
}

TEST(DocumentsPerBatch, OneLongDocumentIsOneDocumentPerBatch) {
  testing::TempDir dir;
  const TrainConfig config = micro_config(dir, 30, {});
  const TrainConfig sequential = micro_config(dir, 30, {"training.sampler_type=sequential"});
  // No EOS at all: the whole file is one document.
  std::vector<uint16_t> tokens(3000, 7);
  testing::write_whole_file(config.data.train_bin,
                            std::string(reinterpret_cast<const char*>(tokens.data()), 6000));
  const TokenFile file(config.data.train_bin, TokenDType::uint16);
  EXPECT_EQ(mean_documents_per_batch(file, config.model.eos_token_id, config, 1), 1.0);
  // EOS as every token: each of the 13 tokens of a window is a document of its own, and the
  // 4 windows of a step never overlap.
  std::fill(tokens.begin(), tokens.end(), uint16_t(config.model.eos_token_id));
  testing::write_whole_file(config.data.train_bin,
                            std::string(reinterpret_cast<const char*>(tokens.data()), 6000));
  const TokenFile eos_only(config.data.train_bin, TokenDType::uint16);
  // Sequential windows at 0, 12, 24, 36 share their last and first token: 4 · 13 − 3.
  EXPECT_EQ(mean_documents_per_batch(eos_only, sequential.model.eos_token_id, sequential, 1), 49.0);
}

TEST(DocumentsPerBatch, WarnsBelowEightAndNamesTheDocs) {
  EXPECT_EQ(few_documents_warning(8.0), "");
  EXPECT_EQ(few_documents_warning(40.0), "");
  const std::string warning = few_documents_warning(1.5);
  EXPECT_NE(warning.find("batches span ~1.5 documents; see docs/data.md"), std::string::npos)
      << warning;
}

TEST(DocumentsPerBatch, ARunRecordsItOnceInItsMetrics) {
  testing::TempDir dir;
  TrainConfig config = micro_config(dir, 10, {"training.chunk_size_units=1"});
  config.system.out_dir = dir.file("run");
  testing::run_train(config, false, 4);  // stopped after 4 steps, then resumed
  testing::run_train(config, true);
  const auto lines = testing::read_metrics(config.system.out_dir + "/metrics.jsonl");
  const TokenFile file(config.data.train_bin, TokenDType::uint16);
  const double expected = mean_documents_per_batch(file, config.model.eos_token_id, config, 1);
  int records = 0;
  for (const auto& line : lines)
    if (line.contains("documents_per_batch")) {
      ++records;
      EXPECT_EQ(line["documents_per_batch"].get<double>(), expected);
      EXPECT_EQ(line["tokens"], 0);
    }
  EXPECT_EQ(records, 1);
  EXPECT_TRUE(lines.front().contains("documents_per_batch"));
}

}  // namespace
}  // namespace sps
