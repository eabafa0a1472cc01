"""What the Python benchmarks share: contenders in processes of their own
that take turns step by step, a digest of tensors' bytes, and writing a
section of docs/BENCHMARKS.md."""

import hashlib
import json
import os
import subprocess
import sys
import time

SETTLE_SECONDS = 0.05


def digest(tensors):
    """A fingerprint of the tensors' bytes: equal digests, bit-equal tensors.
    Of a sharded tensor (a DTensor, FSDP2's), the bytes of this rank's shard."""
    h = hashlib.sha256()
    for t in tensors:
        t = t.to_local() if hasattr(t, "to_local") else t
        h.update(t.detach().cpu().contiguous().reshape(-1).view(-1).numpy().tobytes())
    return h.hexdigest()


class Contender:
    """One contender's process: `command` prints "ready" (or "idle") once
    prepared, runs step i on each "step i" line from stdin (answering
    "done"), and prints its record as JSON on "end". Contenders live side by
    side, each with only its own tensors in its (counted) memory, and take
    turns: one computes at a time, so what slows the machine slows them alike."""

    def __init__(self, name, command, env=None):
        self.name = name
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                        env=env)

    def expect(self, *words):
        line = self.process.stdout.readline().strip()
        if line not in words:
            raise RuntimeError(f"contender {self.name} answered {line!r}, expected one of {words}")
        return line

    def step(self, i):
        self.process.stdin.write(f"step {i}\n")
        self.process.stdin.flush()
        self.expect("done")
        # The next contender starts once this one's OpenMP threads stopped
        # spinning: otherwise whoever steps second in a turn ran up to 10%
        # slower (memtrain at 100% on GPT-2: ratios alternating 1.07 / 0.95
        # with who went first, 1.01-1.05 with this pause).
        time.sleep(SETTLE_SECONDS)

    def record(self, send_end=True):
        if send_end:
            self.process.stdin.write("end\n")
        self.process.stdin.close()
        out = self.process.stdout.read()
        if self.process.wait() != 0:
            raise RuntimeError(f"contender {self.name} failed")
        return json.loads(out.strip().splitlines()[-1])


def step_together(contenders, i):
    """Step i of contenders that step as one (the ranks of one job, whose
    collectives need every rank): each is told before any is waited for."""
    for c in contenders:
        c.process.stdin.write(f"step {i}\n")
        c.process.stdin.flush()
    for c in contenders:
        c.expect("done")
    time.sleep(SETTLE_SECONDS)


def serve(step, record):
    """A contender's side of the protocol: step(i) per "step i"; record()
    is printed as JSON at "end"."""
    for line in sys.stdin:
        words = line.split()
        if words[0] == "end":
            break
        step(int(words[1]))
        print("done", flush=True)
    print(json.dumps(record()), flush=True)


def abba_order(contenders, turn):
    """The order contenders take `turn` in: as given on even turns, reversed
    on odd ones (A B C, C B A, ...), so that over two turns each stands as
    often early as late and drift weighs on all alike."""
    return list(contenders) if turn % 2 == 0 else list(reversed(contenders))


PUBLISH_SECTION = os.environ.get("MEMTRAIN_PUBLISH_SECTION",
                                 os.path.join(os.path.dirname(__file__), "..", "build", "bench", "publish_section"))


def builds_of(given, bench):
    """(label, PYTHONPATH) of each memtrain build named by --build
    LABEL=PATH (PATH holds a memtrain package), else the one installed:
    ("", None)."""
    builds = []
    for b in given:
        label, sep, path = b.partition("=")
        if not sep or not os.path.isdir(os.path.join(path, "memtrain")):
            sys.exit(f"{bench}: --build {b!r}: expected LABEL=PATH to a directory holding a memtrain package")
        builds.append((label, os.path.abspath(path)))
    return builds or [("", None)]


def with_pythonpath(pythonpath):
    """The environment of a contender importing memtrain from `pythonpath`
    (None: this process's own)."""
    return dict(os.environ, PYTHONPATH=pythonpath) if pythonpath else None


def publish(name, text, path):
    """Writes `text` as the section `name` of the Markdown file at `path`,
    through the C++ benches' own writer (bench/publish_section.cpp)."""
    if not os.path.exists(PUBLISH_SECTION):
        raise RuntimeError(f"{PUBLISH_SECTION} is not built; scripts/build.sh builds it "
                           "(or set MEMTRAIN_PUBLISH_SECTION to its path)")
    subprocess.run([PUBLISH_SECTION, name, path], input=text, text=True, check=True, stdout=subprocess.DEVNULL)
