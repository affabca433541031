// `sps analyze` as a program: JSON, table and figure on a micro checkpoint, and one clear
// line with exit status 2 for bad input.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "run_command.h"
#include "model/model_fixtures.h"
#include "model/weights_io.h"
#include "util/temp_dir.h"

namespace sps::testing {
namespace {

const std::string kSpsBinary = SPS_BINARY;

// Runs the command with stderr folded into *out.
int run(const std::string& command, std::string* out) {
  return run_command(command + " 2>&1", out);
}

// Two micro checkpoints (standard, sps w=2) with block_size 12 and a token file of
// documents of 20 tokens.
struct Fixture {
  TempDir dir;
  std::string data;
  Fixture() {
    for (const std::string family : {"standard", "sps"}) {
      const ModelConfig c = micro_config(family, 2);
      const std::string folder = dir.file(family);
      std::filesystem::create_directories(folder);
      write_whole_file(folder + "/config.yaml",
                       "model:\n  family: " + family +
                           "\n  n_layer: 2\n  n_head: 2\n  hidden_size: 16\n"
                           "  intermediate_size: 24\n  vocab_size: 64\n  block_size: 12\n"
                           "  window_size: 2\n  eos_token_id: 60\n  predict_token_id: 61\n"
                           "  pad_token_id: 63\n");
      Model<float> model(c);
      randomize_weights(model, 3);
      save_weights(folder + "/model.safetensors", model.params(), model.weights());
    }
    std::vector<uint16_t> tokens;
    for (int doc = 0; doc < 6; ++doc) {
      for (int i = 0; i < 19; ++i) tokens.push_back(uint16_t((doc * 7 + i * 3) % 60));
      tokens.push_back(60);
    }
    data = dir.file("val.bin");
    std::ofstream(data, std::ios::binary)
        .write(reinterpret_cast<const char*>(tokens.data()), std::streamsize(tokens.size() * 2));
  }
  std::string analyze(const std::string& what) const { return analyze(what, data); }
  std::string analyze(const std::string& what, const std::string& token_file) const {
    return "'" + kSpsBinary + "' analyze " + what + " --quiet --checkpoint " + dir.file("standard") +
           " --checkpoint " + dir.file("sps") + " --data " + token_file;
  }
};

bool is_png(const std::string& path) { return read_whole_file(path).rfind("\x89PNG", 0) == 0; }

TEST(AnalyzeCli, PersistentWindowWritesJsonTableAndFigure) {
  Fixture f;
  std::string out;
  const int rc = run(f.analyze("persistent-window") + " --omega 4 --count 3 --bin-width 4 --out " +
                         f.dir.file("pw.json"),
                     &out);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("| model | family | ω |"), std::string::npos) << out;
  const auto j = nlohmann::json::parse(read_whole_file(f.dir.file("pw.json")));
  EXPECT_EQ(j["analysis"], "persistent_window");
  ASSERT_EQ(j["models"].size(), 2u);
  for (const auto& m : j["models"]) {
    EXPECT_EQ(m["length"], 12);  // --length 2048 cut to block_size
    EXPECT_EQ(m["sequences"], 3);
    EXPECT_EQ(m["bins"].size(), 3u);
    EXPECT_EQ(m["positions"]["delta"].size(), 12u);
    EXPECT_EQ(m["positions"]["delta"][4], 0.0);
    EXPECT_NE(m["mean_delta_beyond_omega"], 0.0);
  }
  EXPECT_EQ(j["models"][1]["family"], "sps");
  EXPECT_TRUE(is_png(f.dir.file("pw.png")));
}

TEST(AnalyzeCli, GradientsWriteJsonTableAndFigure) {
  Fixture f;
  std::string out;
  const int rc = run(f.analyze("gradients") + " --target-begin 2 --target-end 6 --count 2 --out " +
                         f.dir.file("g.json") + " --figure " + f.dir.file("routing.png"),
                     &out);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("| sps | input |"), std::string::npos) << out;
  const auto j = nlohmann::json::parse(read_whole_file(f.dir.file("g.json")));
  EXPECT_EQ(j["analysis"], "gradient_routing");
  const auto& standard = j["models"][0];
  EXPECT_EQ(standard["window"], 12);
  EXPECT_EQ(standard["max_k"], 9);
  EXPECT_EQ(standard["backwards"], 10);  // q = 2..11, one batch
  EXPECT_EQ(standard["streams"]["standard"]["ratio"].size(), 9u);
  EXPECT_EQ(standard["streams"]["standard"]["count"][0], 2 * 4);
  EXPECT_EQ(standard["streams"]["standard"]["without_readout"]["ratio"].size(), 9u);
  const auto& sps = j["models"][1]["streams"];
  EXPECT_TRUE(sps["input"]["persistent"].get<bool>());
  EXPECT_TRUE(sps["predict"]["readout"].get<bool>());
  EXPECT_GT(sps["input"]["ratio"][0].get<double>(), 0);
  EXPECT_TRUE(is_png(f.dir.file("routing.png")));
}

TEST(AnalyzeCli, BadInputIsOneLineWithStatusTwo) {
  Fixture f;
  const std::string out = " --out " + f.dir.file("x.json");
  const std::string pw = f.analyze("persistent-window") + out;
  const std::string gr = f.analyze("gradients") + out;
  const std::string bin = "'" + kSpsBinary + "' analyze ";
  const std::vector<uint16_t> few = {1, 2, 3, 60, 4, 5};  // shorter than 13 tokens
  std::ofstream(f.dir.file("short.bin"), std::ios::binary)
      .write(reinterpret_cast<const char*>(few.data()), std::streamsize(few.size() * 2));
  // Each command and a piece of the one line it must print.
  const std::vector<std::pair<std::string, std::string>> bad = {
      {bin + "persistent-window" + out, "--checkpoint is required"},
      {bin + "gradients --checkpoint " + f.dir.file("nowhere") + out, "no such folder"},
      {bin + "gradients --target-begin 2 --checkpoint " + f.dir.file("sps") + out,
       "names no data.val_bin"},
      {pw + " --omega -1", "--omega must be at least 0"},
      {pw + " --source everywhere", "expected documents or windows"},
      {pw + " --count 0", "--count"},
      {f.analyze("persistent-window") + " --out " + f.dir.file("no/such/folder/x.json"),
       "no folder"},
      {pw + " --label only-one", "1 --label for 2 --checkpoint"},
      {f.analyze("persistent-window", f.dir.file("missing.bin")) + out, "missing.bin"},
      {f.analyze("persistent-window", f.dir.file("short.bin")) + out + " --source windows",
       "fewer than length + 1"},
      {f.analyze("persistent-window", f.dir.file("short.bin")) + out, "no document has 13 tokens"},
      {gr + " --target-begin 11", "leaves no target"},
      {gr + " --target-begin 5 --target-end 5", "need 0 ≤ begin < end"},
      {gr + " --max-k 0", "--max-k must be at least 1"},
      {gr + " --window abc", "--window"},
  };
  for (const auto& [command, expected] : bad) {
    std::string text;
    EXPECT_EQ(run(command, &text), 2) << command << "\n" << text;
    EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << command << "\n" << text;
    EXPECT_EQ(text.rfind("sps: ", 0), 0u) << text;
    EXPECT_NE(text.find(expected), std::string::npos) << command << "\n" << text;
  }
  EXPECT_FALSE(std::filesystem::exists(f.dir.file("x.json")));
}

}  // namespace
}  // namespace sps::testing
