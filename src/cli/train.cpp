#include "cli/commands.h"

namespace sps::cli {

void register_train(CLI::App& app) {
  app.add_subcommand("train", "pretrain a model");
}

}  // namespace sps::cli
