// sps: one binary, one subcommand per file in src/cli/.
#include <csignal>
#include <cstdio>
#include <exception>

#include "cli/commands.h"
#include "util/cpu_check.h"
#include "util/error.h"

// Before any other code of the binary runs, static constructors included (101 is the first
// priority left to programs).
__attribute__((constructor(101))) SPS_BASELINE_CPU static void check_cpu_before_main() {
  sps::require_build_cpu_features();
}

int main(int argc, char** argv) {
  // Past a file-size limit (ulimit -f), let write() fail with EFBIG, so every command reports
  // it and removes its temporary files, instead of being killed by SIGXFSZ.
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{"sps: State-Prediction Separation Transformers and their baselines"};
  app.require_subcommand(1);
  app.set_version_flag("--version", sps::cli::version_text,
                       "print the version, revision, build and libraries, then exit");
  sps::cli::register_bench(app);
  sps::cli::register_tokenizer(app);
  sps::cli::register_data(app);
  sps::cli::register_train(app);
  sps::cli::register_eval(app);
  sps::cli::register_generate(app);
  sps::cli::register_analyze(app);
  sps::cli::register_experiment(app);
  sps::cli::register_convert(app);
  sps::cli::register_serve(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    std::fputs(e.what(), stdout);
    return 0;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "sps: %s\n", e.what());
    return 2;
  } catch (const sps::UserError& e) {
    std::fprintf(stderr, "sps: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sps: internal error: %s\n", e.what());
    return 1;
  }
  return 0;
}
