#include "cli/compute_threads.h"

#include <cstdio>
#include <string>
#include <thread>

#include <ATen/Parallel.h>

#include "cli/blas_library.h"

namespace memtrain::cli {

void use_compute_threads(int threads) {
  at::set_num_threads(threads);
  static bool warned = false;  // a command may set them more than once
  if (warned) return;
  std::string warning = blas_threading_warning(loaded_blas_library(), threads);
  const unsigned cores = std::thread::hardware_concurrency();
  if (warning.empty() && cores > 0 && static_cast<unsigned>(threads) > cores) {
    warning = "--threads " + std::to_string(threads) + " is more than this machine's " + std::to_string(cores) +
              " cores: the threads take turns on them, which is slower than --threads " + std::to_string(cores);
  }
  if (!warning.empty()) {
    std::fprintf(stderr, "memtrain: warning: %s\n", warning.c_str());
    warned = true;
  }
}

}  // namespace memtrain::cli
