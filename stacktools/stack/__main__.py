"""python -m stacktools.stack up|down|status|logs|provision [component ...]

Runs the real servers of the stack as local processes on 127.0.0.1; data, logs, pid files and
generated credentials live under the run directory (default ./run, STACK_RUN_DIR). ``provision``
only creates the users, rights, topics and databases on servers running elsewhere (docker
compose), with the passwords given in the environment.
"""

from __future__ import annotations

import argparse
import sys
import time

from stacktools.stack import Stack
from stacktools.stack.components import DEFAULT_GROUPS, OPTIONAL_GROUPS
from stacktools.stack.process import ManagedProcess, tail
from streamkit.cli import HelpFormatter, entry_point, program_name
from streamkit.config import Settings


def print_status(stack: Stack) -> bool:
    rows = stack.status()
    print(f"{'component':<15} {'state':<10} {'pid':>7}  {'address':<24} log")
    for row in rows:
        print(f"{row.name:<15} {row.state:<10} {row.pid or '-':>7}  {row.address:<24} {row.log}")
    print(
        f"run directory: {stack.settings.run_dir}  (credentials: {stack.settings.credentials_path})"
    )
    return all(row.state in {"running", "external"} for row in rows)


def follow(processes: list[ManagedProcess]) -> None:
    offsets = {p.name: (p.log_file.stat().st_size if p.log_file.exists() else 0) for p in processes}
    while True:
        for process in processes:
            if process.log_file.exists():
                with process.log_file.open("rb") as handle:
                    handle.seek(offsets[process.name])
                    for line in handle.read().decode("utf-8", "replace").splitlines():
                        print(f"{process.name}| {line}")
                    offsets[process.name] = handle.tell()
        time.sleep(0.5)


@entry_point("stacktools.stack")
def main(argv: list[str] | None = None) -> int:
    names = list(DEFAULT_GROUPS)
    optional = ", ".join(OPTIONAL_GROUPS)
    parser = argparse.ArgumentParser(
        prog=program_name("stacktools.stack"),
        description=__doc__,
        formatter_class=HelpFormatter,
    )
    parser.add_argument("action", choices=["up", "down", "status", "logs", "provision"])
    parser.add_argument(
        "components",
        nargs="*",
        metavar="component",
        help=f"subset of: {', '.join(names)} (default all of these; kafka is KAFKA_BROKERS nodes), "
        f"and the optional {optional} (a standalone master and SPARK_WORKERS workers; only "
        "when named)",
    )
    parser.add_argument("-n", "--lines", type=int, default=40, help="logs: lines per component")
    parser.add_argument("-f", "--follow", action="store_true", help="logs: keep printing new lines")
    settings, args = Settings.parse(argv, parser=parser)
    try:
        stack = Stack(settings, args.components or None)
        if args.action == "up":
            print(f"[stack] starting {', '.join(stack.names)} (waiting until healthy)", flush=True)
            stack.up()
            return 0 if print_status(stack) else 1
        if args.action == "provision":
            stack.provision()
            return 0
        if args.action == "down":
            stopped = stack.down()
            print(f"[stack] stopped: {', '.join(stopped) if stopped else 'nothing was running'}")
            return 0
        if args.action == "status":
            return 0 if print_status(stack) else 1
        processes = [ManagedProcess(name, settings.run_dir) for name in stack.names]
        for process in processes:
            print(f"==> {process.log_file} <==\n{tail(process.log_file, args.lines)}")
        if args.follow:
            follow(processes)
        return 0
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
