#include "ops/device.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "ops/backend_registry.h"
#include "util/error.h"

namespace sps::ops {

std::string Device::name() const {
  return backend_entry(*this).indexed ? fmt::format("{}:{}", backend, index) : backend;
}

std::string device_forms() {
  std::vector<std::string> forms;
  bool indexed = false;
  for (const BackendEntry& b : backend_registry()) {
    forms.push_back(b.name);
    if (b.indexed) forms.push_back(b.name + ":N"), indexed = true;
  }
  const std::string last = forms.back();
  forms.pop_back();
  return fmt::format("{} or {}{}", fmt::join(forms, ", "), last, indexed ? " (N = 0, 1, …)" : "");
}

Device parse_device(const std::string& text, const std::string& what) {
  const size_t colon = text.find(':');
  const BackendEntry* backend = find_backend(text.substr(0, colon));
  if (backend && colon == std::string::npos) return {backend->name, 0};
  if (backend && backend->indexed) {
    const char* first = text.data() + colon + 1;
    const char* last = text.data() + text.size();
    int index = -1;
    const auto [end, error] = std::from_chars(first, last, index);
    if (error == std::errc() && end == last && first != last && index >= 0)
      return {backend->name, index};
  }
  fail("{}: '{}' is not a device; expected {}", what, text, device_forms());
}

bool device_of_local_rank(const std::string& text) {
  const BackendEntry* backend = find_backend(text);
  return backend && backend->indexed;
}

Precision parse_precision(const std::string& text, const std::string& what) {
  if (text == "fp32") return Precision::fp32;
  if (text == "bf16") return Precision::bf16;
  fail("{}: '{}' is not a precision; expected fp32 or bf16", what, text);
}

const char* precision_name(Precision precision) {
  return precision == Precision::bf16 ? "bf16" : "fp32";
}

void require_usable_device(const Device& device, const std::string& what) {
  const BackendEntry& backend = backend_entry(device);
  std::string problem;
  const int count = backend.devices(&problem);
  if (count == 0) fail("{}: {} asked for, but {}", what, device.name(), problem);
  if (device.index >= count)
    fail("{}: {} asked for, but this machine has {} {}{} ({} … {})", what, device.name(), count,
         backend.device_noun, count == 1 ? "" : "s", Device{device.backend, 0}.name(),
         Device{device.backend, count - 1}.name());
}

void require_device(const Device& device, const std::string& what, const std::string& command) {
  require_usable_device(device, what);
  const BackendEntry& backend = backend_entry(device);
  if (backend.commands.empty() || std::find(backend.commands.begin(), backend.commands.end(),
                                            command) != backend.commands.end())
    return;
  fail("{}: the {} backend does not run `{}` yet ({} says what runs on a {}); use --device {}",
       what, backend.title, command, backend.guide, backend.device_noun,
       backend_registry().front().name);
}

}  // namespace sps::ops
