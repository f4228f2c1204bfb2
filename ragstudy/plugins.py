"""Plug-in families: one registry implementation for every kind of interchangeable part.

Six families are `Registry` instances (strategies, retrievers, embedding backends, LLM engines, budget and answer
metrics). Each checks a registration's type, keeps names unique case-insensitively, loads its built-in members on the
first lookup, then the packages outside the repository named in $RAGSTUDY_PLUGIN_PACKAGES (the one list for every
family; the deprecated $RAGSTUDY_STRATEGY_PACKAGES is still read, with a warning). See docs/architecture-plugins.md.
"""

from __future__ import annotations

import importlib
import logging
import os
import pkgutil
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

from ragstudy.errors import StudyInputError

logger = logging.getLogger(__name__)

PLUGIN_PACKAGES_ENV = "RAGSTUDY_PLUGIN_PACKAGES"
STRATEGY_PACKAGES_ENV = "RAGSTUDY_STRATEGY_PACKAGES"  # deprecated: read with a warning (PLUGIN_PACKAGES_ENV)
_warned_deprecated = False
_importing_outside = 0  # > 0 while outside packages are being imported (see Registry.register)


def _listed(variable: str) -> list[str]:
    return list(dict.fromkeys(name.strip() for name in os.environ.get(variable, "").split(",") if name.strip()))


def import_outside_packages() -> None:
    """Import the packages of $RAGSTUDY_PLUGIN_PACKAGES and every module in them whose name does not start with
    `_` (each once per process: Python caches modules); those of the deprecated $RAGSTUDY_STRATEGY_PACKAGES are
    imported as packages only, as they always were."""
    global _importing_outside, _warned_deprecated
    old = _listed(STRATEGY_PACKAGES_ENV)
    if old and not _warned_deprecated:
        _warned_deprecated = True
        logger.warning("%s is deprecated: name the package(s) in %s instead (%s=%s)", STRATEGY_PACKAGES_ENV,
                       PLUGIN_PACKAGES_ENV, PLUGIN_PACKAGES_ENV, ",".join(old))
    _importing_outside += 1
    try:
        for name in old:
            guarded_import(name, STRATEGY_PACKAGES_ENV)
        for name in _listed(PLUGIN_PACKAGES_ENV):
            guarded_import(name, PLUGIN_PACKAGES_ENV, import_members)
    finally:
        _importing_outside -= 1


def guarded_import(package: str, variable: str | None,
                   load: Callable[[str], object] = importlib.import_module) -> None:
    """Import one plug-in package (a strategy folder when `variable` is None, else a package an environment
    variable names); one that is missing, fails on import or registers a name already taken is one StudyInputError
    naming the package and the variable."""
    where = f"{variable} names the package {package!r}" if variable else f"strategy folder {package}/"
    fix = f"fix or install it, or remove it from {variable}" if variable else "fix it"
    try:
        load(package)
    except StudyInputError as exc:  # a clash the registry found (a name, Dataset file or folder already taken)
        raise StudyInputError(f"{where}: {exc}") from None
    except ModuleNotFoundError as exc:
        if variable and exc.name is not None and package.split(".")[0] == exc.name.split(".")[0]:
            raise StudyInputError(f"{where}, which cannot be imported (no module named {exc.name!r}); install it "
                                  f"or add its folder to PYTHONPATH, or remove it from {variable}") from None
        raise StudyInputError(f"{where}, which failed on import: it needs the module {exc.name!r} (pip install "
                              f"it), or {fix}") from None
    except Exception as exc:  # a plug-in's own bug: one line naming it, not a traceback from inside it
        raise StudyInputError(f"{where}, which failed on import ({type(exc).__name__}: {str(exc)[:200]}); "
                              f"{fix}") from None


def import_members(package_name: str) -> None:
    """Import a package and its modules whose names do not start with `_` (a plain module: just it)."""
    package = importlib.import_module(package_name)
    for module in pkgutil.iter_modules(getattr(package, "__path__", [])):
        if not module.name.startswith("_"):
            importlib.import_module(f"{package_name}.{module.name}")


T = TypeVar("T")


class RegistrationError(StudyInputError):
    """A registration that is not of the family's record type, or that would share a name (or another field that
    must be a member's own, e.g. a strategy's Dataset file) with another member, compared case-insensitively."""


class UnknownName(StudyInputError, KeyError):
    """A name no member of the family has (also a KeyError, for callers that look members up like a dict)."""

    def __str__(self) -> str:  # the message, not KeyError's quoted repr
        return str(self.args[0]) if self.args else ""


def members_of(package: str) -> Callable[[], None]:
    """A `builtins` loader: import every module of `package` whose name does not start with `_`."""
    return lambda: import_members(package)


class Registry(Generic[T]):
    """The registry of one plug-in family.

    `register(member)` is called by a member's module (a built-in one or one of an outside package); `get(name)`,
    `names()`, `members()`, `parse(value)` serve everything else (CLI choices, validation, cache keys, tables).
    The first lookup loads the built-in members (`builtins()`), then the outside packages. A member is a record
    of type `record` with a `name`; members are listed by (`order`, name) when `ordered`, else in registration
    order (the order of tables). A second registration of the same member (`same(old, new)`; default: equal
    records, as a module imported twice registers) replaces it; any other name clash is a RegistrationError.
    """

    def __init__(self, kind: str, record: type, *, setting: str | None = None,
                 builtins: Callable[[], None] | None = None, ordered: bool = True,
                 unique: Callable[[Any], Iterable[tuple[str, str]]] = lambda member: (),
                 same: Callable[[Any, Any], bool] = lambda old, new: old == new,
                 describe: Callable[[Any], str] | None = None, fix: Callable[[Any], str] = lambda member: "") -> None:
        self.kind = kind  # "retriever", shown in messages
        self.record = record  # the class every registration is an instance of
        self.setting = setting  # the setting that names members (messages say --<setting>); None: no flag
        self._builtins = builtins
        self._ordered = ordered
        self._unique = unique  # further (what, value) pairs a member must not share with another member
        self._same = same
        self._describe = describe or (lambda member: f"{kind} {member.name!r}")
        self._fix = fix
        self._members: dict[str, T] = {}
        self._builtins_loaded = False
        self._outside_loaded = False

    # -------------------------------------------------------------------------------------------- registering

    def register(self, member: T) -> T:
        """Add `member` (its record type checked, its name and unique fields its own, case-insensitively)."""
        if not isinstance(member, self.record):
            raise RegistrationError(f"a {self.kind} registration must be a {self.record.__name__}, got "
                                    f"{type(member).__name__} {member!r:.120}")
        name = getattr(member, "name", None)
        if not isinstance(name, str) or not name.strip() or name.strip().lower() == "all" or "," in name:
            raise RegistrationError(f"{self._describe(member)}: a {self.kind} name must be a non-empty word other "
                                    f"than 'all' without commas, got {name!r}")
        existing = self._members.get(name)
        if existing is not None and self._same(existing, member):
            self._members[name] = member
            return member
        if _importing_outside and not self._builtins_loaded:
            # built-in members are registered first, so a clash is the outside member's
            self._once("_builtins_loaded", self._builtins)
        mine = [(f"{self.kind} name", name), *self._unique(member)]
        for other in self._members.values():
            theirs = dict([(f"{self.kind} name", other.name), *self._unique(other)])
            for what, value in mine:
                if what in theirs and value.casefold() == theirs[what].casefold():
                    raise RegistrationError(
                        f"{self._describe(member)} registers {what} {value!r}, which {self._describe(other)} "
                        f"already uses{self._fix(member)}")
        self._members[name] = member
        return member

    def unregister(self, name: str) -> None:
        """Remove a registration (tests register throwaway members)."""
        self._members.pop(name, None)

    # ---------------------------------------------------------------------------------------------- loading

    def _once(self, flag: str, step: Callable[[], None] | None) -> None:
        """Run `step` unless `flag` is set. The flag is set before the imports (a registration that asks the registry
        must not loop) and cleared when they fail (tried again, and failing again naming the module, next lookup)."""
        if getattr(self, flag):
            return
        setattr(self, flag, True)
        try:
            if step is not None:
                step()
        except BaseException:
            setattr(self, flag, False)
            raise

    def load(self) -> None:
        """Load the built-in members, then the outside packages, once per process (or again after `forget()`)."""
        self._once("_builtins_loaded", self._builtins)
        self._once("_outside_loaded", import_outside_packages)

    def forget(self) -> None:
        """Discover again on the next lookup, as a fresh process would (members already registered stay)."""
        self._builtins_loaded = self._outside_loaded = False

    # ---------------------------------------------------------------------------------------------- lookups

    def registered(self) -> list[T]:
        """The members registered so far, without loading anything (for declarations made at import time)."""
        members = list(self._members.values())
        return sorted(members, key=lambda m: (getattr(m, "order", 100.0), m.name)) if self._ordered else members

    def members(self) -> list[T]:
        """Every member, in the family's order."""
        self.load()
        return self.registered()

    def names(self) -> list[str]:
        return [member.name for member in self.members()]

    def __contains__(self, name: object) -> bool:
        self.load()
        return name in self._members

    def get(self, name: str, where: str | None = None) -> T:
        """The member called `name`, or an UnknownName naming the setting (`where`, default --<setting>) and every
        valid name."""
        self.load()
        try:
            return self._members[name]
        except (KeyError, TypeError):
            prefix = where or (f"--{self.setting.replace('_', '-')}" if self.setting else "")
            raise UnknownName(f"{prefix + ': ' if prefix else ''}unknown {self.kind} {name!r}; choose one of: "
                              f"{', '.join(self.names())}") from None

    def find(self, test: Callable[[T], bool]) -> T | None:
        """The first member (in the family's order) for which `test` is true."""
        return next((member for member in self.members() if test(member)), None)

    def parse(self, value: Any, where: str | None = None) -> tuple[str, ...]:
        """A list of members as a user writes it -> validated names (duplicates dropped, order kept): `"a,b"`, a
        YAML list, or `all` (or None) for every member in the family's order. An empty value is an error naming
        `where`, never "all"."""
        where = where or (f"--{self.setting.replace('_', '-')}" if self.setting else self.kind)
        if value is None:
            return tuple(self.names())
        parts = ([str(part).strip() for part in value] if isinstance(value, (list, tuple))
                 else [part.strip() for part in str(value).split(",")])
        chosen = tuple(dict.fromkeys(part for part in parts if part))
        if [part.lower() for part in chosen] == ["all"]:
            return tuple(self.names())
        if not chosen:
            raise StudyInputError(f"{where} is empty; give one or more of: {', '.join(self.names())} (or all)")
        for name in chosen:
            self.get(name, where)
        return chosen
