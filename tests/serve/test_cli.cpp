// `sps serve` as a program: it listens on a free loopback port, answers what `sps generate`
// prints for the same prompt, seed and sampling flags, drains on SIGTERM (a running stream
// ends, exit status 0), and refuses bad flags with one line and exit status 2.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "model/weights_io.h"
#include "run_command.h"
#include "serve_fixtures.h"
#include "tokenizer/bpe.h"
#include "util/safetensors_edits.h"
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

// --kv-type bf16: the server says so when it starts and answers what generate prints with it.
TEST(ServeCli, Bf16KvCacheAnswersWhatGeneratePrintsWithIt) {
  Checkpoint ckpt("sps");
  ServeProcess serve(ckpt.args() + " --parallel 2 --kv-type bf16", ckpt.dir);
  ASSERT_GT(serve.port, 0) << read_whole_file(serve.err_path);
  EXPECT_NE(read_whole_file(serve.err_path).find("f32 weights, bf16 KV cache"), std::string::npos)
      << read_whole_file(serve.err_path);
  std::string generated;
  ASSERT_EQ(run_command(quote(kSps) + " generate " + ckpt.args() +
                            " --prompt 'Tell me' --max-new-tokens 12 --kv-type bf16 --threads 1 "
                            "2>/dev/null",
                        &generated),
            0);
  httplib::Client c("127.0.0.1", serve.port);
  c.set_read_timeout(60, 0);
  int status = 0;
  const json j = post_json(c, "/v1/completions",
                           {{"prompt", "Tell me"}, {"max_tokens", 12}, {"temperature", 0}}, &status);
  ASSERT_EQ(status, 200) << j.dump();
  EXPECT_EQ(j["choices"][0]["text"].get<std::string>() + "\n", as_json_text(generated));
  EXPECT_EQ(serve.stop(SIGTERM), 0) << read_whole_file(serve.err_path);
}

TEST(ServeCli, BadFlagsAreOneLineAndStatusTwo) {
  Checkpoint ckpt("standard");
  std::string err;
  const auto run = [&](const std::string& args) {
    std::string out;
    const std::string err_path = ckpt.dir.file("err.txt");
    // A bound on the time: a flag that should be refused but starts a server fails the test.
    const int status =
        run_command("timeout 30 " + quote(kSps) + " serve " + args + " 2>" + quote(err_path), &out);
    err = read_whole_file(err_path);
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << args << ": " << err;
    return status;
  };
  EXPECT_EQ(run(ckpt.args() + " --device cuda"), 2);
  EXPECT_EQ(run(ckpt.args() + " --api-key a --api-key-file " + quote(ckpt.path + "/config.yaml")), 2);
  EXPECT_EQ(run(ckpt.args() + " --api-key-file " + quote(ckpt.dir.file("missing"))), 2);
  EXPECT_EQ(run(ckpt.args() + " --port 70000"), 2);
  EXPECT_EQ(run(ckpt.args() + " --parallel 0"), 2);
  EXPECT_EQ(run(ckpt.args() + " --queue 0"), 2);
  EXPECT_EQ(run("--checkpoint " + quote(ckpt.dir.file("nowhere"))), 2);
  // An empty key, from any source, would otherwise mean an open server (`--api-key "$UNSET"`).
  EXPECT_EQ(run(ckpt.args() + " --api-key ''"), 2);
  EXPECT_EQ(err, "sps: --api-key: the API key is empty or only whitespace; give a real key, or "
                 "leave out --api-key and --api-key-file for a server without one\n");
  EXPECT_EQ(run(ckpt.args() + " --api-key ' \t'"), 2);
  EXPECT_NE(err.find("--api-key: the API key is empty or only whitespace"), std::string::npos);
  const std::string blank = ckpt.dir.file("blank.key");
  write_whole_file(blank, " \n\t\n");
  EXPECT_EQ(run(ckpt.args() + " --api-key-file " + quote(blank)), 2);
  EXPECT_NE(err.find("--api-key-file " + blank + ": the API key is empty"), std::string::npos)
      << err;
  // Rows × context that cannot fit: one line, needed vs available, before anything is allocated.
  EXPECT_EQ(run(ckpt.args() + " --ctx 1048576 --parallel 1024"), 2);
  EXPECT_EQ(err.rfind("sps: --parallel 1024 with --ctx 1048576: the KV caches, decode buffers and "
                      "prefill activations of 1024 rows × 1048576 positions: needs ",
                      0),
            0u)
      << err;
  EXPECT_NE(err.find(" of memory is available"), std::string::npos) << err;

  // What is served is the model stored with the weights, and only intact weights.
  const std::string config = ckpt.path + "/config.yaml", weights = ckpt.path + "/model.safetensors";
  const std::string yaml = read_whole_file(config);
  const size_t heads = yaml.find("n_head: 2\n");
  ASSERT_NE(heads, std::string::npos) << yaml;
  std::string edited = yaml;
  edited[heads + 8] = '4';
  write_whole_file(config, edited);
  EXPECT_EQ(run(ckpt.args()), 2);
  EXPECT_NE(err.find(weights + " was saved with model.n_head = "), std::string::npos) << err;
  EXPECT_NE(err.find("the model stored with the weights decides"), std::string::npos) << err;
  write_whole_file(config, yaml);
  flip_tensor_bit(weights, "transformer.wte.weight", 4 * 3 + 3, 5);
  EXPECT_EQ(run(ckpt.args()), 2);
  EXPECT_EQ(err, "sps: " + weights +
                     ": tensor 'transformer.wte.weight' does not match its "
                     "checksum: the file is damaged\n");
}

// Two servers on one port would split its clients between them (maybe two different models):
// the second fails in one line naming the port, and the first goes on serving.
TEST(ServeCli, ASecondServerOnABusyPortFails) {
  Checkpoint ckpt("standard");
  ServeProcess first(ckpt.args(), ckpt.dir);
  ASSERT_GT(first.port, 0) << read_whole_file(first.err_path);
  const std::string err_path = ckpt.dir.file("second.err");
  std::string out;
  EXPECT_EQ(
      run_command("timeout 60 " + quote(kSps) + " serve " + ckpt.args() + " --threads 1 --port " +
                      std::to_string(first.port) + " 2>" + quote(err_path),
                  &out),
      2);
  EXPECT_EQ(read_whole_file(err_path),
            fmt::format("sps: cannot listen on 127.0.0.1:{0}: port {0} is in use (another server "
                        "runs there?)\n",
                        first.port));
  httplib::Client c("127.0.0.1", first.port);
  auto health = c.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(first.stop(SIGTERM), 0);
}

// Resident memory (KiB) and open file descriptors of process `pid`.
int64_t resident_kib(pid_t pid) {
  const std::string status = read_whole_file("/proc/" + std::to_string(pid) + "/status");
  const size_t at = status.find("VmRSS:");
  return at == std::string::npos ? -1 : std::stoll(status.substr(at + 6));
}
int64_t open_descriptors(pid_t pid) {
  int64_t n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++n;
  return n;
}

// The text of a streamed completion: its chunks' text, in order.
std::string streamed_text(const std::string& body) {
  std::string text;
  for (size_t at = body.find("data: {"); at != std::string::npos;
       at = body.find("data: {", at + 1)) {
    const json chunk =
        json::parse(body.substr(at + 6, body.find("\n\n", at) - at - 6), nullptr, false);
    if (chunk.is_object() && !chunk["choices"].empty())
      text += chunk["choices"][0].value("text", "");
  }
  return text;
}

// The server under normal, slow, disconnecting and malformed clients at once, for a fixed
// time on loopback (bounded client counts): every normal request is answered, and answered
// right, and the process's memory and descriptors at the end are within a stated bound of
// where they were after a warm-up of the same mix (docs/reliability.md).
TEST(ServeCli, BoundedSoakOfHostileClients) {
  constexpr double kWarmUpSeconds = 1.5, kSoakSeconds = 6;
  constexpr int64_t kResidentGrowthKib = 16 << 10, kDescriptorGrowth = 2;
  Checkpoint ckpt("sps");
  ServeProcess serve(ckpt.args() + " --parallel 4 --ctx 600 --timeout 1 --max-connections 64 "
                                   "--max-connections-per-client 64",
                     ckpt.dir);
  ASSERT_GT(serve.port, 0) << read_whole_file(serve.err_path);
  const json request = {
      {"prompt", "Once upon"}, {"max_tokens", 16}, {"temperature", 0}, {"ignore_eos", true}};
  httplib::Client c("127.0.0.1", serve.port);
  c.set_read_timeout(30, 0);
  int status = 0;
  const json first = post_json(c, "/v1/completions", request, &status);
  ASSERT_EQ(status, 200) << first.dump();
  const std::string expected = first["choices"][0]["text"];

  std::atomic<int> normal{0}, wrong{0}, slow_closed{0}, malformed{0};
  const auto run_clients = [&](double seconds) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    const auto running = [&] { return std::chrono::steady_clock::now() < until; };
    std::vector<std::thread> clients;
    for (int k = 0; k < 2; ++k)  // normal: plain and streamed, on keep-alive connections
      clients.emplace_back([&, k] {
        httplib::Client n("127.0.0.1", serve.port);
        n.set_read_timeout(30, 0);
        for (int i = 0; running(); ++i) {
          json r = request;
          r["stream"] = (i + k) % 2 == 1;
          auto res = n.Post("/v1/completions", r.dump(), "application/json");
          const bool right =
              res && res->status == 200 &&
              (r["stream"]
                   ? streamed_text(res->body)
                   : json::parse(res->body)["choices"][0]["text"].get<std::string>()) == expected;
          ++normal;
          if (!right) ++wrong;
        }
      });
    clients.emplace_back([&] {  // slow: 8 at a time, a byte every 0.3 s, closed at 1 s
      const std::string head = "POST /v1/completions HTTP/1.1\r\nHost: x\r\n";
      while (running()) {
        std::vector<std::unique_ptr<RawConnection>> slow;
        for (int i = 0; i < 8; ++i) slow.push_back(std::make_unique<RawConnection>(serve.port));
        for (size_t b = 0; b < 6; ++b) {
          for (auto& s : slow) s->send(head.substr(b, 1));
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
        }
        for (auto& s : slow) {
          bool closed = false;
          s->read_until_closed(std::chrono::milliseconds(2000), &closed);
          if (closed) ++slow_closed;
        }
      }
    });
    clients.emplace_back([&] {  // disconnecting: mid-stream, mid-wait, mid-request
      for (int i = 0; running(); ++i) {
        httplib::Client d("127.0.0.1", serve.port);
        json r = request;
        r["max_tokens"] = 500;
        if (i % 3 == 0) {
          r["stream"] = true;
          httplib::Request req;
          req.method = "POST";
          req.path = "/v1/completions";
          req.body = r.dump();
          req.set_header("Content-Type", "application/json");
          req.content_receiver = [](const char*, size_t, uint64_t, uint64_t) { return false; };
          d.send(req);
        } else if (i % 3 == 1) {
          d.set_read_timeout(0, 50000);
          d.Post("/v1/completions", r.dump(), "application/json");
        } else {
          RawConnection half(serve.port);
          const std::string bytes =
              "POST /v1/completions HTTP/1.1\r\nContent-Length: 100\r\n\r\n{\"pro";
          half.send(bytes);
        }
      }
    });
    clients.emplace_back([&] {  // malformed: bytes no client should send
      const std::vector<std::string> bad = {
          std::string("\0\xff\x13 garbage\r\n\r\n", 16),
          "GET / HTTP/9.9\r\n\r\n",
          "POST /v1/completions HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n",
          "POST /tokenize HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
          "POST /tokenize HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
          "POST /v1/completions HTTP/1.1\r\nContent-Length: 5\r\n\r\n{oops",
          "GET /health HTTP/1.1\r\nX: " + std::string(70000, 'x') + "\r\n\r\n"};
      for (size_t i = 0; running(); ++i) {
        RawConnection m(serve.port);
        m.send(bad[i % bad.size()] + "GET /health HTTP/1.1\r\nConnection: close\r\n\r\n");
        bool closed = false;
        if (status_of(m.read_until_closed(std::chrono::milliseconds(3000), &closed)) > 0)
          ++malformed;
      }
    });
    for (auto& t : clients) t.join();
  };
  // Until only the asking connection is open; then that one closes too.
  const auto settle = [&] {
    for (int k = 0; k < 200; ++k) {
      RawConnection m(serve.port);
      m.send("GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n");
      const std::string text = m.read_until_closed(std::chrono::milliseconds(2000));
      if (text.find("\nsps_connections_open 1\n") != std::string::npos &&
          text.find("\nsps_active_rows 0\n") != std::string::npos)
        break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  };

  run_clients(kWarmUpSeconds);  // what the mix allocates once (arenas, caches) is in the baseline
  settle();
  const int64_t resident = resident_kib(serve.pid), descriptors = open_descriptors(serve.pid);
  normal = 0;
  wrong = 0;
  run_clients(kSoakSeconds);
  settle();
  const int64_t resident_after = resident_kib(serve.pid),
                descriptors_after = open_descriptors(serve.pid);
  std::printf("soak: %d normal requests, %d slow clients closed, %d malformed answered; RSS %lld "
              "-> %lld KiB, descriptors %lld -> %lld\n",
              normal.load(), slow_closed.load(), malformed.load(), (long long)resident,
              (long long)resident_after, (long long)descriptors, (long long)descriptors_after);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GE(normal.load(), 10);
  EXPECT_GT(slow_closed.load(), 0);
  EXPECT_GT(malformed.load(), 0);
  EXPECT_LE(resident_after, resident + kResidentGrowthKib);
  EXPECT_LE(descriptors_after, descriptors + kDescriptorGrowth);
  EXPECT_EQ(serve.stop(SIGTERM), 0) << read_whole_file(serve.err_path);
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
