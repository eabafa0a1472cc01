// What a backward that threw leaves behind in LibTorch's autograd engine.
//
// A CPU backward runs on the calling thread from a queue of nodes ready to
// run that lives as long as the thread. When one node throws (the budget
// ran out), the nodes it had already made ready stay queued: each holds the
// gradients handed to it and, through its node, the tensors it saved. The
// engine drops them only when the next backward on the thread starts, and an
// attempt that runs out again in its forward never gets there, so it starts
// with the failed attempt's bytes still live and fails where it would fit.
#pragma once

namespace memtrain::runtime {

// Runs an empty backward on this thread: the engine first pops and drops
// the nodes whose backward failed. Allocates a few bytes.
void drop_work_of_failed_backwards();

}  // namespace memtrain::runtime
