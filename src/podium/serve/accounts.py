"""API keys and what each may spend per day, as LiteLLM proxies' virtual keys have budgets.

Each key is read from an environment variable and has a name (what logs and metrics show; never the key) and
an optional USD limit per UTC day. A limited key's day is a cap its episodes share step by step
(:class:`~podium.costs.ledger.RunCap`): each generation or call of each episode reserves its cost bound there as
it starts and settles what it cost as it ends, as in the episode's own ledger, so that together they never cross
the limit, and a step that does not fit waits while other steps in flight may free some of it. A request is
refused with 429 ``insufficient_quota`` only when the key has spent its limit, or when its episode's next step
cannot be paid for by what the key has left (then the episode stops, and the response says so). An episode holds
nothing between its steps: a request's own ``max_usd`` caps that request, not what others may spend. With a spend
file, what each episode spent is appended to it as a JSON line (day, key, USD) when it ends, and today's lines
are read back at start, so a restart does not reset the limits.
"""

import datetime
import hmac
import json
import math
import os
from pathlib import Path

from pydantic import PositiveFloat

from podium.config import Config
from podium.costs.ledger import RunCap
from podium.errors import ConfigError
from podium.serve.http import ApiError


class ApiKey(Config):
    """A key clients send as ``Authorization: Bearer <key>``."""

    name: str
    """Who the key belongs to, as logs and metrics name it."""
    key_env: str
    """Environment variable holding the key."""
    max_usd_per_day: PositiveFloat | None = None
    """Most US dollars the key's requests may spend per UTC day; unset: no limit."""


def today() -> str:
    return datetime.datetime.now(datetime.UTC).date().isoformat()


class Accounts:
    """The configured keys, and each limited key's cap for today."""

    def __init__(self, keys: list[ApiKey], spend_file: str | None = None) -> None:
        self.keys: list[tuple[ApiKey, bytes]] = []
        names = [key.name for key in keys]
        for index, key in enumerate(keys):
            if key.name in names[:index]:
                raise ConfigError(f"keys.{index}.name: '{key.name}' names two keys")
            secret = os.environ.get(key.key_env)
            if not secret:
                raise ConfigError(f"keys.{index}.key_env: the environment variable {key.key_env} is not set")
            self.keys.append((key, secret.encode()))
        self.spend_file = None if spend_file is None else Path(spend_file)
        self.day = today()
        self.caps: dict[str, RunCap] = {}
        """Each limited key's cap for ``day``: its spend so far and the bounds of its steps in flight."""
        self._read_spend()

    @property
    def required(self) -> bool:
        """Whether requests need a key."""
        return bool(self.keys)

    def authorize(self, authorization: str) -> str | None:
        """The name of the key an ``Authorization`` header carries (``None`` when no key is configured); 401
        otherwise."""
        if not self.keys:
            return None
        scheme, _, sent = authorization.partition(" ")
        if scheme.lower() == "bearer":
            for key, secret in self.keys:
                if hmac.compare_digest(sent.strip().encode(), secret):
                    return key.name
        raise ApiError(401, "missing or wrong API key", "authentication_error", code="invalid_api_key")

    def allowance(self, name: str | None) -> RunCap | None:
        """The cap of key ``name`` for today, which its episodes' steps draw on (``None`` when the key has no
        limit); 429 when the key has spent its limit."""
        limit = self._limit(name)
        if name is None or limit is None:
            return None
        cap = self._cap(name, limit)
        if cap.spent >= limit:
            raise ApiError(
                429, f"the key '{name}' has spent its ${limit:g} for today (UTC)", "insufficient_quota",
                code="insufficient_quota",
            )  # fmt: skip
        return cap

    def settle(self, name: str | None, spent: float) -> None:
        """Record what an episode of key ``name`` spent (its cap counted it step by step) in the spend file."""
        if name is None or self.spend_file is None or spent <= 0.0:
            return
        with self.spend_file.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps({"day": today(), "key": name, "usd": spent}) + "\n")

    def _cap(self, name: str, limit: float) -> RunCap:
        if today() != self.day:  # a new day: fresh caps (episodes running across midnight finish on the old one)
            self.day, self.caps = today(), {}
        if name not in self.caps:
            self.caps[name] = RunCap(limit)
        return self.caps[name]

    def _limit(self, name: str | None) -> float | None:
        return next((key.max_usd_per_day for key, _ in self.keys if key.name == name), None)

    def _read_spend(self) -> None:
        if self.spend_file is None or not self.spend_file.exists():
            return
        for number, line in enumerate(self.spend_file.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                day, name, usd = row["day"], row["key"], float(row["usd"])
                if not math.isfinite(usd) or usd < 0.0:
                    raise ValueError(f"usd is {usd}")
            except (ValueError, KeyError, TypeError) as error:
                raise ConfigError(f"{self.spend_file}:{number}: not a spend record ({error})") from error
            limit = self._limit(name)
            if day == self.day and limit is not None:
                self._cap(name, limit).charge(usd)
