"""Settings declared once: a `Setting` holds what a user can set (its flag, YAML key, help, group, type, choices
and default), and command-line parsers, the accepted YAML keys and the reference docs are generated from it.

A dataclass declares its settings on its fields with `setting(...)` (read back with `declared(cls)`); `add_arguments`
makes argparse options of them and `record` a job's typed settings. See docs/settings.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import MISSING, dataclass
from typing import Any

Text = str | Callable[[], str]
Choices = Callable[[], Sequence[str]]
KINDS = ("value", "switch", "append", "list", "mapping")
_METADATA_KEY = "ragstudy.setting"


@dataclass(frozen=True)
class Setting:
    """One setting: what a user can set, and how. docs/settings.md ("A declaration holds") says what each fact
    means; `kind` is one of KINDS, `flag` "" derives ``--name-with-dashes`` and None means no flag."""

    name: str
    help: Text
    group: str = ""
    type: type = str
    kind: str = "value"
    choices: Choices | None = None
    default: Any = None
    default_doc: Text | None = None
    flag: str | None = ""
    aliases: tuple[str, ...] = ()
    yaml: bool = False
    metavar: str | None = None
    check: Callable[[Any], str | None] | None = None
    several: bool = False
    list_choices: bool = True
    applies: Callable[[Any], bool] | None = None
    bare: str | None = None
    changes_results: bool = True

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"setting {self.name}: kind must be one of {', '.join(KINDS)}, got {self.kind!r}")

    @property
    def option(self) -> str | None:
        """The command-line flag (``--output-dir``), or None when the setting has none."""
        return None if self.flag is None else self.flag or "--" + self.name.replace("_", "-")

    def choice_values(self) -> tuple[str, ...] | None:
        values = self.choices() if self.choices is not None else None
        return tuple(values) if values is not None else None

    def default_text(self) -> str | None:
        """The default as help shows it: `default_doc`, else the value (None for a switch or a mapping)."""
        if self.default_doc is not None:
            return _text(self.default_doc)
        return None if self.kind in ("switch", "mapping") else format_value(self.default)

    def help_text(self) -> str:
        """The help with its default appended: "folder of PDFs (default: Documents)"."""
        default, text = self.default_text(), _text(self.help)
        return f"{text} (default: {default})" if default is not None else text

    def type_name(self) -> str:
        name = {"switch": "flag", "mapping": "mapping"}.get(self.kind, self.type.__name__)
        return f"list of {name}" if self.kind in ("append", "list") else name

    def describe(self) -> dict[str, Any]:
        """The declaration as one row (for generated docs)."""
        return {"name": self.name, "flag": self.option, "yaml_key": self.name if self.yaml else None,
                "type": self.type_name(), "default": self.default_text(), "choices": self.choice_values(),
                "help": _text(self.help), "group": self.group}

    def but(self, **changes: Any) -> "Setting":
        """The same setting with some facts changed (a script's own default or wording of a shared flag)."""
        return dataclasses.replace(self, **changes)


def setting(default: Any = MISSING, help: Text = "", **facts: Any) -> Any:
    """A dataclass field that declares a setting (its name is the field's); `facts` as in `Setting`."""
    return dataclasses.field(default=default, metadata={_METADATA_KEY: {"help": help, "yaml": True, **facts}})


def declared(cls: type) -> tuple[Setting, ...]:
    """The settings `cls` declares on its fields with `setting(...)`, in field order."""
    return tuple(Setting(name=item.name, default=None if item.default is MISSING else item.default,
                         **item.metadata[_METADATA_KEY])
                 for item in dataclasses.fields(cls) if _METADATA_KEY in item.metadata)


def record(name: str, settings: Iterable[Setting]) -> type:
    """A job's typed settings: a frozen dataclass `name` with one field per setting (but -v/--verbose), its default
    the one the job's parser stores (a switch False), each value checked as the parser checks it (type, choices,
    `check`; a StudyInputError naming the field). `Record.of(parsed_flags)` builds one from a parser's Namespace,
    so the command line and Python call a job with the same record."""
    items = tuple(item for item in settings if item.name != VERBOSE.name)
    fields = [(item.name, _annotation(item), bool(item.default) if item.kind == "switch"
               else None if item.kind == "append" else item.default) for item in items]

    def check(self: Any) -> None:
        from ragstudy.errors import StudyInputError

        for item in items:
            value = getattr(self, item.name)
            if isinstance(value, os.PathLike) and item.type is str:  # a folder or file given as a Path
                object.__setattr__(self, item.name, value := os.fspath(value))
            problem = _value_problem(item, value)
            if problem:
                raise StudyInputError(f"{name}({item.name}={value!r}): {problem}")

    def of(cls: type, parsed: argparse.Namespace) -> Any:
        return cls(**{item.name: getattr(parsed, item.name) for item in items if hasattr(parsed, item.name)})

    return dataclasses.make_dataclass(name, fields, frozen=True, namespace={
        "__doc__": f"A job's typed settings (ragstudy.settings.record): {', '.join(i.name for i in items)}.",
        "__post_init__": check, "of": classmethod(of)})


def _annotation(item: Setting) -> Any:
    if item.kind == "switch":
        return bool
    if item.kind in ("list", "append"):
        return str | tuple | list | None
    return item.type if item.default is not None else item.type | None


def _value_problem(item: Setting, value: Any) -> str | None:
    """What is wrong with a value of `item` given in Python (None: nothing)."""
    if value is None and item.kind != "switch":
        return None
    wanted = bool if item.kind == "switch" else (str, tuple, list) if item.kind in ("list", "append") else \
        (int, float) if item.type is float else item.type
    if not isinstance(value, wanted) or (isinstance(value, bool) and item.type is not bool and item.kind != "switch"):
        return "must be True or False" if item.kind == "switch" else f"must be {item.type_name()}"
    choices = item.choice_values() if item.kind == "value" and not item.several else None
    if choices is not None and value not in choices:
        return f"must be one of {', '.join(choices)}"
    return item.check(value) if item.check is not None and item.kind == "value" else None


def format_value(value: Any) -> str:
    """A default as a user would type it: 500,1000 for a tuple, none for None, 600 for 600.0."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (tuple, list)):
        return ",".join(format_value(v) for v in value) if value else "none"
    return str(value)


def _text(value: Text) -> str:
    return value() if callable(value) else value


class CheckedValue(argparse.Action):
    """Stores the value after the setting's own check, then (for choices not listed in --help) membership of its
    choices; a bad one stops the parser (exit 2) naming the flag as the user wrote it."""

    def __init__(self, *args: Any, setting: Setting, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.setting = setting

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        item = self.setting
        problem = item.check(values) if item.check is not None else None
        choices = None if item.list_choices else item.choice_values()
        if problem is None and choices is not None and values not in choices:
            problem = f"must be one of {', '.join(choices)}"
        if problem:
            parser.error(f"{option_string} {values}: {problem}")
        setattr(namespace, self.dest, values)


class _Deferred:
    """Help text made when argparse shows it, so that building a parser imports no plug-in (the strategies'
    names, a registry's members): argparse only tests, strips and %-formats a help string."""

    def __init__(self, make: Callable[[], str]) -> None:
        self._make, self._text = make, None

    def __str__(self) -> str:
        if self._text is None:
            self._text = self._make()
        return self._text

    def __bool__(self) -> bool:
        return True

    def strip(self) -> str:
        return str(self).strip()

    def __mod__(self, params: Any) -> str:
        return str(self) % params

    def __contains__(self, part: str) -> bool:
        return part in str(self)


class _DeferredChoices(Sequence):
    """Choices read from their source when the parser first checks or shows one."""

    def __init__(self, make: Choices) -> None:
        self._make, self._values = make, None

    def _get(self) -> tuple:
        if self._values is None:
            self._values = tuple(self._make() or ())
        return self._values

    def __getitem__(self, index):  # type: ignore[override]
        return self._get()[index]

    def __len__(self) -> int:
        return len(self._get())


def _help_for_parser(item: Setting) -> str | _Deferred:
    text = _Deferred(lambda: item.help_text().replace("%", "%%"))
    return text if callable(item.help) or callable(item.default_doc) else str(text)


def _group(parser: argparse.ArgumentParser, title: str):
    if not title:
        return parser
    made = [group for group in parser._action_groups if group.title == title]  # by the caller or an earlier call
    return made[0] if made else parser.add_argument_group(title)


def add_arguments(parser: argparse.ArgumentParser, settings: Iterable[Setting], *, defer: bool = False) -> None:
    """Add each setting that has a flag to `parser`, in its group. defer=True: an absent flag stores None (a switch
    too), so that a later layer (the config file, the declaration's default) decides; else the setting's default."""
    for item in settings:
        if item.option is None:
            continue
        kwargs: dict[str, Any] = {"dest": item.name, "help": _help_for_parser(item)}
        if item.kind == "switch":
            kwargs.update(action="store_true", default=None if defer else bool(item.default))
        else:
            kwargs["default"] = None if defer or item.kind == "append" else item.default
            if item.kind == "append":
                kwargs["action"] = "append"
            elif item.check is not None or (item.kind == "value" and not item.list_choices):
                kwargs.update(action=CheckedValue, setting=item)
            if item.type is not str and item.kind != "list":
                kwargs["type"] = item.type
            if item.choices is not None and item.kind == "value" and item.list_choices and not item.several:
                kwargs["choices"] = _DeferredChoices(item.choices)
            if item.bare is not None:
                kwargs.update(nargs="?", const=item.bare)
            if item.metavar:
                kwargs["metavar"] = item.metavar
            elif (item.kind == "list" or item.several) and item.choices is not None and item.list_choices:
                kwargs["metavar"] = "{" + ",".join(item.choice_values() or ()) + "}[,...]"
        _group(parser, item.group).add_argument(item.option, *item.aliases, **kwargs)


VERBOSE = Setting("verbose", "debug logging", kind="switch", flag="-v", aliases=("--verbose",), yaml=False)
