"""Check the provisioned Grafana dashboards without a Grafana.

    python -m stacktools.dashboards validate
    python -m stacktools.dashboards list
    python -m stacktools.dashboards check [--from-ms X --to-ms Y] [--var thing=Thing1 ...]
        [--require-data]
    python -m stacktools.dashboards pipeline

validate: the structural check only. list: every variable and panel query, unfilled.
check: the structural check, then every query filled in and run against the local stack.
pipeline: the running pipeline as a graph, each stage's figures from Prometheus (what
``python -m stacktools.stack status --pipeline`` shows under the servers).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping, Sequence

from stacktools.dashboards.check import PanelResult, check_dashboards
from stacktools.dashboards.errors import VariableError
from stacktools.dashboards.graph.collect import snapshot
from stacktools.dashboards.graph.render import render
from stacktools.dashboards.model import (
    Dashboard,
    Datasource,
    iter_panels,
    load_dashboards,
    load_datasources,
    target_query,
    variable_query,
)
from stacktools.dashboards.settings import DashboardSettings
from stacktools.dashboards.validate import validate_dashboards
from streamkit.cli import HelpFormatter, entry_point, program_name


def list_queries(
    dashboards: Sequence[Dashboard], datasources: Mapping[str, Datasource]
) -> list[str]:
    """One line per variable query and panel target, unfilled: what the dashboards ask for."""
    lines = []
    for dashboard in dashboards:
        for variable in dashboard.variables:
            if variable.get("type") == "query":
                lines.append(
                    f"{dashboard.title} | variable {variable.get('name')} | "
                    f"{(variable.get('datasource') or {}).get('uid')} | {variable_query(variable)}"
                )
        for panel, _row in iter_panels(dashboard.model):
            for target in panel.get("targets") or []:
                ref = target.get("datasource", panel.get("datasource")) or {}
                kind = datasources[ref["uid"]].type if ref.get("uid") in datasources else ""
                lines.append(
                    f"{dashboard.title} | panel {panel.get('id')} {panel.get('title')!r} "
                    f"{target.get('refId')} | {ref.get('uid')} | {target_query(target, kind)}"
                )
    return lines


def _parse_vars(pairs: Sequence[str]) -> dict[str, list[str]]:
    variables: dict[str, list[str]] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise VariableError(pair)
        variables.setdefault(name.strip(), []).append(value)
    return variables


def report(results: Sequence[PanelResult], *, require_data: bool, show_queries: bool) -> int:
    """Print one line per result; return how many failed (errors, or empty with require_data)."""
    failed = 0
    for r in results:
        bad = r.error is not None or (require_data and r.series == 0)
        failed += bad
        status = "ERROR" if r.error else ("EMPTY" if r.series == 0 else "ok")
        print(
            f"{status:<5} {r.dashboard} | {f'{r.panel} {r.ref_id}'.strip()} | {r.datasource} | "
            f"series={r.series} points={r.points}" + (f" | {r.error}" if r.error else "")
        )
        if show_queries or bad:
            print(f"      {r.query}")
    print(f"{len(results)} queries, {failed} failed")
    return failed


@entry_point("stacktools.dashboards")
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=program_name("stacktools.dashboards"),
        description=__doc__,
        formatter_class=HelpFormatter,
    )
    parser.add_argument("action", choices=["validate", "list", "check", "pipeline"])
    parser.add_argument(
        "--from-ms", type=int, help="start of the time range (default: an hour before --to-ms)"
    )
    parser.add_argument("--to-ms", type=int, help="end of the time range (default: now)")
    parser.add_argument(
        "--var",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="pin a template variable (repeat for several values; VALUE '$__all' for All)",
    )
    parser.add_argument("--database", help="InfluxDB database instead of INFLUX_DATABASE")
    parser.add_argument(
        "--require-data", action="store_true", help="fail when a query returns no series"
    )
    parser.add_argument("--show-queries", action="store_true", help="print every filled query")
    settings, args = DashboardSettings.parse(argv, parser=parser)
    if args.action == "pipeline":
        print(render(snapshot(settings)), flush=True)
        return 0
    datasources = load_datasources()
    try:
        dashboards = load_dashboards()
    except ValueError as exc:
        print(f"invalid dashboard: {exc}", file=sys.stderr)
        return 1
    problems = validate_dashboards(dashboards, datasources)
    for problem in problems:
        print(f"PROBLEM {problem}")
    if args.action == "validate":
        print(f"{len(dashboards)} dashboards, {len(problems)} problems")
        return 1 if problems else 0
    if args.action == "list":
        print("\n".join(list_queries(dashboards, datasources)))
        return 1 if problems else 0
    to_ms = args.to_ms if args.to_ms is not None else int(time.time() * 1000)
    from_ms = args.from_ms if args.from_ms is not None else to_ms - 3_600_000
    variables = _parse_vars(args.var)
    defined = {v.get("name") for d in dashboards for v in d.variables}
    for name in sorted(set(variables) - defined):
        print(f"warning: no dashboard defines variable {name!r}", file=sys.stderr)
    results = check_dashboards(
        settings,
        from_ms,
        to_ms,
        variables,
        args.database,
        dashboards=dashboards,
        datasources=datasources,
    )
    failed = report(results, require_data=args.require_data, show_queries=args.show_queries)
    return 1 if problems or failed else 0
