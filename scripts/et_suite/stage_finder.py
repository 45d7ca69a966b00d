"""Installed as ``sitecustomize.py`` of a stage (the runner fills in the two constants).

ExecuTorch's test-support modules live inside its package paths
(``executorch.backends.xnnpack.test.tester``, ``executorch.exir.tests.models``). This finder
makes the staged test tree a second portion of every package: when ``PACKAGE`` or one of its
subpackages is imported, the staged folder of the same dotted path is *appended* to its
``__path__``, so installed modules always win and staged test code fills only the gaps. A
dotted path the installed package lacks but the tree has (``edgetorch.backends.test``)
becomes a namespace portion. Subprocesses inherit it through ``PYTHONPATH``.
"""

import importlib.abc
import importlib.machinery
import os
import sys

PACKAGE = "__PACKAGE__"
TREE = "__TREE__"


class _StagedTestsFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != PACKAGE and not name.startswith(PACKAGE + "."):
            return None
        staged = os.path.join(TREE, *name.split(".")[1:])
        spec = None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        if spec is None:
            if not os.path.isdir(staged):
                return None
            spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
            spec.submodule_search_locations = [staged]
            return spec
        locations = spec.submodule_search_locations
        if locations is not None and os.path.isdir(staged) and staged not in list(locations):
            if isinstance(locations, list):
                locations.append(staged)
            else:  # a namespace package's _NamespacePath: replace it by a plain list
                spec.submodule_search_locations = [*locations, staged]
        return spec


sys.meta_path.insert(0, _StagedTestsFinder())
