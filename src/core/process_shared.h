// What processes of one machine that share memory (groups of jobs) need:
// whether a member process has ended, and a mutex that a member killed while
// holding it does not leave locked.
#pragma once

#include <pthread.h>

#include <cstdint>
#include <string>

namespace memtrain {

// True when `pid` no longer runs: gone, or a zombie (it exited and only its
// parent has not collected it yet).
bool process_gone(std::int32_t pid);

// Initialises `mutex` (in shared memory) as process-shared and robust.
void init_process_shared_mutex(pthread_mutex_t* mutex);
// Locks it; when its holder died, takes it over (the holder's changes are
// whole fields, so the state stays usable). Error naming `what` otherwise.
void lock_process_shared_mutex(pthread_mutex_t* mutex, const std::string& what);

}  // namespace memtrain
