// sps.train: the trainer of `sps train` (train/trainer.h) in this process, with each
// metrics record handed to a Python callable that may stop the run.
#include <pybind11/stl.h>

#include "ops/device.h"
#include "python/support.h"
#include "train/collective.h"
#include "train/train_config.h"
#include "train/trainer.h"

namespace sps::python {

namespace {

py::dict train_run(const std::string& config_path, std::vector<std::string> overrides,
                   const std::string& device, bool resume, int64_t stop_after,
                   const py::object& on_log, const py::object& progress) {
  require_path(config_path, "config");
  if (stop_after < 0) fail("stop_after: expected a step count >= 1, got {}", stop_after);
  if (!device.empty()) {
    ops::parse_device(device, "device");
    overrides.push_back("system.device=" + device);
  }
  const TrainConfig config = load_train_config(config_path, overrides);
  const std::unique_ptr<Collective> single = make_single_process_collective();
  ops::require_device(process_device(config.system.device, "system.device", *single),
                      device.empty() ? config.source + ": system.device" : "device", "sps train");
  TrainOptions options;
  options.resume = resume;
  options.stop_after_steps = stop_after;
  options.quiet = true;
  options.take_signals = on_main_thread();
  const PyCallable log(on_log), show(progress);
  const int64_t total_tokens = config.total_steps() * config.tokens_per_step();
  options.on_metrics = [&](const nlohmann::ordered_json& record) {
    bool go_on = true;
    if (show && record.contains("tokens")) show(record["tokens"].get<int64_t>(), total_tokens);
    if (log)
      go_on = log.with([&](const py::object& f) {
        const py::object result = f(py::module_::import("json").attr("loads")(record.dump()));
        return !(result.is(py::bool_(false)));
      });
    return go_on;
  };
  // On Python's main thread the trainer takes SIGINT and SIGTERM itself (a checkpoint, then
  // it returns) and the signal then goes on to Python; elsewhere they stay Python's, and a
  // run is stopped through on_log.
  TrainSummary summary;
  {
    py::gil_scoped_release release;
    summary = train(config, *single, options);
  }
  StopScope::deliver(summary.signal);
  py::dict d;
  d["out_dir"] = config.system.out_dir;
  d["step"] = summary.step;
  d["tokens"] = summary.tokens;
  d["finished"] = summary.finished;
  d["interrupted"] = summary.interrupted;
  d["val_nll"] = summary.val_nll >= 0 ? py::object(py::float_(summary.val_nll)) : py::none();
  d["tokens_per_second"] = summary.tokens_per_second;
  return d;
}

}  // namespace

void register_training(py::module_& m) {
  m.def("train", &train_run, py::arg("config"), py::arg("overrides"), py::arg("device"),
        py::arg("resume"), py::arg("stop_after"), py::arg("on_log"), py::arg("progress"));
}

}  // namespace sps::python
