// One thread running queued jobs in submission order: a copy engine on a CPU
// build (cpu_host_transfers.h), the host's optimizer (host_weights.h).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace memtrain::runtime {

class SerialWorker {
 public:
  SerialWorker();
  // Runs every job still queued, then joins the thread.
  ~SerialWorker();
  SerialWorker(const SerialWorker&) = delete;
  SerialWorker& operator=(const SerialWorker&) = delete;
  void submit(std::function<void()> job);

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace memtrain::runtime
