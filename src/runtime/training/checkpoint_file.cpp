#include "runtime/training/checkpoint_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <torch/serialize.h>

#include "core/error.h"
#include "core/fnv1a.h"

namespace memtrain::runtime {

namespace {

// The checksum's field name. It never changes.
constexpr const char* kChecksumField = "checksum_fnv1a64";

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

std::int64_t checksum(const CheckpointFields& fields) {
  Fnv1a h;
  const auto add_name = [&](const std::string& name) { h.add(name.data(), name.size() + 1); };
  for (const auto& [name, value] : fields.integers) {
    add_name(name);
    h.add(&value, sizeof value);
  }
  for (const auto& [name, tensor] : fields.tensors) {
    add_name(name);
    const torch::Tensor t = tensor.detach().cpu().contiguous();
    const auto type = static_cast<std::int64_t>(t.scalar_type());
    h.add(&type, sizeof type);
    for (const std::int64_t d : t.sizes()) h.add(&d, sizeof d);
    h.add(t.data_ptr(), t.nbytes());
  }
  return static_cast<std::int64_t>(h.value());
}

}  // namespace

void write_checkpoint_file(const std::string& path, const CheckpointFields& fields) {
  torch::serialize::OutputArchive archive;
  for (const auto& [name, value] : fields.integers) archive.write(name, c10::IValue(value));
  for (const auto& [name, tensor] : fields.tensors) archive.write(name, tensor.detach().cpu());
  archive.write(kChecksumField, c10::IValue(checksum(fields)));
  try {
    archive.save_to(partial(path));
  } catch (const std::exception& e) {
    throw Error("checkpoint " + partial(path) + ": cannot write it: " + e.what());
  }
  flush_to_disk(partial(path));
}

void publish_checkpoint_file(const std::string& path) {
  if (std::rename(partial(path).c_str(), path.c_str()) != 0)
    throw Error("checkpoint " + path + ": cannot rename " + partial(path) + " to it: " + std::strerror(errno));
}

CheckpointFields read_checkpoint_file(const std::string& path) {
  if (::access(path.c_str(), R_OK) != 0)
    throw Error("checkpoint " + path + " cannot be read (" + std::strerror(errno) + "); nothing to resume from");
  // The reader's own words, first line only: c10's errors carry a C++ stack.
  auto refuse = [&](const std::string& why) {
    return Error("checkpoint " + path + " is not a memtrain checkpoint: " + why.substr(0, why.find('\n')));
  };
  CheckpointFields fields;
  std::int64_t written = 0;
  bool has_checksum = false;
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(path);
    for (const std::string& name : archive.keys()) {
      c10::IValue value;
      archive.read(name, value);
      if (name == kChecksumField && value.isInt()) {
        written = value.toInt();
        has_checksum = true;
      } else if (value.isInt()) {
        fields.integers[name] = value.toInt();
      } else if (value.isTensor()) {
        fields.tensors[name] = value.toTensor();
      } else {
        throw refuse("field " + name + " is neither a tensor nor an integer");
      }
    }
  } catch (const Error&) {
    throw;
  } catch (const c10::Error& e) {
    throw refuse(e.what_without_backtrace());
  } catch (const std::exception& e) {
    throw refuse(e.what());
  }
  if (!has_checksum) throw refuse("it has no checksum");
  if (checksum(fields) != written) {
    throw Error("checkpoint " + path +
                " is damaged: its fields do not match the checksum written with them; it was left as it is; "
                "resume from a copy of an intact checkpoint or start again");
  }
  return fields;
}

}  // namespace memtrain::runtime
