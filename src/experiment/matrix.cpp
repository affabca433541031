#include "experiment/matrix.h"

#include <fmt/format.h>
#include <fnmatch.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <set>

#include "model/family.h"
#include "train/train_config.h"
#include "util/error.h"
#include "util/read_file.h"
#include "util/yaml_config.h"

namespace sps {

namespace {

namespace fs = std::filesystem;

const std::vector<std::string> kMatrixKeys = {"recipe", "families", "windows",   "seeds",
                                              "scales", "tokens",   "overrides", "eval",
                                              "bench",  "parallel", "decay",
                                              "bench_tries"};

YAML::Node sequence(const YAML::Node& root, const char* key, const std::string& source,
                    bool required) {
  const YAML::Node node = root[key];
  if (!node || node.IsNull()) {
    if (required) fail("{}: {}: missing (expected a list)", source, key);
    return YAML::Node(YAML::NodeType::Sequence);
  }
  if (!node.IsSequence()) fail("{}: {}: expected a list", source, key);
  if (required && node.size() == 0) fail("{}: {}: the list is empty", source, key);
  return node;
}

std::vector<std::string> strings(const YAML::Node& root, const char* key, const std::string& source,
                                 bool required) {
  std::vector<std::string> out;
  const YAML::Node list = sequence(root, key, source, required);
  for (size_t i = 0; i < list.size(); ++i)
    out.push_back(yaml_string(list[i], source, fmt::format("{}[{}]", key, i)));
  return out;
}

std::vector<int64_t> integers(const YAML::Node& root, const char* key, const std::string& source,
                              bool required, int64_t minimum) {
  std::vector<int64_t> out;
  const YAML::Node list = sequence(root, key, source, required);
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string field = fmt::format("{}[{}]", key, i);
    const int64_t value = yaml_int(list[i], source, field);
    if (value < minimum) fail("{}: {}: expected an integer >= {}, got {}", source, field, minimum, value);
    out.push_back(value);
  }
  return out;
}

template <typename T>
void check_distinct(const std::vector<T>& values, const char* key, const std::string& source) {
  std::set<T> seen;
  for (const auto& v : values)
    if (!seen.insert(v).second) fail("{}: {}: {} appears twice", source, key, v);
}

// Scale names become part of run names and file paths.
void check_scale_name(const std::string& scale, const std::string& source) {
  const bool ok = !scale.empty() && std::all_of(scale.begin(), scale.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-';
  });
  if (!ok) fail("{}: scales: '{}': expected letters, digits and '-'", source, scale);
}

void check_override_text(const std::string& o, const std::string& source) {
  if (o.find('=') == std::string::npos || o.starts_with("system.out_dir="))
    fail("{}: overrides: '{}': expected section.key=value (system.out_dir is set per run)", source, o);
}

bool in_scope(const std::vector<std::string>& scope, const std::string& value) {
  return scope.empty() || std::find(scope.begin(), scope.end(), value) != scope.end();
}

std::string recipe_for(const ExperimentMatrix& m, const std::string& scale) {
  const size_t at = m.recipe.find("{scale}");
  if (at == std::string::npos) return m.recipe;
  return m.recipe.substr(0, at) + scale + m.recipe.substr(at + 7);
}

DecayBranches parse_decay(const YAML::Node& node, const std::string& source) {
  DecayBranches d;
  if (!node || node.IsNull()) return d;
  if (!node.IsMap()) fail("{}: decay: expected a mapping (from, fraction, min_lr)", source);
  check_yaml_keys(node, {"from", "fraction", "min_lr"}, source, "decay");
  d.from = integers(node, "from", source + ": decay", true, 1);
  check_distinct(d.from, "decay.from", source);
  for (const char* key : {"fraction", "min_lr"})
    if (!node[key]) fail("{}: decay.{}: missing", source, key);
  d.fraction = yaml_double(node["fraction"], source, "decay.fraction");
  if (!(d.fraction > 0 && d.fraction <= 1))
    fail("{}: decay.fraction: expected a number in (0, 1], got {}", source, d.fraction);
  d.min_lr = yaml_double(node["min_lr"], source, "decay.min_lr");
  if (!(d.min_lr >= 0)) fail("{}: decay.min_lr: expected a number >= 0, got {}", source, d.min_lr);
  return d;
}

// The run's decayed branches. Each starts from a checkpoint the run writes: a named one
// (training.save_every) or, at the run's length, `final`.
std::vector<PlannedBranch> plan_branches(const ExperimentMatrix& m, const PlannedRun& run,
                                         const TrainConfig& config) {
  std::vector<PlannedBranch> branches;
  const int64_t step = config.tokens_per_step(), save_every = config.training.save_every;
  const int64_t length = config.total_steps() * step;
  for (const int64_t from : m.decay.from) {
    if (from % step != 0 || from > length ||
        (from != length && (save_every <= 0 || from % save_every != 0)))
      fail("{}: decay.from: run {} has no checkpoint at {} tokens (a multiple of "
           "training.save_every = {} and of the {} tokens per step, at most the run's {})",
           m.source, run.name, from, save_every, step, length);
    PlannedBranch b;
    b.from = from;
    const int64_t decay_tokens =
        int64_t(std::ceil(m.decay.fraction * double(from) / double(step))) * step;
    b.tokens = from + decay_tokens;
    b.overrides = run.overrides;
    b.overrides.push_back(fmt::format("training.max_tokens={}", b.tokens));
    b.overrides.push_back("scheduler.decay_lr=true");
    b.overrides.push_back(fmt::format("scheduler.lr_decay_tokens={}", decay_tokens));
    b.overrides.push_back(fmt::format("scheduler.min_lr={}", m.decay.min_lr));
    try {
      load_train_config(run.recipe, b.overrides);
    } catch (const UserError& e) {
      fail("{}: run {}, decay from {}: {}", m.source, run.name, from, e.what());
    }
    branches.push_back(std::move(b));
  }
  return branches;
}

std::string token_label(int64_t tokens) {
  if (tokens % 1000000000 == 0) return fmt::format("{}b", tokens / 1000000000);
  if (tokens % 1000000 == 0) return fmt::format("{}m", tokens / 1000000);
  return fmt::format("{}", tokens);
}

}  // namespace

ExperimentMatrix load_matrix(const std::string& path) {
  return parse_matrix(read_file(path, "the matrix file"), path);
}

ExperimentMatrix parse_matrix(const std::string& text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    fail("{}: line {}, column {}: {}", source, e.mark.line + 1, e.mark.column + 1, e.msg);
  }
  if (!root.IsMap()) fail("{}: expected a mapping (recipe, families, seeds, scales, ...)", source);
  check_yaml_keys(root, kMatrixKeys, source, "matrix");

  ExperimentMatrix m;
  m.source = source;
  m.text = text;
  if (!root["recipe"])
    fail("{}: recipe: missing (a training recipe, e.g. ../configs/experiments/tiny_standard.yaml)",
         source);
  const std::string recipe = yaml_string(root["recipe"], source, "recipe");
  m.recipe = (fs::path(source).parent_path() / recipe).lexically_normal().string();
  m.families = strings(root, "families", source, true);
  for (const auto& f : m.families) study_family(f, source + ": families");
  check_distinct(m.families, "families", source);
  m.scales = strings(root, "scales", source, true);
  for (const auto& s : m.scales) check_scale_name(s, source);
  check_distinct(m.scales, "scales", source);
  m.seeds = integers(root, "seeds", source, true, 0);
  check_distinct(m.seeds, "seeds", source);
  const bool needs_windows = std::any_of(m.families.begin(), m.families.end(), window_is_swept);
  m.windows = integers(root, "windows", source, needs_windows, 0);
  check_distinct(m.windows, "windows", source);
  if (!needs_windows && !m.windows.empty())
    fail("{}: windows: none of the families ({}) has a window", source, fmt::join(m.families, ", "));
  m.tokens = integers(root, "tokens", source, false, 1);
  check_distinct(m.tokens, "tokens", source);
  const YAML::Node overrides = sequence(root, "overrides", source, false);
  for (size_t i = 0; i < overrides.size(); ++i) {
    const std::string field = fmt::format("overrides[{}]", i);
    if (overrides[i].IsMap()) {
      check_yaml_keys(overrides[i], {"scales", "families", "set"}, source, field);
      ScopedOverrides scoped;
      scoped.scales = strings(overrides[i], "scales", source + ": " + field, false);
      scoped.families = strings(overrides[i], "families", source + ": " + field, false);
      scoped.set = strings(overrides[i], "set", source + ": " + field, true);
      for (const auto& o : scoped.set) check_override_text(o, source);
      m.scoped_overrides.push_back(std::move(scoped));
    } else {
      m.overrides.push_back(yaml_string(overrides[i], source, field));
      check_override_text(m.overrides.back(), source);
    }
  }
  m.eval_args = strings(root, "eval", source, false);
  m.bench = root["bench"].IsDefined();
  if (m.bench && !root["bench"].IsNull()) m.bench_args = strings(root, "bench", source, false);
  if (root["bench_tries"]) {
    m.bench_tries = yaml_int(root["bench_tries"], source, "bench_tries");
    if (m.bench_tries < 1 || m.bench_tries > 10)
      fail("{}: bench_tries: expected an integer from 1 to 10, got {}", source, m.bench_tries);
    if (!m.bench) fail("{}: bench_tries: there is no bench section to try again", source);
  }
  if (root["parallel"]) {
    m.parallel = yaml_int(root["parallel"], source, "parallel");
    if (m.parallel < 1) fail("{}: parallel: expected an integer >= 1, got {}", source, m.parallel);
  }
  m.decay = parse_decay(root["decay"], source);
  if (m.recipe.find("{scale}") == std::string::npos && !fs::exists(m.recipe))
    fail("{}: recipe: '{}' not found (looked at {})", source, recipe, m.recipe);
  return m;
}

std::vector<PlannedRun> expand_matrix(const ExperimentMatrix& m) {
  const bool templated = m.recipe.find("{scale}") != std::string::npos;
  std::vector<PlannedRun> runs;
  for (const auto& scale : m.scales) {
    const std::string recipe = recipe_for(m, scale);
    if (!fs::exists(recipe)) fail("{}: recipe for scale {}: {} not found", m.source, scale, recipe);
    std::vector<std::string> common = m.overrides;
    if (!templated) common.push_back("model.preset=" + scale);
    const TrainConfig scale_config = load_train_config(recipe, common);
    const std::vector<int64_t> tokens =
        m.tokens.empty() ? std::vector<int64_t>{scale_config.training.max_tokens} : m.tokens;
    for (const int64_t budget : tokens) {
      for (const auto& family : m.families) {
        const StudyFamily& entry = study_family(family, "families");
        std::vector<int64_t> windows = m.windows;
        if (entry.window == WindowRule::none) windows = {0};
        if (entry.window == WindowRule::every_position) windows = {scale_config.model.block_size};
        for (const int64_t window : windows) {
          std::string group = scale + "_" + family;
          if (entry.window == WindowRule::swept) group += fmt::format("_w{}", window);
          if (m.tokens.size() > 1) group += fmt::format("_{}", token_label(budget));
          for (const int64_t seed : m.seeds) {
            PlannedRun run;
            run.group = group;
            run.name = fmt::format("{}_seed{}", group, seed);
            run.recipe = recipe;
            run.family = family;
            run.scale = scale;
            run.window = window;
            run.seed = seed;
            run.tokens = budget;
            run.overrides = common;
            for (const auto& scoped : m.scoped_overrides)
              if (in_scope(scoped.scales, scale) && in_scope(scoped.families, family))
                run.overrides.insert(run.overrides.end(), scoped.set.begin(), scoped.set.end());
            run.overrides.push_back("model.family=" + entry.model_family);
            if (entry.window != WindowRule::none)
              run.overrides.push_back(fmt::format("model.window_size={}", window));
            if (!m.tokens.empty()) run.overrides.push_back(fmt::format("training.max_tokens={}", budget));
            run.overrides.push_back(fmt::format("training.seed={}", seed));
            TrainConfig config;
            try {
              config = load_train_config(recipe, run.overrides);
            } catch (const UserError& e) {
              fail("{}: run {}: {}", m.source, run.name, e.what());
            }
            run.branches = plan_branches(m, run, config);
            runs.push_back(std::move(run));
          }
        }
      }
    }
  }
  if (runs.empty()) fail("{}: the matrix expands to no runs", m.source);
  return runs;
}

std::vector<PlannedRun> select_runs(const std::vector<PlannedRun>& runs,
                                    const std::vector<std::string>& patterns,
                                    const std::string& source) {
  if (patterns.empty()) return runs;
  const auto matches = [](const std::string& pattern, const PlannedRun& run) {
    return ::fnmatch(pattern.c_str(), run.name.c_str(), 0) == 0;
  };
  std::vector<std::string> names;
  for (const PlannedRun& run : runs) names.push_back(run.name);
  for (const std::string& pattern : patterns)
    if (std::none_of(runs.begin(), runs.end(), [&](const auto& r) { return matches(pattern, r); }))
      fail("--only {}: no run of {} has that name (its runs: {})", pattern, source,
           fmt::join(names, ", "));
  std::vector<PlannedRun> kept;
  for (const PlannedRun& run : runs)
    if (std::any_of(patterns.begin(), patterns.end(),
                    [&](const auto& pattern) { return matches(pattern, run); }))
      kept.push_back(run);
  return kept;
}

}  // namespace sps
