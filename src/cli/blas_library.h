// Which BLAS library this process loaded. Debian's LibTorch links the generic
// libblas.so.3, and which build that resolves to decides how matrix products
// share the cores with LibTorch's own OpenMP threads.
#pragma once

#include <string>

namespace memtrain::cli {

struct BlasLibrary {
  std::string path;  // the loaded libblas/libopenblas with links resolved; "" when none is loaded
  // Debian's OpenBLAS builds live in folders named after their threading:
  // "openblas-openmp", "openblas-pthread", "openblas-serial"; "" for others.
  std::string build;
};

BlasLibrary loaded_blas_library();

// A line for the user when the loaded BLAS and `threads` compete for the
// cores (OpenBLAS's pthreads build beside more than one OpenMP thread); ""
// when they do not.
std::string blas_threading_warning(const BlasLibrary& blas, int threads);

}  // namespace memtrain::cli
