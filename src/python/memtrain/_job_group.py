"""Several processes on one device, one budget: a job group.

One process hosts the group (JobGroup here, or `memtrain jobs --name NAME
--expect N` from the command line); each process that trains joins it with
memtrain.Module(model, share="NAME", sample=...). Every allocation a
member's device pool makes is charged to the group, which never lets them
pass its budget together, and each step's budget is a lease the group's
policy grants. A member that exits or is killed gives its bytes back; the
others go on.
"""

import os
import time

from . import _memtrain as _native
from ._memtrain import UsageError

# How long a Module waits for its group to appear.
JOIN_TIMEOUT_SECONDS = 10.0


class JobGroup:
    """A job group hosted by this process, for `jobs` processes that start
    with it (each a memtrain.Module(..., share=name)).

    name: 1..100 letters, digits, '-' or '_'.
    budget: bytes (int) or text ("300MiB"), or "N%" of the sum of the
      starting jobs' plain steps (each measured on its sample).
    policy: how leases are granted: "static", "proportional", "fcfs",
      "tensile" or "arbiter" (docs/jobs.md).
    jobs: the processes that start with the group; their steps wait until
      all of them have measured their samples.

    The group lasts until close() (or the end of a `with` block, or of this
    object): members that join later find no group.
    """

    def __init__(self, name, budget, policy="fcfs", jobs=1, device="cpu"):
        if isinstance(jobs, bool) or not isinstance(jobs, int):
            raise UsageError(f"jobs {jobs!r} is not a number of processes; expected an integer "
                             f"1..{_native.MAX_JOBS}")
        self.name = name
        self._jobs = jobs
        self._native = _native.HostedJobGroup(name, budget, policy, jobs, str(device))

    def state(self):
        """The group now: budget_bytes (None until the starting jobs have
        measured), live_bytes, max_live_bytes, refusals (allocations the
        shared budget refused, each one a step run again), refused (why the
        group refused to start, or None), and members (pid, label, status
        "joined", "finished" or "gone", live, peak and lease bytes, steps,
        wait_seconds, reclaimed_bytes), as memtrain jobs' report names them.
        Members whose process ended are found gone first."""
        return self._native.state()

    def wait(self, timeout=None, poll_seconds=0.05):
        """Until every starting job has joined and each has finished or is
        gone; returns state(). TimeoutError after `timeout` seconds."""
        start = time.monotonic()
        expected = self._jobs
        while True:
            state = self.state()
            members = state["members"]
            if len(members) >= expected and all(m["status"] != "joined" for m in members):
                return state
            if timeout is not None and time.monotonic() - start > timeout:
                raise TimeoutError(f"job group {self.name}: {len(members)} of {expected} jobs joined, "
                                   f"{sum(m['status'] == 'joined' for m in members)} still training after "
                                   f"{timeout} s")
            time.sleep(poll_seconds)

    def close(self):
        """Removes the group; its members keep what they hold."""
        self._native.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def join(name, device, label, planner):
    """This process's membership of group `name`, for a Module on `device`
    planned by `planner`."""
    if not isinstance(name, str):
        raise UsageError(f"share {name!r} is not a job group's name; expected text, the name a JobGroup (or "
                         "memtrain jobs --name) hosts")
    try:
        member = _native.JobMember(name, str(device), f"{label} (pid {os.getpid()})", JOIN_TIMEOUT_SECONDS)
    except UsageError as e:
        raise UsageError(f"share={name!r}: {e}; host it with memtrain.JobGroup({name!r}, budget=...) or memtrain "
                         f"jobs --name {name} --expect N") from None
    try:
        member.check_planner(planner)
    except UsageError as e:
        del member  # leaves the group before the caller sees why
        raise UsageError(f"share={name!r}: {e}") from None
    return member


def leave(leasing):
    """A Module's job is done: the steps it planned last (leasing[0])
    settle their lease, and it leaves the group finished."""
    leasing[0].leave_group()
