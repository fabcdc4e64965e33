"""The fork server reads and parses ahead what every run would (fork_server.warm): a run's cold
container, made after it, reads no botocore data file and parses no catalogue again."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.simulation.runner import PYTHONPATH, ROOT

# In a process of its own: the caches it opens stay open for the rest of that process.
_AFTER_WARM = """
import json
import boto3
import botocore.loaders
import botocore.parsers

parses, files = [], []
original_parse = botocore.parsers.QueryParser._do_parse
original_load = botocore.loaders.JSONFileLoader.load_file

def parse(self, response, shape):
    parses.append(len(response["body"]))
    return original_parse(self, response, shape)

def load(self, path):
    files.append(path)
    return original_load(self, path)

# botocore's own parse, counted under the remembered parses that warm() opens
botocore.parsers.QueryParser._do_parse = parse
from moto.core.base_backend import AccountSpecificBackend
from moto.core.utils import get_service_model
from moto_capacity.ec2.responses.listings import serialize_catalogue_ahead
from tests.simulation import fork_server

fork_server.warm()
warmed = list(parses)
parses.clear()
botocore.loaders.JSONFileLoader.load_file = load

# a run's cold container: a new session and its clients, as a run makes them after the fork
session = boto3.session.Session(
    region_name="us-east-1", aws_access_key_id="a", aws_secret_access_key="b"
)
clients = {service: session.client(service) for service in fork_server.CLIENT_SERVICES}
for service in fork_server.CLIENT_SERVICES:
    get_service_model(service)
for service in fork_server.BACKEND_SERVICES:
    AccountSpecificBackend.get_session().get_available_regions(service)
ec2 = clients["ec2"]
status, headers, body = serialize_catalogue_ahead()  # the kept answer
body = body.encode() if isinstance(body, str) else body  # as botocore reads it off the wire
parser = ec2._endpoint._response_parser_factory.create_parser("ec2")
shape = ec2.meta.service_model.operation_model("DescribeInstanceTypes").output_shape
answer = parser.parse({"status_code": status, "headers": headers, "body": body}, shape)
print(json.dumps({
    "warmed": warmed, "parses": parses, "files": files, "types": len(answer["InstanceTypes"]),
}))
"""


def test_a_run_after_the_warm_reads_no_model_and_parses_no_catalogue_again() -> None:
    # Given the fork server's warm, in a process of its own
    done = subprocess.run(
        [sys.executable, "-c", _AFTER_WARM],
        cwd=ROOT,
        env={"PYTHONPATH": PYTHONPATH, "PATH": "/usr/bin:/bin", "PYTHONHASHSEED": "0"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    # Then the warm parsed the whole catalogue once (5 MB and more of XML)
    assert len(seen["warmed"]) == 1 and seen["warmed"][0] > 5_000_000, seen["warmed"]
    # and a cold container made after it read no botocore data file for its clients, moto's
    # models or regions, and got the whole catalogue without botocore parsing it again
    assert seen["files"] == [], seen["files"]
    assert seen["parses"] == [], seen["parses"]
    assert seen["types"] > 1000, seen["types"]
