// The Gloo headers memtrain compiles c10d's ProcessGroupGloo.hpp with come
// from outside the torch wheel, which compiles Gloo in but ships none of its
// headers. Gloo has no version number to compare (0.5.0 for years), so the
// wheel itself is read: its library names, in Gloo's error locations, the
// source files it compiled; each must have its header in the headers
// memtrain uses. Headers older than the wheel's Gloo lack some of them.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <link.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include <torch/torch.h>

#include "gloo_headers.h"

namespace memtrain::runtime {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The path of the loaded library that holds c10d and Gloo.
std::string torch_cpu_library() {
  void* handle = dlopen("libtorch_cpu.so", RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) return {};
  link_map* map = nullptr;
  const bool found = dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr;
  dlclose(handle);
  return found ? map->l_name : std::string();
}

// "gloo/transport/tcp/pair.cc" and the like, as Gloo's sources are named in
// the library's error locations (…/third_party/gloo/gloo/…).
std::set<std::string> gloo_sources_in(const std::string& library) {
  const std::string bytes = read_file(library);
  const std::string marker = "third_party/gloo/";
  std::set<std::string> sources;
  for (auto at = bytes.find(marker); at != std::string::npos; at = bytes.find(marker, at + 1)) {
    std::size_t end = at + marker.size();
    while (end < bytes.size() && (std::isalnum(static_cast<unsigned char>(bytes[end])) || bytes[end] == '_' ||
                                  bytes[end] == '/' || bytes[end] == '.'))
      ++end;
    const std::string path = bytes.substr(at + marker.size(), end - at - marker.size());
    if (path.ends_with(".cc") || path.ends_with(".h")) sources.insert(path);
  }
  return sources;
}

TEST(GlooHeaders, DescribeTheGlooCompiledIntoTheWheel) {
  const std::string library = torch_cpu_library();
  ASSERT_FALSE(library.empty()) << "libtorch_cpu.so is not loaded";
  const std::set<std::string> sources = gloo_sources_in(library);
  // The TCP transport, the collectives and the rendezvous at least.
  ASSERT_GE(sources.size(), 20u) << library << " names only " << sources.size() << " Gloo sources";

  const std::filesystem::path headers = MEMTRAIN_GLOO_INCLUDE;
  const std::string config = read_file((headers / "gloo/config.h").string());
  ASSERT_FALSE(config.empty()) << "no gloo/config.h under " << headers;
  // A build of Gloo without TLS installs no TLS headers; memtrain's ranks use
  // plain TCP, so that part of the wheel needs none.
  const bool tls = config.find("#define GLOO_HAVE_TRANSPORT_TCP_TLS 1") != std::string::npos;

  std::string missing;
  int checked = 0;
  for (const std::string& source : sources) {
    if (!tls && source.starts_with("gloo/transport/tcp/tls/")) continue;
    const std::string header = source.substr(0, source.rfind('.')) + ".h";
    ++checked;
    if (!std::filesystem::exists(headers / header)) missing += " " + header;
  }
  EXPECT_GE(checked, 20);
  EXPECT_TRUE(missing.empty()) << library << " was compiled from Gloo sources whose headers " << headers
                               << " lacks:" << missing << "; those headers are older than the wheel's Gloo";
}

TEST(GlooHeaders, SourcesAreFoundInALibraryThatNamesThem) {
  // The reader itself: a file with two Gloo locations and noise around them.
  const std::string path = ::testing::TempDir() + "/gloo-names.bin";
  std::string bytes(2, '\0');
  bytes += "/pytorch/third_party/gloo/gloo/allreduce.cc";
  bytes += std::string(1, '\0') + "junk/x/third_party/gloo/gloo/transport/tcp/pair.h:12";
  bytes += std::string(1, '\0') + "third_party/gloo/README";
  std::ofstream(path, std::ios::binary) << bytes;
  EXPECT_EQ(gloo_sources_in(path), (std::set<std::string>{"gloo/allreduce.cc", "gloo/transport/tcp/pair.h"}));
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace memtrain::runtime
