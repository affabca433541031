// sps convert INPUT --to sps|gguf|hf --out PATH [--family F] [--window W] [--with-optimizer]
//                   [--precision f32|f16|bf16|q8_0] [--tokenizer gpt2|FOLDER|RANKS]
// The input format is detected: a zip archive is a torch.save checkpoint of the paper's
// reference trainer; a folder is an sps checkpoint (or a run folder, its newest checkpoint).
// --to sps --with-optimizer writes a run folder that `sps train --resume` continues.
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "cli/commands.h"
#include "cli/model_files.h"
#include "interop/checkpoint_folder.h"
#include "interop/gguf.h"
#include "interop/hf_export.h"
#include "interop/reference_checkpoint.h"
#include "model/params.h"
#include "model/weights_io.h"
#include "tokenizer/bpe.h"
#include "util/error.h"

namespace sps::cli {
namespace {

namespace fs = std::filesystem;

struct ConvertArgs {
  std::string input, to, out;
  ImportOptions import;
  std::string precision = "f32", tokenizer = "gpt2";
};

bool is_zip(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  return in.gcount() == 4 && magic[0] == 'P' && magic[1] == 'K' && magic[2] == 3 && magic[3] == 4;
}

// A model read from either input format.
struct SourceModel {
  ModelConfig config;
  std::vector<float> weights;
};

SourceModel read_sps_checkpoint(const std::string& dir) {
  const ModelFiles files = resolve_model_files(dir, "", "");
  SourceModel m;
  m.config = load_model_config(files.config_path, {});
  const ParamTable table(m.config);
  m.weights.resize(size_t(table.total()));
  load_weights(files.weights_path, table, m.weights.data());
  return m;
}

void run_convert(const ConvertArgs& a) {
  std::error_code ec;
  const bool folder = fs::is_directory(a.input, ec);
  if (!folder && !fs::is_regular_file(a.input, ec)) fail("{}: no such file or folder", a.input);
  if (!folder && !is_zip(a.input))
    fail("{}: not a format sps convert reads (a torch.save checkpoint, which is a zip archive, "
         "or an sps checkpoint folder)",
         a.input);
  if (a.to == "sps") {
    if (folder) fail("{}: already an sps checkpoint folder", a.input);
    const ImportedCheckpoint ckpt = import_reference_checkpoint(a.input, a.import);
    write_imported_checkpoint(a.out, ckpt, a.input);
    std::printf("%s: %s model (family from %s, window %lld), %lld layers, d %lld, vocab %lld%s -> %s\n",
                a.input.c_str(), ckpt.config.family.c_str(), ckpt.family_from.c_str(),
                (long long)ckpt.config.window_size, (long long)ckpt.config.n_layer,
                (long long)ckpt.config.hidden_size, (long long)ckpt.config.vocab_size,
                ckpt.exp_avg.empty() ? "" : ", with AdamW state", a.out.c_str());
    if (!ckpt.exp_avg.empty()) {
      const long long step = ckpt.optimizer_step, tokens = ckpt.tokens_seen;
      std::printf("%s: a run folder at step %lld (%lld tokens, %lld per step); continue it with "
                  "sps train --config RECIPE system.out_dir=%s --resume\n",
                  a.out.c_str(), step, tokens, step > 0 ? tokens / step : 0, a.out.c_str());
      std::printf("note: from there on the data come in sps's sampler order, not the reference "
                  "trainer's (its sampler and RNG state are not imported), so the continuation is "
                  "not the run PyTorch would have made\n");
    }
    return;
  }
  if (a.to != "gguf" && a.to != "hf") fail("--to {}: expected sps, gguf or hf", a.to);
  if (a.import.with_optimizer) fail("--with-optimizer: only for --to sps");
  const GgufType precision = gguf_type_by_name(a.precision);
  if (a.to == "hf" && precision != GgufType::f32) fail("--precision: --to hf writes F32 only");
  SourceModel m;
  if (folder) {
    m = read_sps_checkpoint(a.input);
  } else {
    ImportedCheckpoint ckpt = import_reference_checkpoint(a.input, a.import);
    m.config = ckpt.config;
    m.weights = std::move(ckpt.weights);
  }
  if (a.to == "gguf" && m.config.family != "standard")
    fail("--to gguf: {} holds a {} model; its predict slots need sps's runtime, so only the "
         "standard family exports to GGUF",
         a.input, m.config.family);
  const ExportVocabulary vocabulary = export_vocabulary(BpeTokenizer::load(a.tokenizer), m.config);
  if (a.to == "hf") {
    write_hf_folder(a.out, m.config, m.weights.data(), vocabulary);
    std::printf("%s: %s model -> %s (%s)\n", a.input.c_str(), m.config.family.c_str(), a.out.c_str(),
                m.config.family == "standard" ? "LlamaForCausalLM" : "reference-code parameter names, sps section in config.json");
    return;
  }
  write_gguf(a.out, m.config, m.weights.data(), vocabulary, precision,
             fs::path(a.input).filename().string());
  std::printf("%s: standard model, %lld layers, d %lld, vocab %lld -> %s (GGUF, llama, %s)\n",
              a.input.c_str(), (long long)m.config.n_layer, (long long)m.config.hidden_size,
              (long long)m.config.vocab_size, a.out.c_str(), a.precision.c_str());
}

}  // namespace

void register_convert(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "convert", "import reference-trainer checkpoints (torch.save); export to GGUF or a Hugging Face folder");
  static ConvertArgs a;
  cmd->add_option("input", a.input,
                  "a reference trainer's ckpt*.pt, or an sps checkpoint or run folder")
      ->required();
  cmd->add_option("--to", a.to, "sps (a checkpoint folder) | gguf (llama.cpp) | hf (a Hugging Face folder)")->required();
  cmd->add_option("--out", a.out, "output path (a folder for sps and hf, a file for gguf)")->required();
  cmd->add_option("--family", a.import.family,
                  "family when the checkpoint does not name it: standard | sps | reverse_sps | delayed_state");
  cmd->add_option("--window", a.import.window, "window when the checkpoint does not give it")
      ->check(CLI::Range(int64_t(0), std::numeric_limits<int64_t>::max()));
  cmd->add_flag("--with-optimizer", a.import.with_optimizer,
                "--to sps: also import AdamW's moments, step and tokens seen; OUT is then a run "
                "folder that `sps train --resume` continues");
  cmd->add_option("--precision", a.precision, "--to gguf: f32 (default), f16, bf16 or q8_0 (the weights of --weight-type int8)");
  cmd->add_option("--tokenizer", a.tokenizer,
                  "--to gguf|hf: gpt2 (default), a folder with encoder.json and vocab.bpe, or a rank file (sps tokenizer train)");
  cmd->callback([] { run_convert(a); });
}

}  // namespace sps::cli
