#include "cli/commands.h"

namespace sps::cli {

void register_bench(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "measure kernels and training steps");
  bench->require_subcommand(1);
}

}  // namespace sps::cli
