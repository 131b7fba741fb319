"""API keys and what each may spend per day, as LiteLLM proxies' virtual keys have budgets.

Each key is read from an environment variable and has a name (what logs and metrics show; never the key) and
an optional USD limit per UTC day. An episode under a limited key runs with a USD cap of what the key has left
today, less what its other running episodes hold (the episode's ledger never crosses its cap, so the key never
crosses its limit); a key with nothing left gets 429 ``insufficient_quota``. When the episode ends, what it spent
is charged to the key and the rest of its hold released. With a spend file, every charge is appended to it as a
JSON line (day, key, USD) and today's charges are read back at start, so a restart does not reset the limits.
"""

import datetime
import hmac
import json
import math
import os
from pathlib import Path

from pydantic import PositiveFloat

from podium.config import Config
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
    """The configured keys, today's spend per key and what running episodes hold of it."""

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
        self.spent: dict[str, float] = {}
        self.held: dict[str, float] = {}
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

    def hold(self, name: str | None, cap: float | None) -> float | None:
        """Reserve what an episode of key ``name`` may spend (at most ``cap`` when given): the USD cap to run it
        under, or ``None`` when the key has no limit. 429 when the key has nothing left today."""
        limit = self._limit(name)
        if name is None or limit is None:
            return None
        self._roll_day()
        left = limit - self.spent.get(name, 0.0) - self.held.get(name, 0.0)
        if left <= 0.0:
            raise ApiError(
                429, f"the key '{name}' has spent its ${limit:g} for today (UTC), counting running requests",
                "insufficient_quota", code="insufficient_quota",
            )  # fmt: skip
        amount = left if cap is None else min(cap, left)
        self.held[name] = self.held.get(name, 0.0) + amount
        return amount

    def settle(self, name: str | None, held: float | None, spent: float) -> None:
        """Charge what an episode spent to its key and release its hold."""
        if name is None:
            return
        self._roll_day()
        if held is not None:
            self.held[name] = max(0.0, self.held.get(name, 0.0) - held)
        self.spent[name] = self.spent.get(name, 0.0) + spent
        if self.spend_file is not None and spent > 0.0:
            with self.spend_file.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps({"day": self.day, "key": name, "usd": spent}) + "\n")

    def _limit(self, name: str | None) -> float | None:
        return next((key.max_usd_per_day for key, _ in self.keys if key.name == name), None)

    def _roll_day(self) -> None:
        if today() != self.day:
            self.day, self.spent = today(), {}

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
            if day == self.day:
                self.spent[name] = self.spent.get(name, 0.0) + usd
