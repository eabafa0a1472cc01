#include "runtime/training/checkpoint_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <torch/serialize.h>

#include "core/error.h"

namespace memtrain::runtime {

namespace {

std::string partial(const std::string& path) { return path + ".partial"; }

void flush_to_disk(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0 || ::fsync(fd) != 0) {
    const std::string why = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    throw Error("checkpoint " + path + ": cannot flush it to disk: " + why);
  }
  ::close(fd);
}

}  // namespace

void write_checkpoint_file(const std::string& path, const std::vector<torch::Tensor>& tensors) {
  std::vector<torch::Tensor> on_cpu;
  for (const torch::Tensor& t : tensors) on_cpu.push_back(t.detach().cpu());
  try {
    torch::save(on_cpu, partial(path));
  } catch (const std::exception& e) {
    throw Error("checkpoint " + partial(path) + ": cannot write it: " + e.what());
  }
  flush_to_disk(partial(path));
}

void publish_checkpoint_file(const std::string& path) {
  if (std::rename(partial(path).c_str(), path.c_str()) != 0)
    throw Error("checkpoint " + path + ": cannot rename " + partial(path) + " to it: " + std::strerror(errno));
}

std::vector<torch::Tensor> read_checkpoint_file(const std::string& path) {
  if (::access(path.c_str(), R_OK) != 0)
    throw Error("checkpoint " + path + " cannot be read (" + std::strerror(errno) + "); nothing to resume from");
  std::vector<torch::Tensor> tensors;
  // The reader's own words, first line only: c10's errors carry a C++ stack.
  auto refuse = [&](const std::string& why) {
    return Error("checkpoint " + path + " is not a memtrain checkpoint: " + why.substr(0, why.find('\n')));
  };
  try {
    torch::load(tensors, path);
  } catch (const c10::Error& e) {
    throw refuse(e.what_without_backtrace());
  } catch (const std::exception& e) {
    throw refuse(e.what());
  }
  return tensors;
}

}  // namespace memtrain::runtime
