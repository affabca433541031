// sps --version: what this binary is, for bug reports and the records of a run.
#include <cblas.h>
#include <fmt/format.h>

#include "cli/commands.h"
#include "ops/backend.h"
#include "ops/device.h"

namespace sps::cli {

std::string version_text() {
  return fmt::format(
      "sps {}\n"
      "revision {}\n"
      "build {}, {}\n"
      "blas {} (kernels for {})\n"
      "{}\n"
      "cpu {}\n"
      "{}\n",
      SPS_VERSION, SPS_REVISION, SPS_BUILD_TYPE, SPS_CPU_TARGET, openblas_get_config(),
      openblas_get_corename(), ops::describe_cpu_kernels(),
      ops::cpu_backend(ops::Precision::bf16).describe_gemms(),
      ops::describe_cuda(ops::cuda_status()));
}

}  // namespace sps::cli
