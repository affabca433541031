// sps train --config RECIPE [section.key=value …] [--resume] [--init-from CHECKPOINT]
//           [--dry-run] [--stop-after N]
//           [--device cpu|cuda[:N]]
#include <cstdio>

#include "cli/commands.h"
#include "ops/device.h"
#include "train/collective.h"
#include "train/plan.h"
#include "train/train_config.h"
#include "train/trainer.h"
#include "util/error.h"

namespace sps::cli {

void register_train(CLI::App& app) {
  auto* train_cmd = app.add_subcommand(
      "train", "pretrain a model with the paper's recipe (run under mpirun for data parallelism)");
  static std::string config_path;
  static std::vector<std::string> overrides;
  static TrainOptions options;
  static bool dry_run = false;
  static std::string device;
  train_cmd->add_option("--config", config_path, "recipe YAML, e.g. configs/experiments/tiny_sps_w64.yaml")
      ->required();
  train_cmd->add_option("overrides", overrides,
                        "section.key=value overrides, e.g. training.max_tokens=1000000");
  train_cmd->add_flag("--resume", options.resume,
                      "continue from the run folder's newest good checkpoint (from scratch when "
                      "there is none)");
  train_cmd->add_option("--init-from", options.init_from,
                        "start from another run's checkpoint folder (weights, AdamW moments, step, "
                        "data position) when the run folder has no checkpoint; this recipe's "
                        "schedule and length apply, e.g. a decayed branch");
  train_cmd->add_flag("--dry-run", dry_run,
                      "print parameters, tokens per step, steps, FLOPs and memory, then exit");
  train_cmd->add_option("--stop-after", options.stop_after_steps,
                        "stop after this many steps (writing checkpoints/latest), as SIGTERM does")
      ->check(CLI::Range(int64_t(1), std::numeric_limits<int64_t>::max()));
  train_cmd->add_option("--device", device,
                        "the recipe's system.device for this run: " + ops::device_forms());
  train_cmd->callback([] {
    const std::unique_ptr<Collective> collective = make_collective();
    const int ranks = collective->size();
    try {
      if (!device.empty()) {
        ops::parse_device(device, "--device");
        overrides.push_back("system.device=" + device);
      }
      const TrainConfig config = load_train_config(config_path, overrides);
      ops::require_device(process_device(config.system.device, "system.device", *collective),
                          device.empty() ? config.source + ": system.device" : "--device",
                          "sps train");
      if (dry_run) {
        if (collective->rank() == 0)
          std::fputs(describe_train_plan(config, make_train_plan(config, ranks)).c_str(), stdout);
        return;
      }
      train(config, *collective, options);
    } catch (const std::exception& e) {
      if (ranks == 1) throw;
      // One rank failing must not leave the others waiting in a collective.
      const bool user = dynamic_cast<const UserError*>(&e) != nullptr;
      std::fprintf(stderr, "sps: rank %d: %s%s\n", collective->rank(), user ? "" : "internal error: ",
                   e.what());
      std::fflush(stderr);
      collective->abort(user ? 2 : 1);
    }
  });
}

}  // namespace sps::cli
