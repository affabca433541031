#pragma once
// Each subcommand file registers its CLI11 subcommand; the callback does the work.
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "ops/device.h"

namespace sps::cli {

void register_bench(CLI::App& app);
void register_tokenizer(CLI::App& app);
void register_data(CLI::App& app);
void register_train(CLI::App& app);
void register_eval(CLI::App& app);
void register_generate(CLI::App& app);
void register_analyze(CLI::App& app);
void register_experiment(CLI::App& app);
void register_convert(CLI::App& app);
void register_serve(CLI::App& app);

// --device cpu|cuda[:N] on `command` (named `name` in messages), checked when the command
// line has been read; returns where the chosen device's name is read after parsing.
// Commands with a recipe take system.device instead (sps train).
const std::string& add_device_option(CLI::App* command, const std::string& name);

// The same with --precision fp32|bf16 (`precision_help` its help), checked with the device:
// bf16 on every device, or, where what bf16 changes runs on a GPU only (the tensor-core
// attention), refused on the CPU.
struct DeviceChoice {
  std::string device = "cpu", precision = "fp32", weight_type = "f32", kv_type = "f32";
};
enum class Bf16On { every_device, gpu_only };
const DeviceChoice& add_device_and_precision_options(CLI::App* command, const std::string& name,
                                                     const std::string& precision_help,
                                                     Bf16On bf16_on);

// --precision's value as a comma-separated list (`bench step --precision fp32,bf16`); the
// commands that take one precision parse it whole, so a list there is refused in one line.
std::vector<ops::Precision> parse_precisions(const std::string& list);

// --device with --weight-type f32|bf16|int8, how an inference command holds the projection
// weights (ops/weight_type.h; not f32 only on the CPU), and --kv-type f32|bf16, how it holds
// the KV cache (model/kv_cache.h; bf16 on the CPU only), checked with the device.
const DeviceChoice& add_device_and_weight_type_options(CLI::App* command,
                                                       const std::string& name);

// Version, git revision, build type, CPU target, BLAS and CUDA: what `sps --version` prints.
std::string version_text();

}  // namespace sps::cli
