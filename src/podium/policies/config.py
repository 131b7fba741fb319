"""A policy's settings: each policy has a config of its own (a name and the settings only it reads), nested in the
run config as ``policy:``. The config builds the policy and checks its settings, against the other run settings
and against the pool an executor runs it over, so the runtime names no policy and no policy's setting.

Written as a name alone (``policy: dag``) a policy takes its defaults; with settings it is a mapping (``policy:
{name: dag, lazy: false}``), and it is written back the same way: a name alone when every setting is the default.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import SerializerFunctionWrapHandler, model_serializer

from podium.config import Config
from podium.policies.base import Policy


@dataclass(frozen=True)
class PolicySetup:
    """What a policy's settings are checked against when an executor is built: the pool and the orchestrator."""

    tools: Sequence[str]
    """The pool's tools, roles and workers as tools, by name."""
    workers: Sequence[str]
    """The pool's workers, by name."""
    blind: bool
    """Whether the pool hides its workers behind labels drawn per episode."""
    orchestrator: str
    """The orchestrator's model."""
    scores_choices: bool
    """Whether the orchestrator's backend scores a choice among words under the run's constrained decoding."""
    constrained: str
    """The run's constrained decoding (``auto``, ``always``, ``never``)."""


class PolicyConfig(Config):
    """A policy by name, with its own settings (the fields of its config)."""

    name: str
    """Which policy."""
    policy_class: ClassVar[type[Policy]]
    """The policy this config builds, with its settings as keyword arguments."""

    def build(self) -> Policy:
        """The policy, its settings given."""
        return self.policy_class(**{field: getattr(self, field) for field in self.settings()})

    @classmethod
    def settings(cls) -> list[str]:
        """The policy's own settings (every field but its name)."""
        return [field for field in cls.model_fields if field != "name"]

    def sampling_problem(self, temperature: float) -> str | None:
        """Why these settings cannot run at ``temperature`` (``None``: they can)."""
        return None

    def check(self, setup: PolicySetup) -> None:
        """Refuse (``ValueError``, naming the setting) settings that ``setup``'s pool or orchestrator cannot serve."""

    def recorded(self) -> dict[str, Any]:
        """The settings a trajectory records beside the policy's name."""
        return {}

    def unexplorable(self) -> str | None:
        """Why the policy's every path cannot be played one by one (``None``: it can, if its actions are choices)."""
        return None

    @model_serializer(mode="wrap")
    def _compact(self, handler: SerializerFunctionWrapHandler) -> Any:
        fields = type(self).model_fields
        if all(getattr(self, name) == fields[name].get_default(call_default_factory=True) for name in self.settings()):
            return self.name
        return handler(self)


def policy_by_name(value: Any, configs: Sequence[type[PolicyConfig]]) -> Any:
    """A policy written as its name, as the mapping of its config; a name that is no policy, and a setting of
    another policy than the one named, are refused."""
    by_name = {config.model_fields["name"].default: config for config in configs}
    if isinstance(value, str):
        if value not in by_name:
            raise ValueError(f"'{value}' is not a policy; choose from {', '.join(by_name)}")
        return {"name": value}
    if isinstance(value, dict) and "name" not in value:
        raise ValueError(f"name the policy (name: one of {', '.join(by_name)}) beside its settings")
    if isinstance(value, dict) and value["name"] in by_name:
        own = set(by_name[value["name"]].settings())
        for other, config in by_name.items():
            for setting in sorted((set(config.settings()) - own) & set(value)):
                raise ValueError(f"{setting} applies to the {other} policy, not to '{value['name']}'")
    return value
