#include "util/stop_signals.h"

#include <csignal>
#include <cstdlib>
#include <mutex>

namespace sps {

namespace {

volatile std::sig_atomic_t g_stop_signal = 0;

extern "C" void on_stop_signal(int signal) {
  if (g_stop_signal != 0) {
    std::signal(signal, SIG_DFL);
    std::raise(signal);
    return;
  }
  g_stop_signal = signal;
}

// The handlers are installed while at least one StopSignals lives.
std::mutex g_mutex;
int g_alive = 0;
struct sigaction g_old_int = {}, g_old_term = {};

}  // namespace

StopSignals::StopSignals() {
  const std::lock_guard lock(g_mutex);
  if (g_alive++ > 0) return;
  g_stop_signal = 0;
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &g_old_int);
  sigaction(SIGTERM, &action, &g_old_term);
}

StopSignals::~StopSignals() {
  const std::lock_guard lock(g_mutex);
  if (--g_alive > 0) return;
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
}

int StopSignals::signal() const { return g_stop_signal; }

void StopSignals::die_by_signal() const {
  const int signal = g_stop_signal;
  std::signal(signal, SIG_DFL);
  std::raise(signal);
  std::_Exit(128 + signal);  // not reached: the default action of SIGINT/SIGTERM ends us
}

}  // namespace sps
