#pragma once
// The source tree: the experiment tests read its recipes and write matrices beside them.
#include <string>

namespace sps::testing {

inline const std::string kSource = SPS_SOURCE_DIR;

}  // namespace sps::testing
