#pragma once
// `sps eval` as a function (docs/evaluation.md): a list of tasks (validation NLL, rolling
// corpus NLL, zero-shot tasks) run on one model, and what they found as the eval.json
// structure and its markdown table. The command and the Python module both call it.
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "eval/scoring.h"
#include "model/model.h"
#include "tokenizer/bpe.h"
#include "util/progress.h"

namespace sps::eval {

struct EvalOptions {
  // val, val:PATH, corpus:NAME=PATH, arc_easy, hellaswag, piqa, sciq, lambada_openai, cloze,
  // continuation
  std::vector<std::string> tasks;
  std::map<std::string, std::string> task_files;  // a zero-shot task's JSON Lines file
  std::string suite;                              // "local" (scripts/build-eval-suite.sh) or ""
  int64_t batch = 8;                              // rows per forward
  int64_t limit = 0;         // first N items of each task and documents of each corpus (0: all)
  int64_t val_tokens = -1;   // validation tokens (-1: the recipe's eval_total_tokens)
  int64_t corpus_bytes = 0;  // only each corpus's first N bytes of text (0: all)
  Scoring scoring = Scoring::shared;
  bool quiet = false;  // no progress lines and notes on stderr
  // Each task's progress, as (label, unit) → callback; empty: a ProgressReporter on stderr.
  std::function<ProgressCallback(const std::string& label, const std::string& unit)> progress;
};

// The tasks to run, in order (the local suite expanded), and the files of the zero-shot
// ones: every task and file name checked (UserError) before a model is loaded.
struct EvalPlan {
  std::vector<std::string> tasks;
  std::map<std::string, std::string> files;
};
EvalPlan plan_evaluation(const EvalOptions& options);

// The model evaluated and the files it came from (a training recipe as its config gives
// `val` its val.bin, seed and token count).
struct EvalModel {
  Model<float>& model;
  std::string weights_path, config_path;
  YAML::Node config_doc;                           // the whole config file
  std::function<const BpeTokenizer&()> tokenizer;  // loaded on first use
};

struct EvalResults {
  nlohmann::ordered_json results;  // what --out writes: per task, and the summary
  std::string tables;              // the markdown tables `sps eval` prints
};
EvalResults evaluate(const EvalModel& model, const EvalPlan& plan, const EvalOptions& options);

// --tasks' comma list ("val, piqa" → {"val", "piqa"}), blanks dropped.
std::vector<std::string> split_task_list(const std::string& list);
// "NAME=PATH" of --task-file and corpus:NAME=PATH; anything else is a UserError naming `what`.
std::pair<std::string, std::string> name_path(const std::string& spec, const std::string& what);

}  // namespace sps::eval
