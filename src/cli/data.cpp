#include "cli/commands.h"

namespace sps::cli {

void register_data(CLI::App& app) {
  app.add_subcommand("data", "prepare token files from text");
}

}  // namespace sps::cli
