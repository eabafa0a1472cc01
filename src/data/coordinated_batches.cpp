#include "data/coordinated_batches.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "core/process_shared.h"
#include "core/seconds_since.h"
#include "data/prep_pipeline.h"

namespace memtrain::data {

namespace {

constexpr std::uint64_t kSharedStateMagic = 0x6d656d7472616e31ull;  // "memtran1"
constexpr int kMaxJobs = 64;
enum JobState : std::int32_t { kNoJob = 0, kJoined = 1, kGone = 2 };
enum SlotState : std::int32_t { kEmpty = 0, kClaimed = 1, kReady = 2 };

struct JobEntry {
  std::int32_t pid;
  std::int32_t state;
  std::int64_t cursor;  // the next batch (group sequence number) it takes
};

struct SlotHeader {
  std::int64_t sequence;  // epoch * batches_per_epoch + batch
  std::int32_t state;
  std::int32_t owner;   // the job preparing it
  std::uint64_t taken;  // jobs that have taken it, one bit each
  std::int64_t epoch, index, batch, side, skipped;
  char error[1024];  // a failed preparation, for every taker to raise
};

using Clock = std::chrono::steady_clock;

std::int64_t align64(std::int64_t n) { return (n + 63) / 64 * 64; }

void pause_briefly() { std::this_thread::sleep_for(std::chrono::microseconds(200)); }

}  // namespace

struct CoordinatedBatcher::Segment {
  std::atomic<std::uint64_t> magic;  // written last by the creator
  pthread_mutex_t mutex;             // process-shared and robust
  std::int32_t jobs, slots, joined, pad;
  std::int64_t slot_stride;
  std::int64_t samples, batch_size, min_scale, max_scale, classes;
  std::uint64_t seed;
  std::int64_t next_claim;  // the next sequence number no one has claimed
  JobEntry job[kMaxJobs];

  SlotHeader* slot(int i) {
    auto* base = reinterpret_cast<char*>(this) + align64(sizeof(Segment));
    return reinterpret_cast<SlotHeader*>(base + i * slot_stride);
  }
  static std::int64_t* labels(SlotHeader* s) {
    return reinterpret_cast<std::int64_t*>(reinterpret_cast<char*>(s) + align64(sizeof(SlotHeader)));
  }
  float* pixels(SlotHeader* s) const { return reinterpret_cast<float*>(labels(s) + batch_size); }
};

CoordinatedBatcher::CoordinatedBatcher(const ShardStorage& storage, SampleCache* cache, ShardBatchOptions options,
                                       CoordinationOptions coordination)
    : storage_(storage), cache_(cache), options_(std::move(options)), coordination_(std::move(coordination)) {
  check_options();
  const int slots = coordination_.slots > 0 ? coordination_.slots : coordination_.jobs * options_.prep.threads + 2;
  const std::int64_t stride = align64(align64(sizeof(SlotHeader)) + options_.batch_size * 8 +
                                      options_.batch_size * options_.max_scale * options_.max_scale * 4);
  segment_bytes_ = static_cast<std::size_t>(align64(sizeof(Segment)) + slots * stride);
  path_ = "/memtrain-" + coordination_.name;
  const Clock::time_point start = Clock::now();
  for (int attempt = 0; !segment_; ++attempt) {
    if (attempt > 20) {
      throw Error("coordination group " + coordination_.name + ": cannot create or join the group's shared memory");
    }
    if (!create_segment(slots, stride)) open_segment(seconds_since(start));
  }
  join_group();
  wait_for_every_job(start);
  for (int t = 0; t < std::max(1, options_.prep.threads); ++t) threads_.emplace_back([this] { prep_loop(); });
}

void CoordinatedBatcher::check_options() const {
  const std::string& name = coordination_.name;
  if (name.empty() || name.size() > 200 || !std::all_of(name.begin(), name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
      })) {
    throw UsageError("coordination group '" + name +
                     "' is not a group name; expected 1..200 letters, digits, '-' or '_'");
  }
  if (coordination_.jobs < 1 || coordination_.jobs > kMaxJobs) {
    throw UsageError("jobs in the group " + std::to_string(coordination_.jobs) + " is out of range; expected 1.." +
                     std::to_string(kMaxJobs));
  }
  if (options_.batch_size < 1 || options_.min_scale < 1 || options_.min_scale > options_.max_scale) {
    throw UsageError("coordinated batches: the batch size or the scale range is out of range");
  }
}

bool CoordinatedBatcher::create_segment(int slots, std::int64_t stride) {
  const std::string& name = coordination_.name;
  const int fd = ::shm_open(path_.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) {
    if (errno != EEXIST) throw Error("coordination group " + name + ": shm_open failed: " + std::strerror(errno));
    return false;  // the group exists: join it
  }
  if (::ftruncate(fd, static_cast<off_t>(segment_bytes_)) != 0) {
    ::close(fd);
    ::shm_unlink(path_.c_str());
    throw Error("coordination group " + name + ": cannot size shared memory to " + format_bytes(segment_bytes_) + ": " +
                std::strerror(errno) + " (is /dev/shm large enough?)");
  }
  void* p = ::mmap(nullptr, segment_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED)
    throw Error("coordination group " + name + ": cannot map shared memory: " + std::strerror(errno));
  auto* s = static_cast<Segment*>(p);  // zero-filled by ftruncate
  init_process_shared_mutex(&s->mutex);
  s->jobs = coordination_.jobs;
  s->slots = slots;
  s->slot_stride = stride;
  s->samples = static_cast<std::int64_t>(storage_.samples().size());
  s->batch_size = options_.batch_size;
  s->min_scale = options_.min_scale;
  s->max_scale = options_.max_scale;
  s->classes = options_.classes;
  s->seed = options_.seed;
  s->magic.store(kSharedStateMagic, std::memory_order_release);
  segment_ = s;
  return true;
}

void CoordinatedBatcher::open_segment(Seconds waited) {
  const std::string& name = coordination_.name;
  const int fd = ::shm_open(path_.c_str(), O_RDWR, 0600);
  if (fd < 0) return;  // removed meanwhile: try creating again
  struct stat st {};
  ::fstat(fd, &st);
  if (st.st_size < static_cast<off_t>(sizeof(Segment))) {  // its creator has not sized it yet
    ::close(fd);
    if (waited > 5) ::shm_unlink(path_.c_str());  // a creator that died half way
    pause_briefly();
    return;
  }
  void* p = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED)
    throw Error("coordination group " + name + ": cannot map shared memory: " + std::strerror(errno));
  auto* s = static_cast<Segment*>(p);
  const Clock::time_point start = Clock::now();
  while (s->magic.load(std::memory_order_acquire) != kSharedStateMagic && waited + seconds_since(start) < 5)
    pause_briefly();
  if (s->magic.load(std::memory_order_acquire) != kSharedStateMagic) {
    ::munmap(p, static_cast<size_t>(st.st_size));
    ::shm_unlink(path_.c_str());
    return;
  }
  segment_ = s;
  segment_bytes_ = static_cast<std::size_t>(st.st_size);
  lock();
  // A group whose jobs have all gone (finished or died without removing it) is stale.
  bool anyone = false;
  for (int j = 0; j < s->joined; ++j) {
    if (s->job[j].state == kJoined && !process_gone(s->job[j].pid)) anyone = true;
  }
  const bool stale = s->joined > 0 && !anyone;
  unlock();
  if (stale) {
    ::munmap(p, segment_bytes_);
    segment_ = nullptr;
    ::shm_unlink(path_.c_str());
  }
}

void CoordinatedBatcher::join_group() {
  const std::string& name = coordination_.name;
  Segment* s = segment_;
  lock();
  auto refuse = [&](const std::string& what, std::int64_t mine, std::int64_t group) {
    unlock();
    ::munmap(segment_, segment_bytes_);
    segment_ = nullptr;
    throw UsageError("coordination group " + name + ": this job's " + what + " " + std::to_string(mine) +
                     " differs from the group's " + std::to_string(group) + "; jobs of a group share the data");
  };
  if (s->jobs != coordination_.jobs) refuse("jobs in the group", coordination_.jobs, s->jobs);
  if (s->samples != static_cast<std::int64_t>(storage_.samples().size()))
    refuse("dataset samples", static_cast<std::int64_t>(storage_.samples().size()), s->samples);
  if (s->batch_size != options_.batch_size) refuse("batch size", options_.batch_size, s->batch_size);
  if (s->min_scale != options_.min_scale) refuse("min scale", options_.min_scale, s->min_scale);
  if (s->max_scale != options_.max_scale) refuse("max scale", options_.max_scale, s->max_scale);
  if (s->classes != options_.classes) refuse("classes", options_.classes, s->classes);
  if (s->seed != options_.seed)
    refuse("seed", static_cast<std::int64_t>(options_.seed), static_cast<std::int64_t>(s->seed));
  if (s->joined >= s->jobs) {
    unlock();
    ::munmap(segment_, segment_bytes_);
    segment_ = nullptr;
    throw Error("coordination group " + name + ": the group already has its " + std::to_string(coordination_.jobs) +
                " jobs");
  }
  job_ = s->joined++;
  s->job[job_] = {static_cast<std::int32_t>(::getpid()), kJoined, 0};
  unlock();
}

void CoordinatedBatcher::wait_for_every_job(std::chrono::steady_clock::time_point start) {
  // Nobody takes a batch before every job has joined, so none can miss one.
  while (true) {
    lock();
    const int joined = segment_->joined;
    unlock();
    if (joined >= coordination_.jobs) return;
    if (seconds_since(start) > coordination_.join_timeout) {
      leave();
      throw Error("coordination group " + coordination_.name + ": only " + std::to_string(joined) + " of " +
                  std::to_string(coordination_.jobs) + " jobs joined within " +
                  format_number("%.0f", coordination_.join_timeout) + " s");
    }
    pause_briefly();
  }
}

CoordinatedBatcher::~CoordinatedBatcher() {
  stopping_ = true;
  for (std::thread& t : threads_) t.join();
  leave();
}

void CoordinatedBatcher::leave() {
  if (!segment_) return;
  lock();
  segment_->job[job_].state = kGone;
  bool last = true;
  for (int j = 0; j < segment_->joined; ++j) {
    if (segment_->job[j].state == kJoined && !process_gone(segment_->job[j].pid)) last = false;
  }
  unlock();
  ::munmap(segment_, segment_bytes_);
  segment_ = nullptr;
  if (last) ::shm_unlink(path_.c_str());
}

void CoordinatedBatcher::lock() const {
  lock_process_shared_mutex(&segment_->mutex, "coordination group " + coordination_.name);
}

void CoordinatedBatcher::unlock() const { pthread_mutex_unlock(&segment_->mutex); }

void CoordinatedBatcher::reap() const {
  Segment* s = segment_;
  std::uint64_t live = 0;
  for (int j = 0; j < s->joined; ++j) {
    if (s->job[j].state == kJoined && process_gone(s->job[j].pid)) s->job[j].state = kGone;
    if (s->job[j].state == kJoined) live |= std::uint64_t{1} << j;
  }
  for (int i = 0; i < s->slots; ++i) {
    SlotHeader* h = s->slot(i);
    if (h->state == kReady && (h->taken & live) == live) h->state = kEmpty;
  }
}

std::int64_t CoordinatedBatcher::batches_per_epoch() const {
  const auto n = static_cast<std::int64_t>(storage_.samples().size());
  return (n + options_.batch_size - 1) / options_.batch_size;
}

void CoordinatedBatcher::prep_loop() {
  Segment* s = segment_;
  int claims = 0;
  while (!stopping_) {
    int slot = -1;
    std::int64_t sequence = 0;
    lock();
    reap();
    for (int i = 0; i < s->slots && slot < 0; ++i) {  // a batch a dead job was preparing
      SlotHeader* h = s->slot(i);
      if (h->state == kClaimed && s->job[h->owner].state == kGone) {
        h->owner = job_;
        slot = i;
        sequence = h->sequence;
        ++reclaimed_;
      }
    }
    if (slot < 0) {
      std::int64_t lowest = INT64_MAX;  // the slowest live job's next batch bounds the window
      for (int j = 0; j < s->joined; ++j) {
        if (s->job[j].state == kJoined) lowest = std::min(lowest, s->job[j].cursor);
      }
      if (lowest != INT64_MAX && s->next_claim < lowest + s->slots) {
        for (int i = 0; i < s->slots && slot < 0; ++i) {
          SlotHeader* h = s->slot(i);
          if (h->state != kEmpty) continue;
          h->state = kClaimed;
          h->owner = job_;
          h->taken = 0;
          h->sequence = sequence = s->next_claim++;
          slot = i;
        }
      }
    }
    unlock();
    if (slot < 0) {
      pause_briefly();
      continue;
    }
    if (++claims > coordination_.crash_after_claims && coordination_.crash_after_claims >= 0) ::_exit(3);
    const Seconds cpu0 = thread_cpu_seconds();
    prepare_into(slot, sequence);
    prep_cpu_nanos_ += static_cast<std::int64_t>((thread_cpu_seconds() - cpu0) * 1e9);
    ++prepared_;
    lock();
    s->slot(slot)->state = kReady;
    unlock();
  }
}

void CoordinatedBatcher::prepare_into(int slot, std::int64_t sequence) {
  SlotHeader* h = segment_->slot(slot);
  const std::int64_t per_epoch = batches_per_epoch();
  h->epoch = sequence / per_epoch;
  h->index = sequence % per_epoch;
  h->skipped = 0;
  h->error[0] = '\0';
  try {
    const AugmentedBatch b = prepare_image_batch(storage_, cache_, options_, h->epoch, h->index, &h->skipped);
    h->batch = b.batch;
    h->side = b.side;
    std::copy(b.labels.begin(), b.labels.end(), Segment::labels(h));
    std::copy(b.pixels.begin(), b.pixels.end(), segment_->pixels(h));
  } catch (const std::exception& e) {
    h->batch = 0;
    std::snprintf(h->error, sizeof(h->error), "%s", e.what());
  }
}

AugmentedBatch CoordinatedBatcher::next() {
  Segment* s = segment_;
  const Clock::time_point t0 = Clock::now();
  while (true) {
    const std::int64_t wanted = s->job[job_].cursor;  // only this job writes its cursor
    SlotHeader* found = nullptr;
    lock();
    reap();
    for (int i = 0; i < s->slots && !found; ++i) {
      SlotHeader* h = s->slot(i);
      if (h->state == kReady && h->sequence == wanted) found = h;
    }
    unlock();
    if (!found) {
      pause_briefly();
      continue;
    }
    // The slot stays ready until this job's bit is set, so it can be read unlocked.
    AugmentedBatch b;
    const std::string error = found->error;
    if (error.empty()) {
      b.epoch = found->epoch;
      b.index = found->index;
      b.batch = found->batch;
      b.side = found->side;
      b.labels.assign(Segment::labels(found), Segment::labels(found) + b.batch);
      b.pixels.assign(s->pixels(found), s->pixels(found) + b.batch * b.side * b.side);
      counters_.skipped_corrupt += found->skipped;
    }
    lock();
    found->taken |= std::uint64_t{1} << job_;
    s->job[job_].cursor = wanted + 1;
    reap();
    unlock();
    counters_.wait_seconds += seconds_since(t0);
    if (!error.empty()) throw DataError(error);
    ++counters_.batches_taken;
    epoch_ = b.epoch;
    if (b.batch == 0) continue;  // every sample of it was skipped as corrupt
    return b;
  }
}

CoordinationCounters CoordinatedBatcher::counters() const {
  CoordinationCounters c = counters_;
  c.batches_prepared = prepared_;
  c.reclaimed = reclaimed_;
  c.prep_cpu_seconds = static_cast<double>(prep_cpu_nanos_) * 1e-9;
  return c;
}

}  // namespace memtrain::data
