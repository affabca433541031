#include "ops/device.h"

#include <fmt/format.h>

#include <charconv>

#include "ops/cpu/cpu_common.h"
#include "ops/cpu/linear_packed.h"
#include "util/error.h"
#if SPS_WITH_CUDA
#include "ops/cuda/gpu_info.h"
#endif

namespace sps::ops {

std::string Device::name() const {
  return kind == Kind::cpu ? "cpu" : fmt::format("cuda:{}", index);
}

Device parse_device(const std::string& text, const std::string& what) {
  if (text == "cpu") return {};
  if (text == "cuda") return {Device::Kind::cuda, 0};
  if (text.rfind("cuda:", 0) == 0) {
    const char* first = text.data() + 5;
    const char* last = text.data() + text.size();
    int index = -1;
    const auto [end, error] = std::from_chars(first, last, index);
    if (error == std::errc() && end == last && first != last && index >= 0)
      return {Device::Kind::cuda, index};
  }
  fail("{}: '{}' is not a device; expected cpu, cuda or cuda:N (N = 0, 1, …)", what, text);
}

Precision parse_precision(const std::string& text, const std::string& what) {
  if (text == "fp32") return Precision::fp32;
  if (text == "bf16") return Precision::bf16;
  fail("{}: '{}' is not a precision; expected fp32 or bf16", what, text);
}

const char* precision_name(Precision precision) {
  return precision == Precision::bf16 ? "bf16" : "fp32";
}

CudaStatus cuda_status() {
  CudaStatus status;
#if SPS_WITH_CUDA
  status.built = true;
  status.runtime = cuda::runtime_versions();
  status.gpus = cuda::list_gpus(&status.problem);
#endif
  return status;
}

std::string describe_cuda(const CudaStatus& s) {
  if (!s.built) return "cuda not built (this binary has the CPU backend only)";
  std::string text = fmt::format("cuda {}", s.runtime);
  if (!s.problem.empty()) return text + fmt::format("; no GPU usable: {}", s.problem);
  for (size_t i = 0; i < s.gpus.size(); ++i)
    text += fmt::format("; cuda:{} {} (sm_{}{}, {} SMs, {:.1f} GiB)", i, s.gpus[i].name,
                        s.gpus[i].major, s.gpus[i].minor, s.gpus[i].multiprocessors,
                        double(s.gpus[i].memory_bytes) / double(1 << 30));
  return text;
}

std::string describe_cpu_kernels() {
  std::string sets;
  const auto add = [&](bool present, const char* name) {
    if (present) sets += sets.empty() ? name : std::string(", ") + name;
  };
#if defined(__x86_64__)
  bool avx2 = false, fma = false, f16c = false, avx512 = false;
#ifdef __AVX2__
  avx2 = true;
#endif
#ifdef __FMA__
  fma = true;
#endif
#ifdef __F16C__
  f16c = true;
#endif
#ifdef __AVX512F__
  avx512 = true;
#endif
  add(avx512, "AVX-512");
  add(avx2, "AVX2");
  add(fma, "FMA");
  add(f16c, "F16C");
#elif defined(__aarch64__)
  add(true, "NEON");
#endif
  const PackedLinearKernels<float>& packed = packed_linear<float>();
  return fmt::format("cpu kernels: {}-byte vectors{}; packed linear: {} build, {}-byte vectors",
                     cpu::kVecBytes, sets.empty() ? "" : " (" + sets + ")", packed.variant,
                     packed.vector_bytes);
}

void require_usable_device(const Device& device, const std::string& what) {
  if (device.kind == Device::Kind::cpu) return;
  const CudaStatus status = cuda_status();
  if (!status.built)
    fail("{}: {} asked for, but this sps was built without CUDA (configure with "
         "-DSPS_CUDA=ON on a machine with the CUDA toolkit)",
         what, device.name());
  if (!status.problem.empty())
    fail("{}: {} asked for, but no GPU is usable here: {}", what, device.name(), status.problem);
  if (device.index >= int(status.gpus.size()))
    fail("{}: {} asked for, but this machine has {} GPU{} (cuda:0 … cuda:{})", what,
         device.name(), status.gpus.size(), status.gpus.size() == 1 ? "" : "s",
         status.gpus.size() - 1);
}

void require_device(const Device& device, const std::string& what, const std::string& command) {
  if (device.kind == Device::Kind::cpu) return;
  require_usable_device(device, what);
  // The commands the CUDA backend runs.
  if (command == "sps train" || command == "sps generate" || command == "sps eval" ||
      command == "sps serve" || command == "sps bench gemm" || command == "sps bench attention" ||
      command == "sps bench step" || command == "sps bench generate" ||
      command == "sps bench serve")
    return;
  fail("{}: the CUDA backend does not run `{}` yet (docs/gpu.md says what runs on a GPU); "
       "use --device cpu",
       what, command);
}

}  // namespace sps::ops
