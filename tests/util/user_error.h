#pragma once
// The message of the UserError an action throws: what a user would read.
#include <functional>
#include <string>

#include "util/error.h"

namespace sps::testing {

inline std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace sps::testing
