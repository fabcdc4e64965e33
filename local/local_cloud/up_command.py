"""`capacity-launcher local up`: the local cloud in the foreground until Ctrl-C."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from pathlib import Path

from capacity_launcher_cli import views
from capacity_launcher_cli.deployment import Deployment, local_file, write_local
from local_cloud.cloud import LocalCloud, LocalCloudOptions
from local_cloud.example_capacity import GROUP_NAME, create_reservations


def quiet_server_logs() -> None:
    """moto's HTTP server logs every request; the functions' own logs are what matter here."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)


def describe(deployment: Deployment, written_to: Path, wired: list[str]) -> None:
    out = views.console(stderr=True)
    out.print(f"[bold]local cloud[/] at {deployment.endpoint_url} ({deployment.region})")
    for label, value in (
        ("event bus", deployment.event_bus),
        ("launch queue", deployment.launch_queue_url),
        ("dead-letter queue", deployment.dead_letter_queue_url),
        ("state table", deployment.state_table),
        ("unavailable offerings table", deployment.unavailable_offerings_table),
        ("idempotency table", deployment.idempotency_table),
    ):
        out.print(f"  {label:28} {value}")
    out.print(f"  functions wired              {', '.join(wired)}")
    out.print(f"  examples' reservations       training's ODCR, the {GROUP_NAME} group")
    out.print(f"names written to {written_to}; in another shell:")
    out.print(f"  export AWS_ENDPOINT_URL={deployment.endpoint_url}")
    out.print("  capacity-launcher apply -f examples/")
    out.print("Ctrl-C stops the local cloud.")


def up(args: argparse.Namespace) -> int:
    quiet_server_logs()
    options = LocalCloudOptions(
        host=args.host,
        port=args.port,
        region=args.region or "us-east-1",
        template_path=args.template,
        visibility_timeout_seconds=args.visibility_timeout,
        schedules=not args.no_schedules,
        function_logs=sys.stderr,
    )
    cloud = LocalCloud(options)
    stopped = threading.Event()
    # SIGTERM (a supervisor, `kill`) stops as cleanly as Ctrl-C does.
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    deployment = cloud.start()
    target = local_file(args.local_file)
    try:
        # What examples/ targets, so its pools launch as written (not only in the demo).
        create_reservations(deployment)
        write_local(deployment, target)
        describe(deployment, target, sorted(cloud.functions))
        while not stopped.wait(1):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        print("stopping the local cloud", file=sys.stderr)
        target.unlink(missing_ok=True)
        cloud.stop()
    return 0
