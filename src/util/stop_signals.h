#pragma once
// SIGINT and SIGTERM as a request to stop at the next safe point (a training step, a batch
// of documents), so the command can leave its outputs complete or cleanly absent. A second
// signal ends the process at once. StopSignals alive at the same time (two threads' work, or
// one inside another) share one request; the handlers found before the first come back when
// the last goes, in whatever order they go.
#include <signal.h>

#include <stdexcept>

namespace sps {

// Thrown where a stop request ends work before it is done; what was written is undone.
class Interrupted : public std::runtime_error {
 public:
  Interrupted() : std::runtime_error("interrupted") {}
};

class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  bool requested() const { return signal() != 0; }
  int signal() const;  // the signal received, 0 if none

  // Ends the process by the signal received, with the default action (so the shell sees
  // 128 + signal), after the caller has cleaned up.
  [[noreturn]] void die_by_signal() const;
};

}  // namespace sps
