#pragma once
// Child processes of `sps experiment run`: each stage of a run (train, eval, bench) is the
// same binary started with other arguments, its output in a log file. Children get their
// own process group so a terminal's Ctrl-C reaches only the runner, which forwards one
// signal to each child (a second signal would end a trainer without its checkpoint).
#include <csignal>
#include <string>
#include <vector>

namespace sps {

struct ChildCommand {
  std::vector<std::string> argv;  // argv[0] is the program
  std::string stdout_path;        // truncated and written
  std::string stderr_path;        // empty: the same file as stdout
  std::vector<std::string> extra_env;  // NAME=VALUE added to (or replacing in) the environment
};

struct ChildResult {
  int exit_status = -1;   // when the child exited
  int signal = 0;         // when a signal ended it
  bool ok() const { return exit_status == 0; }
  std::string describe() const;
};

// Starts the child, waits for it and returns how it ended. Throws UserError when it cannot
// start (program missing, log not writable).
ChildResult run_child(const ChildCommand& command);

// While one of these lives, SIGINT and SIGTERM set stop_requested() and are forwarded once
// to every running child; the previous handlers come back afterwards.
class StopForwarding {
 public:
  StopForwarding();
  ~StopForwarding();
  StopForwarding(const StopForwarding&) = delete;
  StopForwarding& operator=(const StopForwarding&) = delete;

 private:
  struct sigaction previous_int_{}, previous_term_{};
};

bool stop_requested();

// A shell-style rendering of a command line, for dry runs and logs.
std::string quote_command(const std::vector<std::string>& argv);

}  // namespace sps
