"""`python -m moto_capacity [--host 127.0.0.1] [--port 5000]`: a moto server with capacity."""

import argparse

from moto.server import main as moto_server_main

from . import install


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m moto_capacity", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=5000)
    args = parser.parse_args(argv)
    install()
    moto_server_main(["--host", args.host, "--port", str(args.port)])


if __name__ == "__main__":
    main()
