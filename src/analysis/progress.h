#pragma once
#include <cstdint>
#include <functional>

namespace sps::analysis {

// Called with (units done, units total) as an analysis advances; the CLI draws it.
using Progress = std::function<void(int64_t, int64_t)>;

}  // namespace sps::analysis
