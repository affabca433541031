#pragma once
// Zero-shot tasks (docs/model.md §8) from local JSON Lines files in the Hugging Face datasets'
// schemas; docs/evaluation.md lists the fields read. Every choice is scored by the summed
// log-likelihood of " choice" after the prompt; acc takes the best sum, acc_norm the best
// sum per character of the continuation. LAMBADA: greedy exact match of every
// continuation token, and perplexity exp(−Σ loglik / Σ tokens).
#include <cstdint>
#include <string>
#include <vector>

#include "eval/scoring.h"
#include "tokenizer/bpe.h"

namespace sps::eval {

struct TaskItem {
  std::string context;
  std::vector<std::string> continuations;  // with their leading space
  int64_t gold = 0;
};

struct TaskData {
  std::string name;  // arc_easy | hellaswag | piqa | sciq | lambada_openai | cloze | continuation
  std::string path;
  bool lambada = false;  // greedy exact match + perplexity instead of acc/acc_norm
  std::vector<TaskItem> items;
};

// The task names `load_task` knows.
const std::vector<std::string>& task_names();
bool is_task_name(const std::string& name);

// Reads a task file. A line that is not a JSON object (file:line), a missing or mistyped
// field (named, file:line), a gold label out of range, or a file without items is a
// UserError. `limit` > 0 keeps the first `limit` items.
TaskData load_task(const std::string& name, const std::string& path, int64_t limit = 0);

// HellaSwag's cleaning: strip; " [title]" → ". "; drop "[...]" spans; "  " → " ".
std::string hellaswag_clean(const std::string& text);
// Python's str.capitalize on ASCII letters: first upper, the rest lower.
std::string python_capitalize(const std::string& text);

struct TaskResult {
  std::string name;
  int64_t items = 0;
  double acc = 0, acc_norm = 0;  // LAMBADA: acc = greedy exact match, acc_norm = acc
  double perplexity = 0;         // LAMBADA only
  double seconds = 0;
  double items_per_second() const { return seconds > 0 ? double(items) / seconds : 0; }
};

// Metrics from the scores of every item's choices (choice-major in item order).
TaskResult task_metrics(const TaskData& task, const std::vector<Score>& scores);

// The requests of a task, in item order, choices in order.
std::vector<Request> task_requests(const TaskData& task, const BpeTokenizer& tokenizer);

// Scores every choice (naive or shared: the same numbers; naive is the faster on CPU, see
// docs/performance.md) and reports progress in items.
template <typename T>
TaskResult run_task(Model<T>& model, const BpeTokenizer& tokenizer, const TaskData& task,
                    int64_t batch, const ProgressCallback& progress = {},
                    Scoring scoring = Scoring::shared);

}  // namespace sps::eval
