"""`capacity-launcher local up`: the local cloud in the foreground until Ctrl-C."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from pathlib import Path

from capacity_launcher_cli import views
from capacity_launcher_cli.deployment import Deployment, local_file, write_local
from capacity_launcher_cli.web_server import WebServer, start
from local_cloud.address import PortInUse, port_taken
from local_cloud.example_capacity import GROUP_NAME

# How often the web view's page polls (`capacity-launcher web --interval` chooses it there).
WEB_REFRESH_SECONDS = 2.0


def quiet_server_logs() -> None:
    """moto's HTTP server logs every request; the functions' own logs are what matter here."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)


def describe(
    deployment: Deployment, written_to: Path, wired: list[str], adjustments: list[str]
) -> None:
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
    for adjustment in adjustments:
        out.print(f"  note: {adjustment}")
    out.print(f"names written to {written_to}; in another shell:")
    out.print(f"  export AWS_ENDPOINT_URL={deployment.endpoint_url}")
    out.print("  capacity-launcher apply -f examples/")
    out.print("Ctrl-C stops the local cloud.")


def up(args: argparse.Namespace) -> int:
    """Serve until Ctrl-C or SIGTERM (also while starting); a taken port fails at once, before
    moto loads (seconds), and again if another program takes it meanwhile."""
    taken = port_taken(args.host, args.port)
    if taken is not None:
        print(f"error: {taken}", file=sys.stderr)
        return 1
    web_port: int | None = args.web_port
    if web_port is not None and port_taken(args.host, web_port) is not None:
        print(f"error: --web-port: port {web_port} on {args.host} is in use", file=sys.stderr)
        return 1
    from local_cloud.cloud import LocalCloud, LocalCloudOptions
    from local_cloud.example_capacity import create_reservations

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
    target = local_file(args.local_file)
    written = False
    web: WebServer | None = None
    # SIGTERM (a supervisor, `kill`, `timeout`) stops as Ctrl-C does, even mid-start.
    signal.signal(signal.SIGTERM, _interrupt)
    print(f"starting the local cloud on {args.host}:{args.port}…", file=sys.stderr)
    try:
        deployment = cloud.start()
        # What examples/ targets, so its pools launch as written (not only in the demo).
        create_reservations(deployment)
        write_local(deployment, target)
        written = True
        describe(deployment, target, sorted(cloud.functions), cloud.adjustments)
        if web_port is not None:
            web = start(deployment, args.host, web_port, WEB_REFRESH_SECONDS)
            print(f"web view at {web.url}", file=sys.stderr)
        while True:
            signal.pause()
    except PortInUse as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    finally:
        if web is not None:
            web.shutdown()
            web.server_close()
        if cloud.deployment is not None:
            print("stopping the local cloud", file=sys.stderr)
        if written:  # another cloud's names (on the port we could not take) are left alone
            target.unlink(missing_ok=True)
        cloud.stop()
    return 0


def _interrupt(_signal: int, _frame: object) -> None:
    raise KeyboardInterrupt
