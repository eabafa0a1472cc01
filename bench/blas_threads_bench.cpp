// How fast `memtrain train` runs on this CPU with each OpenBLAS build Debian
// offers and with one or all compute threads. Debian's LibTorch runs its own
// kernels on OpenMP threads and its matrix products in whatever
// libblas.so.3 resolves to: OpenBLAS's pthreads build keeps threads of its
// own, which compete with OpenMP's, while its OpenMP build shares OpenMP's.
// Each configuration is a separate `memtrain` process (a BLAS library is
// chosen when the process loads), the build picked by LD_LIBRARY_PATH.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>
#include <thread>

#include "bench/lockstep.h"
#include "bench/memtrain_processes.h"
#include "cli/flags.h"
#include "core/error.h"

namespace memtrain::bench {

namespace {

namespace fs = std::filesystem;

struct BlasBuild {
  std::string name;  // openblas-pthread, openblas-openmp
  std::string dir;   // holds its libblas.so.3
};

// The OpenBLAS builds installed side by side (Debian puts each in a folder of
// its own under the multiarch library folder).
std::vector<BlasBuild> installed_builds() {
  std::vector<BlasBuild> builds;
  for (const char* name : {"openblas-pthread", "openblas-openmp", "openblas-serial"}) {
    for (const char* lib : {"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu"}) {
      const fs::path dir = fs::path(lib) / name;
      if (fs::exists(dir / "libblas.so.3")) builds.push_back({name, dir.string()});
    }
  }
  return builds;
}

// The build the system's libblas.so.3 resolves to, or "" when none of them.
std::string system_build(const std::vector<BlasBuild>& builds) {
  for (const BlasBuild& b : builds) {
    const fs::path system_blas = fs::path(b.dir).parent_path() / "libblas.so.3";
    std::error_code error;
    const fs::path target = fs::canonical(system_blas, error);
    if (!error && target.parent_path() == fs::canonical(b.dir)) return b.name;
  }
  return "";
}

struct Workload {
  std::string name;
  std::vector<std::string> flags;
};

using MeanSteps = std::map<std::tuple<std::string, std::string, int>, std::vector<double>>;

// One row per workload, build and thread count (the median of the rounds'
// mean steps), then each workload's fastest.
void write_steps_table(std::ostringstream& md, const std::vector<Workload>& workloads,
                       const std::vector<BlasBuild>& builds, const std::vector<int>& thread_counts,
                       const std::string& system, MeanSteps& means) {
  std::ostringstream fastest;
  for (const Workload& w : workloads) {
    std::map<std::pair<std::string, int>, double> step;  // median mean step by build and threads
    double best_time = 0;
    std::string best;
    for (const BlasBuild& b : builds) {
      for (int t : thread_counts) {
        const double m = step[{b.name, t}] = median(means[{w.name, b.name, t}]);
        if (best.empty() || m < best_time) {
          best_time = m;
          best = "`" + b.name + "` with " + std::to_string(t) + " thread(s)";
        }
      }
    }
    fastest << "- " << w.name << ": fastest " << best << ".";
    for (const BlasBuild& b : builds) {
      fastest << " `" << b.name << "` on all cores: " << fixed(step[{b.name, thread_counts.back()}] / best_time, 2)
              << "x its step.";
    }
    fastest << "\n";
    for (const BlasBuild& b : builds) {
      for (int t : thread_counts) {
        const double m = step[{b.name, t}];
        md << "| " << w.name << " | " << b.name << (b.name == system ? " (system)" : "") << " | " << t << " | "
           << fixed(m, 3) << " s | " << fixed(m / best_time, 2) << " |\n";
      }
    }
  }
  md << "\n" << fastest.str();
}

}  // namespace

int run(const std::vector<std::string>& args) {
  cli::Flags flags(args, {}, "blas_threads_bench");
  const int steps = static_cast<int>(flags.integer("steps", 10, 3, 100000));
  const int rounds = static_cast<int>(flags.integer("rounds", 3, 1, 100));
  const std::string out = flags.text("out", "docs/BENCHMARKS.md");
  flags.check_all_used();

  const std::vector<BlasBuild> builds = installed_builds();
  if (builds.empty()) {
    throw Error(
        "blas_threads_bench: no OpenBLAS build found (expected a folder such as "
        "/usr/lib/x86_64-linux-gnu/openblas-openmp); scripts/install-deps.sh installs one");
  }
  const std::string system = system_build(builds);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const std::vector<int> thread_counts = cores > 1 ? std::vector<int>{1, cores} : std::vector<int>{1};
  const std::vector<Workload> workloads = {
      {"tagger (default)", {}},
      {"gpt", {"--model", "gpt", "--layers", "6", "--width", "256", "--heads", "4", "--vocab", "2000"}},
      {"resnet", {"--model", "resnet"}},
  };

  char pattern[] = "/tmp/memtrain-blas-XXXXXX";
  const std::string dir = ::mkdtemp(pattern);
  // Per configuration, the mean step of each round; rounds visit every
  // configuration in turn so that drifts of the machine hit all alike.
  MeanSteps means;
  for (int r = 0; r < rounds; ++r) {
    for (const Workload& w : workloads) {
      for (const BlasBuild& b : builds) {
        for (int t : thread_counts) {
          std::fprintf(stderr, "blas_threads_bench: round %d/%d, %s, %s, %d thread(s)\n", r + 1, rounds, w.name.c_str(),
                       b.name.c_str(), t);
          std::vector<std::string> train = {"train",           "--steps", std::to_string(steps), "--threads",
                                            std::to_string(t), "--json",  dir + "/report.json"};
          train.insert(train.end(), w.flags.begin(), w.flags.end());
          run_memtrain(train, dir + "/train.log", {"LD_LIBRARY_PATH=" + b.dir});
          const nlohmann::json report = read_json_file(dir + "/report.json");
          means[{w.name, b.name, t}].push_back(report.at("summary").at("mean_step_seconds").get<double>());
        }
      }
    }
  }
  fs::remove_all(dir);

  std::ostringstream md;
  md << "## CPU threads and the BLAS library: `memtrain train` on each OpenBLAS build\n\n"
     << "Command: `build/bench/blas_threads_bench --steps " << steps << " --rounds " << rounds
     << "` (or `scripts/bench.sh blas`)  \n"
     << "Machine: " << machine() << "; date " << today() << "  \n"
     << "Each row is `memtrain train --steps " << steps
     << " --threads N` with the workload's flags (planner mimose, budget 50%, seed 1), in a process of its own "
        "whose libblas.so.3 is the build named (LD_LIBRARY_PATH); the mean step is the median over "
     << rounds << " rounds, which visit every row in turn. The system's libblas.so.3 resolves to "
     << (system.empty() ? std::string("none of these builds") : "`" + system + "`")
     << ". LibTorch runs its own kernels on OpenMP threads (`--threads`); OpenBLAS's pthreads build runs "
        "matrix products on threads of its own, as many as there are cores, its OpenMP build on OpenMP's.\n\n"
     << "| workload | BLAS build | threads | mean step | / the workload's fastest |\n|---|---|---|---|---|\n";
  write_steps_table(md, workloads, builds, thread_counts, system, means);
  publish("blas_threads_bench", md.str(), out);
  return 0;
}

}  // namespace memtrain::bench

int main(int argc, char** argv) {
  return memtrain::bench::bench_main("blas_threads_bench", memtrain::bench::run, argc, argv);
}
