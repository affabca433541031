// The training loop in-process on a micro model: exact resumption, checkpoints, refusals.
#include <gtest/gtest.h>

#include <csignal>
#include <cstring>
#include <filesystem>

#include "model/model.h"
#include "model/weights_io.h"
#include "train/checkpoint.h"
#include "train/trainer.h"
#include "train_fixtures.h"
#include "util/error.h"
#include "util/safetensors_edits.h"
#include "util/user_error.h"

namespace sps {
namespace {

namespace fs = std::filesystem;
using testing::error_of;
using testing::run_train;
using testing::TempDir;

struct MicroData {
  TempDir dir;
  std::string recipe;
  MicroData(const std::string& family = "sps", int64_t steps = 20) {
    testing::write_micro_data(dir.path().string());
    recipe = dir.file("recipe.yaml");
    testing::write_whole_file(recipe, testing::micro_recipe(dir.path().string(), family, steps));
  }
  TrainConfig config(const std::string& run, std::vector<std::string> overrides = {}) const {
    overrides.push_back("system.out_dir=" + dir.file(run));
    return load_train_config(recipe, overrides);
  }
  std::string run(const std::string& name) const { return dir.file(name); }
};

TEST(Trainer, ResumedRunIsBitIdenticalToStraightRun) {
  MicroData data;
  const TrainSummary straight = run_train(data.config("straight"));
  ASSERT_TRUE(straight.finished);
  EXPECT_EQ(straight.step, 20);

  // Interrupted twice, at steps that are not checkpoint or evaluation boundaries.
  TrainSummary part = run_train(data.config("resumed"), false, 7);
  EXPECT_TRUE(part.interrupted);
  EXPECT_EQ(part.step, 7);
  part = run_train(data.config("resumed"), true, 6);
  EXPECT_EQ(part.step, 13);
  part = run_train(data.config("resumed"), true);
  ASSERT_TRUE(part.finished);
  EXPECT_EQ(part.step, 20);

  // Weights, optimizer state and trainer state of every checkpoint both runs wrote (the
  // resolved configs differ only in system.out_dir).
  const TrainConfig config = data.config("straight");
  for (const char* checkpoint : {"final", "pre_decay", "tokens_000000000384"}) {
    const std::string a = data.run("straight") + "/checkpoints/" + checkpoint;
    const std::string b = data.run("resumed") + "/checkpoints/" + checkpoint;
    Model<float> ma(config.model), mb(config.model);
    load_weights(a + "/model.safetensors", ma.params(), ma.weights());
    load_weights(b + "/model.safetensors", mb.params(), mb.weights());
    EXPECT_EQ(std::memcmp(ma.weights(), mb.weights(), sizeof(float) * ma.params().total()), 0)
        << checkpoint << " weights differ";
    EXPECT_TRUE(testing::read_whole_file(a + "/optimizer.safetensors") ==
                testing::read_whole_file(b + "/optimizer.safetensors"))
        << checkpoint << " optimizer state differs";
    TrainerState sa = trainer_state_from_json(testing::read_whole_file(a + "/trainer_state.json"), a);
    TrainerState sb = trainer_state_from_json(testing::read_whole_file(b + "/trainer_state.json"), b);
    sa.metrics_bytes = sb.metrics_bytes = 0;  // timing fields differ in length
    EXPECT_EQ(trainer_state_json(sa), trainer_state_json(sb)) << checkpoint;
  }
  const auto a = testing::read_metrics(data.run("straight") + "/metrics.jsonl");
  const auto b = testing::read_metrics(data.run("resumed") + "/metrics.jsonl");
  EXPECT_EQ(testing::without_timing(a), testing::without_timing(b));
  // 20 step lines and evaluations at steps 0, 5, 10, 15, 20.
  int steps = 0;
  std::vector<int64_t> evals;
  for (const auto& line : a) {
    if (line.contains("loss")) ++steps;
    if (line.contains("val_nll")) evals.push_back(line["step"].get<int64_t>());
  }
  EXPECT_EQ(steps, 20);
  EXPECT_EQ(evals, (std::vector<int64_t>{0, 5, 10, 15, 20}));
  EXPECT_EQ(a.front()["tokens"], 0);
  EXPECT_EQ(a.back()["tokens"], 20 * 48);
}

int64_t latest_step(const std::string& run) {
  const std::string path = run + "/checkpoints/latest/trainer_state.json";
  return trainer_state_from_json(testing::read_whole_file(path), path).step;
}

// on_metrics sees each record as metrics.jsonl gets it; returning false stops the run at
// that step boundary with `latest`, as stop_after_steps does, and a resume continues it.
TEST(Trainer, OnMetricsSeesEveryRecordAndCanStopTheRun) {
  MicroData data("standard", 20);
  std::vector<nlohmann::json> seen;
  auto single = make_single_process_collective();
  TrainOptions options;
  options.quiet = true;
  options.on_metrics = [&](const nlohmann::ordered_json& record) {
    seen.push_back(nlohmann::json::parse(record.dump()));
    return !(record.contains("loss") && record["step"] == 6);
  };
  const TrainSummary stopped = train(data.config("run"), *single, options);
  EXPECT_TRUE(stopped.interrupted);
  EXPECT_FALSE(stopped.finished);
  EXPECT_EQ(stopped.step, 6);
  EXPECT_EQ(stopped.signal, 0);
  EXPECT_EQ(seen, testing::read_metrics(data.run("run") + "/metrics.jsonl"));
  EXPECT_EQ(latest_step(data.run("run")), 6);
  // Resumed to the end: the same checkpoint as a run never stopped.
  ASSERT_TRUE(run_train(data.config("run"), true).finished);
  ASSERT_TRUE(run_train(data.config("straight")).finished);
  EXPECT_EQ(
      testing::read_whole_file(data.run("run") + "/checkpoints/final/model.safetensors"),
      testing::read_whole_file(data.run("straight") + "/checkpoints/final/model.safetensors"));
}

// A signal received during the run stops it with `latest` and is reported, so that a caller
// (the Python module) can hand it on.
TEST(Trainer, ReportsTheSignalThatStoppedIt) {
  MicroData data("sps", 20);
  auto single = make_single_process_collective();
  TrainOptions options;
  options.quiet = true;
  options.on_metrics = [](const nlohmann::ordered_json& record) {
    if (record.contains("loss") && record["step"] == 4) std::raise(SIGTERM);
    return true;
  };
  const TrainSummary summary = train(data.config("run"), *single, options);
  EXPECT_TRUE(summary.interrupted);
  EXPECT_EQ(summary.signal, SIGTERM);
  EXPECT_EQ(summary.step, 4);
  EXPECT_EQ(latest_step(data.run("run")), 4);
}

TEST(Trainer, LearnsSomething) {
  MicroData data("sps", 40);
  run_train(data.config("run"));
  const auto lines = testing::read_metrics(data.run("run") + "/metrics.jsonl");
  std::vector<double> val;
  for (const auto& l : lines)
    if (l.contains("val_nll")) val.push_back(l["val_nll"].get<double>());
  ASSERT_GE(val.size(), 2u);
  EXPECT_LT(val.back(), val.front() - 0.05);
}

TEST(Trainer, CheckpointsHoldWhatTheyClaim) {
  MicroData data("standard", 12);
  run_train(data.config("run"), false, 5);
  const std::string dir = data.run("run");
  const std::string latest = find_newest_checkpoint(dir);
  EXPECT_EQ(fs::path(latest).filename(), "latest");
  const TrainerState state = trainer_state_from_json(
      testing::read_whole_file(latest + "/trainer_state.json"), "state");
  EXPECT_EQ(state.step, 5);
  EXPECT_EQ(state.tokens, 5 * 48);
  EXPECT_EQ(state.windows_per_rank, 5 * 4);
  EXPECT_EQ(state.reason, "interrupted");
  EXPECT_EQ(state.metrics_bytes, int64_t(fs::file_size(dir + "/metrics.jsonl")));
  // The weights load into a model of the resolved config; the optimizer made 5 updates.
  const TrainConfig config = data.config("run");
  Model<float> model(config.model);
  load_weights(latest + "/model.safetensors", model.params(), model.weights());
  AdamW optimizer(model.params(), config.optimizer);
  optimizer.load(latest + "/optimizer.safetensors");
  EXPECT_EQ(optimizer.step(), 5);
  // Leftovers of an interrupted write and damaged folders are not candidates.
  fs::create_directories(dir + "/checkpoints/latest.tmp");
  testing::write_whole_file(dir + "/checkpoints/latest.tmp/trainer_state.json", "{}");
  fs::copy(latest, dir + "/checkpoints/damaged", fs::copy_options::recursive);
  std::string text = testing::read_whole_file(latest + "/trainer_state.json");
  text.replace(text.find("\"step\": 5"), 9, "\"step\": 9");
  testing::write_whole_file(dir + "/checkpoints/damaged/trainer_state.json", text);
  fs::resize_file(dir + "/checkpoints/damaged/model.safetensors", 100);
  EXPECT_EQ(find_newest_checkpoint(dir), latest);
}

TEST(Trainer, RefusesToOverwriteARunAndToResumeAnotherConfig) {
  MicroData data("sps", 10);
  run_train(data.config("run"), false, 3);
  std::string e = error_of([&] { run_train(data.config("run")); });
  EXPECT_NE(e.find("already holds a run"), std::string::npos) << e;
  EXPECT_NE(e.find("--resume"), std::string::npos) << e;
  e = error_of([&] { run_train(data.config("run", {"model.family=delayed_state"}), true); });
  EXPECT_NE(e.find("another config: model.family is sps there, delayed_state here"),
            std::string::npos) << e;
  e = error_of([&] { run_train(data.config("run", {"training.global_batch_size=8"}), true); });
  EXPECT_NE(e.find("training.global_batch_size is 4 there, 8 here"), std::string::npos) << e;
  // Resuming with no checkpoint starts from scratch.
  EXPECT_EQ(run_train(data.config("fresh"), true, 2).step, 2);
}

// A decayed branch: a constant-LR run to step 8, then --init-from its checkpoint with a
// decay over 2 steps, ends bit-identical to a run trained straight with that schedule (the
// schedules agree up to step 8).
TEST(Trainer, InitFromAnotherRunsCheckpointContinuesItsTrajectory) {
  MicroData data("sps", 20);
  ASSERT_TRUE(run_train(data.config("constant", {"scheduler.lr_decay_tokens=0"})).finished);
  const std::vector<std::string> decayed = {"training.max_tokens=480",
                                            "scheduler.lr_decay_tokens=96"};
  ASSERT_TRUE(run_train(data.config("straight", decayed)).finished);
  auto branch = [&](const std::vector<std::string>& extra = {}) {
    std::vector<std::string> overrides = decayed;
    overrides.insert(overrides.end(), extra.begin(), extra.end());
    auto single = make_single_process_collective();
    TrainOptions options;
    options.quiet = true;
    options.init_from = data.run("constant") + "/checkpoints/tokens_000000000384";
    return train(data.config("branch", overrides), *single, options);
  };
  const TrainSummary summary = branch();
  ASSERT_TRUE(summary.finished);
  EXPECT_EQ(summary.step, 10);

  const TrainConfig config = data.config("straight", decayed);
  Model<float> a(config.model), b(config.model);
  load_weights(data.run("straight") + "/checkpoints/final/model.safetensors", a.params(),
               a.weights());
  load_weights(data.run("branch") + "/checkpoints/final/model.safetensors", b.params(),
               b.weights());
  EXPECT_EQ(std::memcmp(a.weights(), b.weights(), sizeof(float) * a.params().total()), 0);
  EXPECT_TRUE(
      testing::read_whole_file(data.run("straight") + "/checkpoints/final/optimizer.safetensors") ==
      testing::read_whole_file(data.run("branch") + "/checkpoints/final/optimizer.safetensors"));
  // The branch's metrics hold its own steps 9 and 10 (lr 0.01, then halfway to 0.001) and
  // the final evaluation, as the straight run's last lines.
  const auto straight =
      testing::without_timing(testing::read_metrics(data.run("straight") + "/metrics.jsonl"));
  const auto own =
      testing::without_timing(testing::read_metrics(data.run("branch") + "/metrics.jsonl"));
  ASSERT_EQ(own.size(), 3u);
  EXPECT_EQ(own[0]["step"], 9);
  EXPECT_DOUBLE_EQ(own[0]["lr"].get<double>(), 0.01);
  EXPECT_DOUBLE_EQ(own[1]["lr"].get<double>(), 0.0055);
  EXPECT_EQ(std::vector<nlohmann::json>(straight.end() - 3, straight.end()), own);

  // Run again, the branch's own checkpoint wins: nothing left to do.
  EXPECT_EQ(branch().step, 10);
  EXPECT_EQ(testing::read_metrics(data.run("branch") + "/metrics.jsonl").size(), 3u);
  // A checkpoint of another trajectory is refused.
  fs::remove_all(data.run("branch"));
  const std::string e = error_of([&] { branch({"training.seed=7"}); });
  EXPECT_NE(e.find("another config: training.seed"), std::string::npos) << e;
}

// Resuming verifies every tensor of the checkpoint (weights and AdamW moments) against the
// checksums written with it, and names the file and the tensor that fails; a checkpoint
// written before checksums resumes as before. Its config must agree with its own weights.
TEST(Trainer, ResumeVerifiesTheCheckpoint) {
  MicroData data("sps", 6);
  run_train(data.config("run"), false, 3);
  const std::string latest = data.run("run") + "/checkpoints/latest";
  const std::string moments = latest + "/optimizer.safetensors";
  const std::string tensor = "transformer.h.0.attn.c_proj.weight.exp_avg_sq";
  testing::flip_tensor_bit(moments, tensor, 2, 1);
  EXPECT_EQ(error_of([&] { run_train(data.config("run"), true); }),
            moments + ": tensor '" + tensor + "' does not match its checksum: the file is damaged");
  testing::flip_tensor_bit(moments, tensor, 2, 1);
  testing::flip_tensor_bit(latest + "/model.safetensors", "transformer.wte.weight", 11, 2);
  EXPECT_NE(
      error_of([&] {
        run_train(data.config("run"), true);
      }).find("model.safetensors: tensor 'transformer.wte.weight' does not match its checksum"),
      std::string::npos);
  testing::flip_tensor_bit(latest + "/model.safetensors", "transformer.wte.weight", 11, 2);
  // The checkpoint's config.yaml and the recipe both edited away from the weights' model.
  const std::string config = testing::read_whole_file(latest + "/config.yaml");
  std::string edited = config;
  edited.replace(edited.find("rope_theta: 10000"), 17, "rope_theta: 20000");
  testing::write_whole_file(latest + "/config.yaml", edited);
  EXPECT_EQ(error_of([&] { run_train(data.config("run", {"model.rope_theta=20000"}), true); }),
            latest + "/model.safetensors was saved with model.rope_theta = 10000, but " + latest +
                "/config.yaml says 20000; the model stored with the weights decides (restore "
                "the config's value)");
  testing::write_whole_file(latest + "/config.yaml", config);
  for (const char* file : {"/model.safetensors", "/optimizer.safetensors"})
    testing::strip_checksums(latest + file);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(run_train(data.config("run"), true).step, 6);
  const std::string err = ::testing::internal::GetCapturedStderr();
  const std::string note = " has no tensor checksums (written before sps recorded them)";
  EXPECT_NE(err.find("sps: note: "), std::string::npos) << err;
  EXPECT_NE(err.find(note), std::string::npos) << err;
  EXPECT_EQ(err.find(note), err.rfind(note)) << err;  // once, for the checkpoint
}

TEST(Trainer, ValidationWindowsAreFixedAndUnaligned) {
  const auto a = validation_windows(1000, 12, 100, 42);
  EXPECT_EQ(a, validation_windows(1000, 12, 100, 42));
  EXPECT_EQ(a.size(), 9u);  // ⌈100/12⌉
  bool unaligned = false;
  for (int64_t p : a) {
    EXPECT_GE(p, 0);
    EXPECT_LE(p + 13, 1000);
    unaligned = unaligned || p % 12 != 0;
  }
  EXPECT_TRUE(unaligned);
  EXPECT_EQ(validation_windows(50, 12, 10000000, 42).size(), 5u);  // capped by the file
  EXPECT_NE(validation_windows(1000, 12, 100, 43), a);
}

}  // namespace
}  // namespace sps
