// sps --version: what this binary is, for bug reports and the records of a run.
#include <cblas.h>
#include <fmt/format.h>

#include "cli/commands.h"
#include "ops/backend_registry.h"

namespace sps::cli {

std::string version_text() {
  std::string backends;
  for (const ops::BackendEntry& backend : ops::backend_registry())
    backends += backend.describe() + "\n";
  return fmt::format("sps {}\n"
                     "revision {}\n"
                     "build {}, {}\n"
                     "blas {} (kernels for {})\n"
                     "{}",
                     SPS_VERSION, SPS_REVISION, SPS_BUILD_TYPE, SPS_CPU_TARGET,
                     openblas_get_config(), openblas_get_corename(), backends);
}

}  // namespace sps::cli
