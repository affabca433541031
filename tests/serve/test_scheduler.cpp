// Continuous batching: each request's tokens equal the library generation of its prompt
// alone (what `sps generate` prints) whatever else shares the batch, for standard and sps;
// rows are freed at once on cancel; the queue is bounded; echo scores equal `sps eval`'s.
#include <gtest/gtest.h>

#include <cmath>

#include "eval/scoring.h"
#include "model/checking_backend.h"
#include "serve/scheduler.h"
#include "serve_fixtures.h"

namespace sps::testing {
namespace {

using serve::Job;
using serve::Scheduler;
using serve::SchedulerOptions;

std::shared_ptr<Job> make_job(const ModelConfig& c, std::vector<int32_t> prompt, int64_t max_tokens,
                              double temperature, int64_t top_k, uint64_t seed, int64_t n = 1) {
  auto job = std::make_shared<Job>();
  job->prompt = std::move(prompt);
  job->max_tokens = max_tokens;
  job->n = n;
  SamplingOptions s;
  s.temperature = temperature;
  s.top_k = top_k;
  s.seed = seed;
  s.allowed_ids = byte_level_tokenizer().vocab_size();
  job->sampler = std::make_unique<TokenSampler>(s, c);
  return job;
}

struct Collected {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<std::string> text;
  std::vector<StopReason> reasons;
  std::vector<serve::TokenLogprob> prompt_logprobs;
  bool cancelled = false;
};

Collected collect(Job& job) {
  Collected c;
  c.tokens.resize(job.n);
  c.text.resize(job.n);
  c.reasons.resize(job.n);
  while (true) {
    Job::Taken t = job.take(std::chrono::milliseconds(100));
    if (t.prompt_logprobs) c.prompt_logprobs = *t.prompt_logprobs;
    for (const auto& u : t.updates) {
      for (const auto& tok : u.tokens) c.tokens[u.choice].push_back(tok.id);
      c.text[u.choice] += u.text;
      if (u.finished) c.reasons[u.choice] = u.reason;
    }
    if (t.finished) {
      c.cancelled = t.cancelled;
      return c;
    }
  }
}

class SchedulerFamily : public ::testing::TestWithParam<std::string> {};

TEST_P(SchedulerFamily, ConcurrentRequestsEqualGeneratingEachAlone) {
  ServeModel m(GetParam());
  serve::Metrics metrics;
  SchedulerOptions o;
  o.rows = 4;
  o.context = m.config.block_size;
  o.prefill_tokens_per_turn = 8;  // at most one longer prompt per turn: arrivals interleave
  Scheduler scheduler(*m.model, byte_level_tokenizer(), o, metrics);
  struct Case {
    std::string prompt;
    int64_t max_tokens;
    double temperature;
    int64_t top_k;
    uint64_t seed;
  };
  const std::vector<Case> cases = {{"The cat", 20, 0.9, 0, 3},
                                   {"a", 6, 0, 0, 0},
                                   {"Once upon a time, in a land", 15, 1.3, 12, 42},
                                   {"xyz", 30, 0.7, 5, 9},
                                   {"hello hello hello", 9, 1.0, 0, 8},
                                   {"q", 25, 1.1, 0, 1}};
  std::vector<std::shared_ptr<Job>> jobs;
  for (const Case& c : cases) {
    jobs.push_back(make_job(m.config, byte_ids(c.prompt), c.max_tokens, c.temperature, c.top_k, c.seed));
    ASSERT_TRUE(scheduler.submit({jobs.back()}));
  }
  int64_t generated = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Collected got = collect(*jobs[i]);
    const Case& c = cases[i];
    const Generation want = m.generate(byte_ids(c.prompt), c.max_tokens, c.temperature, c.top_k, c.seed);
    EXPECT_EQ(got.tokens[0], want.tokens) << "request " << i;
    EXPECT_EQ(got.text[0], want.text) << "request " << i;
    EXPECT_EQ(got.reasons[0], want.stop_reason) << "request " << i;
    EXPECT_FALSE(got.tokens[0].empty());
    generated += int64_t(want.tokens.size());
  }
  EXPECT_EQ(int64_t(metrics.generated_tokens), generated);
  EXPECT_EQ(int64_t(metrics.completions), int64_t(cases.size()));
  scheduler.drain(std::chrono::milliseconds(1000));
  EXPECT_EQ(scheduler.gauges().active_rows, 0);
}

TEST_P(SchedulerFamily, StopStringsAndChoicesFollowTheGenerator) {
  ServeModel m(GetParam(), 9);
  serve::Metrics metrics;
  SchedulerOptions o;
  o.rows = 4;
  o.context = m.config.block_size;
  Scheduler scheduler(*m.model, byte_level_tokenizer(), o, metrics);
  // A stop string the greedy text contains: cut before it, as the generator cuts.
  const Generation free_run = m.generate(byte_ids("abc"), 20, 0, 0, 0);
  ASSERT_GE(free_run.text.size(), 4u);
  const std::string stop = free_run.text.substr(2, 2);
  auto stopped = make_job(m.config, byte_ids("abc"), 20, 0, 0, 0);
  stopped->stop = {stop};
  // n = 3 sampled choices of one prompt: choice 0 is the prompt generated alone.
  auto choices = make_job(m.config, byte_ids("zz top"), 12, 1.2, 0, 77, 3);
  ASSERT_TRUE(scheduler.submit({stopped}));
  ASSERT_TRUE(scheduler.submit({choices}));
  const Collected s = collect(*stopped);
  const Generation want = m.generate(byte_ids("abc"), 20, 0, 0, 0, {stop});
  EXPECT_EQ(s.text[0], want.text);
  EXPECT_EQ(s.tokens[0], want.tokens);
  EXPECT_EQ(s.reasons[0], StopReason::stop_string);
  EXPECT_EQ(s.text[0].find(stop), std::string::npos);
  const Collected c = collect(*choices);
  EXPECT_EQ(c.tokens[0], m.generate(byte_ids("zz top"), 12, 1.2, 0, 77).tokens);
  EXPECT_NE(c.tokens[1], c.tokens[2]);  // own sampler streams
  for (const auto& t : c.tokens) EXPECT_FALSE(t.empty());
}

// A prompt longer than the turn's prefill budget runs as one forward that pauses between its
// layers for decode steps of the rows already running; nobody's tokens change. The running
// request ignores EOS and has thousands of tokens to go when the long prompt arrives (it is
// submitted after the first one's first token), so it is running throughout that prefill.
TEST_P(SchedulerFamily, LongPromptPrefillPausesForRunningRows) {
  ModelConfig config = serve_config(GetParam());
  config.block_size = 4096;
  ServeModel m(config);
  const std::string long_prompt = "A much longer prompt that spans many turns";
  for (const int64_t budget : {int64_t(4), int64_t(64)}) {
    SCOPED_TRACE("budget " + std::to_string(budget));
    serve::Metrics metrics;
    SchedulerOptions o;
    o.rows = 2;
    o.context = config.block_size;
    o.prefill_tokens_per_turn = budget;
    Scheduler scheduler(*m.model, byte_level_tokenizer(), o, metrics);
    const auto running = make_job(config, byte_ids("ab"), 4000, 0.8, 0, 4);
    running->stop_at_eos = false;
    const auto arriving = make_job(config, byte_ids(long_prompt), 5, 0.8, 0, 6);
    ASSERT_TRUE(scheduler.submit({running}));
    std::vector<int32_t> ran;
    while (ran.empty())
      for (const auto& u : running->take(std::chrono::milliseconds(100)).updates)
        for (const auto& t : u.tokens) ran.push_back(t.id);
    ASSERT_TRUE(scheduler.submit({arriving}));
    const Collected b = collect(*arriving);
    running->cancel();
    const Collected a = collect(*running);
    ran.insert(ran.end(), a.tokens[0].begin(), a.tokens[0].end());
    EXPECT_EQ(b.tokens[0], m.generate(byte_ids(long_prompt), 5, 0.8, 0, 6).tokens);
    EXPECT_EQ(ran, m.generate(byte_ids("ab"), int64_t(ran.size()), 0.8, 0, 4, {}, false).tokens);
    EXPECT_LT(ran.size(), 4000u);  // still running when the long prompt was done
    // Budget 4 against a 42-token prompt: a pause after every layer but the last.
    const uint64_t pauses = budget < int64_t(long_prompt.size()) ? uint64_t(config.n_layer - 1) : 0;
    EXPECT_EQ(uint64_t(metrics.decode_steps_during_prefill), pauses);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, SchedulerFamily, ::testing::Values("standard", "sps"));

TEST(Scheduler, CancelFreesRowsAndTheQueueIsBounded) {
  ServeModel m("sps");
  serve::Metrics metrics;
  SchedulerOptions o;
  o.rows = 2;
  o.queue_limit = 2;
  o.context = 20000;  // far past block_size: room for jobs that run until cancelled
  Scheduler scheduler(*m.model, byte_level_tokenizer(), o, metrics);
  // Two endless jobs fill both rows; the next two wait; a fifth is refused.
  std::vector<std::shared_ptr<Job>> jobs;
  for (int i = 0; i < 4; ++i) {
    const bool endless = i < 2;
    jobs.push_back(make_job(m.config, byte_ids("long"), endless ? 19000 : 30, 1.0, 0, uint64_t(i)));
    jobs.back()->stop_at_eos = !endless;
    ASSERT_TRUE(scheduler.submit({jobs.back()}));
    if (i == 1) {
      // Wait until the first two have left the queue for rows.
      for (int k = 0; k < 400 && scheduler.gauges().queue_length > 0; ++k)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  EXPECT_EQ(scheduler.gauges().active_rows, 2);
  EXPECT_EQ(scheduler.gauges().queue_length, 2);
  auto refused = make_job(m.config, byte_ids("x"), 3, 0, 0, 0);
  EXPECT_FALSE(scheduler.submit({refused}));
  // Cancelling the running ones frees their rows for the waiting ones.
  jobs[0]->cancel();
  jobs[1]->cancel();
  const Collected a = collect(*jobs[0]);
  EXPECT_TRUE(a.cancelled);
  EXPECT_LT(a.tokens[0].size(), 19000u);
  const Collected c = collect(*jobs[2]);
  EXPECT_FALSE(c.cancelled);
  EXPECT_EQ(c.tokens[0], m.generate(byte_ids("long"), 30, 1.0, 0, 2).tokens);
  collect(*jobs[3]);
  EXPECT_EQ(int64_t(metrics.cancelled), 2);
  scheduler.drain(std::chrono::milliseconds(1000));
  EXPECT_FALSE(scheduler.submit({refused}));  // draining: nothing new
}

// A request's prompts are queued together or not at all: a half-queued request would run
// prompts whose answer is a 503.
TEST(Scheduler, ARequestsJobsAreQueuedTogetherOrNotAtAll) {
  ServeModel m("standard");
  serve::Metrics metrics;
  SchedulerOptions o;
  o.rows = 1;
  o.queue_limit = 3;
  o.context = 20000;
  Scheduler scheduler(*m.model, byte_level_tokenizer(), o, metrics);
  auto running = make_job(m.config, byte_ids("a"), 19000, 1.0, 0, 1);
  running->stop_at_eos = false;
  ASSERT_TRUE(scheduler.submit({running}));
  for (int k = 0; k < 400 && scheduler.gauges().active_rows == 0; ++k)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::vector<std::shared_ptr<Job>> two, three;
  for (int i = 0; i < 2; ++i) two.push_back(make_job(m.config, byte_ids("b"), 2, 0, 0, 0));
  for (int i = 0; i < 3; ++i) three.push_back(make_job(m.config, byte_ids("c"), 2, 0, 0, 0));
  ASSERT_TRUE(scheduler.submit(two));
  EXPECT_FALSE(scheduler.submit(three));  // 2 + 3 > 3: none of the three
  EXPECT_EQ(scheduler.gauges().queue_length, 2);
  running->cancel();
  for (const auto& job : two) EXPECT_FALSE(collect(*job).cancelled);
  EXPECT_TRUE(scheduler.submit(three));
  for (const auto& job : three) EXPECT_FALSE(collect(*job).cancelled);
}

TEST(Scheduler, DrainCancelsWhatTheGraceDoesNotCover) {
  ServeModel m("standard");
  serve::Metrics metrics;
  SchedulerOptions o;
  o.rows = 1;
  o.context = 20000;
  Scheduler scheduler(*m.model, byte_level_tokenizer(), o, metrics);
  auto running = make_job(m.config, byte_ids("a"), 19000, 1.0, 0, 1);
  auto waiting = make_job(m.config, byte_ids("b"), 19000, 1.0, 0, 2);
  running->stop_at_eos = waiting->stop_at_eos = false;
  ASSERT_TRUE(scheduler.submit({running}));
  ASSERT_TRUE(scheduler.submit({waiting}));
  scheduler.drain(std::chrono::milliseconds(0));
  EXPECT_TRUE(collect(*waiting).cancelled);
  const Collected r = collect(*running);
  EXPECT_TRUE(r.cancelled);
  EXPECT_LT(r.tokens[0].size(), 19000u);
}

// Echo scoring: the prompt's per-token log-probabilities are what `sps eval` computes for
// the text (token 0 predicted from EOS, each later one from the tokens before it).
TEST(Scheduler, PromptScoresEqualEvalLogLikelihoods) {
  for (const std::string family : {"standard", "sps"}) {
    ServeModel m(family, 3);
    serve::Metrics metrics;
    SchedulerOptions o;
    o.context = m.config.block_size;
    Scheduler scheduler(*m.model, byte_level_tokenizer(), o, metrics);
    std::vector<int32_t> prompt = byte_ids("A text of some twenty bytes");
    prompt.insert(prompt.begin() + 7, m.config.eos_token_id);  // a document boundary inside
    auto job = make_job(m.config, prompt, 0, 0, 0, 0);
    job->score_prompt = true;
    job->logprobs = 2;
    ASSERT_TRUE(scheduler.submit({job}));
    const Collected got = collect(*job);
    ASSERT_EQ(got.prompt_logprobs.size(), prompt.size());
    std::vector<eval::Request> requests;
    for (size_t i = 0; i < prompt.size(); ++i) {
      eval::Request r;
      r.context.assign(prompt.begin(), prompt.begin() + i);
      r.continuation = {prompt[i]};
      requests.push_back(r);
    }
    eval::Request whole;
    whole.continuation = prompt;
    requests.push_back(whole);
    const auto scores = eval::score_requests(*m.reference, requests, 4);
    double sum = 0;
    for (size_t i = 0; i < prompt.size(); ++i) {
      const auto& t = got.prompt_logprobs[i];
      EXPECT_EQ(t.id, prompt[i]);
      EXPECT_NEAR(t.logprob, scores[i].loglik, 1e-4) << family << " token " << i;
      ASSERT_EQ(t.top.size(), 2u);
      EXPECT_GE(t.top[0].second, t.top[1].second);
      EXPECT_GE(t.top[0].second, t.logprob - 1e-9);
      sum += t.logprob;
    }
    EXPECT_NEAR(sum, scores.back().loglik, 1e-3) << family;
  }
}

// The decoders, KV caches and prefill activations are checked against the memory left as one
// sum before anything is allocated: a machine where each part fits but the whole does not is
// refused in one line, and the whole fitting exactly is enough.
TEST(Scheduler, RefusesAPlanWhoseSumDoesNotFitThoughEachPartDoes) {
  ServeModel m("sps");
  CheckingBackend checking;
  Model<float> model(m.config, checking);
  serve::Metrics metrics;
  SchedulerOptions o;
  o.rows = 4;
  o.context = m.config.block_size;
  const __int128 whole = Scheduler::memory_bytes(model, o);
  DecoderShape batch;  // the largest part: every row's decoder
  batch.batch = o.rows;
  batch.max_prompt_tokens = o.context;
  ASSERT_GT(whole, Decoder<float>::memory_bytes(model, batch) +
                       model.inference_activation_bytes(1, o.context));
  checking.available = int64_t(whole) - 1;
  try {
    Scheduler refused(model, byte_level_tokenizer(), o, metrics);
    ADD_FAILURE() << "a plan one byte over the memory left was allocated";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("4 rows × 48 positions: needs"), std::string::npos)
        << e.what();
  }
  checking.available = int64_t(whole);
  Scheduler fits(model, byte_level_tokenizer(), o, metrics);
  fits.drain(std::chrono::milliseconds(0));
}

// The scheduler on a backend whose memory the host cannot read (a GPU's, as far as the model
// can tell; `sps serve --device cuda`): every op comes from the scheduler's thread after it
// selected the backend, or from the thread that made it, none is given host memory, and each
// request's tokens and prompt scores are those of the CPU backend.
TEST(Scheduler, RunsOnADeviceBackendFromItsOwnThread) {
  for (const std::string family : {"standard", "sps"}) {
    SCOPED_TRACE(family);
    ServeModel cpu(family);
    const CheckingBackend checking;
    Model<float> model(cpu.config, checking);
    randomize_weights(model, 5);  // ServeModel's weights
    serve::Metrics metrics;
    SchedulerOptions o;
    o.rows = 3;
    o.context = cpu.config.block_size;
    Scheduler scheduler(model, byte_level_tokenizer(), o, metrics);
    const std::vector<std::string> prompts = {"The cat", "Once upon a time", "xyz"};
    std::vector<std::shared_ptr<Job>> jobs;
    for (size_t i = 0; i < prompts.size(); ++i) {
      jobs.push_back(make_job(cpu.config, byte_ids(prompts[i]), 12, i == 1 ? 0.0 : 0.9,
                              i == 2 ? 5 : 0, 7 + i));
      ASSERT_TRUE(scheduler.submit({jobs.back()}));
    }
    auto scored = make_job(cpu.config, byte_ids("A text to score"), 0, 0, 0, 0);
    scored->score_prompt = true;
    scored->logprobs = 1;
    ASSERT_TRUE(scheduler.submit({scored}));
    for (size_t i = 0; i < prompts.size(); ++i) {
      const Generation want =
          cpu.generate(byte_ids(prompts[i]), 12, i == 1 ? 0.0 : 0.9, i == 2 ? 5 : 0, 7 + i);
      EXPECT_EQ(collect(*jobs[i]).tokens[0], want.tokens) << prompts[i];
    }
    const Collected got = collect(*scored);
    eval::Request whole;
    whole.continuation = byte_ids("A text to score");
    ASSERT_EQ(got.prompt_logprobs.size(), whole.continuation.size());
    double sum = 0;
    for (const auto& t : got.prompt_logprobs) sum += t.logprob;
    EXPECT_NEAR(sum, eval::score_requests(*cpu.reference, {whole}, 1)[0].loglik, 1e-3);
    scheduler.drain(std::chrono::milliseconds(1000));
    EXPECT_GT(checking.calls, 0);
    EXPECT_EQ(checking.strays, std::vector<std::string>{});
  }
}

}  // namespace
}  // namespace sps::testing
