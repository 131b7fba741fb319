"""Base class of Podium's data records."""

from pydantic import BaseModel, ConfigDict


class Record(BaseModel):
    """A strict, documented data record: unknown fields are rejected, attribute docstrings describe fields."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
