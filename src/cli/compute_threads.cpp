#include "cli/compute_threads.h"

#include <cstdio>
#include <string>

#include <ATen/Parallel.h>

#include "cli/blas_library.h"

namespace memtrain::cli {

void use_compute_threads(int threads) {
  at::set_num_threads(threads);
  static bool warned = false;  // a command may set them more than once
  if (warned) return;
  const std::string warning = blas_threading_warning(loaded_blas_library(), threads);
  if (!warning.empty()) {
    std::fprintf(stderr, "memtrain: warning: %s\n", warning.c_str());
    warned = true;
  }
}

}  // namespace memtrain::cli
