import pytest

from podium.config import Config
from podium.errors import ConfigError, MissingExtraError
from podium.extras import require_extra
from podium.sandbox import SandboxConfig


def test_every_config_field_is_documented():
    for config in (SandboxConfig, *Config.__subclasses__()):
        undocumented = [name for name, text in config.field_help().items() if not text]
        assert undocumented == [], f"{config.__name__} fields without a docstring: {undocumented}"


def test_config_errors_name_the_field(tmp_path):
    path = tmp_path / "sandbox.yaml"
    path.write_text("wall_time_s: -3\nmemroy_mb: 10\n")
    with pytest.raises(ConfigError) as error:
        SandboxConfig.from_file(path)
    message = str(error.value)
    assert "wall_time_s" in message and "memroy_mb" in message and str(path) in message


def test_missing_extra_says_what_to_install():
    with pytest.raises(MissingExtraError, match=r"pip install 'podium\[local\]'"):
        require_extra("local", "a_module_that_does_not_exist_anywhere")
    assert require_extra("local", "json").dumps([]) == "[]"
