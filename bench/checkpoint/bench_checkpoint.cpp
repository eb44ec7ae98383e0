// Checkpoint cost per save (issue 16): the time training is blocked by a synchronous and by
// an asynchronous save, the staging copy, bytes per rank, and the write bandwidth, on the
// threads backend (FSDP over `ranks` threads). Compare the bandwidth with dd on the same
// disk: bench/checkpoint/compare_dd.sh does both. Medians over the saves; the first async save
// also allocates (and touches) the staging arena the others reuse, so it is printed apart.
//
//   bench_checkpoint FOLDER [debug|large] [ranks] [saves] [fsync 0|1]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <tessera/comm/threads.hpp>
#include <tessera/train/checkpoint.hpp>
#include <tessera/train/parallel_llama.hpp>
#include <tessera/train/recipes.hpp>

using namespace tessera;
namespace fs = std::filesystem;

namespace {
/// A model ~14x the debug model's parameters that still fits this machine's memory.
struct large_model {
  static constexpr llama_config config{.name = "bench_large", .dim = 512, .n_layers = 8, .n_heads = 8,
                                       .n_kv_heads = 8, .vocab_size = 8192, .multiple_of = 256};
};
struct large_fsdp {
  static constexpr std::string_view name = "large_fsdp";
  using model = large_model;
  using mesh = tessera::mesh<axis<"dp">>;
  using parallelize = tessera::parallelize<fsdp<"dp">>;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class R>
void bench(const fs::path& folder, int ranks, int saves, bool fsync) {
  std::vector<std::int32_t> tokens(20000);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<std::int32_t>((i * 7) % 2048);
  for (auto mode : {train::async_mode::disabled, train::async_mode::async}) {
    fs::remove_all(folder);
    std::vector<double> blocked, staging, write;
    std::uint64_t bytes = 0;
    comm::run_threads(ranks, [&](comm::threads_communicator& c) {
      device_mesh<typename R::mesh> dm(typename R::mesh(ranks), c);
      train::parallel_llama<R> pm(dm);
      pm.init_weights(0);
      train::batch_loader loader(tokens, 2, 16, 0);
      train::basic_trainer<train::parallel_llama<R>> tr(pm, loader, 1000, 1, {}, 0);
      train::checkpointer<train::parallel_llama<R>> ck(pm, tr, loader,
                                                       {.folder = folder.string(), .keep_latest_k = 2, .mode = mode,
                                                        .fsync = fsync});
      for (int s = 1; s <= saves; ++s) {
        ck.save(s);
        const auto st = ck.last();
        ck.finish();  // the write's time is known once it is done
        if (c.rank() == 0) {
          blocked.push_back(st.blocked_s);
          staging.push_back(st.staging_s);
          write.push_back(ck.last().write_s);
          bytes = st.bytes;
        }
      }
    });
    const double total_bytes = static_cast<double>(bytes) * ranks;  // every FSDP rank writes an equal share
    std::printf("%-10s %d ranks %-5s fsync=%d: blocked %8.1f ms (first save %8.1f ms)  staging %7.1f ms  "
                "write %8.1f ms  %7.1f MiB/rank  write bandwidth %7.1f MiB/s (all ranks)\n",
                std::string(R::name).c_str(), ranks, mode == train::async_mode::async ? "async" : "sync", fsync ? 1 : 0,
                1e3 * median(blocked), 1e3 * blocked.front(), 1e3 * median(staging), 1e3 * median(write),
                static_cast<double>(bytes) / (1 << 20), total_bytes / (1 << 20) / median(write));
  }
  fs::remove_all(folder);
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_checkpoint FOLDER [debug|large] [ranks] [saves] [fsync 0|1]\n");
    return 2;
  }
  const fs::path folder = argv[1];
  const std::string model = argc > 2 ? argv[2] : "debug";
  const int ranks = argc > 3 ? std::atoi(argv[3]) : 2;
  const int saves = argc > 4 ? std::atoi(argv[4]) : 5;
  const bool fsync = argc > 5 && std::atoi(argv[5]) != 0;
  if (ranks < 1 || saves < 1 || (model != "debug" && model != "large")) {
    std::fprintf(stderr, "bench_checkpoint: bad arguments\n");
    return 2;
  }
  if (model == "debug")
    bench<recipes::debug_fsdp>(folder, ranks, saves, fsync);
  else
    bench<large_fsdp>(folder, ranks, saves, fsync);
}
