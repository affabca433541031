#pragma once
// A duration for progress lines and logs: "42s", "3m07s", "2h05m"; "?" when not a duration.
#include <string>

namespace sps {

std::string duration_text(double seconds);

}  // namespace sps
