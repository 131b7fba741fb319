import warnings

import pytest

from podium.errors import ConfigError, MissingExtraError
from podium.extras import quiet_library_deprecations, require_extra
from podium.sandbox import SandboxConfig


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


def test_the_libraries_deprecations_of_each_other_are_quiet_and_others_are_not():
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        quiet_library_deprecations()
        # what peft triggers on every adapter load, reading a property transformers deprecates
        warnings.warn("`is_gradient_checkpointing` is deprecated and will go.", FutureWarning, stacklevel=1)
        # what TRL's GRPO triggers on every step, passing the key/value cache by transformers' old name
        warnings.warn("`past_key_values` is deprecated and will be removed.", FutureWarning, stacklevel=1)
        warnings.warn("something else is deprecated", FutureWarning, stacklevel=1)
    assert [str(w.message) for w in seen] == ["something else is deprecated"]
