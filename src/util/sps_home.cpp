#include "util/sps_home.h"

#include <cstdlib>

#include "util/error.h"

namespace sps {

std::string sps_home() {
  if (const char* home = std::getenv("SPS_HOME"); home && *home) return home;
  const char* user_home = std::getenv("HOME");
  if (!user_home || !*user_home) fail("neither SPS_HOME nor HOME is set");
  return std::string(user_home) + "/.cache/sps";
}

}  // namespace sps
