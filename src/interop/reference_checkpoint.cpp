#include "interop/reference_checkpoint.h"

#include <cstring>
#include <limits>
#include <map>
#include <set>

#include "interop/torch_archive.h"
#include "model/family.h"
#include "model/params.h"
#include "util/error.h"
#include "util/process_stats.h"

namespace sps {

namespace {

constexpr const char* kCompilePrefix = "_orig_mod.";
constexpr const char* kTiedHead = "lm_head.weight";

struct Reader {
  const TorchArchive& archive;
  const PickleDocument& doc;

  const PickleValue& dict(const PickleValue* v, const std::string& field) const {
    if (!v) fail("{}: no '{}' in the checkpoint", archive.path(), field);
    if (v->kind != PickleKind::dict)
      fail("{}: '{}' is a {}, expected a dict", archive.path(), field, pickle_kind_name(v->kind));
    return *v;
  }
  const PickleValue* get(const PickleValue& parent, const std::string& key) const {
    return doc.find(parent, key);
  }
  int64_t integer(const PickleValue& v, const std::string& field) const {
    if (v.kind != PickleKind::integer)
      fail("{}: {} is a {}, expected an integer", archive.path(), field, pickle_kind_name(v.kind));
    return v.integer;
  }
  double real(const PickleValue& v, const std::string& field) const {
    if (v.kind == PickleKind::integer) return double(v.integer);
    if (v.kind != PickleKind::real)
      fail("{}: {} is a {}, expected a number", archive.path(), field, pickle_kind_name(v.kind));
    return v.real;
  }
  const PickleTensor& tensor(const PickleValue& v, const std::string& field) const {
    if (v.kind != PickleKind::tensor)
      fail("{}: {} is a {}, expected a tensor", archive.path(), field, pickle_kind_name(v.kind));
    return v.tensor;
  }
};

std::string shape_text(const std::vector<int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

ModelConfig read_model_config(const Reader& r, const PickleValue& root, const ImportOptions& options,
                              std::string* family_from) {
  const std::string& path = r.archive.path();
  const PickleValue& args = r.dict(r.get(root, "model_args"), "model_args");
  ModelConfig c;
  auto int_arg = [&](const char* key, bool required, auto* out) {
    const PickleValue* v = r.get(args, key);
    if (!v || v->kind == PickleKind::none) {
      if (required) fail("{}: model_args.{} is missing", path, key);
      return false;
    }
    using T = std::remove_pointer_t<decltype(out)>;
    const int64_t value = r.integer(*v, std::string("model_args.") + key);
    if (value < int64_t(std::numeric_limits<T>::min()) || value > int64_t(std::numeric_limits<T>::max()))
      fail("{}: model_args.{} = {} is out of range", path, key, value);
    *out = static_cast<T>(value);
    return true;
  };
  int_arg("n_layer", true, &c.n_layer);
  int_arg("n_head", true, &c.n_head);
  int_arg("hidden_size", true, &c.hidden_size);
  int_arg("intermediate_size", true, &c.intermediate_size);
  int_arg("vocab_size", true, &c.vocab_size);
  int_arg("block_size", true, &c.block_size);
  int_arg("eos_token_id", true, &c.eos_token_id);
  int_arg("pad_token_id", true, &c.pad_token_id);
  const bool has_predict = int_arg("predict_token_id", false, &c.predict_token_id);
  int64_t window = -1;
  int_arg("window_size", false, &window);
  if (const PickleValue* v = r.get(args, "norm_eps")) c.norm_eps = r.real(*v, "model_args.norm_eps");
  if (const PickleValue* v = r.get(args, "rope_theta")) c.rope_theta = r.real(*v, "model_args.rope_theta");
  if (const PickleValue* v = r.get(args, "bias"); v && v->kind == PickleKind::boolean && v->integer)
    fail("{}: model_args.bias is true; the models here have no biases", path);

  // The family: the model class named in config.model._target_, else --family.
  std::string family;
  if (const PickleValue* config = r.get(root, "config"); config && config->kind == PickleKind::dict) {
    if (const PickleValue* model = r.get(*config, "model"); model && model->kind == PickleKind::dict) {
      if (const PickleValue* target = r.get(*model, "_target_"); target && target->kind == PickleKind::string) {
        family = family_of_reference_class(target->text);
        if (family.empty())
          fail("{}: config.model._target_ '{}' is not a model class this importer knows", path, target->text);
        *family_from = "config.model._target_";
      }
    }
  }
  if (!options.family.empty()) {
    family_by_name(options.family);  // a known name
    if (!family.empty() && family != options.family)
      fail("{}: the checkpoint holds a {} model (config.model._target_), not --family {}", path,
           family, options.family);
    if (family.empty()) *family_from = "--family";
    family = options.family;
  }
  if (family.empty())
    fail("{}: the checkpoint does not name its model class (config.model._target_); give --family",
         path);
  c.family = family;

  if (family != "standard") {
    if (window >= 0 && options.window >= 0 && window != options.window)
      fail("{}: the checkpoint was trained with window_size {} (model_args), not --window {}", path,
           window, options.window);
    if (window < 0) window = options.window;
    if (window < 0)
      fail("{}: a {} checkpoint without model_args.window_size; give --window", path, family);
    if (!has_predict) fail("{}: a {} checkpoint without model_args.predict_token_id", path, family);
    c.window_size = window;
  } else {
    if (options.window >= 0) fail("--window: the standard family has no window");
    c.window_size = 0;
    // A standard model never sees PREDICT; keep the GPT-2 id when it fits, else V − 2.
    if (!has_predict && (c.predict_token_id >= c.vocab_size || c.predict_token_id == c.eos_token_id ||
                         c.predict_token_id == c.pad_token_id))
      c.predict_token_id = static_cast<int32_t>(c.vocab_size - 2);
  }
  c.validate(path + " (model_args)");
  return c;
}

// The state dict under our names: the `_orig_mod.` prefix dropped; all-or-none.
std::map<std::string, const PickleValue*> model_tensors(const Reader& r, const PickleValue& model) {
  std::map<std::string, const PickleValue*> out;
  bool prefixed = false, plain = false;
  for (size_t i = 0; i + 1 < model.items.size(); i += 2) {
    const PickleValue& key = r.doc.at(model.items[i]);
    if (key.kind != PickleKind::string) fail("{}: model has a key that is not a string", r.archive.path());
    std::string name = key.text;
    if (name.rfind(kCompilePrefix, 0) == 0) {
      name = name.substr(std::strlen(kCompilePrefix));
      prefixed = true;
    } else {
      plain = true;
    }
    if (!out.emplace(name, &r.doc.at(model.items[i + 1])).second)
      fail("{}: model.{} appears twice", r.archive.path(), name);
  }
  if (prefixed && plain)
    fail("{}: the state dict mixes names with and without the '_orig_mod.' prefix", r.archive.path());
  return out;
}

void read_optimizer(const Reader& r, const PickleValue& root, const ParamTable& table,
                    ImportedCheckpoint* out) {
  const std::string& path = r.archive.path();
  const PickleValue& optimizer = r.dict(r.get(root, "optimizer"), "optimizer");
  const PickleValue& state = r.dict(r.get(optimizer, "state"), "optimizer.state");
  const PickleValue* groups = r.get(optimizer, "param_groups");
  if (!groups || groups->kind != PickleKind::list)
    fail("{}: optimizer.param_groups is missing or not a list", path);
  // The reference's AdamW groups: ≥2-D parameters (decayed) then the others, each in
  // module order, which is our table order; indices count on across the groups.
  std::vector<const ParamEntry*> order;
  for (bool decayed : {true, false})
    for (const auto& e : table.entries())
      if (e.decayed == decayed) order.push_back(&e);
  std::vector<int64_t> ids;
  for (uint32_t g : groups->items) {
    const PickleValue* params = r.get(r.doc.at(g), "params");
    if (!params || params->kind != PickleKind::list) fail("{}: optimizer.param_groups[].params is not a list", path);
    for (uint32_t p : params->items) ids.push_back(r.integer(r.doc.at(p), "optimizer.param_groups[].params[]"));
  }
  if (ids.size() != order.size())
    fail("{}: the optimizer has {} parameters, the model {}", path, ids.size(), order.size());
  if (state.items.empty())
    fail("{}: the optimizer has no moments yet (saved before the first step); drop --with-optimizer", path);
  out->exp_avg.assign(size_t(table.total()), 0.0f);
  out->exp_avg_sq.assign(size_t(table.total()), 0.0f);
  int64_t step = -1;
  for (size_t k = 0; k < ids.size(); ++k) {
    const ParamEntry& e = *order[k];
    const PickleValue* entry = nullptr;
    for (size_t i = 0; i + 1 < state.items.size(); i += 2) {
      const PickleValue& key = r.doc.at(state.items[i]);
      if (key.kind == PickleKind::integer && key.integer == ids[k]) entry = &r.doc.at(state.items[i + 1]);
    }
    const std::string field = fmt::format("optimizer.state[{}] ({})", ids[k], e.name);
    if (!entry || entry->kind != PickleKind::dict) fail("{}: {} is missing", path, field);
    for (const bool second : {false, true}) {
      const char* key = second ? "exp_avg_sq" : "exp_avg";
      const PickleValue* v = r.get(*entry, key);
      if (!v) fail("{}: {}.{} is missing", path, field, key);
      const PickleTensor& t = r.tensor(*v, field + "." + key);
      if (t.shape != e.shape)
        fail("{}: {}.{} has shape {}, the parameter {}", path, field, key, shape_text(t.shape), shape_text(e.shape));
      const std::vector<float> values = r.archive.read_floats(t, field + "." + key);
      std::memcpy((second ? out->exp_avg_sq : out->exp_avg).data() + e.offset, values.data(),
                  sizeof(float) * values.size());
    }
    const PickleValue* s = r.get(*entry, "step");
    if (!s) fail("{}: {}.step is missing", path, field);
    int64_t this_step = 0;
    if (s->kind == PickleKind::tensor) {
      const std::vector<float> v = r.archive.read_floats(s->tensor, field + ".step");
      if (v.size() != 1) fail("{}: {}.step is not a scalar", path, field);
      this_step = static_cast<int64_t>(v[0]);
    } else {
      this_step = static_cast<int64_t>(r.real(*s, field + ".step"));
    }
    if (step >= 0 && this_step != step)
      fail("{}: {}.step is {}, other parameters have {}", path, field, this_step, step);
    step = this_step;
  }
  out->optimizer_step = step;
}

// Where the run stood, for `sps train --resume`, which counts one step for both the LR
// schedule (iter_num in the reference) and AdamW's bias correction (the optimizer's step).
void read_progress(const Reader& r, const PickleValue& root, ImportedCheckpoint* out) {
  const std::string& path = r.archive.path();
  const PickleValue* iter = r.get(root, "iter_num");
  if (!iter)
    fail("{}: no iter_num (the steps done), which resuming needs; drop --with-optimizer", path);
  if (out->iter_num != out->optimizer_step)
    fail("{}: iter_num is {}, but the optimizer made {} updates (optimizer.state[].step); sps "
         "resumes with one step count for both",
         path, out->iter_num, out->optimizer_step);
  const PickleValue* tokens = r.get(root, "last_save_tokens");
  if (!tokens)
    fail("{}: no last_save_tokens (the tokens seen), which resuming needs; drop --with-optimizer",
         path);
  out->tokens_seen = r.integer(*tokens, "last_save_tokens");
  if (out->tokens_seen < 0) fail("{}: last_save_tokens is negative ({})", path, out->tokens_seen);
}

}  // namespace

ImportedCheckpoint import_reference_checkpoint(const std::string& path, const ImportOptions& options) {
  const TorchArchive archive(path);
  const Reader r{archive, archive.document()};
  const PickleValue& root = r.doc.root();
  if (root.kind != PickleKind::dict)
    fail("{}: the pickle holds a {}, expected the trainer's checkpoint dict", path, pickle_kind_name(root.kind));

  ImportedCheckpoint out;
  out.config = read_model_config(r, root, options, &out.family_from);
  if (const PickleValue* it = r.get(root, "iter_num")) out.iter_num = r.integer(*it, "iter_num");

  const ParamTable table(out.config);
  const auto tensors = model_tensors(r, r.dict(r.get(root, "model"), "model"));
  std::set<std::string> known{kTiedHead};
  for (const auto& e : table.entries()) known.insert(e.name);
  for (const auto& [name, value] : tensors)
    if (!known.count(name))
      fail("{}: model.{} is not a parameter of a {} model with these model_args", path, name,
           out.config.family);

  // Every tensor is checked before the weights are allocated, so model_args cannot ask for
  // more than the archive's declared tensors hold.
  for (const auto& e : table.entries()) {
    const auto it = tensors.find(e.name);
    if (it == tensors.end()) fail("{}: model.{} is missing", path, e.name);
    const PickleTensor& t = r.tensor(*it->second, "model." + e.name);
    if (t.shape != e.shape)
      fail("{}: model.{} has shape {}, model_args give {}", path, e.name, shape_text(t.shape), shape_text(e.shape));
    archive.check_floats(t, "model." + e.name);
  }
  require_memory(__int128(table.total()) * sizeof(float) * (options.with_optimizer ? 3 : 1),
                 fmt::format("{}: the imported weights{}", path,
                             options.with_optimizer ? " and AdamW moments" : ""));
  out.weights.assign(size_t(table.total()), 0.0f);
  for (const auto& e : table.entries()) {
    const PickleTensor& t = r.tensor(*tensors.at(e.name), "model." + e.name);
    const std::vector<float> values = archive.read_floats(t, "model." + e.name);
    std::memcpy(out.weights.data() + e.offset, values.data(), sizeof(float) * values.size());
  }

  // The tied head: one storage in a real checkpoint; two copies must agree exactly.
  if (const auto head = tensors.find(kTiedHead); head != tensors.end()) {
    const PickleTensor& h = r.tensor(*head->second, "model.lm_head.weight");
    const PickleTensor& wte = r.tensor(*tensors.at("transformer.wte.weight"), "model.transformer.wte.weight");
    if (!archive.same_view(h, wte)) {
      const ParamEntry& e = table.entries()[0];
      if (h.shape != e.shape)
        fail("{}: model.lm_head.weight has shape {}, the tied embedding {}", path, shape_text(h.shape), shape_text(e.shape));
      const std::vector<float> values = archive.read_floats(h, "model.lm_head.weight");
      for (int64_t k = 0; k < e.numel; ++k)
        if (std::memcmp(&values[k], &out.weights[e.offset + k], sizeof(float)) != 0)
          fail("{}: model.lm_head.weight differs from model.transformer.wte.weight at [{}, {}] "
               "({} vs {}); the two tied copies must be equal",
               path, k / e.shape[1], k % e.shape[1], values[k], out.weights[e.offset + k]);
    }
  }

  if (options.with_optimizer) {
    read_optimizer(r, root, table, &out);
    read_progress(r, root, &out);
  }
  return out;
}

}  // namespace sps
