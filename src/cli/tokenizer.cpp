#include "cli/commands.h"

namespace sps::cli {

void register_tokenizer(CLI::App& app) {
  auto* tokenizer = app.add_subcommand("tokenizer", "encode, decode and train tokenizers");
  tokenizer->require_subcommand(1);
}

}  // namespace sps::cli
