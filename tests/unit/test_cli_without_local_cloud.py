"""The operator CLI's AWS commands never load the local cloud or moto: an operator against a real
account runs none of the emulation (`local up`, `demo` and `invoke` load it when they run). The
CLI's parser reads the local cloud's command registration (local_cloud.commands, argparse only),
which is all of it that loads."""

import json
import os
import subprocess
import sys

AWS_COMMANDS = (
    ["apply", "-f", "examples"],
    ["get", "nodepools"],
    ["get", "requests"],
    ["get", "reservations"],
    ["get", "unavailable-offerings"],
    ["delete", "nodepool", "training"],
    ["submit", "--request-id", "r-1", "--count", "1"],
    ["status", "r-1"],
)
# For each command, the modules of the emulation loaded once it is parsed and its code looked up
# (the registration aside).
SCRIPT = """
import json, sys
from capacity_launcher_cli import main
REGISTRATION = ("local_cloud", "local_cloud.commands")
loaded = {}
for argv in json.loads(sys.argv[1]):
    main._command(main.parser().parse_args(argv))
    loaded[" ".join(argv)] = sorted(
        m for m in sys.modules if m.split(".")[0] in ("local_cloud", "moto", "moto_capacity")
        and m not in REGISTRATION
    )
print(json.dumps(loaded))
"""


def test_the_aws_commands_load_neither_the_local_cloud_nor_moto() -> None:
    # Given a fresh interpreter, so nothing else has imported the local cloud first
    # When the CLI parses each AWS command and loads the code that runs it
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(AWS_COMMANDS)],
        # This interpreter's path: the worktree's packages, not another checkout's install.
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        capture_output=True,
        text=True,
        check=True,
    )

    # Then no module of the local cloud or of moto was imported
    loaded = json.loads(result.stdout)
    assert len(loaded) == len(AWS_COMMANDS)
    assert all(modules == [] for modules in loaded.values()), loaded
