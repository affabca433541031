#include "experiment/run_process.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "util/error.h"

extern char** environ;

namespace sps {

namespace {

// Children the handler forwards a stop signal to; 0 marks a free slot. A fixed table keeps
// the handler async-signal-safe.
constexpr size_t kMaxChildren = 256;
std::array<std::atomic<pid_t>, kMaxChildren> g_children{};
volatile std::sig_atomic_t g_stop_signal = 0;

extern "C" void forward_stop_signal(int signal) {
  if (g_stop_signal != 0) return;  // forward once: a second signal would end a trainer at once
  g_stop_signal = signal;
  for (auto& child : g_children) {
    const pid_t pid = child.load();
    if (pid > 0) ::kill(pid, signal);
  }
}

size_t register_child(pid_t pid) {
  for (size_t i = 0; i < kMaxChildren; ++i) {
    pid_t free_slot = 0;
    if (g_children[i].compare_exchange_strong(free_slot, pid)) return i;
  }
  SPS_ASSERT(false && "more running children than slots");
  return 0;
}

std::vector<std::string> environment_with(const std::vector<std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    bool replaced = false;
    for (const auto& x : extra)
      replaced = replaced || entry.compare(0, x.find('=') + 1, x, 0, x.find('=') + 1) == 0;
    if (!replaced) env.push_back(entry);
  }
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

std::string ChildResult::describe() const {
  if (signal != 0) return fmt::format("ended by signal {} ({})", signal, ::strsignal(signal));
  return fmt::format("exited with status {}", exit_status);
}

ChildResult run_child(const ChildCommand& command) {
  SPS_ASSERT(!command.argv.empty());
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  const int flags = O_WRONLY | O_CREAT | O_TRUNC;
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, command.stdout_path.c_str(), flags, 0644);
  if (command.stderr_path.empty())
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  else
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, command.stderr_path.c_str(), flags, 0644);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes, 0);

  std::vector<std::string> args = command.argv;
  std::vector<std::string> env = environment_with(command.extra_env);
  std::vector<char*> argv = pointers(args), envp = pointers(env);
  pid_t pid = 0;
  const int error = ::posix_spawn(&pid, argv[0], &actions, &attributes, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (error != 0) fail("cannot start {}: {}", command.argv[0], std::strerror(error));

  const size_t slot = register_child(pid);
  if (g_stop_signal != 0) ::kill(pid, g_stop_signal);  // the signal came before the slot was set
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  g_children[slot].store(0);
  ChildResult result;
  if (WIFEXITED(status)) result.exit_status = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  // posix_spawn reports a failed exec as exit status 127 of the child.
  return result;
}

StopForwarding::StopForwarding() {
  g_stop_signal = 0;
  struct sigaction action {};
  action.sa_handler = forward_stop_signal;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, &previous_int_);
  ::sigaction(SIGTERM, &action, &previous_term_);
}

StopForwarding::~StopForwarding() {
  ::sigaction(SIGINT, &previous_int_, nullptr);
  ::sigaction(SIGTERM, &previous_term_, nullptr);
}

bool stop_requested() { return g_stop_signal != 0; }

std::string quote_command(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    const bool plain = !a.empty() && a.find_first_not_of(
                                         "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                         "0123456789_-./=:,+@%") == std::string::npos;
    if (!out.empty()) out += ' ';
    if (plain) {
      out += a;
    } else {
      out += '\'';
      for (char c : a) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
      out += '\'';
    }
  }
  return out;
}

}  // namespace sps
