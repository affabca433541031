#include "cli/model_files.h"

#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "model/weights_io.h"
#include "ops/backend.h"
#include "train/checkpoint.h"
#include "util/error.h"
#include "util/read_file.h"
#include "util/safetensors.h"
#include "util/sps_home.h"
#include "util/yaml_config.h"

namespace sps::cli {

namespace {

namespace fs = std::filesystem;

std::string checkpoint_folder(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) fail("--checkpoint {}: no such folder", dir);
  if (fs::exists(fs::path(dir) / "model.safetensors", ec)) return dir;
  if (fs::is_directory(fs::path(dir) / "checkpoints", ec)) {
    std::vector<std::string> skipped;
    const std::string newest = find_newest_checkpoint(dir, &skipped);
    for (const std::string& note : skipped) std::fprintf(stderr, "sps: %s\n", note.c_str());
    if (newest.empty()) fail("--checkpoint {}: no complete checkpoint under its checkpoints/", dir);
    return newest;
  }
  fail("--checkpoint {}: neither a checkpoint folder (model.safetensors) nor a run folder "
       "(checkpoints/)",
       dir);
}

}  // namespace

ModelFiles resolve_model_files(const std::string& checkpoint, const std::string& weights,
                               const std::string& config) {
  ModelFiles m;
  if (!checkpoint.empty()) {
    if (!weights.empty() || !config.empty())
      fail("give either --checkpoint or --weights with --config, not both");
    const std::string dir = checkpoint_folder(checkpoint);
    m.weights_path = (fs::path(dir) / "model.safetensors").string();
    m.config_path = (fs::path(dir) / "config.yaml").string();
    std::error_code ec;
    if (!fs::exists(m.config_path, ec)) fail("--checkpoint {}: config.yaml is missing", dir);
  } else {
    if (weights.empty() || config.empty())
      fail("give --checkpoint DIR, or --weights FILE with --config FILE");
    m.weights_path = weights;
    m.config_path = config;
  }
  return m;
}

LoadedModel load_model(const std::string& checkpoint, const std::string& weights,
                       const std::string& config_file, const DeviceChoice& on) {
  const ops::Device device = ops::parse_device(on.device, "--device");
  const ops::WeightType weight_type = ops::parse_weight_type(on.weight_type, "--weight-type");
  LoadedModel m;
  const ModelFiles files = resolve_model_files(checkpoint, weights, config_file);
  const std::string& weights_path = m.weights_path = files.weights_path;
  m.config_path = files.config_path;
  m.config_doc = load_yaml_file(m.config_path);
  const ModelConfig config = load_model_config(m.config_path, {});
  // Same shapes do not mean the same model: every model field must agree with the model
  // stored with the weights.
  require_saved_model(weights_path, config, m.config_path);
  m.model = std::make_unique<Model<float>>(config, ops::backend_for(device),
                                            Model<float>::InitialWeights::unset);
  m.model->set_kv_type(parse_kv_type(on.kv_type, "--kv-type"));
  if (!load_weights_for_inference(weights_path, *m.model, weight_type))
    std::fprintf(stderr, "sps: %s\n", unverified_note(weights_path).c_str());
  return m;
}

namespace {

// The tokenizer a config names: `tokenizer:` or `data.tokenizer:`, else the one recorded in
// the meta.json of its `data.dataset`; GPT-2's vocabulary shape means gpt2. Empty if none.
std::string tokenizer_from_config(const LoadedModel& m, const ModelConfig& c) {
  const YAML::Node& doc = m.config_doc;
  if (doc["tokenizer"] && doc["tokenizer"].IsScalar()) return doc["tokenizer"].Scalar();
  const YAML::Node data = doc["data"];
  if (data && data.IsMap()) {
    if (data["tokenizer"] && data["tokenizer"].IsScalar()) return data["tokenizer"].Scalar();
    if (data["dataset"] && data["dataset"].IsScalar() && !data["dataset"].Scalar().empty()) {
      std::string dataset = data["dataset"].Scalar();
      const std::string home_var = "${SPS_HOME}";
      if (dataset.rfind(home_var, 0) == 0) dataset = sps_home() + dataset.substr(home_var.size());
      const fs::path meta = fs::path(dataset) / "meta.json";
      std::error_code ec;
      if (fs::exists(meta, ec)) {
        try {
          const auto j = nlohmann::json::parse(read_file(meta.string(), "the dataset's meta.json"));
          if (j.contains("tokenizer") && j["tokenizer"].contains("name") &&
              j["tokenizer"]["name"].is_string())
            return j["tokenizer"]["name"].get<std::string>();
        } catch (const nlohmann::json::exception&) {
          fail("{}: not valid JSON", meta.string());
        }
      }
    }
  }
  if (c.vocab_size == 50304 && c.eos_token_id == 50256) return "gpt2";
  return "";
}

}  // namespace

BpeTokenizer load_tokenizer(const std::string& tokenizer_spec, const LoadedModel& m) {
  const ModelConfig& c = m.model->config();
  std::string spec = tokenizer_spec;
  if (spec.empty()) spec = tokenizer_from_config(m, c);
  if (spec.empty())
    fail("{} names no tokenizer (no tokenizer:, data.tokenizer: or dataset meta.json); pass "
         "--tokenizer gpt2|PATH",
         m.config_path);
  BpeTokenizer tokenizer = BpeTokenizer::load(spec);
  if (int64_t(tokenizer.padded_vocab_size()) != c.vocab_size ||
      int64_t(tokenizer.eos_id()) != c.eos_token_id ||
      int64_t(tokenizer.predict_id()) != c.predict_token_id ||
      int64_t(tokenizer.pad_id()) != c.pad_token_id)
    fail("tokenizer {} (V {}, EOS {}, PREDICT {}, PAD {}) does not match the model of {} "
         "(vocab_size {}, EOS {}, PREDICT {}, PAD {})",
         tokenizer.name(), tokenizer.padded_vocab_size(), tokenizer.eos_id(), tokenizer.predict_id(),
         tokenizer.pad_id(), m.config_path, c.vocab_size, c.eos_token_id, c.predict_token_id,
         c.pad_token_id);
  return tokenizer;
}


}  // namespace sps::cli
