#include "cli/blas_library.h"

#include <ATen/Context.h>
#include <link.h>

#include <filesystem>

namespace memtrain::cli {

namespace {

int find_blas(dl_phdr_info* info, size_t, void* data) {
  const std::string name = info->dlpi_name != nullptr ? info->dlpi_name : "";
  const std::string file = std::filesystem::path(name).filename().string();
  if (file.rfind("libopenblas", 0) == 0 || file.rfind("libblas.so", 0) == 0) {
    auto* found = static_cast<std::string*>(data);
    // libopenblas, when loaded, says more than the generic libblas.
    if (found->empty() || file.rfind("libopenblas", 0) == 0) *found = name;
  }
  return 0;
}

}  // namespace

BlasLibrary loaded_blas_library() {
  std::string name;
  dl_iterate_phdr(find_blas, &name);
  BlasLibrary blas;
  blas.mkl_in_torch = at::globalContext().hasMKL();
  if (name.empty()) return blas;
  std::error_code error;
  const std::filesystem::path resolved = std::filesystem::canonical(name, error);
  blas.path = error ? name : resolved.string();
  const std::string folder = std::filesystem::path(blas.path).parent_path().filename().string();
  if (folder.rfind("openblas-", 0) == 0) blas.build = folder;
  return blas;
}

std::string blas_name(const BlasLibrary& blas) {
  if (blas.mkl_in_torch) return "MKL inside LibTorch";
  if (!blas.build.empty()) return blas.build;
  return blas.path.empty() ? "no BLAS" : blas.path;
}

std::string blas_threading_warning(const BlasLibrary& blas, int threads) {
  if (blas.mkl_in_torch || blas.build != "openblas-pthread" || threads <= 1) return "";
  return "OpenBLAS's pthreads build (" + blas.path + ") runs matrix products on threads of its own beside " +
         std::to_string(threads) +
         " OpenMP threads, and the two fight over the cores (steps up to 2x slower measured); install "
         "libopenblas0-openmp and point libblas.so.3 at it (scripts/install-deps.sh does both), or pass --threads 1";
}

}  // namespace memtrain::cli
