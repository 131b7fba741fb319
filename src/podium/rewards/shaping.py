"""What rewards read off a trajectory's turns: whether each turn followed the action format, whether it failed
or repaired a failure, and the shaping terms built from that (Uno's S(τ) and per-turn r_t)."""

from podium.core.calls import Status
from podium.core.trajectory import Trajectory, Turn
from podium.rewards.uno import MAX_SHAPING


def turn_well_formed(turn: Turn) -> bool:
    """The turn parsed, and no call of it was refused as malformed."""
    return turn.parse_error is None and all(result.status is not Status.PARSE_ERR for result in turn.results)


def turn_failed(turn: Turn) -> bool:
    """Something in the turn went wrong: it did not parse, or a call did not return OK."""
    return not turn_well_formed(turn) or any(not result.ok for result in turn.results)


def well_formed(trajectory: Trajectory) -> bool:
    """Every turn followed the format."""
    return all(turn_well_formed(turn) for turn in trajectory.turns)


def format_shaping(trajectory: Trajectory) -> float:
    """Uno's S(τ) for a wrong answer: the consolation grows with the share of well-formed turns."""
    if not trajectory.turns:
        return 0.0
    return MAX_SHAPING * sum(turn_well_formed(turn) for turn in trajectory.turns) / len(trajectory.turns)


def turn_shaping(trajectory: Trajectory, eta: float) -> tuple[list[float], list[str]]:
    """Per-turn shaping r_t and action type for turn-level credit: −η for a malformed turn, +η for a turn that
    repaired the failure of the turn before it, else 0; types ``invalid``, ``answer`` (no call) or ``call``."""
    shaping: list[float] = []
    kinds: list[str] = []
    for index, turn in enumerate(trajectory.turns):
        if not turn_well_formed(turn):
            shaping.append(-eta)
            kinds.append("invalid")
            continue
        repaired = index > 0 and turn_failed(trajectory.turns[index - 1])
        shaping.append(eta if repaired else 0.0)
        kinds.append("call" if turn.results else "answer")
    return shaping, kinds
