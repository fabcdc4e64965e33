"""The launch use case: one SQS batch of launch requests, each served through the launch phases.

`LaunchBatch` takes a batch (validate, claim, coalesce, run groups); `Launcher` serves one group
of compatible requests through the phases of `pipeline`. docs/architecture.md walks a request
through them.
"""

from capacity_launcher.service.launch.batch import LaunchBatch, Message
from capacity_launcher.service.launch.pipeline import Launcher
from capacity_launcher.service.launch.progress import LaunchReport

__all__ = ["LaunchBatch", "LaunchReport", "Launcher", "Message"]
