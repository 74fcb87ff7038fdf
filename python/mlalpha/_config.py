"""mlalpha.Config: the TOML file's settings (docs/config.md), parsed and checked by the engine."""
from __future__ import annotations

import json
import math
import os
from typing import Any, Mapping

try:
    import tomllib
except ImportError:  # Python < 3.11
    import tomli as tomllib

from . import _core


def _toml_value(value: Any, key: str) -> str:
    """A Python value as a TOML literal, for the engine's `section.key=value` overrides."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        text = repr(value)
        return text if any(c in text for c in ".eE") else text + ".0"
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a TOML basic string
    if isinstance(value, os.PathLike):
        return json.dumps(os.fspath(value))
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v, key) for v in value) + "]"
    if hasattr(value, "item"):  # numpy scalars
        return _toml_value(value.item(), key)
    raise TypeError(f"config key {key}: cannot write a {type(value).__name__} as a TOML value")


def _flatten(settings: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """{"train": {"lr": 1e-3}} and {"train.lr": 1e-3} both give [("train.lr", 1e-3)]."""
    out = []
    for name, value in settings.items():
        if not isinstance(name, str):
            raise TypeError(f"config keys are strings like 'train.lr', got {name!r}")
        if isinstance(value, Mapping):
            out.extend((f"{name}.{k}", v) for k, v in _flatten(value))
        else:
            out.append((name, value))
    return out


class Config:
    """The settings of a run, with exactly the keys of the TOML file (docs/config.md).

    Config({"train": {"lr": 1e-3}})            a nested dict, as the TOML file's tables
    Config({"train.lr": 1e-3})                 or flat "section.key" names
    Config(train={"models": 4}, sweep={"lr": [1e-3, 3e-4]})   a population (docs/config.md, "Populations")
    Config(train={"lr": 1e-3}, model={"layers": 1})   keyword arguments, one per section
    Config.from_toml("configs/example.toml", train={"steps": 50})

    Every value goes to the engine as a `section.key=value` override (as `--set` on the command line), so
    unknown keys and bad values raise ValueError with the engine's message and its "did you mean"; the
    settings are checked (RunConfig::validate) when the Config is made.
    """

    def __init__(self, settings: Mapping[str, Any] | None = None, /, **sections: Any):
        self._path = ""
        self._overrides = self._overrides_of(settings, sections)
        self._cfg = _core.load_run_config("", self._overrides)
        self._cfg.validate()

    @staticmethod
    def _overrides_of(settings, sections) -> list[str]:
        merged: dict[str, Any] = {}
        if settings is not None:
            if not isinstance(settings, Mapping):
                raise TypeError(f"Config takes a dict of settings, got {type(settings).__name__}")
            merged.update(settings)
        merged.update(sections)
        return [f"{k}={_toml_value(v, k)}" for k, v in _flatten(merged)]

    @classmethod
    def from_toml(cls, path: str | os.PathLike, settings: Mapping[str, Any] | None = None, /, **sections: Any) -> "Config":
        """Reads a TOML file (relative paths in it resolve against its folder), then applies the settings."""
        self = cls.__new__(cls)
        self._path = os.fspath(path)
        self._overrides = cls._overrides_of(settings, sections)
        self._cfg = _core.load_run_config(self._path, self._overrides)
        self._cfg.validate()
        return self

    def replace(self, settings: Mapping[str, Any] | None = None, /, **sections: Any) -> "Config":
        """A copy with more settings applied (later values win)."""
        new = Config.__new__(Config)
        new._path = self._path
        new._overrides = self._overrides + self._overrides_of(settings, sections)
        new._cfg = _core.load_run_config(new._path, new._overrides)
        new._cfg.validate()
        return new

    def to_toml(self) -> str:
        """Every setting as a TOML document the engine reads back to the same values."""
        return self._cfg.to_toml()

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """Every setting, as {section: {key: value}}."""
        return tomllib.loads(self.to_toml())

    def __getitem__(self, key: str) -> Any:
        """config["train.lr"]."""
        section, _, name = key.partition(".")
        d = self.to_dict()
        if section == "sweep" and key in _core.run_config_keys() and name not in d.get("sweep", {}):
            return []  # not swept: to_toml leaves the empty list out
        if section not in d or name not in d[section]:
            hint = _core.suggest_run_config_key(key)
            raise KeyError(f"unknown config key '{key}'" + (f" (did you mean '{hint}'?)" if hint else ""))
        return d[section][name]

    @property
    def given(self) -> list[str]:
        """The keys set explicitly (in the file or the settings), not left at their defaults."""
        return self._cfg.given

    @staticmethod
    def keys() -> list[str]:
        """Every valid "section.key", in the order of docs/config.md."""
        return _core.run_config_keys()

    def __repr__(self) -> str:
        src = f"{self._path!r}, " if self._path else ""
        return f"mlalpha.Config({src}{', '.join(self._overrides)})"
