"""The service's use cases for one deployment, as the composition root builds them
(`capacity_launcher.service.wiring`): the CLI formats and prints what they answer, and reaches
no adapter itself (import-linter holds it: `make lint`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from capacity_launcher.service import wiring
from capacity_launcher_cli.deployment import Deployment

if TYPE_CHECKING:
    from capacity_launcher.service.configuration import Configuration
    from capacity_launcher.service.queries import Queries


def adapters(deployment: Deployment, clock: wiring.Clock | None = None) -> wiring.Adapters:
    """The deployment's composition root (`clock`: the emulator's on a local cloud)."""
    if clock is None:
        return wiring.Adapters(deployment.settings(), deployment.client)
    return wiring.Adapters(deployment.settings(), deployment.client, clock=clock)


def queries(deployment: Deployment) -> Queries:
    """What `get`, `describe` and `top` read."""
    return adapters(deployment).queries()


def configuration(deployment: Deployment) -> Configuration:
    """What `apply` and `delete` change."""
    return adapters(deployment).configuration()
