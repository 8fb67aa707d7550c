"""Trusted pytest plugin that repo_patch's runner loads into the task's pytest command.

A repository's tests import the candidate's code into the pytest process, so that code can
rewrite how pytest reports outcomes (security.md A02/A03). The verifier cannot keep it out;
it plants two tests of its own instead and checks them in pytest's report (repo_patch.decide):
a canary that must pass and a honeypot that must fail. A blanket forgery ("every test
passed") turns the honeypot into a pass; one that spares tests it does not recognise has no
way to tell the two planted tests apart by name.

This module is mounted read-only under a module name drawn for each verification (no file
of the repository can shadow it) and loaded with ``-p`` before any conftest, entry-point
plugin or package code. It

* adds the planted test file (absolute path in ``SECUREBENCH_GUARD_TESTS``, written by the
  runner) to the session's arguments once pytest has settled them (``testpaths`` and the
  rootdir stay what the task's command makes them);
* moves the planted tests, once each, to the end of the item list in a ``trylast`` hook:
  a ``-x`` run reaches them only when every task test passed (canary first, so a stop at
  the honeypot loses nothing). Whatever drops them before or after that (a plugin or
  package code deselecting the tests it does not know) leaves them missing, which decide
  reports;
* only when the task's own command selects (``-k``, ``-m``, ``--deselect``, ``--lf``,
  from the command line or the ini file's addopts) holds them back from pytest's selection:
  out of the list just before pytest's own plugins apply it, back in the ``trylast`` hook.
  Plugins registered after this one still see them first.

Runs in the image's Python and pytest: plain and ``trylast`` hooks, ``config.args`` and
``config.option`` only (all there since pytest 3; tried on 7.2 and 9.2), no syntax newer
than Python 3.6.
"""

import os

import pytest

TESTS_ENV = "SECUREBENCH_GUARD_TESTS"
# pytest's selection options, by their names on config.option (absent ones are skipped).
SELECTION_OPTIONS = ("keyword", "markexpr", "deselect", "lf")


class _Planted:
    """The planted tests: where they are, and those held back from pytest's selection."""

    def __init__(self):
        self.file_name = ""
        self.hold_back = False
        self.held = []

    def is_planted(self, item):
        return item.nodeid.split("::", 1)[0].rsplit("/", 1)[-1] == self.file_name

    def take(self, items):
        """Our items out of ``items``, once each (a folder argument and our explicit one
        may both collect the file)."""
        taken = []
        seen = set()
        for item in items:
            if self.is_planted(item) and item.nodeid not in seen:
                seen.add(item.nodeid)
                taken.append(item)
        items[:] = [item for item in items if not self.is_planted(item)]
        return taken

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items):
        present = self.take(items)
        held = set(item.nodeid for item in self.held)
        items.extend(self.held + [item for item in present if item.nodeid not in held])


_planted = _Planted()


def pytest_configure(config):
    path = os.environ.get(TESTS_ENV, "")
    if not path:
        return
    if path not in config.args:
        config.args.append(path)
    _planted.file_name = os.path.basename(path)
    _planted.hold_back = any(getattr(config.option, name, None) for name in SELECTION_OPTIONS)
    config.pluginmanager.register(_planted, "securebench-guard-" + _planted.file_name)


def pytest_collection_modifyitems(items):
    # A plain implementation of a plugin loaded with -p: called after those of the plugins
    # registered later (entry points, conftests, code the tests import) and before those of
    # pytest's own plugins registered earlier, which apply -k, -m, --deselect and --lf.
    if _planted.file_name and _planted.hold_back:
        _planted.held = _planted.take(items)
