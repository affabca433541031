#include "serve/scheduler.h"

#include <algorithm>
#include <cmath>

#include "infer/stop_rule.h"
#include "util/error.h"
#include "util/process_stats.h"

namespace sps::serve {

// ---- Job --------------------------------------------------------------------------------

Job::Taken Job::take(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, timeout, [&] { return !updates_.empty() || prompt_logprobs_ || finished_; });
  Taken t;
  t.updates.assign(std::make_move_iterator(updates_.begin()), std::make_move_iterator(updates_.end()));
  updates_.clear();
  t.prompt_logprobs = std::move(prompt_logprobs_);
  prompt_logprobs_.reset();
  t.finished = finished_ && updates_.empty();
  t.cancelled = cancelled_;
  return t;
}

void Job::cancel() {
  cancelled_ = true;
}

void Job::post(ChoiceUpdate update) {
  {
    std::lock_guard lock(mutex_);
    if (update.finished && ++choices_finished_ == n) finished_ = true;
    updates_.push_back(std::move(update));
  }
  changed_.notify_all();
}

void Job::post_prompt_logprobs(std::vector<TokenLogprob> logprobs) {
  {
    std::lock_guard lock(mutex_);
    prompt_logprobs_ = std::move(logprobs);
  }
  changed_.notify_all();
}

void Job::finish_all() {
  {
    std::lock_guard lock(mutex_);
    finished_ = true;
  }
  changed_.notify_all();
}

// ---- Scheduler --------------------------------------------------------------------------

struct Scheduler::Row {
  std::shared_ptr<Job> job;
  int64_t choice = 0;
  Rng rng{0};
  RowStop stop;
  int32_t next_token = 0;
  double last_token_at = 0;
  bool done = false;
};

Scheduler::Scheduler(Model<float>& model, const BpeTokenizer& tokenizer, SchedulerOptions options,
                     Metrics& metrics)
    : model_(model), tokenizer_(tokenizer), options_(options), metrics_(metrics) {
  const ModelConfig& c = model.config();
  SPS_ASSERT(options_.rows >= 1 && options_.context >= 1 && options_.queue_limit >= 0);
  const DecoderShapes shapes = decoder_shapes(c, options_);
  max_prompt_ = shapes.max_prompt;
  // All of it checked at once (each part alone may fit where the whole does not), then
  // allocated.
  model_.backend().require(memory_bytes(model_, options_),
                           fmt::format("the KV caches, decode buffers and prefill activations "
                                       "of {} rows × {} positions",
                                       options_.rows, options_.context));
  decoder_ = std::make_unique<Decoder<float>>(model_, shapes.main);
  prefill_decoder_ = std::make_unique<Decoder<float>>(model_, shapes.prefill);
  score_decoder_ = std::make_unique<Decoder<float>>(model_, shapes.scoring);
  model_.reserve(1, max_prompt_, /*training=*/false);  // the longest prompt's prefill
  step_tokens_.assign(options_.rows, 0);
  thread_ = std::thread([this] { run(); });
}

Scheduler::DecoderShapes Scheduler::decoder_shapes(const ModelConfig& config,
                                                   const SchedulerOptions& options) {
  DecoderShapes s;
  s.max_prompt = std::min(options.context, config.block_size);
  // Every row holds up to `context` positions: a prompt of at most max_prompt tokens, then
  // the generated ones.
  s.main.batch = options.rows;
  s.main.max_prompt_tokens = s.max_prompt;
  s.main.max_new_tokens = options.context - s.max_prompt;
  s.prefill.batch = 1;
  s.prefill.max_prompt_tokens = s.max_prompt;
  // Echo requests score their prompt token by token in extends that end at an EOS.
  s.scoring.batch = 1;
  s.scoring.max_prompt_tokens = 1;
  s.scoring.max_new_tokens = s.max_prompt;
  s.scoring.max_chunk_tokens = kScoreChunk;
  return s;
}

__int128 Scheduler::memory_bytes(const Model<float>& model, const SchedulerOptions& options) {
  const DecoderShapes s = decoder_shapes(model.config(), options);
  return Decoder<float>::memory_bytes(model, s.main) +
         Decoder<float>::memory_bytes(model, s.prefill) +
         Decoder<float>::memory_bytes(model, s.scoring) +
         model.inference_activation_bytes(1, s.max_prompt);
}

Scheduler::~Scheduler() { drain(std::chrono::milliseconds(0)); }

bool Scheduler::submit(const std::vector<std::shared_ptr<Job>>& jobs) {
  for (const auto& job : jobs) {
    SPS_ASSERT(job->n >= 1 && job->n <= options_.rows && job->sampler);
    SPS_ASSERT(!job->prompt.empty() && int64_t(job->prompt.size()) <= max_prompt_);
    SPS_ASSERT(int64_t(job->prompt.size()) + job->max_tokens <= options_.context);
  }
  {
    std::lock_guard lock(mutex_);
    if (draining_ || int64_t(queue_.size() + jobs.size()) > options_.queue_limit) return false;
    const double now = now_seconds();
    for (const auto& job : jobs) {
      job->submitted_at_ = now;
      queue_.push_back(job);
    }
  }
  wake_.notify_all();
  return true;
}

void Scheduler::drain(std::chrono::milliseconds grace) {
  std::unique_lock lock(mutex_);
  draining_ = true;
  wake_.notify_all();
  // The thread signals wake_ after every turn; wait for it to go idle or the grace to pass.
  const auto deadline = std::chrono::steady_clock::now() + grace;
  wake_.wait_until(lock, deadline, [&] { return queue_.empty() && active_rows_ == 0; });
  stop_ = true;
  lock.unlock();
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Gauges Scheduler::gauges() const {
  Gauges g;
  {
    std::lock_guard lock(mutex_);
    g.queue_length = int64_t(queue_.size());
  }
  g.active_rows = active_rows_;
  g.rows = options_.rows;
  g.kv_bytes_in_use = kv_bytes_in_use_;
  g.kv_bytes_allocated = decoder_->cache().allocated_bytes();
  return g;
}

void Scheduler::run() {
  model_.backend().use_on_this_thread();  // every op of the model runs on this thread
  while (true) {
    std::vector<std::shared_ptr<Job>> admitted, dropped;
    bool stopping = false;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || !queue_.empty() || !rows_.empty(); });
      stopping = stop_;
      if (stopping) {
        // Past the grace period: every job still here is cancelled.
        for (auto& job : queue_) dropped.push_back(job);
        queue_.clear();
      } else {
        // Jobs are admitted in arrival order while their choices fit the free rows and the
        // turn's prefill budget (the first one always fits the budget).
        int64_t free_rows = options_.rows - int64_t(rows_.size()), budget = options_.prefill_tokens_per_turn;
        bool first = true;
        while (!queue_.empty()) {
          const auto& job = queue_.front();
          if (job->cancelled()) {
            dropped.push_back(job);
            queue_.pop_front();
            continue;
          }
          const int64_t tokens = int64_t(job->prompt.size());
          if (job->n > free_rows || (!first && tokens > budget)) break;
          free_rows -= job->n;
          budget -= tokens;
          first = false;
          admitted.push_back(job);
          queue_.pop_front();
        }
        // Counted as active while they are prefilled, so drain() does not see an idle turn.
        active_rows_ = int64_t(rows_.size() + admitted.size());
      }
    }
    for (auto& job : dropped) {
      job->cancel();
      job->finish_all();
      ++metrics_.cancelled;
    }
    if (stopping)
      for (Row& row : rows_) row.job->cancel();
    for (auto& job : admitted) admit(job);
    decode_turn();
    active_rows_ = int64_t(rows_.size());
    // Only the live rows: a retired row's cache keeps its lengths until the row is reused.
    kv_bytes_in_use_ = decoder_->cache().used_bytes(int64_t(rows_.size()));
    wake_.notify_all();  // drain() waits for an idle turn
    if (stopping && rows_.empty()) {
      std::lock_guard lock(mutex_);
      if (queue_.empty()) break;
    }
  }
}

void Scheduler::admit(std::shared_ptr<Job> job) {
  ++metrics_.completions;
  metrics_.prompt_tokens += job->prompt.size();
  if (job->score_prompt) score_prompt(*job);
  if (job->max_tokens == 0) {
    job->finish_all();
    return;
  }
  const int64_t P = int64_t(job->prompt.size()), L = model_.config().n_layer;
  // Layers of this prompt's forward that cost about one turn's prefill budget.
  const int64_t layers_per_turn =
      std::max<int64_t>(1, L * options_.prefill_tokens_per_turn / std::max<int64_t>(P, 1));
  int64_t layers_done = 0;
  prefill_decoder_->prefill(job->prompt.data(), P, [&] {
    if (++layers_done % layers_per_turn != 0 || rows_.empty()) return;
    decode_turn();
    ++metrics_.decode_steps_during_prefill;
  });
  const StopRule rule{.eos_token_id = model_.config().eos_token_id,
                      .stop_at_eos = job->stop_at_eos,
                      .max_new_tokens = job->max_tokens,
                      .stop_strings = job->stop};
  for (int64_t i = 0; i < job->n; ++i) {
    const int64_t r = int64_t(rows_.size());
    decoder_->fork(r, *prefill_decoder_, 0);
    rows_.push_back(Row{.job = job,
                        .choice = i,
                        .rng = TokenSampler::row_rng(job->sampler->options().seed, i),
                        .stop = RowStop(rule, &tokenizer_)});
  }
}

// The prompt's own log-probabilities: token 0 predicted from EOS (the start of a document,
// as `sps eval` scores a text), token i from the tokens before it. The prompt is fed in
// extends that end at an EOS (a document may only end at an extend's last token).
void Scheduler::score_prompt(Job& job) {
  const ModelConfig& c = model_.config();
  const std::vector<int32_t>& p = job.prompt;
  const int64_t n = int64_t(p.size()), V = c.vocab_size;
  std::vector<TokenLogprob> out;
  const int32_t eos = c.eos_token_id;
  score_decoder_->prefill(&eos, 1);
  out.push_back(token_logprob(score_decoder_->logits(), p[0], std::max<int64_t>(job.logprobs, 0)));
  // Feed p[0 .. n-1) so that logits after p[i-1] score p[i].
  for (int64_t i = 0; i + 1 < n;) {
    int64_t K = 0;
    while (K < kScoreChunk && i + K + 1 < n) {
      ++K;
      if (p[i + K - 1] == eos) break;
    }
    score_decoder_->extend(p.data() + i, K);
    for (int64_t k = 0; k < K; ++k)
      out.push_back(token_logprob(score_decoder_->logits() + k * V, p[i + k + 1],
                                  std::max<int64_t>(job.logprobs, 0)));
    i += K;
  }
  job.post_prompt_logprobs(std::move(out));
}

TokenLogprob Scheduler::token_logprob(const float* logits, int32_t id, int64_t top) const {
  return ::sps::token_logprob(logits, model_.config().vocab_size, id, top, tokenizer_.vocab_size());
}

// Every live row samples its next token from its logits row, exactly as the generator does.
void Scheduler::sample_rows() {
  const ModelConfig& c = model_.config();
  const int64_t V = c.vocab_size, n = int64_t(rows_.size());
  const double now = now_seconds();
  std::vector<const TokenSampler*> samplers(n);
  std::vector<Rng*> rngs(n);
  std::vector<uint8_t> cancelled(n);
  std::vector<int32_t> tokens(n);
  for (int64_t r = 0; r < n; ++r) {
    samplers[r] = rows_[r].job->sampler.get();
    rngs[r] = &rows_[r].rng;
    cancelled[r] = rows_[r].job->cancelled();
  }
  TokenSampler::next_tokens(*decoder_, n, samplers.data(), rngs.data(), tokens.data(),
                            cancelled.data());
  for (int64_t r = 0; r < n; ++r) {
    Row& row = rows_[r];
    Job& job = *row.job;
    if (cancelled[r]) {
      row.done = true;
      continue;
    }
    const int32_t token = tokens[r];
    ChoiceUpdate u;
    u.choice = row.choice;
    u.tokens.push_back(job.logprobs >= 0
                           ? token_logprob(decoder_->logits() + r * V, token, job.logprobs)
                           : TokenLogprob{token, 0, {}});
    ++metrics_.generated_tokens;
    if (row.stop.generated() == 0)
      metrics_.time_to_first_token.observe(now - job.submitted_at_);
    else
      metrics_.inter_token_latency.observe(now - row.last_token_at);
    row.last_token_at = now;
    u.text = row.stop.push(token);
    if (row.stop.stopped()) {
      u.reason = row.stop.reason();
      u.finished = true;
      row.done = true;
    }
    row.next_token = token;
    job.post(std::move(u));
  }
}

// Every live row samples, finished rows leave, and the rest advance one decode step.
void Scheduler::decode_turn() {
  sample_rows();
  retire_rows();
  if (rows_.empty()) return;
  for (size_t i = 0; i < rows_.size(); ++i) step_tokens_[i] = rows_[i].next_token;
  decoder_->extend(step_tokens_.data(), 1, int64_t(rows_.size()));
}

// Finished and cancelled rows leave at once; the last live row moves into each hole so the
// live rows stay a prefix of the decoder's rows.
void Scheduler::retire_rows() {
  for (size_t r = 0; r < rows_.size();) {
    if (!rows_[r].done) {
      ++r;
      continue;
    }
    Job& job = *rows_[r].job;
    if (job.cancelled()) {
      // A cancelled job is over for its client: count it once, close it.
      bool last_row_of_job = true;
      for (size_t q = 0; q < rows_.size(); ++q)
        if (q != r && rows_[q].job.get() == &job) last_row_of_job = false;
      if (last_row_of_job) {
        ++metrics_.cancelled;
        job.finish_all();
      }
    }
    const size_t last = rows_.size() - 1;
    if (r != last) {
      decoder_->move_row(int64_t(r), int64_t(last));
      rows_[r] = std::move(rows_[last]);
    }
    rows_.pop_back();
  }
}

}  // namespace sps::serve
