// `strata localai --addr HOST:PORT`: strata as a LocalAI gRPC backend (the binary LocalAI starts
// per backend). The serving flags of `strata serve` give defaults; LoadModel's ModelOptions
// override them: ModelFile / ModelPath+Model (the directory), ContextSize / MaxModelLen,
// GPUMemoryUtilization, LoadFormat, CUDA, Tokenizer, CacheTypeKey (fp8), DType, and Options
// entries "key:value" for max_num_seqs, max_num_batched_tokens, block_size, device, preset,
// mamba_ssm_cache_dtype, tool_call_parser, reasoning_parser.
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <pthread.h>
#include <thread>

#include "command.h"
#include "core/check.h"
#include "core/log.h"
#include "serve_setup.h"
#include "server/localai_backend.h"

namespace strata::cli {
namespace {

namespace fs = std::filesystem;

struct LocalAIFlags {
  ServingFlags serving;
  std::string addr = "localhost:50051";
};

int64_t to_int(const std::string& key, const std::string& v) {
  try {
    return std::stoll(v);
  } catch (...) {
    fail("localai: option {}: not an integer: {}", key, v);
  }
}

ServingFlags flags_from_options(ServingFlags f, const backend::ModelOptions& o) {
  std::string dir = o.modelfile();
  if (dir.empty() || !fs::is_directory(dir)) {
    if (!o.modelpath().empty() && !o.model().empty())
      dir = (fs::path(o.modelpath()) / o.model()).string();
    else if (!o.model().empty())
      dir = o.model();
  }
  if (!dir.empty()) {
    f.src.model = dir;
    f.model_positional.clear();
  }
  if (o.maxmodellen() > 0) f.max_model_len = o.maxmodellen();
  else if (o.contextsize() > 0) f.max_model_len = o.contextsize();
  if (o.gpumemoryutilization() > 0) f.gpu_memory_utilization = o.gpumemoryutilization();
  if (!o.loadformat().empty()) f.src.load_format = o.loadformat();
  if (o.cuda()) f.device = "cuda";
  if (!o.tokenizer().empty()) f.tokenizer = o.tokenizer();
  if (!o.cachetypekey().empty()) f.kv_cache_dtype = o.cachetypekey().rfind("fp8", 0) == 0 ? "fp8" : "auto";
  if (!o.dtype().empty()) f.src.dtype = o.dtype();
  for (const auto& opt : o.options()) {
    const size_t colon = opt.find(':');
    if (colon == std::string::npos) fail("localai: option \"{}\" is not key:value", opt);
    const std::string k = opt.substr(0, colon), v = opt.substr(colon + 1);
    if (k == "max_num_seqs") f.max_num_seqs = to_int(k, v);
    else if (k == "max_num_batched_tokens") f.max_num_batched_tokens = to_int(k, v);
    else if (k == "block_size") f.block_size = to_int(k, v);
    else if (k == "device") f.device = v;
    else if (k == "preset") f.src.preset = v;
    else if (k == "mamba_ssm_cache_dtype") f.mamba_ssm_cache_dtype = v;
    else if (k == "tool_call_parser") f.tool_call_parser = v;
    else if (k == "reasoning_parser") f.reasoning_parser = v;
    else if (k == "served_model_name") f.served_model_name = v;
    else log::warn("localai: option {} is not used by strata", k);
  }
  if (!f.src.preset.empty() && o.loadformat().empty()) f.src.load_format = "dummy";
  if (f.src.load_format == "dummy") f.src.model.clear();
  return f;
}

struct Holder {
  std::unique_ptr<Served> served;
  std::unique_ptr<server::EngineClient> client;
  ~Holder() {
    client.reset();  // the engine thread ends before the model goes
    served.reset();
  }
};

void run_localai(const LocalAIFlags& flags) {
  // Signals are taken by one thread (sigwait) so that gRPC's threads never see them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);

  server::LocalAIBackend backend([&](const backend::ModelOptions& o) {
    const ServingFlags f = flags_from_options(flags.serving, o);
    auto holder = std::make_shared<Holder>();
    holder->served = build_serving(
        f, "localai", [](const std::string& what, const std::function<void()>& load) {
          log::info("localai: loading {}", what);
          load();
        });
    holder->client = server::make_async_engine_client(std::move(holder->served->engine));
    server::LocalAIModel m;
    m.ctx = &holder->served->ctx;
    m.engine = holder->client.get();
    m.owner = holder;
    return m;
  });
  backend.start(flags.addr);
  std::fprintf(stderr, "localai: gRPC backend listening on %s (port %d)\n", flags.addr.c_str(),
               backend.port());
  std::fflush(stderr);
  std::thread signals([&] {
    int sig = 0;
    sigwait(&set, &sig);
    log::info("localai: signal {}: shutting down", sig);
    backend.shutdown();
  });
  backend.wait();
  pthread_kill(signals.native_handle(), SIGTERM);  // ends sigwait if shutdown came otherwise
  signals.join();
}

void setup(CLI::App& app) {
  auto* sub = app.add_subcommand("localai", "Serve as a LocalAI gRPC backend (backend.Backend)");
  static LocalAIFlags f;
  sub->add_option("--addr", f.addr, "HOST:PORT to listen on")->capture_default_str();
  add_serving_flags(sub, f.serving);
  sub->callback([] { run_localai(f); });
}

}  // namespace
STRATA_COMMAND(setup);
}  // namespace strata::cli
