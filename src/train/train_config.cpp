#include "train/train_config.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>

#include "ops/device.h"
#include "util/error.h"
#include "util/sps_home.h"
#include "util/yaml_config.h"

namespace sps {

namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kSections = {"base",      "model", "training", "optimizer",
                                            "scheduler", "data",  "system"};
const std::vector<std::string> kTrainingKeys = {
    "micro_batch_size",   "global_batch_size", "max_tokens",         "eval_total_tokens",
    "eval_interval_tokens", "log_interval",    "save_every",         "rolling_save_every",
    "sampler_type",       "chunk_size_units",  "chunk_shuffle_seed", "sampler_start_offset",
    "seed",               "eval_seed"};
const std::vector<std::string> kOptimizerKeys = {"learning_rate", "weight_decay", "beta1",
                                                 "beta2",         "eps",          "grad_clip"};
const std::vector<std::string> kSchedulerKeys = {"warmup_tokens", "lr_decay_tokens", "min_lr",
                                                 "decay_lr"};
const std::vector<std::string> kDataKeys = {"dataset", "train_bin", "val_bin", "dtype"};
const std::vector<std::string> kSystemKeys = {
    "threads", "recompute_activations", "out_dir", "device", "precision", "all_reduce_bucket_mb"};

const std::vector<std::string>* section_keys(const std::string& section) {
  if (section == "training") return &kTrainingKeys;
  if (section == "optimizer") return &kOptimizerKeys;
  if (section == "scheduler") return &kSchedulerKeys;
  if (section == "data") return &kDataKeys;
  if (section == "system") return &kSystemKeys;
  return nullptr;  // model: checked by the model parser after the preset is merged
}

// Checks one file's (or the merged document's) sections and their keys.
void check_sections(const YAML::Node& root, const std::string& source) {
  check_yaml_keys(root, kSections, source, "");
  for (const auto& entry : root) {
    const std::string section = entry.first.Scalar();
    if (section == "base") continue;
    const YAML::Node& node = entry.second;
    if (!node.IsNull() && !node.IsMap())
      fail("{}: {}: expected a mapping of settings", source, section);
    if (const auto* keys = section_keys(section)) check_yaml_keys(node, *keys, source, section);
  }
}

// `over` merged onto `under`: mappings merge key by key, anything else replaces.
YAML::Node merged(const YAML::Node& under, const YAML::Node& over) {
  if (!under.IsMap() || !over.IsMap()) return YAML::Clone(over);
  YAML::Node result = YAML::Clone(under);
  for (const auto& entry : over) {
    const std::string key = entry.first.Scalar();
    result[key] = result[key] ? merged(result[key], entry.second) : YAML::Clone(entry.second);
  }
  return result;
}

YAML::Node load_recipe(const std::string& path, int depth) {
  if (depth > 8) fail("{}: base: recipes nest more than 8 deep (a cycle?)", path);
  YAML::Node root = load_yaml_file(path);
  if (root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  if (!root.IsMap()) fail("{}: expected a mapping of sections (model, training, ...)", path);
  check_sections(root, path);
  if (!root["base"]) return root;
  const std::string base_name = yaml_string(root["base"], path, "base");
  const std::string base_path = (fs::path(path).parent_path() / base_name).string();
  if (!fs::exists(base_path)) fail("{}: base: '{}' not found (looked at {})", path, base_name, base_path);
  YAML::Node result = merged(load_recipe(base_path, depth + 1), root);
  result.remove("base");
  return result;
}

std::string find_preset(const std::string& preset, const std::string& recipe) {
  const fs::path recipe_dir = fs::path(recipe).parent_path();
  std::vector<fs::path> candidates;
  if (preset.find('/') != std::string::npos || preset.ends_with(".yaml")) {
    candidates.push_back(recipe_dir / preset);
  } else {
    candidates.push_back(recipe_dir / ".." / "models" / (preset + ".yaml"));
    candidates.push_back(fs::path("configs") / "models" / (preset + ".yaml"));
  }
  for (const auto& c : candidates)
    if (fs::exists(c)) return c.lexically_normal().string();
  fail("{}: model.preset: '{}' not found (looked at {})", recipe, preset,
       candidates.front().lexically_normal().string());
}

YAML::Node resolve_model(const YAML::Node& model, const std::string& source) {
  if (!model || model.IsNull()) fail("{}: model: missing (a preset or the model's shapes)", source);
  if (!model.IsMap()) fail("{}: model: expected a mapping of model settings", source);
  YAML::Node own = YAML::Clone(model);
  if (!own["preset"]) return own;
  const std::string preset = yaml_string(own["preset"], source, "model.preset");
  own.remove("preset");
  const std::string preset_path = find_preset(preset, source);
  YAML::Node preset_root = load_yaml_file(preset_path);
  YAML::Node preset_model = preset_root.IsMap() && preset_root["model"] ? preset_root["model"]
                                                                          : preset_root;
  if (!preset_model.IsMap()) fail("{}: expected a model: mapping", preset_path);
  return merged(preset_model, own);
}

void check_override(const std::string& o, const std::string& source) {
  const size_t equals = o.find('=');
  const std::string key = o.substr(0, equals == std::string::npos ? o.size() : equals);
  const size_t dot = key.find('.');
  const std::string section = key.substr(0, dot);
  bool known = false;
  for (const auto& s : kSections) known = known || (s == section && s != "base");
  if (!known || dot == std::string::npos)
    fail("override '{}': expected section.key=value with a section of model, training, "
         "optimizer, scheduler, data, system",
         o);
  const std::string name = key.substr(dot + 1);
  if (const auto* keys = section_keys(section)) {
    bool ok = false;
    for (const auto& k : *keys) ok = ok || k == name;
    if (!ok)
      fail("override '{}': {}: unknown key (expected one of {})", o, key, fmt::join(*keys, ", "));
  }
  (void)source;
}

// Typed readers over one section; absent keys keep their defaults.
struct Section {
  YAML::Node node;
  std::string source, name;
  YAML::Node at(const char* key) const {
    return node.IsDefined() && node.IsMap() ? node[key] : YAML::Node(YAML::NodeType::Undefined);
  }
  std::string field(const char* key) const { return name + "." + key; }
  void read(const char* key, int64_t* out) const {
    if (const YAML::Node n = at(key)) *out = yaml_int(n, source, field(key));
  }
  void read(const char* key, double* out) const {
    if (const YAML::Node n = at(key)) *out = yaml_double(n, source, field(key));
  }
  void read(const char* key, bool* out) const {
    if (const YAML::Node n = at(key)) *out = yaml_bool(n, source, field(key));
  }
  void read(const char* key, std::string* out) const {
    if (const YAML::Node n = at(key)) *out = n.IsNull() ? "" : yaml_string(n, source, field(key));
  }
};

void validate(const TrainConfig& c, const std::string& s) {
  const auto& t = c.training;
  auto at_least = [&](const char* field, int64_t value, int64_t low) {
    if (value < low) fail("{}: {}: must be >= {}, got {}", s, field, low, value);
  };
  at_least("training.micro_batch_size", t.micro_batch_size, 1);
  at_least("training.global_batch_size", t.global_batch_size, 1);
  if (t.global_batch_size % t.micro_batch_size != 0)
    fail("{}: training.global_batch_size: {} is not a multiple of training.micro_batch_size = {}",
         s, t.global_batch_size, t.micro_batch_size);
  if (t.max_tokens <= 0) fail("{}: training.max_tokens: missing or <= 0 (the run's length in tokens)", s);
  at_least("training.eval_total_tokens", t.eval_total_tokens, 0);
  at_least("training.eval_interval_tokens", t.eval_interval_tokens, 0);
  at_least("training.log_interval", t.log_interval, 1);
  at_least("training.save_every", t.save_every, 0);
  at_least("training.rolling_save_every", t.rolling_save_every, 0);
  at_least("training.chunk_size_units", t.chunk_size_units, 1);
  at_least("training.chunk_shuffle_seed", t.chunk_shuffle_seed, 0);
  at_least("training.sampler_start_offset", t.sampler_start_offset, 0);
  at_least("training.seed", t.seed, 0);
  at_least("training.eval_seed", t.eval_seed, 0);
  if (t.sampler_type != "fixed_random_chunk" && t.sampler_type != "sequential")
    fail("{}: training.sampler_type: expected fixed_random_chunk or sequential, got '{}'", s,
         t.sampler_type);
  const auto& o = c.optimizer;
  if (o.learning_rate < 0) fail("{}: optimizer.learning_rate: must be >= 0", s);
  if (o.weight_decay < 0) fail("{}: optimizer.weight_decay: must be >= 0", s);
  if (!(o.beta1 >= 0 && o.beta1 < 1)) fail("{}: optimizer.beta1: must be in [0, 1)", s);
  if (!(o.beta2 >= 0 && o.beta2 < 1)) fail("{}: optimizer.beta2: must be in [0, 1)", s);
  if (!(o.eps > 0)) fail("{}: optimizer.eps: must be > 0", s);
  if (o.grad_clip < 0) fail("{}: optimizer.grad_clip: must be >= 0 (0 = off)", s);
  const auto& sc = c.scheduler;
  at_least("scheduler.warmup_tokens", sc.warmup_tokens, 0);
  at_least("scheduler.lr_decay_tokens", sc.lr_decay_tokens, 0);
  if (sc.min_lr < 0) fail("{}: scheduler.min_lr: must be >= 0", s);
  if (sc.decay_lr && sc.warmup_tokens + sc.lr_decay_tokens > t.max_tokens)
    fail("{}: scheduler: warmup_tokens ({}) + lr_decay_tokens ({}) exceed training.max_tokens ({})",
         s, sc.warmup_tokens, sc.lr_decay_tokens, t.max_tokens);
  if (c.data.train_bin.empty())
    fail("{}: data: set data.dataset (a folder with train.bin and val.bin) or data.train_bin", s);
  if (c.data.val_bin.empty() && t.eval_total_tokens > 0)
    fail("{}: data.val_bin: needed for validation (or set training.eval_total_tokens=0)", s);
  if (!c.data.dtype.empty() && c.data.dtype != "uint16" && c.data.dtype != "uint32")
    fail("{}: data.dtype: expected uint16 or uint32, got '{}'", s, c.data.dtype);
  at_least("system.threads", c.system.threads, 0);
  if (!(c.system.all_reduce_bucket_mb > 0 && c.system.all_reduce_bucket_mb <= 1 << 20))
    fail("{}: system.all_reduce_bucket_mb: expected a size in MiB in (0, 1048576], got {}", s,
         c.system.all_reduce_bucket_mb);
  ops::parse_device(c.system.device, s + ": system.device");
  ops::parse_precision(c.system.precision, s + ": system.precision");
}

TrainConfig parse(const YAML::Node& root, const std::string& source, bool resolved) {
  TrainConfig c;
  c.source = source;
  c.model = model_config_from_yaml(resolve_model(root["model"], source), source);
  c.model.validate(source);

  const Section training{root["training"], source, "training"};
  auto& t = c.training;
  training.read("micro_batch_size", &t.micro_batch_size);
  training.read("global_batch_size", &t.global_batch_size);
  training.read("max_tokens", &t.max_tokens);
  training.read("eval_total_tokens", &t.eval_total_tokens);
  training.read("eval_interval_tokens", &t.eval_interval_tokens);
  training.read("log_interval", &t.log_interval);
  training.read("save_every", &t.save_every);
  training.read("rolling_save_every", &t.rolling_save_every);
  training.read("sampler_type", &t.sampler_type);
  training.read("chunk_size_units", &t.chunk_size_units);
  training.read("chunk_shuffle_seed", &t.chunk_shuffle_seed);
  training.read("sampler_start_offset", &t.sampler_start_offset);
  training.read("seed", &t.seed);
  training.read("eval_seed", &t.eval_seed);

  const Section optimizer{root["optimizer"], source, "optimizer"};
  auto& o = c.optimizer;
  optimizer.read("learning_rate", &o.learning_rate);
  optimizer.read("weight_decay", &o.weight_decay);
  optimizer.read("beta1", &o.beta1);
  optimizer.read("beta2", &o.beta2);
  optimizer.read("eps", &o.eps);
  optimizer.read("grad_clip", &o.grad_clip);

  const Section scheduler{root["scheduler"], source, "scheduler"};
  auto& sc = c.scheduler;
  scheduler.read("warmup_tokens", &sc.warmup_tokens);
  scheduler.read("lr_decay_tokens", &sc.lr_decay_tokens);
  scheduler.read("min_lr", &sc.min_lr);
  scheduler.read("decay_lr", &sc.decay_lr);

  const Section data{root["data"], source, "data"};
  auto& d = c.data;
  data.read("dataset", &d.dataset);
  data.read("train_bin", &d.train_bin);
  data.read("val_bin", &d.val_bin);
  data.read("dtype", &d.dtype);
  if (!resolved) {
    d.dataset = d.dataset.empty() ? "" : expand_path(d.dataset, source + ": data.dataset");
    d.train_bin = d.train_bin.empty() ? "" : expand_path(d.train_bin, source + ": data.train_bin");
    d.val_bin = d.val_bin.empty() ? "" : expand_path(d.val_bin, source + ": data.val_bin");
    if (!d.dataset.empty()) {
      if (d.train_bin.empty()) d.train_bin = (fs::path(d.dataset) / "train.bin").string();
      if (d.val_bin.empty()) d.val_bin = (fs::path(d.dataset) / "val.bin").string();
    }
  }

  const Section system{root["system"], source, "system"};
  system.read("threads", &c.system.threads);
  system.read("recompute_activations", &c.system.recompute_activations);
  system.read("out_dir", &c.system.out_dir);
  system.read("device", &c.system.device);
  system.read("precision", &c.system.precision);
  system.read("all_reduce_bucket_mb", &c.system.all_reduce_bucket_mb);
  if (c.system.out_dir.empty()) c.system.out_dir = "runs/" + fs::path(source).stem().string();
  else if (!resolved) c.system.out_dir = expand_path(c.system.out_dir, source + ": system.out_dir");

  validate(c, source);
  return c;
}

std::string number(double x) { return fmt::format("{}", x); }

}  // namespace

int64_t TrainConfig::decay_start_tokens() const {
  if (!scheduler.decay_lr || scheduler.lr_decay_tokens <= 0) return -1;
  return training.max_tokens - scheduler.lr_decay_tokens;
}

std::string expand_path(const std::string& text, const std::string& field) {
  std::string out;
  size_t i = 0;
  if (text.starts_with("~/")) {
    const char* home = std::getenv("HOME");
    if (!home || !*home) fail("{}: '~' in '{}' but HOME is not set", field, text);
    out = home;
    i = 1;
  }
  while (i < text.size()) {
    if (text.compare(i, 2, "${") == 0) {
      const size_t close = text.find('}', i);
      if (close == std::string::npos) fail("{}: unclosed '${{' in '{}'", field, text);
      const std::string name = text.substr(i + 2, close - i - 2);
      const char* value = std::getenv(name.c_str());
      if (name == "SPS_HOME") out += sps_home();
      else if (value) out += value;
      else fail("{}: '{}' uses ${{{}}}, which is not set", field, text, name);
      i = close + 1;
    } else {
      out += text[i++];
    }
  }
  return out;
}

TrainConfig load_train_config(const std::string& path, const std::vector<std::string>& overrides) {
  YAML::Node root = load_recipe(path, 0);
  for (const std::string& o : overrides) {
    check_override(o, path);
    apply_override(root, o, path);
  }
  check_sections(root, path);
  return parse(root, path, false);
}

TrainConfig train_config_from_yaml(const YAML::Node& root, const std::string& source) {
  if (!root.IsMap()) fail("{}: expected a mapping of sections", source);
  check_sections(root, source);
  return parse(root, source, true);
}

std::string train_config_yaml(const TrainConfig& c, bool with_system) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  const ModelConfig& m = c.model;
  out << YAML::Key << "model" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "family" << YAML::Value << m.family;
  out << YAML::Key << "n_layer" << YAML::Value << m.n_layer;
  out << YAML::Key << "n_head" << YAML::Value << m.n_head;
  out << YAML::Key << "hidden_size" << YAML::Value << m.hidden_size;
  out << YAML::Key << "intermediate_size" << YAML::Value << m.intermediate_size;
  out << YAML::Key << "vocab_size" << YAML::Value << m.vocab_size;
  out << YAML::Key << "block_size" << YAML::Value << m.block_size;
  out << YAML::Key << "window_size" << YAML::Value << m.window_size;
  out << YAML::Key << "persistent_key_window" << YAML::Value << m.persistent_key_window;
  out << YAML::Key << "eos_token_id" << YAML::Value << m.eos_token_id;
  out << YAML::Key << "predict_token_id" << YAML::Value << m.predict_token_id;
  out << YAML::Key << "pad_token_id" << YAML::Value << m.pad_token_id;
  out << YAML::Key << "rope_theta" << YAML::Value << number(m.rope_theta);
  out << YAML::Key << "norm_eps" << YAML::Value << number(m.norm_eps);
  out << YAML::Key << "init_std" << YAML::Value << number(m.init_std);
  out << YAML::EndMap;

  const TrainingSettings& t = c.training;
  out << YAML::Key << "training" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "micro_batch_size" << YAML::Value << t.micro_batch_size;
  out << YAML::Key << "global_batch_size" << YAML::Value << t.global_batch_size;
  out << YAML::Key << "max_tokens" << YAML::Value << t.max_tokens;
  out << YAML::Key << "eval_total_tokens" << YAML::Value << t.eval_total_tokens;
  out << YAML::Key << "eval_interval_tokens" << YAML::Value << t.eval_interval_tokens;
  out << YAML::Key << "log_interval" << YAML::Value << t.log_interval;
  out << YAML::Key << "save_every" << YAML::Value << t.save_every;
  out << YAML::Key << "rolling_save_every" << YAML::Value << t.rolling_save_every;
  out << YAML::Key << "sampler_type" << YAML::Value << t.sampler_type;
  out << YAML::Key << "chunk_size_units" << YAML::Value << t.chunk_size_units;
  out << YAML::Key << "chunk_shuffle_seed" << YAML::Value << t.chunk_shuffle_seed;
  out << YAML::Key << "sampler_start_offset" << YAML::Value << t.sampler_start_offset;
  out << YAML::Key << "seed" << YAML::Value << t.seed;
  out << YAML::Key << "eval_seed" << YAML::Value << t.eval_seed;
  out << YAML::EndMap;

  const OptimizerSettings& o = c.optimizer;
  out << YAML::Key << "optimizer" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "learning_rate" << YAML::Value << number(o.learning_rate);
  out << YAML::Key << "weight_decay" << YAML::Value << number(o.weight_decay);
  out << YAML::Key << "beta1" << YAML::Value << number(o.beta1);
  out << YAML::Key << "beta2" << YAML::Value << number(o.beta2);
  out << YAML::Key << "eps" << YAML::Value << number(o.eps);
  out << YAML::Key << "grad_clip" << YAML::Value << number(o.grad_clip);
  out << YAML::EndMap;

  const SchedulerSettings& s = c.scheduler;
  out << YAML::Key << "scheduler" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "warmup_tokens" << YAML::Value << s.warmup_tokens;
  out << YAML::Key << "lr_decay_tokens" << YAML::Value << s.lr_decay_tokens;
  out << YAML::Key << "min_lr" << YAML::Value << number(s.min_lr);
  out << YAML::Key << "decay_lr" << YAML::Value << (s.decay_lr ? "true" : "false");
  out << YAML::EndMap;

  out << YAML::Key << "data" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "dataset" << YAML::Value << c.data.dataset;
  out << YAML::Key << "train_bin" << YAML::Value << c.data.train_bin;
  out << YAML::Key << "val_bin" << YAML::Value << c.data.val_bin;
  out << YAML::Key << "dtype" << YAML::Value << c.data.dtype;
  out << YAML::EndMap;

  if (with_system) {
    out << YAML::Key << "system" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "threads" << YAML::Value << c.system.threads;
    out << YAML::Key << "recompute_activations" << YAML::Value << c.system.recompute_activations;
    out << YAML::Key << "out_dir" << YAML::Value << c.system.out_dir;
    out << YAML::Key << "device" << YAML::Value << c.system.device;
    out << YAML::Key << "precision" << YAML::Value << c.system.precision;
    out << YAML::Key << "all_reduce_bucket_mb" << YAML::Value << c.system.all_reduce_bucket_mb;
    out << YAML::EndMap;
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

int64_t accumulation_steps(const TrainConfig& c, int ranks) {
  const int64_t per_step = c.training.micro_batch_size * ranks;
  if (c.training.global_batch_size % per_step != 0)
    fail("{}: training.global_batch_size: {} is not a multiple of training.micro_batch_size ({}) "
         "× {} processes",
         c.source, c.training.global_batch_size, c.training.micro_batch_size, ranks);
  return c.training.global_batch_size / per_step;
}

}  // namespace sps
