// `sps serve` as a program: it listens on a free loopback port, answers what `sps generate`
// prints for the same prompt, seed and sampling flags, drains on SIGTERM (a running stream
// ends, exit status 0), and refuses bad flags with one line and exit status 2.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "model/weights_io.h"
#include "run_command.h"
#include "serve_fixtures.h"
#include "tokenizer/bpe.h"
#include "util/sps_home.h"
#include "util/temp_dir.h"

extern char** environ;

namespace sps::testing {
namespace {

using nlohmann::json;
const std::string kSps = SPS_BINARY;

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// A checkpoint folder of a byte-level micro model and its rank file.
struct Checkpoint {
  TempDir dir;
  std::string path, tokenizer;
  explicit Checkpoint(const std::string& family) {
    ServeModel m(family);
    path = dir.file("ckpt");
    std::filesystem::create_directories(path);
    const std::string yaml = model_yaml(m.config);
    write_whole_file(path + "/config.yaml", yaml);
    save_weights(path + "/model.safetensors", m.model->params(), m.model->weights(), yaml);
    tokenizer = dir.file("bytes.tiktoken");
    byte_level_tokenizer().save_rank_file(tokenizer);
  }
  std::string args() const { return "--checkpoint " + quote(path) + " --tokenizer " + quote(tokenizer); }
};

// `sps serve ARGS --port 0` in the background; the port is read from its stderr.
struct ServeProcess {
  pid_t pid = -1;
  int port = 0;
  std::string err_path;

  ServeProcess(const std::string& args, const TempDir& dir) {
    err_path = dir.file("serve.err");
    const std::string command = "exec " + quote(kSps) + " serve " + args + " --port 0 --threads 1 2>" +
                                quote(err_path) + " </dev/null";
    const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
    if (posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ) != 0) pid = -1;
    for (int k = 0; k < 600 && port == 0 && pid > 0; ++k) {
      const std::string err = read_whole_file(err_path);
      const size_t at = err.find("http://127.0.0.1:");
      if (at != std::string::npos && err.find('\n', at) != std::string::npos)
        port = std::stoi(err.substr(at + 17));
      else
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  // Sends `signal` and waits (bounded) for the exit status; -1 if it did not exit.
  int stop(int signal, int wait_seconds = 30) {
    if (pid <= 0) return -1;
    ::kill(pid, signal);
    for (int k = 0; k < wait_seconds * 20; ++k) {
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        pid = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return -1;
  }
  ~ServeProcess() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

TEST(ServeCli, AnswersWhatGeneratePrintsAndDrainsOnSigterm) {
  for (const std::string family : {"standard", "sps"}) {
    Checkpoint ckpt(family);
    ServeProcess serve(ckpt.args() + " --parallel 4 --ctx 4000 --grace 20", ckpt.dir);
    ASSERT_GT(serve.port, 0) << read_whole_file(serve.err_path);
    httplib::Client c("127.0.0.1", serve.port);
    c.set_read_timeout(60, 0);
    std::string generated;
    ASSERT_EQ(run_command(quote(kSps) + " generate " + ckpt.args() +
                              " --prompt 'Tell me' --max-new-tokens 12 --temperature 0.9 --top-k 40 "
                              "--seed 5 --threads 1 2>/dev/null",
                          &generated),
              0);
    int status = 0;
    const json j = post_json(c, "/v1/completions",
                             {{"prompt", "Tell me"}, {"max_tokens", 12}, {"temperature", 0.9},
                              {"top_k", 40}, {"seed", 5}},
                             &status);
    ASSERT_EQ(status, 200) << j.dump();
    EXPECT_EQ(j["choices"][0]["text"].get<std::string>() + "\n", as_json_text(generated)) << family;

    // SIGTERM while a long stream runs: the stream still ends properly, the exit status is 0.
    std::string streamed;
    std::thread client([&] {
      httplib::Client s("127.0.0.1", serve.port);
      s.set_read_timeout(60, 0);
      auto res = s.Post("/v1/completions",
                        json({{"prompt", "a"}, {"max_tokens", 3000}, {"stream", true}, {"ignore_eos", true}}).dump(),
                        "application/json");
      if (res) streamed = res->body;
    });
    // The stream runs once more tokens were generated than the first request's 12 (the
    // active-rows gauge alone can still show the first request's row).
    for (int k = 0; k < 400; ++k) {
      auto m = c.Get("/metrics");
      const std::string key = "\nsps_generated_tokens_total ";
      const size_t at = m ? m->body.find(key) : std::string::npos;
      if (at != std::string::npos && std::stoll(m->body.substr(at + key.size())) > 12 + 8) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_EQ(serve.stop(SIGTERM), 0) << read_whole_file(serve.err_path);
    client.join();
    EXPECT_NE(streamed.find("data: [DONE]"), std::string::npos)
        << family << ": " << streamed.size() << " bytes streamed; server: " << read_whole_file(serve.err_path);
    EXPECT_NE(read_whole_file(serve.err_path).find("stopped"), std::string::npos);
  }
}

TEST(ServeCli, BadFlagsAreOneLineAndStatusTwo) {
  Checkpoint ckpt("standard");
  const auto run = [&](const std::string& args) {
    std::string out;
    const std::string err_path = ckpt.dir.file("err.txt");
    const int status = run_command(quote(kSps) + " serve " + args + " 2>" + quote(err_path), &out);
    const std::string err = read_whole_file(err_path);
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << args << ": " << err;
    return status;
  };
  EXPECT_EQ(run(ckpt.args() + " --device cuda"), 2);
  EXPECT_EQ(run(ckpt.args() + " --api-key a --api-key-file " + quote(ckpt.path + "/config.yaml")), 2);
  EXPECT_EQ(run(ckpt.args() + " --api-key-file " + quote(ckpt.dir.file("missing"))), 2);
  EXPECT_EQ(run(ckpt.args() + " --port 70000"), 2);
  EXPECT_EQ(run(ckpt.args() + " --parallel 0"), 2);
  EXPECT_EQ(run("--checkpoint " + quote(ckpt.dir.file("nowhere"))), 2);
}

// A client nobody here wrote: the official `openai` npm package (scripts/get-openai-client.sh
// installs it) gets what the server's own answers say, plain and streamed.
TEST(ServeCli, OfficialOpenAINodeClient) {
  if (run_command("command -v node >/dev/null 2>&1") != 0) GTEST_SKIP() << "node is absent";
  const std::string source = SPS_SOURCE_DIR;
  std::string log;
  ASSERT_EQ(run_command("bash " + quote(source + "/scripts/get-openai-client.sh") + " 2>&1", &log), 0) << log;
  Checkpoint ckpt("sps");
  ServeProcess serve(ckpt.args() + " --api-key k3y --model-name micro", ckpt.dir);
  ASSERT_GT(serve.port, 0) << read_whole_file(serve.err_path);
  std::string out;
  const int rc = run_command("node " + quote(source + "/tests/serve/openai_client.mjs") + " " +
                                 quote(sps_home() + "/node-openai/node_modules") + " " +
                                 std::to_string(serve.port) + " k3y 2>&1",
                             &out);
  ASSERT_EQ(rc, 0) << out;
  const json got = json::parse(out, nullptr, false);
  ASSERT_TRUE(got.is_object()) << out;
  // The same requests straight over HTTP.
  httplib::Client c("127.0.0.1", serve.port);
  c.set_bearer_token_auth("k3y");
  int status = 0;
  const json completion = post_json(c, "/v1/completions",
                                    {{"prompt", "Hello"}, {"max_tokens", 8}, {"temperature", 0}}, &status);
  ASSERT_EQ(status, 200) << completion.dump();
  const json chat = post_json(c, "/v1/chat/completions",
                              {{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                               {"max_tokens", 8}, {"temperature", 0}},
                              &status);
  ASSERT_EQ(status, 200) << chat.dump();
  EXPECT_EQ(got["model"], "micro");
  EXPECT_EQ(got["completion"], completion["choices"][0]["text"]);
  EXPECT_EQ(got["streamed"], completion["choices"][0]["text"]);
  EXPECT_EQ(got["finish_reason"], completion["choices"][0]["finish_reason"]);
  EXPECT_EQ(got["usage"]["completion_tokens"], completion["usage"]["completion_tokens"]);
  EXPECT_EQ(got["chat"], chat["choices"][0]["message"]["content"]);
  EXPECT_EQ(got["chat_streamed"], chat["choices"][0]["message"]["content"]);
  EXPECT_EQ(got["unauthorized"], 401);
  EXPECT_EQ(serve.stop(SIGTERM), 0);
}

}  // namespace
}  // namespace sps::testing
