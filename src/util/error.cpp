#include "util/error.h"

#include <cstdio>
#include <cstdlib>

namespace sps {

void assertion_failed(const char* expr, const char* file, int line) {
  std::fprintf(stderr, "sps: internal error: assertion '%s' failed at %s:%d\n", expr, file, line);
  std::abort();
}

}  // namespace sps
