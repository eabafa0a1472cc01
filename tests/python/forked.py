"""Cases each in a process of its own, forked from one server process that
imported torch and memtrain once: a case's death by a signal still shows as
its own exit status, while the seconds an import of torch takes are paid
once rather than per case. The server runs no operation of torch before it
forks, so a case starts as a fresh interpreter that imported the modules."""

import json
import os
import subprocess
import sys

SERVER = r'''
import json, os, signal, sys, tempfile, time, traceback
sys.path.insert(0, sys.argv[2])
for name in json.loads(sys.argv[1]):
    __import__(name)
replies = os.fdopen(os.dup(1), "w")
for line in sys.stdin:
    case = json.loads(line)
    out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    pid = os.fork()
    if pid == 0:
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        sys.argv = ["-c"] + case["argv"]
        status = 0
        try:
            exec(compile(case["source"], "<case>", "exec"), {"__name__": "__main__"})
        except SystemExit as e:  # as the interpreter ends on it
            if isinstance(e.code, int) or e.code is None:
                status = e.code or 0
            else:
                print(e.code, file=sys.stderr)
                status = 1
        except BaseException:
            traceback.print_exc()
            status = 1
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    deadline = time.monotonic() + case["timeout"]
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            returncode = os.waitstatus_to_exitcode(status)
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            returncode = None
            break
        time.sleep(0.02)
    said = []
    for f in (out, err):
        f.seek(0)
        said.append(f.read().decode(errors="replace"))
        f.close()
    replies.write(json.dumps({"returncode": returncode, "stdout": said[0], "stderr": said[1]}) + "\n")
    replies.flush()
'''


class Forks:
    """run(source, argv, timeout) as subprocess.run([python, "-c", source,
    *argv]) would, with `preload` already imported."""

    def __init__(self, preload, path=os.path.dirname(os.path.abspath(__file__))):
        self.server = subprocess.Popen([sys.executable, "-c", SERVER, json.dumps(list(preload)), path],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def run(self, source, argv, timeout):
        self.server.stdin.write(json.dumps({"source": source, "argv": argv, "timeout": timeout}) + "\n")
        self.server.stdin.flush()
        line = self.server.stdout.readline()
        if not line:
            raise RuntimeError(f"the fork server ended with status {self.server.wait()}")
        reply = json.loads(line)
        args = [sys.executable, "-c", "<case>"] + argv
        if reply["returncode"] is None:
            raise subprocess.TimeoutExpired(args, timeout, reply["stdout"], reply["stderr"])
        return subprocess.CompletedProcess(args, reply["returncode"], reply["stdout"], reply["stderr"])

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.server.stdin.close()
        self.server.wait(timeout=60)
