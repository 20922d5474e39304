"""The package's templates as the Jinja environment loads them (render.environment): each compiled once per
edit of its file, and kept compiled, one file per environment, in the user's private cache
(spec/user_cache.py).

Jinja's own bytecode cache reads and hashes each template's source to find its code, and keeps one file per
template: 2.8 ms of a compile's eight templates. Here a template is known by the stamp of its file
(user_cache.stamp), and one read brings every kept template. Jinja's files hold code, so only the user's own
private cache is read; a missing, damaged or foreign file only means the templates are compiled again, to the
same code.
"""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Callable, MutableMapping
from typing import Any

import jinja2
from jinja2.loaders import split_template_path

from spark_compile import __version__
from spark_compile.spec import user_cache

PREFIX = "templates-"
KEPT = 8  # files of compiled templates: one per environment (the artifacts', the review page's) and install


def _unchanged() -> bool:
    return True  # a run's templates do not change under it (the environment does not auto-reload)


class CompiledTemplates(jinja2.BaseLoader):
    """The templates under ``root``, loaded from their kept code while their files are unchanged."""

    def __init__(self, root: str, kind: str) -> None:
        self.root = root
        versions = f"{__version__}-{jinja2.__version__}-{sys.implementation.cache_tag}"
        self.file_name = f"{PREFIX}{kind}-{versions}"
        self.directory = user_cache.cache_dir()
        self._kept: dict[str, Any] | None = None

    def get_source(self, environment: jinja2.Environment, template: str) -> tuple[str, str, Callable[[], bool]]:
        path = self._path(template)
        try:
            with open(path, encoding="utf-8") as file:
                return file.read(), path, _unchanged
        except OSError:
            raise jinja2.TemplateNotFound(template) from None

    def load(self, environment: jinja2.Environment, name: str,
             globals: MutableMapping[str, Any] | None = None) -> jinja2.Template:
        # Jinja asks loaders not to override load, for the sake of loaders that combine others and call
        # get_source; none combines this one, and load is where the source can go unread.
        path = self._path(name)
        try:
            stamp = user_cache.stamp(path)
        except OSError:
            raise jinja2.TemplateNotFound(name) from None
        kept = self._read().get(name)
        if isinstance(kept, tuple) and len(kept) == 2 and kept[0] == stamp and isinstance(kept[1], types.CodeType):
            code = kept[1]
        else:
            source, _, _ = self.get_source(environment, name)
            code = environment.compile(source, name, path)
            self._keep(name, stamp, code)
        return environment.template_class.from_code(environment, code, {} if globals is None else globals,
                                                    _unchanged)

    def _path(self, name: str) -> str:
        return os.path.join(self.root, *split_template_path(name))

    def _read(self) -> dict[str, Any]:
        if self._kept is None:
            kept = user_cache.load(self.directory, self.file_name)
            self._kept = kept if isinstance(kept, dict) else {}
        return self._kept

    def _keep(self, name: str, stamp: str, code: types.CodeType) -> None:
        kept = self._read()
        kept[name] = (stamp, code)
        user_cache.dump(self.directory, self.file_name, kept, prefix=PREFIX, keep=KEPT)
