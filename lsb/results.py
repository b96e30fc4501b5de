"""Per-pair result functions, the output event time and deterministic pair ids.

Result functions take numpy arrays (or plain floats, for the per-record path)
so the batch path can evaluate a whole batch in one call.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from functools import lru_cache

import numpy as np

Number = float | np.ndarray
ResultFn = Callable[[Number, Number], Number]

_RPM_TO_RAD_PER_S = 2.0 * math.pi / 60.0


def mechanical_power(speed_rpm: Number, torque_nm: Number) -> Number:
    """P [W] = 2*pi/60 * n [rpm] * M [Nm]; the default result for speed ~ torque."""
    return _RPM_TO_RAD_PER_S * speed_rpm * torque_nm


def product(left: Number, right: Number) -> Number:
    return left * right


def difference(left: Number, right: Number) -> Number:
    return left - right


RESULT_FUNCTIONS: dict[str, ResultFn] = {
    "mechanical_power": mechanical_power,
    "product": product,
    "difference": difference,
}


def event_time(left_time: int, right_time: int) -> int:
    """Output event time = the later input: the instant both values are known.

    Using the later time keeps output event times monotone with the watermark
    of the slower input, so a downstream event-time window never sees a joined
    value "before" one of its inputs existed.
    """
    return left_time if left_time >= right_time else right_time


# --- deterministic ids -------------------------------------------------------
# 128 bits = two 64-bit lanes of a splitmix64-style mix over (seed, left time,
# right time).  The seed hashes (key, left quantity, right quantity) once with
# blake2b so neither Python's salted hash() nor the process matters.

_M64 = (1 << 64) - 1
_C1 = 0xBF58476D1CE4E5B9
_C2 = 0x94D049BB133111EB
_GOLD = 0x9E3779B97F4A7C15


@lru_cache(maxsize=4096)
def _seeds(key: str, left_q: str, right_q: str) -> tuple[int, int]:
    digest = hashlib.blake2b(f"{key}\x1f{left_q}\x1f{right_q}".encode(), digest_size=16).digest()
    return int.from_bytes(digest[:8], "big"), int.from_bytes(digest[8:], "big")


def _mix_int(z: int) -> int:
    z = ((z ^ (z >> 30)) * _C1) & _M64
    z = ((z ^ (z >> 27)) * _C2) & _M64
    return z ^ (z >> 31)


def _lane_int(seed: int, lt: int, rt: int) -> int:
    z = _mix_int(seed ^ (lt & _M64))
    return _mix_int(((z + _GOLD) & _M64) ^ (rt & _M64))


def pair_id(key: str, left_q: str, right_q: str, left_time: int, right_time: int) -> str:
    """32 hex chars, identical for the same (key, pair, left time, right time)."""
    s1, s2 = _seeds(key, left_q, right_q)
    return f"{_lane_int(s1, left_time, right_time):016x}{_lane_int(s2, left_time, right_time):016x}"


def _mix_arr(z: np.ndarray) -> np.ndarray:
    z = (z ^ (z >> np.uint64(30))) * np.uint64(_C1)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(_C2)
    return z ^ (z >> np.uint64(31))


def _lane_arr(seed: int, lt: np.ndarray, rt: np.ndarray) -> np.ndarray:
    z = _mix_arr(np.uint64(seed) ^ lt)
    return _mix_arr((z + np.uint64(_GOLD)) ^ rt)


def pair_ids_hex(
    key: str, left_q: str, right_q: str, left_times: np.ndarray, right_times: np.ndarray
) -> str:
    """All ids of a column pair as one string of 32 hex chars per pair (no per-pair objects)."""
    n = len(left_times)
    if n == 0:
        return ""
    s1, s2 = _seeds(key, left_q, right_q)
    lt = np.asarray(left_times, dtype=np.int64).view(np.uint64)
    rt = np.asarray(right_times, dtype=np.int64).view(np.uint64)
    both = np.empty((n, 2), dtype=">u8")
    with np.errstate(over="ignore"):
        both[:, 0] = _lane_arr(s1, lt, rt)
        both[:, 1] = _lane_arr(s2, lt, rt)
    return both.tobytes().hex()


def pair_ids(
    key: str, left_q: str, right_q: str, left_times: np.ndarray, right_times: np.ndarray
) -> list[str]:
    """Vectorized :func:`pair_id` (same values), for the batch path."""
    h = pair_ids_hex(key, left_q, right_q, left_times, right_times)
    return [h[i : i + 32] for i in range(0, len(h), 32)]
