// `sps eval` as a program: results JSON and table, and one clear line with exit status 2 for
// bad input.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "run_command.h"
#include "eval_fixtures.h"
#include "model/weights_io.h"
#include "util/safetensors_edits.h"
#include "util/temp_dir.h"

namespace sps::testing {
namespace {

const std::string kSpsBinary = SPS_BINARY;

// Runs the command with stderr folded into *out.
int run(const std::string& command, std::string* out) {
  return run_command(command + " 2>&1", out);
}

void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// A byte-level rank file, a small model's config and weights in a temp folder.
struct Fixture {
  TempDir dir;
  std::string base;
  Fixture() {
    std::string ranks;
    static const char* b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int b = 0; b < 256; ++b) {
      ranks += b64[b >> 2];
      ranks += b64[(b & 3) << 4];
      ranks += "== " + std::to_string(b) + "\n";
    }
    write(dir.file("bytes.tok"), ranks);
    const ModelConfig c = small_eval_config("sps", 2, 16);
    write(dir.file("config.yaml"),
          "tokenizer: " + dir.file("bytes.tok") +
              "\nmodel:\n  family: sps\n  n_layer: 2\n  n_head: 2\n  hidden_size: 16\n"
              "  intermediate_size: 24\n  vocab_size: 320\n  block_size: 16\n  window_size: 2\n"
              "  eos_token_id: 256\n  predict_token_id: 257\n  pad_token_id: 319\n");
    Model<float> model(c);
    model.init_weights(5);
    save_weights(dir.file("model.safetensors"), model.params(), model.weights());
    base = "'" + kSpsBinary + "' eval --quiet --weights " + dir.file("model.safetensors") +
           " --config " + dir.file("config.yaml");
  }
};

TEST(EvalCli, TasksCorpusAndValWriteJsonAndTable) {
  Fixture f;
  write(f.dir.file("piqa.jsonl"),
        R"({"goal": "Open a jar", "sol1": "twist", "sol2": "smash it", "label": 0})" "\n"
        R"({"goal": "Dry hands", "sol1": "towel", "sol2": "water", "label": 1})" "\n");
  write(f.dir.file("lambada.jsonl"), R"({"text": "the cat sat on the mat"})" "\n");
  write(f.dir.file("doc.txt"), "Some text to score, long enough for two windows of sixteen.\n");
  std::vector<uint16_t> tokens(200);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = uint16_t((i * 7) % 256);
  std::ofstream(f.dir.file("val.bin"), std::ios::binary)
      .write(reinterpret_cast<const char*>(tokens.data()), std::streamsize(tokens.size() * 2));
  std::string out;
  const int rc = run(f.base + " --tasks val:" + f.dir.file("val.bin") + ",corpus:doc=" +
                         f.dir.file("doc.txt") + ",piqa,lambada_openai --task-file piqa=" +
                         f.dir.file("piqa.jsonl") + " --task-file lambada_openai=" +
                         f.dir.file("lambada.jsonl") + " --out " + f.dir.file("r.json"),
                     &out);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("| val NLL | Corpus NLL | Task Accuracy |"), std::string::npos) << out;
  std::ifstream in(f.dir.file("r.json"));
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["tasks"]["piqa"]["items"], 2);
  EXPECT_EQ(j["corpus"]["doc"]["words"], 12);  // 11 words and the empty piece after "\n"
  EXPECT_GT(j["val"]["nll"].get<double>(), 0.0);
  EXPECT_TRUE(j["summary"].contains("task_accuracy"));
  EXPECT_TRUE(std::ifstream(f.dir.file("r.md")).good());
}

void expect_one_line_error(const std::string& command, const std::string& needle) {
  std::string out;
  EXPECT_EQ(run(command, &out), 2) << out;
  EXPECT_NE(out.find(needle), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
}

TEST(EvalCli, BadInputIsOneLineAndStatusTwo) {
  Fixture f;
  write(f.dir.file("bad.jsonl"),
        R"({"goal": "g", "sol1": "a", "sol2": "b", "label": 0})" "\n{oops\n");
  expect_one_line_error(f.base + " --tasks piqa --task-file piqa=" + f.dir.file("bad.jsonl"),
                        f.dir.file("bad.jsonl") + ":2: not a JSON object");
  write(f.dir.file("missing.jsonl"), R"({"goal": "g", "sol2": "b", "label": 0})" "\n");
  expect_one_line_error(f.base + " --tasks piqa --task-file piqa=" + f.dir.file("missing.jsonl"),
                        "field \"sol1\" is missing");
  write(f.dir.file("empty.jsonl"), "");
  expect_one_line_error(f.base + " --tasks corpus:e=" + f.dir.file("empty.jsonl"),
                        "the corpus has no documents");
  write(f.dir.file("broken.safetensors"), "not a safetensors file");
  expect_one_line_error("'" + kSpsBinary + "' eval --quiet --weights " + f.dir.file("broken.safetensors") +
                            " --config " + f.dir.file("config.yaml") + " --tasks corpus:e=" +
                            f.dir.file("config.yaml"),
                        "broken.safetensors");
  expect_one_line_error("'" + kSpsBinary + "' eval --checkpoint " + f.dir.file("nowhere") +
                            " --tasks piqa --task-file piqa=" + f.dir.file("bad.jsonl"),
                        "nowhere");
  expect_one_line_error(f.base + " --tasks piqa", "--task-file piqa=PATH");
  expect_one_line_error(f.base + " --tasks nonsense", "unknown task \"nonsense\"");
  expect_one_line_error(f.base + " --scoring fast --tasks piqa --task-file piqa=" + f.dir.file("bad.jsonl"),
                        "--scoring fast: expected naive or shared");
  expect_one_line_error(f.base + " --val-tokens -5 --tasks val:" + f.dir.file("val.bin"), "--val-tokens");
}

// A checkpoint's model.safetensors records its model: an edited config.yaml cannot make it
// another model (each of these edits used to change the NLL silently), and a damaged weight
// is caught by its checksum. A file without checksums still loads, with one note.
TEST(EvalCli, TheStoredModelDecidesAndTheWeightsMustBeIntact) {
  Fixture f;
  const std::string ckpt = f.dir.file("ckpt"), weights = ckpt + "/model.safetensors",
                    config = ckpt + "/config.yaml";
  std::filesystem::create_directories(ckpt);
  const std::string yaml = read_whole_file(f.dir.file("config.yaml"));
  write(config, yaml);
  Model<float> model(load_model_config(config, {}));
  model.init_weights(5);
  save_weights(weights, model.params(), model.weights(), yaml);
  write(f.dir.file("doc.txt"), "Some text to score, long enough for two windows of sixteen.\n");
  const std::string command = "'" + kSpsBinary + "' eval --quiet --checkpoint " + ckpt +
                              " --tasks corpus:doc=" + f.dir.file("doc.txt");
  std::string out;
  ASSERT_EQ(run(command, &out), 0) << out;
  EXPECT_EQ(out.find("note"), std::string::npos) << out;

  // field, text in the config, its replacement, the saved value, the edited one
  const std::vector<std::array<std::string, 5>> edits = {
      {"n_head", "n_head: 2", "n_head: 4", "2", "4"},
      {"window_size", "window_size: 2", "window_size: 3", "2", "3"},
      {"rope_theta", "n_layer: 2", "n_layer: 2\n  rope_theta: 500000", "10000", "500000"},
      {"norm_eps", "n_layer: 2", "n_layer: 2\n  norm_eps: 0.00001", "1e-06", "1e-05"}};
  for (const auto& [field, from, to, saved, edited_value] : edits) {
    std::string edited = yaml;
    edited.replace(edited.find(from), from.size(), to);
    write(config, edited);
    expect_one_line_error(command, weights + " was saved with model." + field + " = " + saved +
                                       ", but " + config + " says " + edited_value +
                                       "; the model stored with the weights decides");
  }
  write(config, yaml);

  // One exponent bit of one weight (this once gave exit status 0 and an NLL of 1.97e36).
  flip_tensor_bit(weights, "transformer.h.1.mlp.down_proj.weight", 4 * 17 + 3, 5);
  expect_one_line_error(command, weights + ": tensor 'transformer.h.1.mlp.down_proj.weight' does "
                                           "not match its checksum: the file is damaged");
  flip_tensor_bit(weights, "transformer.h.1.mlp.down_proj.weight", 4 * 17 + 3, 5);

  strip_checksums(weights);
  ASSERT_EQ(run(command, &out), 0) << out;
  EXPECT_NE(out.find("sps: note: " + weights + " has no tensor checksums"), std::string::npos)
      << out;
  EXPECT_EQ(out.find("note"), out.rfind("note")) << out;  // one note
}

nlohmann::json json_file(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

TEST(EvalCli, CorpusBytesKeepsTheFirstBytesCutAtWhiteSpace) {
  Fixture f;
  write(f.dir.file("c.jsonl"), R"({"text": "alpha beta gamma"})" "\n" R"({"text": "delta"})" "\n");
  std::string out;
  ASSERT_EQ(run(f.base + " --tasks corpus:c=" + f.dir.file("c.jsonl") + " --corpus-bytes 13 --out " +
                    f.dir.file("r.json"),
                &out),
            0)
      << out;
  const auto c = json_file(f.dir.file("r.json"))["corpus"]["c"];
  EXPECT_EQ(c["documents"], 1);
  EXPECT_EQ(c["bytes"], 10);  // "alpha beta"
  EXPECT_EQ(c["words"], 2);
}

TEST(EvalCli, SharedAndNaiveScoringReportTheSameAccuracies) {
  Fixture f;
  std::string items;
  for (int i = 0; i < 6; ++i)
    items += R"({"context": "Item )" + std::to_string(i) +
             R"( says that", "choices": ["it rains", "the sun is out today", "x", "no"], "label": )" +
             std::to_string(i % 4) + "}\n";
  write(f.dir.file("c.jsonl"), items);
  const std::string task = " --tasks continuation --task-file continuation=" + f.dir.file("c.jsonl");
  std::string out;
  ASSERT_EQ(run(f.base + task + " --out " + f.dir.file("shared.json"), &out), 0) << out;  // the default
  ASSERT_EQ(run(f.base + task + " --scoring naive --out " + f.dir.file("naive.json"), &out), 0) << out;
  const auto shared = json_file(f.dir.file("shared.json"))["tasks"]["continuation"];
  const auto naive = json_file(f.dir.file("naive.json"))["tasks"]["continuation"];
  EXPECT_EQ(shared["scoring"], "shared");
  EXPECT_EQ(naive["scoring"], "naive");
  EXPECT_EQ(shared["acc"], naive["acc"]);
  EXPECT_EQ(shared["acc_norm"], naive["acc_norm"]);
  EXPECT_GT(shared["items_per_second"].get<double>(), 0.0);
}

// `sps bench step --forward-only` times the forward alone: the same JSON keys, and the loss is
// the full step's (its forward is the same computation).
TEST(EvalCli, BenchStepForwardOnlyReportsTheFullStepsLoss) {
  const std::string bench = "'" + kSpsBinary + "' bench step --config " + std::string(SPS_SOURCE_DIR) +
                            "/configs/models/tiny.yaml --batch 1 --tokens 32 --warmup 0 --steps 1 --json";
  std::string full, forward;
  ASSERT_EQ(run(bench, &full), 0) << full;
  ASSERT_EQ(run(bench + " --forward-only", &forward), 0) << forward;
  const auto a = nlohmann::json::parse(full), b = nlohmann::json::parse(forward);
  EXPECT_EQ(a["loss"].get<double>(), b["loss"].get<double>());
  EXPECT_GT(b["tokens_per_second"].get<double>(), 0.0);
  std::vector<std::string> keys_a, keys_b;
  for (auto it = a.begin(); it != a.end(); ++it) keys_a.push_back(it.key());
  for (auto it = b.begin(); it != b.end(); ++it) keys_b.push_back(it.key());
  EXPECT_EQ(keys_a, keys_b);
}

}  // namespace
}  // namespace sps::testing
