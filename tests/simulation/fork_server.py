"""The tests' runs forked from one warm interpreter: `python -m tests.simulation.fork_server`.

A run in a fresh interpreter spent about 2.5 s of CPU importing the service, moto (its AMI and
instance-type catalogues), boto3 and the simulation before its first step, and 1.9 s more (0.6 s
with the extension's XML writer) serializing moto's answer to the listing of every instance type
at its first sync: the server does both once, with `PYTHONHASHSEED` fixed as `python -m
tests.simulation` fixes it, and forks one child per run, which runs `tests.simulation.__main__.main`
with the run's arguments and exits.

A child starts where a fresh `python -m tests.simulation` would be once its imports are done,
that answer aside (moto_capacity keeps it once serialized, whoever asked: the same bytes): the
server makes no AWS call, makes no moto backend, starts no thread and seeds nothing before it
forks (everything a run draws is seeded by the run itself, `World._prepare`; it installs
moto_capacity, as each run does first, which only patches moto's classes), and each child is
forked from the server as it was then, never from another run. So a seed replays the same,
forked or not (`test_a_seed_replays_exactly` runs one seed forked, then fresh).

Protocol, one line of JSON each way per run: `{"argv": [...], "stdout": path}` in, the child's
exit status out (`{"status": n}`). The server ends when its input closes (its runner's process
ended), and kills no one.
"""

from __future__ import annotations

import json
import os
import sys
from typing import TextIO


def warm() -> None:
    """What `main` imports before a run, imported once for every child; and the answer to the
    listing of every instance type serialized (0.6 s of CPU, once a run: each sync lists them)."""
    import moto_capacity
    import tests.simulation.operations
    import tests.simulation.report
    import tests.simulation.scheduler  # noqa: F401
    from moto_capacity.ec2.responses.listings import serialize_catalogue_ahead
    from tests.support.collector import settle

    # Installed as each run installs it (local_cloud.cloud): a run's call is answered by the
    # extension's serializer, the same bytes as moto's in under half its CPU.
    moto_capacity.install()
    serialize_catalogue_ahead()
    # What is warm now lives as long as the server: no child's collection walks it again.
    settle()


def serve(requests: TextIO, answers: TextIO) -> None:
    """One forked child per request line, answered with its exit status once it ended."""
    for line in requests:
        request = json.loads(line)
        answers.write(json.dumps({"status": _fork_run(request["argv"], request["stdout"])}))
        answers.write("\n")
        answers.flush()


def _fork_run(argv: list[str], stdout: str) -> int:
    pid = os.fork()
    if pid == 0:  # the child: one run, its output in a file, then gone without the server's exit
        code = 70
        try:
            output = os.open(stdout, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(output, 1)
            os.dup2(output, 2)
            os.close(output)
            from tests.simulation.__main__ import main

            code = main(argv)
        except SystemExit as exiting:
            code = exiting.code if isinstance(exiting.code, int) else 1
        except BaseException:
            import traceback

            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    warm()
    serve(sys.stdin, sys.stdout)
