"""The bridge partitioned from Mosquitto while machines publish: cut briefly (TCP heals it),
cut past the keepalive (both ends drop the connection, the bridge reconnects to its persistent
session), its acknowledgements lost (Mosquitto holds the messages as unacknowledged and sends
them again), lossy, slow and flapping (tests/support/partition.py). The simulator's link to
Mosquitto is untouched: machines go on publishing, and their messages wait in the broker.

Afterwards the raw topic holds every row, each key's copies identical; a message whose
acknowledgement was lost comes again, and its copy lands on the same key with the same value.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stacktools.harness.services import service_process
from stacktools.harness.wiring import Wiring
from stacktools.stack.settings import Settings
from streamkit.mqtt_client import KEEPALIVE_S
from streamkit.paths import REPO_ROOT
from tests.support.harness import expected_records, start_bridge, wait_for_keys
from tests.support.partition import Endpoint, Network, network
from tests.support.waits import keep_alive, landing_limit_s

from .test_bridge_stack import assert_raw_topic_holds_exactly

pytestmark = [pytest.mark.stack, pytest.mark.partition]

#: Held this long, a cut outlasts both ends' patience: the bridge's keepalive, and the broker's
#: one and a half keepalives.
PAST_KEEPALIVE_S = 1.5 * KEEPALIVE_S + 5
#: Brief faults: well within the keepalive, so TCP's retransmissions heal them.
BRIEF_S = 8.0
FAULTS = {
    "cut": BRIEF_S,
    "cut-past-keepalive": PAST_KEEPALIVE_S,
    "acks-lost": PAST_KEEPALIVE_S,
    "lossy": BRIEF_S,
    "slow": BRIEF_S,
    "flapping": BRIEF_S,
}
#: Rounds (one fault each; the first ones cover every kind); PARTITION_ROUNDS runs more.
ROUNDS = int(os.environ.get("PARTITION_ROUNDS", str(len(FAULTS))))
ROWS, RATE = 20_000, 150


def start_fault(net: Network, fault: str, bridge: Endpoint, broker: Endpoint) -> None:
    if fault in ("cut", "cut-past-keepalive"):
        net.cut(bridge, broker)
    elif fault == "acks-lost":
        net.cut(bridge, broker, one_way=True)
    elif fault == "lossy":
        net.lossy(bridge, broker, 0.3)
        net.lossy(broker, bridge, 0.3)
    elif fault == "slow":
        net.slow(bridge, broker, 8)


def test_the_bridge_partitioned_from_mosquitto_loses_nothing(
    stack_settings: Settings, tmp_path: Path
) -> None:
    lane = Wiring.private(stack_settings, bridge_only=True)
    seed = int(os.environ.get("PARTITION_SEED", str(random.randrange(1_000_000))))
    rng = random.Random(seed)
    kinds = list(FAULTS)
    faults = [*kinds, *(rng.choice(kinds) for _ in range(max(0, ROUNDS - len(kinds))))][:ROUNDS]
    rng.shuffle(faults)
    print(f"PARTITION_SEED={seed} faults={faults}")
    events = tmp_path / "generated.json"
    rows = max(ROWS, int(RATE * 1.5 * sum(FAULTS[f] + 2 for f in faults)))  # outlasts the faults
    subprocess.run(
        [
            sys.executable, "-m", "simulator.generate", "-o", str(events), "--rows", str(rows),
            "--things", "5", "--seed", str(seed), "--no-progress",
        ],
        cwd=REPO_ROOT,
        check=True,
    )  # fmt: skip
    log = tmp_path / "bridge.log"
    with network() as net:
        bridge = net.group("bridge")
        broker = net.server("mosquitto", (stack_settings.mqtt_port,))
        with bridge.joined():
            service = start_bridge(lane, log)
        simulator = service_process(
            "simulator", lane, tmp_path / "simulator.log", "--input", str(events),
            "--rate", str(RATE),
        ).start()  # fmt: skip
        try:
            for fault in faults:
                time.sleep(rng.uniform(0.5, 2.0))
                assert simulator.popen.poll() is None, "the replay ended before the faults"
                held = FAULTS[fault]
                if fault == "flapping":
                    with net.flapping(bridge, broker, rng, (0.2, 2.0)):
                        keep_alive(service, held, log)
                else:
                    start_fault(net, fault, bridge, broker)
                    keep_alive(service, held, log)
                    if fault in ("cut", "cut-past-keepalive", "acks-lost"):
                        assert net.dropped_packets() > 0, f"{fault} dropped nothing"
                    net.heal()
            assert simulator.popen.wait(600) == 0, (tmp_path / "simulator.log").read_text()[-3000:]
            expected = set(expected_records(events))
            seen = wait_for_keys(stack_settings, lane.raw, expected, landing_limit_s(len(expected)))
            assert expected <= seen, f"{len(expected - seen)} missing; {log.read_text()[-3000:]}"
            resent = assert_raw_topic_holds_exactly(stack_settings, lane, events, check_order=False)
            print(f"identical copies after {faults}: {resent}")
            if "acks-lost" in faults:
                assert resent > 0, "messages whose acknowledgement was lost never came again"
        finally:
            service.terminate()
            simulator.kill9()
