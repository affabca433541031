// sps eval --checkpoint DIR | --weights FILE --config FILE  --tasks LIST | --suite local
//
// Tasks: `val` / `val:PATH` (validation NLL on a token file with the trainer's fixed seeded
// windows), `corpus:NAME=PATH` (rolling NLL, nats per whitespace word), and the zero-shot
// tasks arc_easy, hellaswag, piqa, sciq, lambada_openai (files given with --task-file
// NAME=PATH) and the local suite's cloze and continuation. See docs/evaluation.md; the work
// is eval::evaluate (eval/evaluate.h).
#include <cstdio>
#include <filesystem>
#include <memory>

#include "cli/commands.h"
#include "cli/model_files.h"
#include "eval/evaluate.h"
#include "tokenizer/bpe.h"
#include "util/atomic_file.h"

namespace sps::cli {
namespace {

namespace fs = std::filesystem;

struct EvalArgs {
  std::string checkpoint, weights, config, tokenizer, tasks, suite, out, scoring = "shared";
  std::vector<std::string> task_files;
  eval::EvalOptions options;
  const DeviceChoice* on = nullptr;  // --device and --weight-type, read after parsing
};

void run_eval(EvalArgs& a) {
  eval::EvalOptions& options = a.options;
  options.scoring = eval::scoring_from_name(a.scoring);
  options.tasks = eval::split_task_list(a.tasks);
  for (const auto& spec : a.task_files) {
    const auto [name, path] = eval::name_path(spec, "--task-file");
    options.task_files[name] = path;
  }
  options.suite = a.suite;
  const eval::EvalPlan plan = eval::plan_evaluation(options);

  const LoadedModel m =
      load_model(a.checkpoint, a.weights, a.config, *a.on);
  std::unique_ptr<BpeTokenizer> tokenizer;
  const eval::EvalModel model{
      *m.model, m.weights_path, m.config_path, m.config_doc, [&]() -> const BpeTokenizer& {
        if (!tokenizer) tokenizer = std::make_unique<BpeTokenizer>(load_tokenizer(a.tokenizer, m));
        return *tokenizer;
      }};
  const eval::EvalResults results = eval::evaluate(model, plan, options);
  std::fputs(results.tables.c_str(), stdout);
  if (!a.out.empty()) {
    write_file_atomically(a.out, results.results.dump(2) + "\n");
    const fs::path md_path = fs::path(a.out).replace_extension(".md");
    write_file_atomically(md_path.string(), results.tables);
  }
}

}  // namespace

void register_eval(CLI::App& app) {
  auto* cmd = app.add_subcommand("eval", "evaluate a model: validation NLL, corpus NLL, zero-shot tasks");
  auto a = std::make_shared<EvalArgs>();
  cmd->add_option("--checkpoint", a->checkpoint, "checkpoint folder, or a run folder (newest checkpoint)");
  cmd->add_option("--weights", a->weights, "model.safetensors (with --config)");
  cmd->add_option("--config", a->config, "config YAML (with --weights)");
  cmd->add_option("--tokenizer", a->tokenizer, "gpt2 or a rank file (default: the config's)");
  cmd->add_option("--tasks", a->tasks,
                  "comma list: val, val:PATH, corpus:NAME=PATH, arc_easy, hellaswag, piqa, sciq, "
                  "lambada_openai, cloze, continuation");
  cmd->add_option("--task-file", a->task_files, "NAME=PATH of a task's JSON Lines file (repeatable)");
  cmd->add_option("--suite", a->suite, "local: the suite built by scripts/build-eval-suite.sh");
  cmd->add_option("--out", a->out, "results JSON (a markdown table is written beside it)");
  cmd->add_option("--batch", a->options.batch, "rows per forward")->capture_default_str();
  cmd->add_option("--scoring", a->scoring,
                  "zero-shot choices: shared (one context pass per item, each choice in one "
                  "extend of its cached copy) or naive (one full pass per choice); the same "
                  "numbers, shared is faster (docs/performance.md)")
      ->capture_default_str();
  cmd->add_option("--limit", a->options.limit,
                  "first N items of each task and documents of each corpus (0 = all)");
  cmd->add_option("--corpus-bytes", a->options.corpus_bytes,
                  "score only each corpus's first N bytes of text (cut at white space; 0 = all)");
  cmd->add_option("--val-tokens", a->options.val_tokens,
                  "validation tokens (default: the recipe's eval_total_tokens)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--quiet", a->options.quiet, "no progress lines");
  a->on = &add_device_and_weight_type_options(cmd, "sps eval");
  cmd->callback([a] { run_eval(*a); });
}

}  // namespace sps::cli
