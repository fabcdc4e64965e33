"""The tests' runs forked from one warm interpreter: `python -m tests.simulation.fork_server`.

A run in a fresh interpreter spent about 2.5 s of CPU importing the service, moto (its AMI and
instance-type catalogues), boto3 and the simulation before its first step, and 1.9 s more (0.6 s
with the extension's XML writer) serializing moto's answer to the listing of every instance type
at its first sync: the server does both once, with `PYTHONHASHSEED` fixed as `python -m
tests.simulation` fixes it, and forks one child per run, which runs `tests.simulation.__main__.main`
with the run's arguments and exits.

The server also opens the caches a run opens (tests/support/process_caches.py: one botocore
loader, remembered parses) for its whole life, and fills them as a run would: each service's
botocore model read, its client made (no call), moto's models and region lists read, and that
answer parsed as the EC2 client parses it (0.8 s). A run then finds them open and uses them.

A child starts where a fresh `python -m tests.simulation` would be once its imports are done,
those caches aside (moto_capacity keeps that answer once serialized, whoever asked: the same
bytes; a remembered parse is a copy of botocore's): the server makes no AWS call, makes no moto
backend, starts no thread and seeds nothing before it forks (everything a run draws is seeded by
the run itself, `World._prepare`; it installs moto_capacity, as each run does first, which only
patches moto's classes), and each child is forked from the server as it was then, never from
another run. So a seed replays the same,
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

# The services a run's clients call, and those whose moto backends a run makes (moto lists each
# one's regions from botocore's model when it makes its first backend): their botocore data
# files read once by the server. A service left out is read by each run, as before.
CLIENT_SERVICES = ("dynamodb", "ec2", "events", "iam", "lambda", "sqs", "ssm", "sts")
BACKEND_SERVICES = ("autoscaling", "ec2", "elb", "elbv2", "kms")


def warm() -> None:
    """What `main` imports before a run, imported once for every child; the answer to the
    listing of every instance type serialized (0.6 s of CPU, once a run: each sync lists them)
    and parsed as a client parses it (0.8 s); botocore's data files read (0.3 s)."""
    import moto_capacity
    import tests.simulation.operations
    import tests.simulation.report
    import tests.simulation.scheduler  # noqa: F401
    from moto_capacity.ec2.responses.listings import serialize_catalogue_ahead
    from tests.support.collector import settle
    from tests.support.process_caches import open_for_the_process

    # The caches each run would open (the shared loader, remembered parses): open here once,
    # so what is loaded and parsed below is every child's.
    open_for_the_process()
    # Installed as each run installs it (local_cloud.cloud): a run's call is answered by the
    # extension's serializer, the same bytes as moto's in under half its CPU.
    moto_capacity.install()
    _read_ahead(serialize_catalogue_ahead())
    # What is warm now lives as long as the server: no child's collection walks it again.
    settle()


def _read_ahead(catalogue: tuple[int, dict[str, str], bytes | str]) -> None:
    """Each service's model loaded (a client made, no call), and the catalogue's answer parsed
    by the EC2 client's parser into the remembered parses, as a sync's listing parses it."""
    import boto3
    from moto.core.base_backend import AccountSpecificBackend
    from moto.core.utils import get_service_model

    session = boto3.session.Session(
        region_name="us-east-1", aws_access_key_id="warm", aws_secret_access_key="warm"
    )
    clients = {service: session.client(service) for service in CLIENT_SERVICES}
    for service in CLIENT_SERVICES:
        get_service_model(service)  # moto's, to read each request it answers
    clients["dynamodb"].get_waiter("table_exists")  # the local cloud waits for its tables
    clients["dynamodb"].can_paginate("query")  # and the paginators' data
    regions = AccountSpecificBackend.get_session()  # moto's own session: the shared loader
    for service in BACKEND_SERVICES:
        regions.get_available_regions(service)
    ec2 = clients["ec2"]
    operation = ec2.meta.service_model.operation_model("DescribeInstanceTypes")
    parser = ec2._endpoint._response_parser_factory.create_parser(
        ec2.meta.service_model.metadata["protocol"]
    )
    status, headers, body = catalogue
    raw = body.encode("utf-8") if isinstance(body, str) else body
    parser.parse({"status_code": status, "headers": headers, "body": raw}, operation.output_shape)


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
