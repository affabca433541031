#include "train/batch_documents.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <vector>

#include "data/sampler.h"
#include "train/training_data.h"
#include "util/error.h"

namespace sps {

namespace fs = std::filesystem;

namespace {

// The first position of the document that holds position p.
int64_t document_start(const TokenFile& file, int64_t p, uint32_t eos) {
  while (p > 0 && file.at(p - 1) != eos) --p;
  return p;
}

}  // namespace

int64_t documents_sampled_steps(const TrainConfig& config, int64_t max_steps) {
  return std::max<int64_t>(1, std::min(config.total_steps(), max_steps));
}

double mean_documents_per_batch(const TokenFile& file, int64_t eos_token_id,
                                const TrainConfig& config, int ranks, int64_t max_steps) {
  const int64_t T = config.model.block_size;
  const uint32_t eos = uint32_t(eos_token_id);
  const int64_t per_rank = config.training.global_batch_size / ranks;  // windows per step
  std::vector<WindowSampler> samplers;
  for (int r = 0; r < ranks; ++r)
    samplers.emplace_back(file.size(), training_sampler_config(config, r, ranks), file.path());
  const int64_t steps = config.total_steps(), sampled = documents_sampled_steps(config, max_steps);
  std::vector<int64_t> documents;  // the batch's documents, by their first position
  double total = 0;
  for (int64_t k = 0; k < sampled; ++k) {
    const int64_t step = k * steps / sampled;
    documents.clear();
    for (const WindowSampler& sampler : samplers)
      for (int64_t w = 0; w < per_rank; ++w) {
        const int64_t p = sampler.position(step * per_rank + w);
        documents.push_back(document_start(file, p, eos));
        for (int64_t q = p; q < p + T; ++q)
          if (file.at(q) == eos) documents.push_back(q + 1);
      }
    std::sort(documents.begin(), documents.end());
    total += double(std::unique(documents.begin(), documents.end()) - documents.begin());
  }
  return total / double(sampled);
}

std::string describe_documents_per_batch(double documents, const TrainConfig& config) {
  const int64_t steps = documents_sampled_steps(config);
  return fmt::format("~{:.1f} per global batch of {} sequences (mean over {} step{})", documents,
                     config.training.global_batch_size, steps, steps == 1 ? "" : "s");
}

std::string few_documents_warning(double documents) {
  if (documents >= kFewDocumentsPerBatch) return "";
  return fmt::format(
      "batches span ~{:.1f} documents; see docs/data.md (fewer than {:.0f}: consecutive steps "
      "see the same documents; training.chunk_size_units sets how many consecutive windows a "
      "chunk reads)",
      documents, kFewDocumentsPerBatch);
}

std::string planned_documents_per_batch(const TrainConfig& config, int ranks) {
  const std::string& path = config.data.train_bin;
  std::error_code ec;
  if (path.empty() || !fs::exists(path, ec)) return "";
  const DatasetMeta meta = read_dataset_meta(fs::path(path).parent_path().string());
  const std::string dtype = !meta.dtype.empty()          ? meta.dtype
                            : !config.data.dtype.empty() ? config.data.dtype
                                                         : "uint16";
  double documents = 0;
  try {
    const TokenFile file(path, token_dtype_from_name(dtype, "data.dtype"));
    documents = mean_documents_per_batch(file, config.model.eos_token_id, config, ranks);
  } catch (const UserError& e) {  // the plan is still worth printing; the run would fail
    return fmt::format("documents     not computed: {}\n", e.what());
  }
  std::string s = "documents     " + describe_documents_per_batch(documents, config) + "\n";
  const std::string warning = few_documents_warning(documents);
  if (!warning.empty()) s += "warning: " + warning + "\n";
  return s;
}

}  // namespace sps
