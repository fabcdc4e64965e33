"""README's hands-on shows what a refused request answers: every `$ capacity-launcher ...` line
of the section's ```console blocks that is followed by its output is run against the local cloud
with the examples applied, and each output line shown is in what the command prints (the
hands-on said "ask for more than a pool allows ... and the answer says which limit or field
refused it" above a dry run the pool allowed: a newcomer saw no refusal)."""

from __future__ import annotations

import re
import shlex

from tests.e2e.conftest import REPO, E2eCloud, run_cli

SECTION = "## Five minutes, hands on"
_CONSOLE_BLOCK = re.compile(r"^```console\n(.*?)^```", re.MULTILINE | re.DOTALL)


def shown_answers(readme: str) -> list[tuple[str, list[str]]]:
    """Each command of the section's console blocks with the output lines shown under it."""
    section = readme.split(SECTION, 1)[1].split("\n## ", 1)[0]
    answers: list[tuple[str, list[str]]] = []
    for block in _CONSOLE_BLOCK.findall(section):
        for line in block.splitlines():
            if line.startswith("$ "):
                answers.append((line[2:].split(" #", 1)[0].strip(), []))
            elif answers and line.strip():
                answers[-1][1].append(line.strip())
    return [(command, shown) for command, shown in answers if shown]


def test_the_refusals_the_hands_on_shows_are_what_the_commands_answer(
    e2e_cloud: E2eCloud,
) -> None:
    answers = shown_answers((REPO / "README.md").read_text(encoding="utf-8"))
    assert answers, "the hands-on shows no command with its answer"

    for command, shown in answers:
        argv = shlex.split(command)
        assert argv[0] == "capacity-launcher", command
        done = run_cli(*argv[1:])
        printed = [line.strip() for line in (done.out + done.err).splitlines()]
        for line in shown:
            assert line in printed, f"{command}\nshown: {line}\nprinted:\n{done.out}{done.err}"
