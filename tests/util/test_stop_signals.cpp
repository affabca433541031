// StopSignals alive at once share one stop request, and the handlers found before the first
// come back when the last goes, whichever goes last (two threads' work ends in any order).
#include "util/stop_signals.h"

#include <gtest/gtest.h>

#include <csignal>
#include <optional>

namespace sps {
namespace {

volatile std::sig_atomic_t g_own_handler_calls = 0;
extern "C" void own_handler(int) { g_own_handler_calls = g_own_handler_calls + 1; }

void (*current_handler(int signal))(int) {
  struct sigaction now {};
  sigaction(signal, nullptr, &now);
  return now.sa_handler;
}

TEST(StopSignals, OverlappingScopesShareTheRequestAndRestoreTheFirstHandlers) {
  struct sigaction own {
  }, before_int{}, before_term{};
  own.sa_handler = own_handler;
  sigemptyset(&own.sa_mask);
  sigaction(SIGINT, &own, &before_int);
  sigaction(SIGTERM, &own, &before_term);
  {
    std::optional<StopSignals> first(std::in_place), second(std::in_place);
    EXPECT_NE(current_handler(SIGINT), own_handler);
    std::raise(SIGINT);
    EXPECT_EQ(first->signal(), SIGINT);
    EXPECT_EQ(second->signal(), SIGINT);
    first.reset();                                     // the one made first goes first
    EXPECT_NE(current_handler(SIGTERM), own_handler);  // `second` still takes them
    EXPECT_TRUE(second->requested());
  }
  EXPECT_EQ(current_handler(SIGINT), own_handler);
  EXPECT_EQ(current_handler(SIGTERM), own_handler);
  EXPECT_EQ(g_own_handler_calls, 0);
  {
    const StopSignals later;  // a new scope starts without a request
    EXPECT_FALSE(later.requested());
  }
  sigaction(SIGINT, &before_int, nullptr);
  sigaction(SIGTERM, &before_term, nullptr);
}

}  // namespace
}  // namespace sps
