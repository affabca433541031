// sps.Model: load, logits, per-token NLL, the scoring of lm-evaluation-harness's requests,
// evaluation, and the weights as arrays (docs/python.md).
#include "python/model.h"

#include <pybind11/stl.h>

#include <cmath>
#include <limits>

#include "eval/evaluate.h"
#include "eval/rolling.h"
#include "eval/scoring.h"
#include "interop/checkpoint_folder.h"
#include "interop/reference_checkpoint.h"
#include "model/config.h"
#include "model/slot_layout.h"
#include "model/weights_io.h"
#include "ops/backend.h"
#include "ops/device.h"
#include "ops/weight_type.h"
#include "python/tokenizer.h"

namespace sps::python {

PyModel::PyModel(cli::LoadedModel loaded, std::shared_ptr<const std::vector<float>> host_weights,
                 std::string tokenizer_spec)
    : loaded_(std::move(loaded)), host_weights_(std::move(host_weights)),
      tokenizer_spec_(std::move(tokenizer_spec)) {}

std::shared_ptr<BpeTokenizer> PyModel::tokenizer() {
  std::shared_ptr<BpeTokenizer> t = tokenizer_if_any();
  if (!t) throw UserError(tokenizer_error_);
  return t;
}

std::shared_ptr<BpeTokenizer> PyModel::tokenizer_if_any() {
  py::gil_scoped_release release;
  const std::lock_guard<std::mutex> lock(tokenizer_mutex_);
  if (tokenizer_ || !tokenizer_error_.empty()) return tokenizer_;
  if (!tokenizer_spec_.empty()) {  // given: its errors are the caller's to see
    tokenizer_ = std::make_shared<BpeTokenizer>(cli::load_tokenizer(tokenizer_spec_, loaded_));
    return tokenizer_;
  }
  try {
    tokenizer_ = std::make_shared<BpeTokenizer>(cli::load_tokenizer("", loaded_));
  } catch (const UserError& e) {
    tokenizer_error_ = fmt::format("{} (pass tokenizer= to sps.load)", e.what());
  }
  return tokenizer_;
}

std::vector<int32_t> ids_of(PyModel& model, const py::handle& text_or_ids,
                            const std::string& argument) {
  if (py::isinstance<py::str>(text_or_ids) || py::isinstance<py::bytes>(text_or_ids)) {
    const std::string text = text_or_ids.cast<std::string>();
    const std::shared_ptr<BpeTokenizer> tokenizer = model.tokenizer();
    py::gil_scoped_release released;  // encode is thread-safe (tokenizer/bpe.h)
    const std::vector<uint32_t> ids = tokenizer->encode(text);
    return std::vector<int32_t>(ids.begin(), ids.end());
  }
  return token_list(text_or_ids, argument, model.config().vocab_size);
}

namespace {

ops::Device usable_device(const std::string& name) {
  const ops::Device device = ops::parse_device(name, "device");
  ops::require_usable_device(device, "device");
  return device;
}

py::object json_to_python(const nlohmann::ordered_json& j) {
  return py::module_::import("json").attr("loads")(
      j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

py::dict config_dict(const ModelConfig& c) {
  py::dict d;
  d["family"] = c.family;
  d["n_layer"] = c.n_layer;
  d["n_head"] = c.n_head;
  d["hidden_size"] = c.hidden_size;
  d["intermediate_size"] = c.intermediate_size;
  d["vocab_size"] = c.vocab_size;
  d["block_size"] = c.block_size;
  d["window_size"] = c.window_size;
  d["persistent_key_window"] = c.persistent_key_window;
  d["eos_token_id"] = c.eos_token_id;
  d["predict_token_id"] = c.predict_token_id;
  d["pad_token_id"] = c.pad_token_id;
  d["rope_theta"] = c.rope_theta;
  d["norm_eps"] = c.norm_eps;
  d["init_std"] = c.init_std;
  return d;
}

// A model config from the JSON text of a dict of `model:` fields (checked as a YAML file's).
ModelConfig config_from_json(const std::string& json) {
  YAML::Node node;
  try {
    node = YAML::Load(json);
  } catch (const YAML::Exception& e) {
    fail("config: not a mapping of model fields ({})", e.what());
  }
  if (node["model"]) node = node["model"];
  if (!node.IsMap()) fail("config: expected a mapping of model fields (family, n_layer, ...)");
  ModelConfig config = model_config_from_yaml(node, "config");
  config.validate("config");
  return config;
}

// An engine model of `config` on `device` with these weights (checkpoint layout), packed for
// inference as cli::load_model packs the models it loads.
cli::LoadedModel model_from_weights(const ModelConfig& config, const ops::Device& device,
                                    const std::vector<float>& weights, const std::string& source) {
  cli::LoadedModel m;
  m.model = std::make_unique<Model<float>>(config, ops::backend_for(device));
  const size_t P = size_t(m.model->params().total());
  SPS_ASSERT(weights.size() == P);
  ops::on_host(m.model->backend(), m.model->weights(), P, ops::HostAccess::write,
               [&](float* w) { std::copy(weights.begin(), weights.end(), w); });
  m.model->pack_for_inference();
  m.weights_path = source;
  m.config_path = source;
  m.config_doc = YAML::Load(model_config_yaml(config, source));
  return m;
}

std::shared_ptr<PyModel> load(const std::string& path, const std::string& device_name,
                              const std::string& weights,
                              const std::optional<std::string>& tokenizer,
                              const std::string& kv_cache) {
  require_path(path, "path");
  usable_device(device_name);
  cli::DeviceChoice on;
  on.device = device_name;
  on.weight_type = ops::weight_type_name(ops::parse_weight_type(weights, "weights"));
  on.kv_type = kv_type_name(parse_kv_type(kv_cache, "kv_cache"));
  cli::LoadedModel loaded =
      without_gil([&](const StopScope&) { return cli::load_model(path, "", "", on); });
  return std::make_shared<PyModel>(std::move(loaded), nullptr, tokenizer.value_or(""));
}

std::shared_ptr<PyModel> from_weights(const std::string& config_json,
                                      const py::array_t<float, py::array::c_style>& flat,
                                      const std::string& device_name, const std::string& source,
                                      const std::optional<std::string>& tokenizer) {
  const ModelConfig config = config_from_json(config_json);
  const ParamTable table(config);
  if (flat.ndim() != 1 || flat.size() != table.total())
    fail("weights: expected {} floats (the parameters of this config), got {}", table.total(),
         flat.size());
  auto host = std::make_shared<std::vector<float>>(flat.data(), flat.data() + flat.size());
  const ops::Device device = usable_device(device_name);
  cli::LoadedModel loaded = without_gil(
      [&](const StopScope&) { return model_from_weights(config, device, *host, source); });
  return std::make_shared<PyModel>(std::move(loaded), std::move(host), tokenizer.value_or(""));
}

std::shared_ptr<PyModel> from_torch_checkpoint(const std::string& path,
                                               const std::optional<std::string>& family,
                                               const std::optional<int64_t>& window,
                                               const std::string& device_name,
                                               const std::optional<std::string>& tokenizer) {
  require_path(path, "path");
  ImportOptions options;
  options.family = family.value_or("");
  options.window = window.value_or(-1);
  const ops::Device device = usable_device(device_name);
  std::shared_ptr<std::vector<float>> host;
  cli::LoadedModel loaded = without_gil([&](const StopScope&) {
    ImportedCheckpoint ckpt = import_reference_checkpoint(path, options);
    host = std::make_shared<std::vector<float>>(std::move(ckpt.weights));
    return model_from_weights(ckpt.config, device, *host, path);
  });
  return std::make_shared<PyModel>(std::move(loaded), std::move(host), tokenizer.value_or(""));
}

py::list param_table(const ModelConfig& config) {
  py::list out;
  const ParamTable table(config);
  for (const ParamEntry& e : table.entries())
    out.append(py::make_tuple(e.name, py::tuple(py::cast(e.shape)), e.offset));
  return out;
}

// The weights in checkpoint layout as one flat float32 array (ParamTable order): a view of
// the host copy, or the weights file read again into a new array.
py::array_t<float> flat_weights(PyModel& self) {
  if (const auto& host = self.host_weights())
    return array_owning(const_cast<float*>(host->data()), {py::ssize_t(host->size())}, host,
                        /*writeable=*/false);
  const ParamTable& table = self.model().params();
  auto [array, data] = new_array<float>({py::ssize_t(table.total())});
  without_gil([&](const StopScope&) { load_weights(self.loaded().weights_path, table, data); });
  array.attr("flags").attr("writeable") = false;
  return array;
}

// Rows of at most block_size tokens (the logits and NLL inputs).
void require_context(const TokenArray& tokens, int64_t columns, const ModelConfig& c,
                     const char* what) {
  if (columns > c.block_size)
    fail("tokens: rows of {} tokens give {} {} positions, more than the model's block_size of {}",
         tokens.columns(), columns, what, c.block_size);
}

py::array_t<float> logits(PyModel& self, const py::handle& tokens_object) {
  const ModelConfig& c = self.config();
  const TokenArray tokens(tokens_object, "tokens", c.vocab_size);
  const int64_t B = tokens.rows(), T = tokens.columns(), V = c.vocab_size;
  require_context(tokens, T, c, "input");
  std::vector<py::ssize_t> shape = {B, T, V};
  if (tokens.was_1d()) shape.erase(shape.begin());
  auto [array, data] = new_array<float>(shape);
  without_gil([&](const StopScope&) {
    const std::lock_guard<std::mutex> lock(self.mutex());
    const std::vector<int32_t> targets(size_t(B * T), 0);  // unread: no loss is asked for
    ForwardOptions options;
    options.float_logits = data;
    self.model().forward(tokens.data(), targets.data(), B, T, options);
  });
  return array;
}

py::array_t<double> nll(PyModel& self, const py::handle& tokens_object) {
  const ModelConfig& c = self.config();
  const TokenArray tokens(tokens_object, "tokens", c.vocab_size);
  const int64_t B = tokens.rows(), N = tokens.columns(), T = N - 1;
  if (N < 2) fail("tokens: rows of {} token(s); the NLL needs at least 2 (input and target)", N);
  require_context(tokens, T, c, "predicted");
  std::vector<py::ssize_t> shape = {B, T};
  if (tokens.was_1d()) shape.erase(shape.begin());
  auto [array, data] = new_array<double>(shape);
  without_gil([&](const StopScope&) {
    std::vector<int32_t> x(size_t(B * T)), y(size_t(B * T));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) {
        x[size_t(b * T + t)] = tokens.data()[b * N + t];
        y[size_t(b * T + t)] = tokens.data()[b * N + t + 1];
      }
    {
      const std::lock_guard<std::mutex> lock(self.mutex());
      ForwardOptions options;
      options.nll = data;
      self.model().forward(x.data(), y.data(), B, T, options);
    }
    // The terms the loss leaves out (docs/model.md §5: input EOS or PAD) are NaN.
    SlotLayout layout;
    build_slot_layout(layout, x.data(), B, T, c, self.model().family());
    for (int64_t k = 0; k < B * T; ++k)
      if (!layout.keep[size_t(k)]) data[k] = std::numeric_limits<double>::quiet_NaN();
  });
  return array;
}

// A progress callback that ends the work when a stop was asked for, and shows `show` (a
// Python callable (done, total), or None) the progress.
ProgressCallback stopping_progress(const StopScope& scope, const PyCallable& show) {
  return [&scope, show](int64_t done, int64_t total) {
    scope.throw_if_stopped();
    if (show) show(done, total);
  };
}

py::list loglikelihood(PyModel& self, const py::sequence& pairs, int64_t batch,
                       const std::string& scoring_name, const py::object& progress) {
  if (batch < 1) fail("batch: must be at least 1, got {}", batch);
  const eval::Scoring scoring = eval::scoring_from_name(scoring_name);
  std::vector<eval::Request> requests;
  for (size_t i = 0; i < pairs.size(); ++i) {
    const py::sequence pair = pairs[i].cast<py::sequence>();
    if (pair.size() != 2) fail("requests[{}]: expected a (context, continuation) pair", i);
    eval::Request r;
    r.context = ids_of(self, pair[0], fmt::format("context[{}]", i));
    r.continuation = ids_of(self, pair[1], fmt::format("continuation[{}]", i));
    if (r.continuation.empty()) fail("continuation[{}]: empty (nothing to score)", i);
    r.greedy = true;
    requests.push_back(std::move(r));
  }
  const PyCallable show(progress);
  const std::vector<eval::Score> scores = without_gil([&](const StopScope& scope) {
    const std::lock_guard<std::mutex> lock(self.mutex());
    return eval::score_requests(self.model(), requests, batch, scoring,
                                stopping_progress(scope, show));
  });
  py::list out;
  for (const eval::Score& s : scores) out.append(py::make_tuple(s.loglik, s.greedy));
  return out;
}

py::list loglikelihood_rolling(PyModel& self, const py::sequence& texts, int64_t batch,
                               const py::object& progress) {
  if (batch < 1) fail("batch: must be at least 1, got {}", batch);
  std::vector<std::vector<int32_t>> docs;
  for (size_t i = 0; i < texts.size(); ++i)
    docs.push_back(ids_of(self, texts[i], fmt::format("text[{}]", i)));
  const PyCallable show(progress);
  const std::vector<double> logliks = without_gil([&](const StopScope& scope) {
    const std::lock_guard<std::mutex> lock(self.mutex());
    return eval::rolling_logliks(self.model(), docs, self.config().block_size, batch,
                                 stopping_progress(scope, show));
  });
  return py::cast(logliks);
}

py::object evaluate(PyModel& self, const std::vector<std::string>& tasks,
                    const std::map<std::string, std::string>& task_files, const std::string& suite,
                    int64_t batch, int64_t limit, int64_t val_tokens, int64_t corpus_bytes,
                    const std::string& scoring, const py::object& progress) {
  eval::EvalOptions options;
  options.tasks = tasks;
  options.task_files = task_files;
  options.suite = suite;
  options.batch = batch;
  options.limit = limit;
  options.val_tokens = val_tokens;
  options.corpus_bytes = corpus_bytes;
  options.scoring = eval::scoring_from_name(scoring);
  options.quiet = true;
  const eval::EvalPlan plan = eval::plan_evaluation(options);
  const PyCallable bar(progress);  // (label, unit) → a callable (done, total), or None
  const eval::EvalResults results = without_gil([&](const StopScope& scope) {
    options.progress = [&](const std::string& label, const std::string& unit) {
      PyCallable show;
      if (bar) show = bar.with([&](const py::object& f) { return PyCallable(f(label, unit)); });
      return stopping_progress(scope, show);
    };
    const std::lock_guard<std::mutex> lock(self.mutex());
    std::shared_ptr<BpeTokenizer> tokenizer;
    const eval::EvalModel model{self.model(), self.loaded().weights_path, self.loaded().config_path,
                                self.loaded().config_doc, [&]() -> const BpeTokenizer& {
                                  if (!tokenizer) {
                                    py::gil_scoped_acquire gil;
                                    tokenizer = self.tokenizer();
                                  }
                                  return *tokenizer;
                                }};
    return eval::evaluate(model, plan, options);
  });
  return json_to_python(results.results);
}

}  // namespace

void register_model(py::module_& m) {
  py::class_<PyModel, std::shared_ptr<PyModel>>(m, "Model")
      .def_static("load", &load, py::arg("path"), py::arg("device"), py::arg("weights"),
                  py::arg("tokenizer"), py::arg("kv_cache"))
      .def_static("from_weights", &from_weights, py::arg("config_json"), py::arg("weights"),
                  py::arg("device"), py::arg("source"), py::arg("tokenizer"))
      .def_static("from_torch_checkpoint", &from_torch_checkpoint, py::arg("path"),
                  py::arg("family"), py::arg("window"), py::arg("device"), py::arg("tokenizer"))
      .def_property_readonly("config", [](PyModel& s) { return config_dict(s.config()); })
      .def_property_readonly("weights_path", [](PyModel& s) { return s.loaded().weights_path; })
      .def_property_readonly("config_path", [](PyModel& s) { return s.loaded().config_path; })
      .def_property_readonly("device",
                             [](PyModel& s) { return s.model().backend().device().name(); })
      .def_property_readonly("tokenizer", &PyModel::tokenizer)
      .def("param_table", [](PyModel& s) { return param_table(s.config()); })
      .def("flat_weights", &flat_weights)
      .def("logits", &logits, py::arg("tokens"))
      .def("nll", &nll, py::arg("tokens"))
      .def("loglikelihood", &loglikelihood, py::arg("requests"), py::arg("batch"),
           py::arg("scoring"), py::arg("progress"))
      .def("loglikelihood_rolling", &loglikelihood_rolling, py::arg("texts"), py::arg("batch"),
           py::arg("progress"))
      .def("evaluate", &evaluate, py::arg("tasks"), py::arg("task_files"), py::arg("suite"),
           py::arg("batch"), py::arg("limit"), py::arg("val_tokens"), py::arg("corpus_bytes"),
           py::arg("scoring"), py::arg("progress"));
  m.def(
      "param_table",
      [](const std::string& config_json) { return param_table(config_from_json(config_json)); },
      py::arg("config_json"));
}

}  // namespace sps::python
