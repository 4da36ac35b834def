"""The roles of a chat message in every HealthBench file: one declaration for the line shapes
(`healthbench.data.shapes`, msgspec) and the records (`healthbench.data.schema`, pydantic), which
import neither each other's library."""

from __future__ import annotations

from typing import Literal

Role = Literal["system", "user", "assistant", "developer"]
