"""Plug-in families: one registry per kind of interchangeable part (retrievers, embedding backends, LLM engines).

A family is a sub-package of `ragstudy` (`ragstudy/retrievers/`, `ragstudy/embedders/`, `ragstudy/llms/`) with one
module per member; each member module makes one registration call. On first use the family imports every module of
its sub-package, then the packages outside the repository named in $RAGSTUDY_PLUGIN_PACKAGES (every module of such
a package too, so one module per member works outside as inside) and, as strategies do, those in
$RAGSTUDY_STRATEGY_PACKAGES. An outside member registers with the same call as a built-in one and appears like it
in the CLI's choices, in config validation, in cache keys and in config.json.
See docs/architecture-plugins.md.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from .errors import StudyInputError

PLUGIN_PACKAGES_ENV = "RAGSTUDY_PLUGIN_PACKAGES"
STRATEGY_PACKAGES_ENV = "RAGSTUDY_STRATEGY_PACKAGES"  # the strategies' variable, also read here (one list for all)


def _listed(variable: str) -> list[str]:
    return list(dict.fromkeys(name.strip() for name in os.environ.get(variable, "").split(",") if name.strip()))


def import_outside_packages() -> None:
    """Import the outside packages (each once per process: Python caches modules); of those in
    $RAGSTUDY_PLUGIN_PACKAGES also every module whose name does not start with `_`."""
    for name in _listed(STRATEGY_PACKAGES_ENV):
        guarded_import(name, STRATEGY_PACKAGES_ENV)
    for name in _listed(PLUGIN_PACKAGES_ENV):
        guarded_import(name, PLUGIN_PACKAGES_ENV, import_members)


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


class Named(Protocol):
    name: str
    order: float


S = TypeVar("S", bound=Named)


class Family(Generic[S]):
    """The registry of one plug-in family: `register(spec)` from a member module, `get(name)` / `names()` for
    everything else (CLI choices, validation, cache keys). Members are discovered on the first lookup."""

    def __init__(self, kind: str, package: str, setting: str) -> None:
        self.kind = kind  # "retriever", shown in messages
        self.package = package  # "ragstudy.retrievers", whose modules are the built-in members
        self.setting = setting  # the config setting that names a member, e.g. "retriever"
        self._specs: dict[str, S] = {}
        self._loaded = False

    def register(self, spec: S) -> S:
        existing = self._specs.get(spec.name)
        if existing is not None and existing != spec:
            raise ValueError(f"{self.kind} {spec.name!r} is already registered ({existing!r})")
        self._specs[spec.name] = spec
        return spec

    def unregister(self, name: str) -> None:
        """Remove a registration (tests register throwaway members)."""
        self._specs.pop(name, None)

    def load(self) -> None:
        """Import the family's member modules and the outside packages, once per process (or again after
        `forget()`: tests that add a package to the environment)."""
        if self._loaded:
            return
        self._loaded = True
        import_members(self.package)
        import_outside_packages()

    def forget(self) -> None:
        """Discover again on the next lookup, as a fresh process would (members already registered stay)."""
        self._loaded = False

    def names(self) -> list[str]:
        """Registered names in their registered order."""
        self.load()
        return sorted(self._specs, key=lambda name: (self._specs[name].order, name))

    def specs(self) -> list[S]:
        return [self._specs[name] for name in self.names()]

    def get(self, name: str, where: str | None = None) -> S:
        """The member called `name`, or a StudyInputError naming the setting (`where`, default --<setting>) and
        every valid name."""
        self.load()
        try:
            return self._specs[name]
        except (KeyError, TypeError):
            where = where or f"--{self.setting.replace('_', '-')}"
            raise StudyInputError(f"{where}: unknown {self.kind} {name!r}; choose one of: "
                                  f"{', '.join(self.names())}") from None

    def find(self, test: Callable[[S], bool]) -> S | None:
        """The first member (in registered order) for which `test` is true."""
        return next((spec for spec in self.specs() if test(spec)), None)
