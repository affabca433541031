#include "eval/tasks.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "util/error.h"

namespace sps::eval {

namespace {

using Json = nlohmann::json;

struct Line {
  const std::string* path;
  int64_t number;
};

const Json& field(const Json& j, const char* name, const Line& at) {
  const auto it = j.find(name);
  if (it == j.end() || it->is_null())
    fail("{}:{}: field \"{}\" is missing", *at.path, at.number, name);
  return *it;
}

std::string text_field(const Json& j, const char* name, const Line& at) {
  const Json& v = field(j, name, at);
  if (!v.is_string()) fail("{}:{}: field \"{}\" is not a string", *at.path, at.number, name);
  return v.get<std::string>();
}

int64_t int_field(const Json& j, const char* name, const Line& at) {
  const Json& v = field(j, name, at);
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_string()) {  // HellaSwag stores its label as a string
    const std::string s = v.get<std::string>();
    char* end = nullptr;
    const long long n = std::strtoll(s.c_str(), &end, 10);
    if (!s.empty() && end && *end == '\0') return n;
  }
  fail("{}:{}: field \"{}\" is not an integer", *at.path, at.number, name);
}

std::vector<std::string> strings_field(const Json& j, const char* name, const Line& at) {
  const Json& v = field(j, name, at);
  if (!v.is_array()) fail("{}:{}: field \"{}\" is not a list", *at.path, at.number, name);
  std::vector<std::string> out;
  for (const auto& e : v) {
    if (!e.is_string())
      fail("{}:{}: field \"{}\" holds a non-string", *at.path, at.number, name);
    out.push_back(e.get<std::string>());
  }
  return out;
}

std::string lstrip(const std::string& s) {
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

TaskItem parse_item(const std::string& task, const Json& j, const Line& at) {
  TaskItem item;
  if (task == "arc_easy") {
    item.context = "Question: " + text_field(j, "question", at) + "\nAnswer:";
    const Json& choices = field(j, "choices", at);
    if (!choices.is_object()) fail("{}:{}: field \"choices\" is not an object", *at.path, at.number);
    const auto texts = strings_field(choices, "text", at);
    const auto labels = strings_field(choices, "label", at);
    if (texts.size() != labels.size() || texts.empty())
      fail("{}:{}: choices.text and choices.label differ in length", *at.path, at.number);
    const std::string key = text_field(j, "answerKey", at);
    item.gold = -1;
    for (size_t k = 0; k < labels.size(); ++k) {
      if (labels[k] == key) item.gold = int64_t(k);
      item.continuations.push_back(" " + texts[k]);
    }
    if (item.gold < 0)
      fail("{}:{}: answerKey \"{}\" is not among choices.label", *at.path, at.number, key);
  } else if (task == "hellaswag") {
    const std::string ctx = text_field(j, "activity_label", at) + ": " + text_field(j, "ctx_a", at) +
                            " " + python_capitalize(text_field(j, "ctx_b", at));
    item.context = hellaswag_clean(ctx);
    // (" " + a temporary string trips GCC 12's false -Wrestrict here)
    for (const auto& e : strings_field(j, "endings", at))
      item.continuations.push_back(std::string(" ").append(hellaswag_clean(e)));
    item.gold = int_field(j, "label", at);
  } else if (task == "piqa") {
    item.context = "Question: " + text_field(j, "goal", at) + "\nAnswer:";
    item.continuations = {" " + text_field(j, "sol1", at), " " + text_field(j, "sol2", at)};
    item.gold = int_field(j, "label", at);
  } else if (task == "sciq") {
    item.context = lstrip(text_field(j, "support", at)) + "\nQuestion: " +
                   text_field(j, "question", at) + "\nAnswer:";
    item.continuations = {" " + text_field(j, "distractor1", at),
                          " " + text_field(j, "distractor2", at),
                          " " + text_field(j, "distractor3", at),
                          " " + text_field(j, "correct_answer", at)};
    item.gold = 3;
  } else if (task == "lambada_openai" || task == "cloze") {
    const std::string text = text_field(j, "text", at);
    const size_t space = text.rfind(' ');
    if (space == std::string::npos || space + 1 >= text.size())
      fail("{}:{}: field \"text\" has no last word after a space", *at.path, at.number);
    item.context = text.substr(0, space);
    item.continuations = {text.substr(space)};
    item.gold = 0;
  } else if (task == "continuation") {
    item.context = text_field(j, "context", at);
    for (const auto& e : strings_field(j, "choices", at)) item.continuations.push_back(" " + e);
    item.gold = int_field(j, "label", at);
  } else {
    fail("unknown task {}", task);
  }
  if (item.gold < 0 || item.gold >= int64_t(item.continuations.size()))
    fail("{}:{}: gold label {} is out of range for {} choices", *at.path, at.number, item.gold,
         item.continuations.size());
  return item;
}

int64_t characters(const std::string& s) {  // UTF-8 code points
  int64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

}  // namespace

const std::vector<std::string>& task_names() {
  static const std::vector<std::string> names = {"arc_easy", "hellaswag", "piqa", "sciq",
                                                 "lambada_openai", "cloze", "continuation"};
  return names;
}

bool is_task_name(const std::string& name) {
  for (const auto& n : task_names())
    if (n == name) return true;
  return false;
}

std::string python_capitalize(const std::string& text) {
  std::string out = text;
  for (size_t i = 0; i < out.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(out[i]);
    if (c < 0x80) out[i] = char(i == 0 ? std::toupper(c) : std::tolower(c));
  }
  return out;
}

std::string hellaswag_clean(const std::string& text) {
  // strip
  size_t b = 0, e = text.size();
  while (b < e && std::isspace(static_cast<unsigned char>(text[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(text[e - 1]))) --e;
  std::string s = text.substr(b, e - b);
  // " [title]" → ". "
  std::string t;
  for (size_t i = 0; i < s.size();) {
    if (s.compare(i, 8, " [title]") == 0) {
      t += ". ";
      i += 8;
    } else {
      t += s[i++];
    }
  }
  // drop "[...]" spans (shortest match, as re.sub("\\[.*?\\]", ""); '.' stops at newlines)
  std::string u;
  for (size_t i = 0; i < t.size();) {
    if (t[i] == '[') {
      size_t j = i + 1;
      while (j < t.size() && t[j] != ']' && t[j] != '\n') ++j;
      if (j < t.size() && t[j] == ']') {
        i = j + 1;
        continue;
      }
    }
    u += t[i++];
  }
  // "  " → " " (one left-to-right pass, as str.replace)
  std::string v;
  for (size_t i = 0; i < u.size();) {
    if (u.compare(i, 2, "  ") == 0) {
      v += ' ';
      i += 2;
    } else {
      v += u[i++];
    }
  }
  return v;
}

TaskData load_task(const std::string& name, const std::string& path, int64_t limit) {
  if (!is_task_name(name)) fail("unknown task \"{}\"", name);
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open the {} task file", path, name);
  TaskData task;
  task.name = name;
  task.path = path;
  task.lambada = name == "lambada_openai" || name == "cloze";
  std::string line;
  int64_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    bool blank = true;
    for (char c : line) blank = blank && std::isspace(static_cast<unsigned char>(c));
    if (blank) continue;
    Json j = Json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object())
      fail("{}:{}: not a JSON object", path, number);
    task.items.push_back(parse_item(name, j, Line{&path, number}));
    if (limit > 0 && int64_t(task.items.size()) >= limit) break;
  }
  if (task.items.empty()) fail("{}: no items in the {} task file", path, name);
  return task;
}

std::vector<Request> task_requests(const TaskData& task, const BpeTokenizer& tokenizer) {
  std::vector<Request> requests;
  const auto ids = [&](const std::string& s) {
    const auto u = tokenizer.encode(s);
    return std::vector<int32_t>(u.begin(), u.end());
  };
  for (const auto& item : task.items) {
    const auto context = ids(item.context);
    for (const auto& c : item.continuations) {
      Request r;
      r.context = context;
      r.continuation = ids(c);
      r.greedy = task.lambada;
      requests.push_back(std::move(r));
    }
  }
  return requests;
}

TaskResult task_metrics(const TaskData& task, const std::vector<Score>& scores) {
  TaskResult result;
  result.name = task.name;
  result.items = int64_t(task.items.size());
  size_t k = 0;
  double correct = 0, correct_norm = 0, loglik = 0;
  int64_t tokens = 0;
  for (const auto& item : task.items) {
    int64_t best = 0, best_norm = 0;
    double best_ll = -INFINITY, best_ll_norm = -INFINITY;
    for (size_t c = 0; c < item.continuations.size(); ++c, ++k) {
      const Score& s = scores[k];
      finite_or_fail(s.loglik, fmt::format("{}: item {} choice {} log-likelihood", task.name,
                                           &item - task.items.data(), c));
      const double norm = s.loglik / double(std::max<int64_t>(1, characters(item.continuations[c])));
      if (s.loglik > best_ll) best_ll = s.loglik, best = int64_t(c);
      if (norm > best_ll_norm) best_ll_norm = norm, best_norm = int64_t(c);
      if (task.lambada) {
        correct += s.greedy;
        loglik += s.loglik;
        tokens += s.tokens;
      }
    }
    if (!task.lambada) {
      correct += best == item.gold;
      correct_norm += best_norm == item.gold;
    }
  }
  const double n = double(std::max<int64_t>(1, result.items));
  result.acc = correct / n;
  result.acc_norm = task.lambada ? result.acc : correct_norm / n;
  if (task.lambada) result.perplexity = std::exp(-loglik / double(std::max<int64_t>(1, tokens)));
  return result;
}

template <typename T>
TaskResult run_task(Model<T>& model, const BpeTokenizer& tokenizer, const TaskData& task,
                    int64_t batch, const ProgressCallback& progress, Scoring scoring) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto requests = task_requests(task, tokenizer);
  const int64_t items = int64_t(task.items.size()), total = int64_t(requests.size());
  ProgressCallback in_items;
  if (progress)
    in_items = [&](int64_t done, int64_t) { progress(done * items / std::max<int64_t>(1, total), items); };
  const auto scores = score_requests(model, requests, batch, scoring, in_items);
  TaskResult result = task_metrics(task, scores);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

template TaskResult run_task<float>(Model<float>&, const BpeTokenizer&, const TaskData&, int64_t,
                                    const ProgressCallback&, Scoring);
template TaskResult run_task<double>(Model<double>&, const BpeTokenizer&, const TaskData&, int64_t,
                                     const ProgressCallback&, Scoring);

}  // namespace sps::eval
