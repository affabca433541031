#include "train/trainer.h"

#include <fcntl.h>
#include <omp.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "data/sampler.h"
#include "data/token_file.h"
#include "ops/backend.h"
#include "train/batch_documents.h"
#include "train/checkpoint.h"
#include "train/checkpoint_policy.h"
#include "train/metrics_file.h"
#include "train/plan.h"
#include "train/resume.h"
#include "train/training_data.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/process_stats.h"
#include "util/progress.h"
#include "util/rng.h"
#include "util/stop_signals.h"
#include "util/writer_lock.h"

namespace sps {

namespace fs = std::filesystem;

double pooled_nll(Model<float>& model, const TokenFile& file, const std::vector<int64_t>& starts,
                  int64_t micro_batch, std::vector<int32_t>& x, std::vector<int32_t>& y,
                  std::vector<int32_t>& row, const ProgressCallback& progress) {
  const int64_t T = model.config().block_size, V = model.config().vocab_size;
  double nll_sum = 0;
  int64_t kept = 0;
  for (size_t first = 0; first < starts.size(); first += size_t(micro_batch)) {
    const int64_t b = std::min<int64_t>(micro_batch, int64_t(starts.size() - first));
    for (int64_t k = 0; k < b; ++k) {
      file.read(starts[first + k], T + 1, row.data(), V);
      std::copy(row.begin(), row.begin() + T, x.begin() + k * T);
      std::copy(row.begin() + 1, row.begin() + T + 1, y.begin() + k * T);
    }
    const StepResult r = model.forward(x.data(), y.data(), b, T);
    nll_sum += r.nll_sum;
    kept += r.kept;
    if (progress) progress(int64_t(first) + b, int64_t(starts.size()));
  }
  return kept > 0 ? nll_sum / double(kept) : 0.0;
}

std::vector<int64_t> validation_windows(int64_t file_tokens, int64_t block_size,
                                        int64_t eval_total_tokens, uint64_t seed) {
  const int64_t starts = file_tokens - block_size;  // p in [0, N − T − 1]
  SPS_ASSERT(starts >= 1);
  const int64_t budget = std::min(eval_total_tokens, file_tokens - 1);
  const int64_t count = std::max<int64_t>(1, (budget + block_size - 1) / block_size);
  Rng rng(seed);
  std::vector<int64_t> result(count);
  for (auto& p : result) p = int64_t(rng.below(uint64_t(starts)));
  return result;
}

template <typename T>
StepOutcome train_step(Model<T>& model, AdamW& optimizer, Collective& collective,
                       int64_t micro_batch, int64_t accumulation, const BatchSource& batches,
                       std::vector<int32_t>& x, std::vector<int32_t>& y, double lr,
                       double grad_clip, double vote) {
  const int64_t tokens = model.config().block_size;
  const int64_t P = model.params().total();
  const double scale = 1.0 / double(accumulation * collective.size());
  model.zero_grads();
  double stats[4] = {0, 0, 0, vote};  // Σ micro-batch losses, Σ nll, Σ kept, votes
  // The last micro-batch's backward sums the gradients between ranks as it finishes them.
  BucketedSum<T> gradient_sum(collective, model.backend(), model.grads(), P);
  for (int64_t m = 0; m < accumulation; ++m) {
    batches(m, x.data(), y.data());
    BackwardOptions<T> backward;
    if (collective.size() > 1 && m + 1 == accumulation)
      backward.gradients_done_from = [&](int64_t offset) { gradient_sum.done_from(offset); };
    const StepResult r =
        model.forward_backward(x.data(), y.data(), micro_batch, tokens, scale, backward);
    stats[0] += r.loss;
    stats[1] += r.nll_sum;
    stats[2] += double(r.kept);
  }
  if (collective.size() > 1) {
    collective.wait_for_sums();
    collective.allreduce_sum(stats, 4);
  }
  StepOutcome out;
  out.loss = stats[0] / double(accumulation * collective.size());
  out.nll_sum = stats[1];
  out.kept = int64_t(stats[2]);
  out.votes = stats[3];
  out.grad_norm = global_grad_norm(model.backend(), model.grads(), P);
  out.finite = std::isfinite(out.loss) && std::isfinite(out.grad_norm);
  if (!out.finite) return out;
  out.clip = clip_coefficient(out.grad_norm, grad_clip);
  optimizer.update(model.backend(), model.weights(), model.grads(), lr, out.clip);
  return out;
}

template StepOutcome train_step<float>(Model<float>&, AdamW&, Collective&, int64_t, int64_t,
                                       const BatchSource&, std::vector<int32_t>&,
                                       std::vector<int32_t>&, double, double, double);
template StepOutcome train_step<double>(Model<double>&, AdamW&, Collective&, int64_t, int64_t,
                                        const BatchSource&, std::vector<int32_t>&,
                                        std::vector<int32_t>&, double, double, double);

// ---- train(): the parts, in the order it calls them -----------------------------------

namespace {

// Lines on stdout and the progress on stderr, from rank 0 unless --quiet. An error unwinds
// the reporter first, so its message starts on a clean line.
ProgressOptions train_progress_options(bool talk) {
  ProgressOptions options;
  options.unit = "tokens";
  options.mode = talk ? ProgressMode::automatic : ProgressMode::off;
  return options;
}

struct Console {
  explicit Console(bool talk) : talk(talk), progress("train", train_progress_options(talk)) {}
  void say(const std::string& text) {
    if (talk) progress.print(stdout, text);
  }
  const bool talk;
  ProgressReporter progress;
};

// The backend of system.device (this process's GPU under several processes) and
// system.precision.
const ops::Backend<float>& training_backend(const TrainConfig& config,
                                            const Collective& collective) {
  return ops::backend_for(process_device(config.system.device, "system.device", collective),
                          ops::parse_precision(config.system.precision, "system.precision"));
}

// Several processes, one GPU each (system.device=cuda): the gradients are summed on the GPUs
// (NCCL) where every process can; otherwise, and for processes sharing a GPU
// (system.device=cuda:N), through host copies, and rank 0 says why.
void reduce_on_devices(const ops::Backend<float>& backend, const TrainConfig& config,
                       Collective& collective, Console& console) {
  if (collective.size() == 1 || backend.host_accessible()) return;
  std::string why = "every process is on " + config.system.device;
  if (ops::device_of_local_rank(config.system.device)) {
    ops::JobLink job;
    job.rank = collective.rank();
    job.size = collective.size();
    job.broadcast = [&](void* data, size_t bytes) {
      collective.broadcast(data, int64_t(bytes), 0);
    };
    job.all = [&](bool mine) {
      double votes = mine ? 1 : 0;
      collective.allreduce_sum(&votes, 1);
      return votes == double(collective.size());
    };
    std::unique_ptr<ops::DeviceAllReduce> device = backend.device_all_reduce(job, &why);
    if (device) {
      collective.use_device_all_reduce(std::move(device));
      return;
    }
  }
  console.say(fmt::format("note: gradients are summed through host copies ({})", why));
}

// The backend must hold what the plan counts before the model allocates: a run that cannot
// fit fails at once, in one line, instead of partway through.
void require_memory(const ops::Backend<float>& backend, const TrainPlan& plan,
                    const TrainConfig& config) {
  backend.require(__int128(plan.memory_bytes()),
                  fmt::format("{}: the run's weights, gradients, AdamW moments and activations "
                              "(per process; system.recompute_activations=true needs fewer)",
                              config.source));
}

// The first line of a run: what trains, where, and how the batch is split.
std::string run_header(const TrainConfig& config, const Model<float>& model, const TrainPlan& plan,
                       int64_t accumulation, int ranks) {
  const ModelConfig& mc = config.model;
  return fmt::format(
      "sps train {} → {}: {}{} ({:.2f}M parameters), {} steps × {} tokens, micro-batch {} × "
      "{} accumulation × {} process{}, {} thread{}",
      config.source, config.system.out_dir, mc.family,
      model.family().interleaved ? fmt::format(" w={}", mc.window_size) : "",
      double(plan.parameters) / 1e6, config.total_steps(), config.tokens_per_step(),
      config.training.micro_batch_size, accumulation, ranks, ranks == 1 ? "" : "es",
      omp_get_max_threads(), omp_get_max_threads() == 1 ? "" : "s");
}

// How many documents a global batch spans: said at the start, a warning on stderr when they
// are few (rank 0), and the metrics record of a run's start (null on a resume).
nlohmann::ordered_json report_documents_per_batch(const TrainConfig& config,
                                                  const TrainingData& data, int ranks,
                                                  bool resumed, Console& console) {
  const double documents =
      mean_documents_per_batch(data.train_file, config.model.eos_token_id, config, ranks);
  nlohmann::ordered_json record;
  if (!resumed) {
    record["step"] = 0;
    record["tokens"] = 0;
    record["documents_per_batch"] = documents;
  }
  console.say("documents: " + describe_documents_per_batch(documents, config));
  const std::string warning = few_documents_warning(documents);
  if (!warning.empty()) std::fprintf(stderr, "sps: warning: %s\n", warning.c_str());
  return record;
}

// A resumed run that had already reached training.max_tokens: nothing to train.
TrainSummary nothing_to_do(Console& console, const std::string& run_dir,
                           const TrainerState& state) {
  console.say(fmt::format("{} finished at step {} ({} tokens); nothing to do (raise "
                          "training.max_tokens to train on)",
                          run_dir, state.step, state.tokens));
  TrainSummary done;
  done.step = state.step;
  done.tokens = state.tokens;
  done.finished = true;
  return done;
}

// Says where a resumed run continues and what is not bit-identical about the continuation.
void report_resume(Console& console, const std::string& resumed_from, const TrainerState& state,
                   bool leader) {
  console.say(fmt::format("resumed from {} at step {} ({} tokens)", resumed_from, state.step,
                          state.tokens));
  if (state.reason == kImportedReason)
    console.say("an imported checkpoint: the weights, AdamW moments and step are the other "
                "trainer's; the data from here on come in sps's sampler order, not in the "
                "order that trainer would have read them");
  // A step's sums are split over the threads, so another thread count changes the last
  // bits of every step from here on: the run goes on correctly, but not bit-identically.
  if (leader && state.threads > 0 && state.threads != omp_get_max_threads())
    std::fprintf(stderr,
                 "sps: warning: %s was written with %d thread%s per process, this run has %d; "
                 "the continuation is not bit-identical to an uninterrupted run (set "
                 "system.threads=%d for that)\n",
                 resumed_from.c_str(), state.threads, state.threads == 1 ? "" : "s",
                 omp_get_max_threads(), state.threads);
}

// The optimizer steps and what happens at each step boundary: stop, evaluate, finish,
// checkpoint. It keeps the clock (evaluation time is not training time) and the sums of
// the current log interval.
class TrainingLoop {
 public:
  TrainingLoop(const TrainConfig& config, Collective& collective, const TrainOptions& options,
               Console& console, const TrainingData& data, Model<float>& model, AdamW& optimizer,
               TrainerState& state, MetricsFile& metrics)
      : config_(config), tc_(config.training), collective_(collective), options_(options),
        console_(console), data_(data), model_(model), optimizer_(optimizer), state_(state),
        metrics_(metrics), leader_(collective.rank() == 0), ranks_(collective.size()),
        evaluating_(tc_.eval_total_tokens > 0), A_(accumulation_steps(config, ranks_)),
        B_(tc_.micro_batch_size), T_(config.model.block_size),
        tokens_per_step_(config.tokens_per_step()), total_steps_(config.total_steps()), x_(B_ * T_),
        y_(B_ * T_), row_(T_ + 1),
        batches_([this](int64_t micro, int32_t* xs, int32_t* ys) { read_batch(micro, xs, ys); }) {
    if (options.take_signals) signals_.emplace();
  }

  // Steps until the run ends (the `final` checkpoint) or is stopped (`latest`).
  TrainSummary run();
  // Writes a metrics record and shows it to on_metrics.
  void record(const nlohmann::ordered_json& record);

 private:
  bool signal_received() const { return signals_ && signals_->requested(); }
  bool stop_due() const;
  bool evaluate_if_due();
  double evaluate();
  void checkpoint(const std::string& name, const char* reason);
  void stop();
  void finish(bool evaluated_here);
  StepOutcome step(double lr);
  void log_step(double lr, const StepOutcome& out);
  double tokens_per_second() const;
  // Fills micro-batch `micro` of the step from this rank's next windows.
  void read_batch(int64_t micro, int32_t* xs, int32_t* ys);

  const TrainConfig& config_;
  const TrainingSettings& tc_;
  Collective& collective_;
  const TrainOptions& options_;
  Console& console_;
  const TrainingData& data_;
  Model<float>& model_;
  AdamW& optimizer_;
  TrainerState& state_;
  MetricsFile& metrics_;
  const bool leader_;
  const int ranks_;
  const bool evaluating_;    // every rank keeps the schedule; rank 0 evaluates
  const int64_t A_, B_, T_;  // accumulation, micro-batch and block size, as in train_step
  const int64_t tokens_per_step_, total_steps_;

  std::optional<StopSignals> signals_;  // absent: the caller keeps SIGINT and SIGTERM
  std::vector<int32_t> x_, y_, row_;  // scratch of the steps and the evaluations
  const BatchSource batches_;         // read_batch
  int64_t first_step_ = 0;            // state.step when this invocation started
  double train_seconds_ = 0, interval_seconds_ = 0;
  int64_t interval_tokens_ = 0;
  double last_val_ = -1, stop_votes_ = 0;
  bool stop_asked_ = false;  // on_metrics returned false
  double mark_ = 0;  // when the training time counted so far ends
};

TrainSummary TrainingLoop::run() {
  TrainSummary summary;
  first_step_ = state_.step;
  console_.progress.skip(state_.tokens);  // a resumed run's tokens are not in its rate
  mark_ = now_seconds();
  for (;;) {
    // ---- step boundary: state.step steps done ----
    if (stop_due()) {
      stop();
      summary.interrupted = true;
      break;
    }
    const bool evaluated_here = evaluate_if_due();
    if (state_.step >= total_steps_) {
      finish(evaluated_here);
      summary.finished = true;
      break;
    }
    if (state_.step > 0)
      for (const auto& [name, reason] : due_checkpoints(config_, state_)) checkpoint(name, reason);

    // ---- step state.step ----
    const double lr = scheduled_learning_rate(state_.step, tokens_per_step_, tc_.max_tokens,
                                              config_.optimizer, config_.scheduler);
    const StepOutcome out = step(lr);
    log_step(lr, out);
  }
  console_.progress.finish();
  if (ranks_ > 1) collective_.barrier();
  summary.step = state_.step;
  summary.tokens = state_.tokens;
  summary.val_nll = last_val_;
  summary.tokens_per_second = tokens_per_second();
  summary.signal = signals_ ? signals_->signal() : 0;
  return summary;
}

// A signal or on_metrics (with several processes, by the votes the last step exchanged; in
// one, whenever they came) or --stop-after ends the run early at this boundary; a finished
// run ends by finish() instead.
bool TrainingLoop::stop_due() const {
  const int64_t steps_now = state_.step - first_step_;
  return state_.step < total_steps_ &&
         (stop_votes_ > 0 || (ranks_ == 1 && (stop_asked_ || signal_received())) ||
          (options_.stop_after_steps > 0 && steps_now >= options_.stop_after_steps));
}

// Evaluates when the schedule says so; returns whether it did.
bool TrainingLoop::evaluate_if_due() {
  if (!evaluating_ || state_.tokens < state_.next_eval_tokens) return false;
  mark_ += evaluate();  // evaluation time is not training time
  while (state_.next_eval_tokens <= state_.tokens)
    state_.next_eval_tokens =
        tc_.eval_interval_tokens > 0 ? state_.next_eval_tokens + tc_.eval_interval_tokens : kNever;
  return true;
}

// The validation NLL (rank 0), written to the metrics and said; returns the seconds it took.
double TrainingLoop::evaluate() {
  const double t0 = now_seconds();
  if (leader_) {
    last_val_ = finite_or_fail(
        pooled_nll(model_, *data_.validation.file, data_.validation.windows, B_, x_, y_, row_),
        fmt::format("step {}: validation NLL", state_.step));
    const double seconds = now_seconds() - t0;
    nlohmann::ordered_json record;
    record["step"] = state_.step;
    record["tokens"] = state_.tokens;
    record["val_nll"] = last_val_;
    record["eval_seconds"] = seconds;
    this->record(record);
    console_.say(fmt::format("step {}/{}  {} tokens  val NLL {:.4f}  ({} windows, {:.1f} s)",
                             state_.step, total_steps_, state_.tokens, last_val_,
                             data_.validation.windows.size(), seconds));
  }
  return now_seconds() - t0;
}

// Rank 0 writes checkpoints/NAME; weights that are no longer finite are never written, so
// the last good checkpoint stays.
void TrainingLoop::checkpoint(const std::string& name, const char* reason) {
  if (!leader_) return;
  const ParamTable& table = model_.params();
  const int64_t P = table.total();
  if (!std::isfinite(model_.backend().sum_squares(model_.weights(), P)))
    fail("step {}: the weights are not finite; stopping without writing checkpoints/{} (the "
         "last good checkpoint stays)",
         state_.step, name);
  state_.reason = reason;
  state_.metrics_bytes = metrics_.bytes();
  ops::on_host(model_.backend(), std::as_const(model_).weights(), size_t(P), ops::HostAccess::read,
               [&](const float* weights) {
                 write_checkpoint(config_.system.out_dir, name, table, weights, optimizer_, config_,
                                  state_);
               });
}

void TrainingLoop::stop() {
  checkpoint("latest", "interrupted");
  console_.say(fmt::format("stopped at step {} ({} tokens); checkpoint {}/latest; continue "
                           "with --resume",
                           state_.step, state_.tokens, checkpoints_dir(config_.system.out_dir)));
}

// The run ends with an evaluation of the final weights (unless this boundary had one) and
// the `final` checkpoint.
void TrainingLoop::finish(bool evaluated_here) {
  if (evaluating_ && !evaluated_here) mark_ += evaluate();
  checkpoint("final", "final");
  console_.say(fmt::format(
      "finished: {} steps, {} tokens{}, {:.0f} tokens/s (evaluation excluded); checkpoint "
      "{}/final",
      state_.step, state_.tokens, last_val_ >= 0 ? fmt::format(", val NLL {:.4f}", last_val_) : "",
      tokens_per_second(), checkpoints_dir(config_.system.out_dir)));
}

// One optimizer step, and the state after it. A non-finite loss or gradient ends the run
// before anything is written.
StepOutcome TrainingLoop::step(double lr) {
  const double vote = signal_received() || stop_asked_ ? 1.0 : 0.0;
  const StepOutcome out = train_step(model_, optimizer_, collective_, B_, A_, batches_, x_, y_, lr,
                                     config_.optimizer.grad_clip, vote);
  if (!out.finite)
    fail("step {}: the {} is not finite (loss {}, gradient norm {}); stopping. The last good "
         "checkpoint is kept; lower optimizer.learning_rate or check the data",
         state_.step, std::isfinite(out.loss) ? "gradient" : "loss", out.loss, out.grad_norm);
  state_.step += 1;
  state_.tokens = state_.step * tokens_per_step_;
  state_.windows_per_rank += A_ * B_;
  // All ranks stop at the same boundary: with several, on the votes the step exchanged.
  stop_votes_ = ranks_ == 1 ? (signal_received() ? 1.0 : 0.0) : out.votes;
  return out;
}

void TrainingLoop::read_batch(int64_t micro, int32_t* xs, int32_t* ys) {
  for (int64_t b = 0; b < B_; ++b) {
    const int64_t index = state_.windows_per_rank + micro * B_ + b;
    data_.train_file.read(data_.sampler.position(index), T_ + 1, row_.data(), data_.ids.limit);
    std::copy(row_.begin(), row_.begin() + T_, xs + b * T_);
    std::copy(row_.begin() + 1, row_.begin() + T_ + 1, ys + b * T_);
  }
}

// Counts the step's time, writes a metrics line every training.log_interval steps (and
// after the last) and moves the progress line.
void TrainingLoop::log_step(double lr, const StepOutcome& out) {
  const double now = now_seconds();
  interval_seconds_ += now - mark_;
  train_seconds_ += now - mark_;
  mark_ = now;
  interval_tokens_ += tokens_per_step_;
  if (leader_ && (state_.step % tc_.log_interval == 0 || state_.step == total_steps_)) {
    nlohmann::ordered_json record;
    record["step"] = state_.step;
    record["tokens"] = state_.tokens;
    record["lr"] = lr;
    record["loss"] = out.loss;
    record["grad_norm"] = out.grad_norm;
    record["tokens_per_second"] = double(interval_tokens_) / interval_seconds_;
    record["peak_rss_bytes"] = peak_rss_bytes();
    this->record(record);
    interval_tokens_ = 0;
    interval_seconds_ = 0;
  }
  console_.progress.update(
      state_.tokens, total_steps_ * tokens_per_step_,
      fmt::format("step {}/{} · loss {:.4f} · val {}", state_.step, total_steps_, out.loss,
                  last_val_ >= 0 ? fmt::format("{:.4f}", last_val_) : "-"));
}

void TrainingLoop::record(const nlohmann::ordered_json& record) {
  metrics_.write(record);
  if (options_.on_metrics && !options_.on_metrics(record)) stop_asked_ = true;
}

// This invocation's training rate, evaluation excluded.
double TrainingLoop::tokens_per_second() const {
  return train_seconds_ > 0
             ? double((state_.step - first_step_) * tokens_per_step_) / train_seconds_
             : 0.0;
}

}  // namespace

TrainSummary train(const TrainConfig& config, Collective& collective, const TrainOptions& options) {
  const int rank = collective.rank(), ranks = collective.size();
  const bool leader = rank == 0;
  if (config.system.threads > 0) omp_set_num_threads(int(config.system.threads));
  const int64_t accumulation = accumulation_steps(config, ranks);
  const std::string& run_dir = config.system.out_dir;
  Console console(leader && !options.quiet);

  const bool evaluating = config.training.eval_total_tokens > 0;
  const TrainingData data(config, rank, ranks, evaluating && leader);

  const ops::Backend<float>& backend = training_backend(config, collective);
  reduce_on_devices(backend, config, collective, console);
  collective.set_gradient_bucket_bytes(
      std::max<int64_t>(1, int64_t(config.system.all_reduce_bucket_mb * double(1 << 20))));
  const TrainPlan plan = make_train_plan(config, ranks);
  require_memory(backend, plan, config);
  Model<float> model(config.model, backend);
  model.set_recompute(config.system.recompute_activations);
  AdamW optimizer(model.params(), config.optimizer, model.backend());
  TrainerState state = initial_trainer_state(config, ranks);
  state.threads = omp_get_max_threads();

  std::optional<WriterLock> lock;  // one trainer per run folder, for the whole run
  std::string resumed_from;        // the checkpoint rank 0 continues from
  bool branched = false;           // started from options.init_from
  if (leader) {
    resumed_from = claim_run_folder(run_dir, options.resume || !options.init_from.empty(), lock);
    if (resumed_from.empty() && !options.init_from.empty()) {
      resumed_from = options.init_from;
      branched = true;
    }
    if (!resumed_from.empty())
      read_checkpoint_into(resumed_from, config, ranks, model, optimizer, state);
    if (branched) state.metrics_bytes = 0;  // the other run's metrics stay in its folder
  }
  const bool resumed = agree_on_resume(collective, !resumed_from.empty());
  if (resumed)
    share_resumed_state(collective, model, optimizer, state);
  else
    model.init_weights(uint64_t(config.training.seed));
  model.reserve(config.training.micro_batch_size, config.model.block_size);

  MetricsFile metrics;  // rank 0's; a resume drops the lines written after its checkpoint
  if (leader) {
    write_file_atomically((fs::path(run_dir) / "config.yaml").string(), train_config_yaml(config));
    metrics.open((fs::path(run_dir) / "metrics.jsonl").string(), resumed ? state.metrics_bytes : 0);
  }

  console.say(run_header(config, model, plan, accumulation, ranks));
  nlohmann::ordered_json documents_record;
  if (leader) documents_record = report_documents_per_batch(config, data, ranks, resumed, console);
  if (const std::string gemms = backend.describe_gemms(); !gemms.empty()) console.say(gemms);
  if (resumed && state.step >= config.total_steps()) return nothing_to_do(console, run_dir, state);
  if (resumed) {
    report_resume(console, resumed_from, state, leader);
    state.threads = omp_get_max_threads();  // what the checkpoints from here on were run with
  } else if (options.resume) {
    console.say(fmt::format("no checkpoint in {}; starting from scratch", run_dir));
  }

  TrainingLoop loop(config, collective, options, console, data, model, optimizer, state, metrics);
  if (!documents_record.is_null()) loop.record(documents_record);
  return loop.run();
}

}  // namespace sps
