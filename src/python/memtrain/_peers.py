"""Naming the rank that failed, for a model sharded by FSDP2 across
torch.distributed's ranks. Each rank beats on the process group's store
(a thread of its own, so a rank busy computing still beats; one that is
killed or stopped does not). When a collective in memtrain's part of the
step fails (a peer died mid-step, or stopped past the process group's
timeout), the rank reads the store and raises memtrain.RankFailure naming
the rank to blame, as memtrain's own ranks do (runtime/comm/peer_watch.h)."""

import functools
import threading

import torch.distributed as dist

from . import _memtrain as _native

# Transport failures, as torch.distributed's backends word them.
_TRANSPORT_WORDS = ("gloo", "nccl", "connection reset", "connection closed", "broken pipe", "timed out")


def _default_store():
    if not dist.is_available() or not dist.is_initialized() or dist.get_world_size() < 2:
        return None
    return dist.distributed_c10d._get_default_store()


class PeerWatch:
    """This rank's heartbeat on `store`, and the diagnosis of a failed collective."""

    def __init__(self, store):
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.timeout = store.timeout.total_seconds()  # the process group's own
        self.progress = 0  # block calls and backwards begun: alike on every rank
        self._native = _native.PeerWatch(store, self.rank, self.world)
        self._native.arrive()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="memtrain-heartbeat", daemon=True)
        self._thread.start()

    def _beat(self):
        while not self._stop.wait(_native.PeerWatch.beat_seconds):
            try:
                self._native.beat(self.progress)
            except Exception:  # the store is gone: the next collective fails and says why
                return

    def close(self):
        self._stop.set()

    def failure(self, error, what):
        """memtrain.RankFailure for `error`, raised in `what`, when it is a
        collective's failure; None for any other error."""
        if isinstance(error, _native.Error):
            return None
        text = str(error)
        if not isinstance(error, dist.DistError) and not any(w in text.lower() for w in _TRANSPORT_WORDS):
            return None
        failed = f"rank {self.rank} of {self.world}: a collective in {what} failed"
        transport = text.strip().split("\n")[0]
        try:
            blamed, message = self._native.blame(failed, transport, self.progress, self.timeout)
        except Exception as e:  # the store itself is gone: whoever serves it
            blamed, message = -1, (f"{failed} and the process group's store does not answer ({e}): the process "
                                   f"that serves it (rank 0, unless a launcher such as torchrun does) died or "
                                   f"stopped (transport: {transport})")
        failure = _native.RankFailure(message)
        failure.rank = blamed if blamed >= 0 else None
        return failure

    def named(self, run, what):
        """run(), a part of the step named `what`; a collective of it that
        fails raises memtrain.RankFailure naming the rank to blame."""
        try:
            return run()
        except Exception as e:
            failure = self.failure(e, what)
            if failure is None:
                raise
            raise failure from e

    def watch_backward(self, model):
        """FSDP2's collectives in the backward run in its hooks, around
        memtrain's nodes (a block's gather before its backward, the
        reduce-scatter after): each FSDP2 module's pre- and post-backward
        name a failed collective's rank too."""
        for module in model.modules():
            state = module._get_fsdp_state() if hasattr(module, "_get_fsdp_state") else None
            group = getattr(state, "_fsdp_param_group", None)
            for name in ("pre_backward", "post_backward"):
                if group is not None and hasattr(group, name):
                    what = f"FSDP2's {name.replace('_', '-')} of {type(module).__name__}"
                    setattr(group, name, functools.partial(self._backward_hook, getattr(group, name), what))

    def _backward_hook(self, original, what, *args, **kwargs):
        return self.named(lambda: original(*args, **kwargs), what)

    def give_up(self, why):
        """This rank stops with `why`: the others' failures name it."""
        try:
            self._native.give_up(why)
        except Exception:
            pass


def watch_peers():
    """A PeerWatch when this process is a rank of more than one, else None."""
    store = _default_store()
    return PeerWatch(store) if store is not None else None
