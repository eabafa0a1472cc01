// A binary that links the torch wheel gets the C++ standard library from
// the system's libstdc++, not from the copies of its functions the wheel's
// libraries export: libtorch.so's std::filesystem::remove_all crashed
// memtrain when it was bound first.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <torch/torch.h>

namespace memtrain::runtime {
namespace {

TEST(StandardLibrary, FilesystemCallsBindToTheSystemsLibstdcxx) {
  // std::filesystem::remove_all(const path&, std::error_code&), as the dynamic
  // linker resolves it for this binary.
  void* symbol = dlsym(RTLD_DEFAULT, "_ZNSt10filesystem10remove_allERKNS_7__cxx114pathERSt10error_code");
  ASSERT_NE(symbol, nullptr);
  Dl_info info{};
  ASSERT_NE(dladdr(symbol, &info), 0);
  EXPECT_NE(std::string(info.dli_fname).find("libstdc++.so"), std::string::npos)
      << "remove_all binds to " << info.dli_fname;
  EXPECT_GT(torch::ones({2}).sum().item<float>(), 1.0f);  // and torch is loaded beside it
}

TEST(StandardLibrary, RemoveAllRemovesATree) {
  const std::filesystem::path root = ::testing::TempDir() + "/memtrain-remove-all";
  std::filesystem::create_directories(root / "a" / "b");
  std::ofstream(root / "a" / "b" / "file") << "x";
  std::error_code error;
  EXPECT_EQ(std::filesystem::remove_all(root, error), 4u);
  EXPECT_FALSE(error) << error.message();
  EXPECT_FALSE(std::filesystem::exists(root));
}

}  // namespace
}  // namespace memtrain::runtime
