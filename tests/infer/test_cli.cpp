// `sps generate` from the shell: streamed text equals the library's, batch JSONL, sampling
// flags, and bad input (missing, damaged or mismatched checkpoints, over-long prompts, a
// mismatched tokenizer, no prompt off a terminal) as one line on stderr with exit status 2.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "run_command.h"
#include "infer/generator.h"
#include "infer_fixtures.h"
#include "model/weights_io.h"
#include "util/temp_dir.h"

namespace sps::testing {
namespace {

namespace fs = std::filesystem;
const std::string kSps = SPS_BINARY;

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

struct CliRun {
  int status = -1;
  std::string out, err;
  int err_lines() const { return int(std::count(err.begin(), err.end(), '\n')); }
};

// Runs `sps generate ARGS` with stdin from /dev/null; stdout and stderr kept apart.
CliRun generate(const std::string& args, const TempDir& dir) {
  const std::string err_path = dir.file("stderr.txt");
  const std::string command =
      quote(kSps) + " generate " + args + " </dev/null 2>" + quote(err_path);
  CliRun run;
  run.status = run_command(command, &run.out);
  run.err = read_whole_file(err_path);
  return run;
}

// A checkpoint folder of a byte-level micro model (block_size 16) and its rank file.
struct Fixture {
  TempDir dir;
  ModelConfig config = byte_micro_config("sps", 2);
  std::unique_ptr<Model<float>> model;
  std::string checkpoint, tokenizer;

  Fixture() {
    model = std::make_unique<Model<float>>(config);
    randomize_weights(*model, 21);
    checkpoint = dir.file("ckpt");
    fs::create_directories(checkpoint);
    const std::string yaml = model_yaml(config);
    write_whole_file(checkpoint + "/config.yaml", yaml);
    save_weights(checkpoint + "/model.safetensors", model->params(), model->weights(), yaml);
    tokenizer = dir.file("bytes.tiktoken");
    byte_level_tokenizer().save_rank_file(tokenizer);
  }
  std::string base() const {
    return "--checkpoint " + quote(checkpoint) + " --tokenizer " + quote(tokenizer);
  }
  // What the library generates (greedy, EOS forbidden) for a prompt, with the weights held
  // as they are or packed in a weight type.
  std::string library(const std::string& prompt, int64_t n) { return library(prompt, n, *model); }
  std::string library(const std::string& prompt, int64_t n, ops::WeightType type,
                      KvType kv_type = KvType::f32) {
    Model<float> packed(config);
    std::copy_n(model->weights(), model->params().total(), packed.weights());
    packed.pack_for_inference(type);
    packed.set_kv_type(kv_type);
    return library(prompt, n, packed);
  }
  std::string library(const std::string& prompt, int64_t n, Model<float>& m) {
    GenerationOptions o;
    o.max_new_tokens = n;
    o.sampling.allowed_ids = byte_level_tokenizer().vocab_size();
    o.sampling.forbidden = {config.eos_token_id};
    Generator g(m, &byte_level_tokenizer(), o);
    return g.generate_text({prompt})[0].text;
  }
};

TEST(GenerateCli, StreamsWhatTheLibraryGenerates) {
  Fixture f;
  const CliRun run = generate(f.base() + " --prompt hello --max-new-tokens 6 --forbid 256", f.dir);
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(run.out, f.library("hello", 6) + "\n");
  EXPECT_EQ(run.out.size(), 7u);
  const CliRun again = generate(f.base() + " --prompt hello --max-new-tokens 6 --forbid 256", f.dir);
  EXPECT_EQ(again.out, run.out);
  // Weights + config instead of a checkpoint folder; top-k 1 is greedy.
  const CliRun split = generate("--weights " + quote(f.checkpoint + "/model.safetensors") + " --config " +
                                 quote(f.checkpoint + "/config.yaml") + " --tokenizer " +
                                 quote(f.tokenizer) +
                                 " --prompt hello --max-new-tokens 6 --forbid 256 --temperature 1.5 "
                                 "--top-k 1 --seed 4",
                             f.dir);
  EXPECT_EQ(split.out, run.out) << split.err;
}

// --weight-type bf16 | int8: the text the library generates with the weights held that way.
TEST(GenerateCli, WeightTypesGenerateWhatTheLibraryDoesWithThem) {
  Fixture f;
  for (const ops::WeightType type : {ops::WeightType::bf16, ops::WeightType::int8}) {
    const std::string name = ops::weight_type_name(type);
    const CliRun run = generate(f.base() + " --prompt hello --max-new-tokens 12 --forbid 256 --weight-type " + name, f.dir);
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_EQ(run.out, f.library("hello", 12, type) + "\n") << name;
  }
  const CliRun bad = generate(f.base() + " --prompt hello --weight-type fp8", f.dir);
  EXPECT_EQ(bad.status, 2);
  EXPECT_EQ(bad.err, "sps: --weight-type: 'fp8' is not a weight type; expected f32, bf16 or int8\n");
}

// --kv-type bf16: the text the library generates with a bf16 KV cache, with each weight type.
TEST(GenerateCli, Bf16KvCacheGeneratesWhatTheLibraryDoesWithIt) {
  Fixture f;
  for (const ops::WeightType type : {ops::WeightType::f32, ops::WeightType::int8}) {
    const std::string name = ops::weight_type_name(type);
    const CliRun run = generate(f.base() + " --prompt hello --max-new-tokens 12 --forbid 256 --kv-type bf16 --weight-type " + name, f.dir);
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_EQ(run.out, f.library("hello", 12, type, KvType::bf16) + "\n") << name;
  }
  const CliRun bad = generate(f.base() + " --prompt hello --kv-type fp16", f.dir);
  EXPECT_EQ(bad.status, 2);
  EXPECT_EQ(bad.err, "sps: --kv-type: 'fp16' is not a KV cache type; expected f32 or bf16\n");
}

TEST(GenerateCli, SeededSamplingRepeatsAndEmptyPromptStartsADocument) {
  Fixture f;
  const std::string args = f.base() + " --max-new-tokens 8 --temperature 1 --top-p 0.9 --seed 7 --forbid 256";
  const CliRun a = generate(args + " --prompt abc", f.dir), b = generate(args + " --prompt abc", f.dir);
  ASSERT_EQ(a.status, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  // An empty prompt is a new document: the library's generation from no text, greedy here.
  const CliRun empty = generate(f.base() + " --prompt '' --max-new-tokens 8 --forbid 256", f.dir);
  EXPECT_EQ(empty.status, 0) << empty.err;
  EXPECT_EQ(empty.out, f.library("", 8) + "\n");
  EXPECT_EQ(empty.err, "");
}

TEST(GenerateCli, BatchFileWritesOneJsonLinePerPrompt) {
  Fixture f;
  write_whole_file(f.dir.file("in.jsonl"),
                   "{\"prompt\": \"hello\", \"id\": \"a\"}\n\n{\"prompt\": \"\"}\n{\"prompt\": \"xyz\", \"id\": 3}\n");
  const std::string out = f.dir.file("out.jsonl");
  const CliRun run = generate(f.base() + " --batch-file " + quote(f.dir.file("in.jsonl")) +
                               " --output " + quote(out) + " --max-new-tokens 5 --forbid 256 --batch-size 2",
                           f.dir);
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(run.out, "");
  std::istringstream lines(read_whole_file(out));
  std::vector<nlohmann::json> rows;
  for (std::string line; std::getline(lines, line);) rows.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0]["id"], "a");
  EXPECT_EQ(rows[2]["id"], 3);
  EXPECT_FALSE(rows[1].contains("id"));
  const char* prompts[] = {"hello", "", "xyz"};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(rows[i]["index"], i);
    EXPECT_EQ(rows[i]["prompt"], prompts[i]);
    EXPECT_EQ(rows[i]["stop_reason"], "length");
    EXPECT_EQ(rows[i]["completion_tokens"], 5);
    EXPECT_EQ(rows[i]["completion_ids"].size(), 5u);
    // Batched (left-padded) generation equals each prompt alone.
    // (JSON holds UTF-8: ill-formed bytes become U+FFFD.)
    const std::string text = nlohmann::json(f.library(prompts[i], 5))
                                 .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    EXPECT_EQ(rows[i]["completion"], nlohmann::json::parse(text)) << i;
  }
}

TEST(GenerateCli, OverLongPromptIsAnErrorUnlessTruncated) {
  Fixture f;
  const std::string prompt(40, 'q');  // 40 byte tokens > block_size 16
  const CliRun run = generate(f.base() + " --prompt " + prompt + " --max-new-tokens 3", f.dir);
  EXPECT_EQ(run.status, 2);
  EXPECT_EQ(run.err_lines(), 1) << run.err;
  EXPECT_NE(run.err.find("longer than the model's context"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("--truncate left"), std::string::npos) << run.err;
  EXPECT_EQ(run.out, "");
  const CliRun cut = generate(f.base() + " --prompt " + prompt + " --max-new-tokens 3 --forbid 256 --truncate left", f.dir);
  EXPECT_EQ(cut.status, 0) << cut.err;
  EXPECT_EQ(cut.out, f.library(prompt.substr(24), 3) + "\n");
}

// Every bad input: exit 2, one line on stderr naming the problem, nothing on stdout.
TEST(GenerateCli, BadInputIsOneLineAndStatusTwo) {
  Fixture f;
  auto expect_error = [&](const std::string& args, const std::string& needle) {
    const CliRun run = generate(args, f.dir);
    EXPECT_EQ(run.status, 2) << args << "\n" << run.err;
    EXPECT_EQ(run.err_lines(), 1) << args << "\n" << run.err;
    EXPECT_NE(run.err.find(needle), std::string::npos) << args << "\n" << run.err;
    EXPECT_EQ(run.out, "") << args;
  };
  const std::string prompt = " --prompt hi";
  expect_error("--checkpoint " + quote(f.dir.file("missing")) + prompt, "no such folder");
  fs::create_directories(f.dir.file("empty"));
  expect_error("--checkpoint " + quote(f.dir.file("empty")) + prompt, "neither a checkpoint folder");
  expect_error(f.base(), "interactive mode needs a terminal");
  expect_error(f.base() + prompt + " --top-p 0", "--top-p");
  expect_error(f.base() + prompt + " --truncate right", "--truncate");

  // Damaged: the weights file cut short.
  const std::string damaged = f.dir.file("damaged");
  fs::create_directories(damaged);
  fs::copy_file(f.checkpoint + "/config.yaml", damaged + "/config.yaml");
  const std::string weights = read_whole_file(f.checkpoint + "/model.safetensors");
  write_whole_file(damaged + "/model.safetensors", weights.substr(0, weights.size() - 100));
  expect_error("--checkpoint " + quote(damaged) + " --tokenizer " + quote(f.tokenizer) + prompt,
               "model.safetensors");

  // Mismatched: the config has another shape, or another family, than the weights.
  const std::string other = f.dir.file("other");
  fs::create_directories(other);
  fs::copy_file(f.checkpoint + "/model.safetensors", other + "/model.safetensors");
  ModelConfig deeper = f.config;
  deeper.n_layer = 3;
  write_whole_file(other + "/config.yaml", model_yaml(deeper));
  expect_error("--checkpoint " + quote(other) + " --tokenizer " + quote(f.tokenizer) + prompt,
               "model.safetensors");
  ModelConfig standard = f.config;
  standard.family = "standard";
  write_whole_file(other + "/config.yaml", model_yaml(standard));
  expect_error("--checkpoint " + quote(other) + " --tokenizer " + quote(f.tokenizer) + prompt,
               "was saved with model.family = sps, but");

  // A tokenizer whose vocabulary does not fit the model.
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(std::string(1, static_cast<char>(b)));
  for (int k = 0; k < 70; ++k) tokens.push_back(std::string(1, char('a' + k % 26)) + char('A' + k / 26));
  const std::string bigger = f.dir.file("bigger.tiktoken");
  BpeTokenizer::from_ranks(tokens, "bigger").save_rank_file(bigger);
  expect_error("--checkpoint " + quote(f.checkpoint) + " --tokenizer " + quote(bigger) + prompt,
               "does not match the model");
  // No tokenizer recorded anywhere and none given.
  expect_error("--checkpoint " + quote(f.checkpoint) + prompt, "--tokenizer");
}

// The config may name its tokenizer; a run folder resolves to its newest checkpoint.
TEST(GenerateCli, TokenizerFromTheConfig) {
  Fixture f;
  const std::string yaml = model_yaml(f.config) + "tokenizer: " + f.tokenizer + "\n";
  write_whole_file(f.checkpoint + "/config.yaml", yaml);
  const CliRun run = generate("--checkpoint " + quote(f.checkpoint) + " --prompt hello --max-new-tokens 6 --forbid 256", f.dir);
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(run.out, f.library("hello", 6) + "\n");
}

// `sps bench generate --checkpoint` reads folders as every other command does.
TEST(BenchGenerateCli, CheckpointFoldersAsEveryCommandTakesThem) {
  Fixture f;
  std::string out;
  const std::string bench = quote(kSps) + " bench generate --prompt-tokens 4 --new-tokens 4 --batch 1 --runs 1 --warmup 0 --json --checkpoint ";
  EXPECT_EQ(run_command(bench + quote(f.checkpoint) + " 2>&1", &out), 0) << out;
  const nlohmann::json j = nlohmann::json::parse(out.substr(out.find('{')));
  EXPECT_GT(j.at("decode_tokens_per_second").get<double>(), 0);
  // The op bound adds each part's larger side, so it is at least either whole-step bound (up
  // to rounding: a/r + b/r and (a + b)/r may differ in the last place); the rates the bounds
  // use are the larger of those measured before and after the runs.
  const double op = j.at("decode_fraction_of_op_bound").get<double>() * (1 + 1e-12);
  EXPECT_GE(op, j.at("decode_fraction_of_bandwidth_bound").get<double>()) << out;
  EXPECT_GE(op, j.at("decode_fraction_of_flop_bound").get<double>()) << out;
  const auto& bw = j.at("copy_bandwidth_before_after");
  EXPECT_EQ(j.at("copy_bandwidth_bytes_per_second").get<double>(),
            std::max(bw.at(0).get<double>(), bw.at(1).get<double>()));
  // What other processes took of the CPUs meanwhile: a share (Linux has /proc).
  EXPECT_GE(j.at("other_cpu_share").get<double>(), 0.0) << out;
  EXPECT_LE(j.at("other_cpu_share").get<double>(), 1.0) << out;
  // Each weight type given runs the checkpoint once, labelled with the type.
  EXPECT_EQ(run_command(bench + quote(f.checkpoint) + " --weight-type f32,bf16,int8 2>/dev/null", &out), 0)
      << out;
  std::istringstream lines(out);
  std::vector<std::string> models;
  for (std::string line; std::getline(lines, line);)
    if (!line.empty() && line[0] == '{') models.push_back(nlohmann::json::parse(line).at("model"));
  ASSERT_EQ(models.size(), 3u) << out;
  EXPECT_NE(models[1].find("bf16"), std::string::npos) << models[1];
  EXPECT_NE(models[2].find("int8"), std::string::npos) << models[2];
  // And each KV cache type, labelled with it; the bf16 cache reports half the bytes.
  EXPECT_EQ(run_command(bench + quote(f.checkpoint) + " --kv-type f32,bf16 2>/dev/null", &out), 0)
      << out;
  std::vector<nlohmann::json> runs;
  std::istringstream kv_lines(out);
  for (std::string line; std::getline(kv_lines, line);)
    if (!line.empty() && line[0] == '{') runs.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(runs.size(), 2u) << out;
  EXPECT_NE(runs[1].at("model").get<std::string>().find("kv-bf16"), std::string::npos) << out;
  EXPECT_EQ(runs[1].at("kv_cache_allocated_bytes").get<double>() * 2, runs[0].at("kv_cache_allocated_bytes").get<double>())
      << out;
  fs::create_directories(f.dir.file("empty"));
  EXPECT_EQ(run_command(bench + quote(f.dir.file("empty")) + " 2>&1", &out), 2);
  EXPECT_NE(out.find("neither a checkpoint folder (model.safetensors) nor a run folder"), std::string::npos) << out;
}

// `sps bench serve` serves the checkpoint in its own process and every streamed request
// completes with its N tokens; a bad --url is one line and status 2.
TEST(BenchServeCli, EveryRequestCompletes) {
  Fixture f;
  std::string out;
  const std::string bench = quote(kSps) + " bench serve --clients 2 --requests 3 --prompt-tokens 4 --new-tokens 3 ";
  ASSERT_EQ(run_command(bench + "--json " + f.base() + " 2>&1", &out), 0) << out;
  const nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
  EXPECT_EQ(j["completed"], 3) << out;
  EXPECT_EQ(j["failed"], 0) << out;
  EXPECT_GT(j["output_tokens_per_second"].get<double>(), 0) << out;
  EXPECT_GT(j["inter_token_latency_p50_ms"].get<double>(), 0) << out;
  EXPECT_EQ(run_command(bench + "--url localhost 2>&1", &out), 2);
  EXPECT_NE(out.find("--url localhost: expected http://HOST:PORT"), std::string::npos) << out;
}

}  // namespace
}  // namespace sps::testing
