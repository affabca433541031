// Model.generate and its streaming iterator: the generator of `sps generate`
// (infer/generator.h) on the KV cache, a step at a time without the GIL.
#include <pybind11/stl.h>

#include "infer/generator.h"
#include "python/model.h"

namespace sps::python {

namespace {

struct GenerateArgs {
  int64_t max_new_tokens = 128;
  double temperature = 0, top_p = 1;
  int64_t top_k = 0;
  uint64_t seed = 0;
  std::vector<std::string> stop;
  std::vector<int32_t> forbid;
  bool ignore_eos = false;
  std::string truncate = "none";
  int64_t logprobs = -1;
  int64_t prefill_rows = 0;
};

py::object logprob_object(const TokenLogprob& t) {
  py::list top;
  for (const auto& [id, lp] : t.top) top.append(py::make_tuple(id, lp));
  return py::make_tuple(t.id, t.logprob, top);
}

py::dict generation_dict(const Generation& g, bool with_logprobs) {
  py::dict d;
  d["text"] = py::bytes(g.text);
  std::vector<int32_t> tokens = g.tokens, prompt = g.prompt;
  d["tokens"] = py::array_t<int32_t>(py::ssize_t(tokens.size()), tokens.data());
  d["prompt_tokens"] = py::array_t<int32_t>(py::ssize_t(prompt.size()), prompt.data());
  d["stop_reason"] = stop_reason_name(g.stop_reason);
  d["truncated"] = g.truncated;
  if (with_logprobs) {
    py::list lps;
    for (const TokenLogprob& t : g.logprobs) lps.append(logprob_object(t));
    d["logprobs"] = lps;
  }
  return d;
}

py::dict stats_dict(const GenerationStats& s) {
  py::dict d;
  d["batch"] = s.batch;
  d["prompt_tokens"] = s.prompt_tokens;
  d["generated_tokens"] = s.generated_tokens;
  d["decode_steps"] = s.decode_steps;
  d["prefill_seconds"] = s.prefill_seconds;
  d["decode_seconds"] = s.decode_seconds;
  d["decode_tokens_per_second"] =
      s.decode_seconds > 0 ? double(s.decode_steps * s.batch) / s.decode_seconds : 0.0;
  d["kv_cache_allocated_bytes"] = s.kv_cache_allocated_bytes;
  d["kv_cache_used_bytes"] = s.kv_cache_used_bytes;
  return d;
}

// One generation in progress. The model's lock is taken for the prefill and each step, not
// in between, so the stream may be consumed at any pace.
class GenerationStream {
 public:
  GenerationStream(std::shared_ptr<PyModel> model, const py::sequence& prompts,
                   const GenerateArgs& a)
      : model_(std::move(model)) {
    if (a.truncate != "none" && a.truncate != "left")
      fail("truncate: expected \"none\" or \"left\", got \"{}\"", a.truncate);
    if (a.logprobs < -1) fail("logprobs: expected None or a count >= 0, got {}", a.logprobs);
    if (a.prefill_rows < 0 || a.prefill_rows > 4096)  // `sps generate --prefill-rows`'s range
      fail("prefill_rows: expected 0 (as many as fit) to 4096, got {}", a.prefill_rows);
    if (py::isinstance<py::str>(prompts) || py::isinstance<py::bytes>(prompts))
      fail("prompts: expected a list of prompts (str or token ids), got one string");
    if (prompts.size() == 0) fail("prompts: an empty batch (no prompts)");
    bool text = !a.stop.empty();
    for (const py::handle p : prompts)
      text = text || py::isinstance<py::str>(p) || py::isinstance<py::bytes>(p);
    // As `sps generate`: only the tokenizer's ids are emitted (PREDICT and PAD lie beyond);
    // prompts of ids without a tokenizer may get any id of V but PAD and PREDICT, and no text.
    tokenizer_ = text ? model_->tokenizer() : model_->tokenizer_if_any();
    for (size_t i = 0; i < prompts.size(); ++i)
      prompts_.push_back(ids_of(*model_, prompts[i], fmt::format("prompts[{}]", i)));
    GenerationOptions o;
    o.max_new_tokens = a.max_new_tokens;
    o.sampling.temperature = a.temperature;
    o.sampling.top_k = a.top_k;
    o.sampling.top_p = a.top_p;
    o.sampling.seed = a.seed;
    o.sampling.forbidden = a.forbid;
    if (tokenizer_) o.sampling.allowed_ids = tokenizer_->vocab_size();
    o.stop_strings = a.stop;
    o.stop_at_eos = !a.ignore_eos;
    o.truncate_left = a.truncate == "left";
    o.logprobs = a.logprobs;
    o.prefill_rows = a.prefill_rows;
    generator_ = std::make_unique<Generator>(model_->model(), tokenizer_.get(), o);
  }

  // The tokens of the next step as (row, id, text bytes, last, logprob or None); None when
  // the generation is over. The first call prefills.
  py::object step() {
    const bool stepped = without_gil([&](const StopScope& scope) { return advance(scope); });
    if (!stepped) return py::none();
    py::list out;
    for (const GeneratedToken& t : run_->step_tokens())
      out.append(py::make_tuple(t.row, t.id, py::bytes(t.text.data(), t.text.size()), t.last,
                                t.logprob ? logprob_object(*t.logprob) : py::none()));
    return out;
  }

  // Runs to the end (stopping between steps when asked); returns every row's generation.
  py::list finish() {
    without_gil([&](const StopScope& scope) {
      while (advance(scope)) {
      }
    });
    return results();
  }

  py::list results() const {
    py::list out;
    if (run_)
      for (const Generation& g : run_->results())
        out.append(generation_dict(g, generator_->options().logprobs >= 0));
    return out;
  }
  py::dict stats() const { return stats_dict(run_ ? run_->stats() : GenerationStats{}); }

 private:
  // Prefills, or takes one step; false when there is nothing left to do.
  bool advance(const StopScope& scope) {
    scope.throw_if_stopped();
    const std::lock_guard<std::mutex> lock(model_->mutex());
    if (!run_) {
      run_ = std::make_unique<GenerationRun>(*generator_, prompts_);
      scope.throw_if_stopped();
    }
    if (run_->done()) return false;
    run_->step();
    return true;
  }

  std::shared_ptr<PyModel> model_;
  std::shared_ptr<BpeTokenizer> tokenizer_;
  std::vector<std::vector<int32_t>> prompts_;
  std::unique_ptr<Generator> generator_;
  std::unique_ptr<GenerationRun> run_;
};

}  // namespace

void register_generation(py::module_& m) {
  py::class_<GenerationStream>(m, "GenerationStream")
      .def(py::init([](std::shared_ptr<PyModel> model, const py::sequence& prompts,
                       int64_t max_new_tokens, double temperature, int64_t top_k, double top_p,
                       uint64_t seed, std::vector<std::string> stop, std::vector<int32_t> forbid,
                       bool ignore_eos, std::string truncate, int64_t logprobs,
                       int64_t prefill_rows) {
             GenerateArgs a;
             a.max_new_tokens = max_new_tokens;
             a.temperature = temperature;
             a.top_k = top_k;
             a.top_p = top_p;
             a.seed = seed;
             a.stop = std::move(stop);
             a.forbid = std::move(forbid);
             a.ignore_eos = ignore_eos;
             a.truncate = std::move(truncate);
             a.logprobs = logprobs;
             a.prefill_rows = prefill_rows;
             return std::make_unique<GenerationStream>(std::move(model), prompts, a);
           }),
           py::arg("model"), py::arg("prompts"), py::arg("max_new_tokens"), py::arg("temperature"),
           py::arg("top_k"), py::arg("top_p"), py::arg("seed"), py::arg("stop"), py::arg("forbid"),
           py::arg("ignore_eos"), py::arg("truncate"), py::arg("logprobs"), py::arg("prefill_rows"))
      .def("step", &GenerationStream::step)
      .def("finish", &GenerationStream::finish)
      .def("results", &GenerationStream::results)
      .def("stats", &GenerationStream::stats);
}

}  // namespace sps::python
