"""edgetorch.exir._warnings: ExecuTorch's deprecated/experimental decorators (API life cycle)."""

from __future__ import annotations

import warnings

import pytest

pytest.importorskip("torch")  # edgetorch.exir imports torch (as executorch.exir does)

from edgetorch.exir._warnings import (  # noqa: E402
    ExperimentalWarning,
    deprecated,
    experimental,
    is_marked,
)


@deprecated("OldThing is deprecated.", replacement="edgetorch.exir.NewThing", removal_version="0.4")
class OldThing:
    def __init__(self, x: int = 0) -> None:
        self.x = x


@experimental("Preview is experimental and may change without notice.")
class Preview:
    pass


@deprecated("old_function message")
def old_function(a, b=2):
    """Adds."""
    return a + b


@experimental("try_me message")
def try_me():
    return 7


class Holder:
    @deprecated("old_method message", replacement="Holder.new_method")
    def old_method(self):
        return "old"

    @experimental("preview_method message")
    def preview_method(self):
        return "preview"


def _warns(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn()
    return result, caught


@pytest.mark.parametrize("fn, message, value", [
    (lambda: old_function(1), "old_function message", 3),
    (lambda: Holder().old_method(), "old_method message Use Holder.new_method instead.", "old"),
    (lambda: OldThing(5).x, "OldThing is deprecated. Use edgetorch.exir.NewThing instead. It will "
     "be removed in edgetorch 0.4.", 5),
])
def test_deprecated_warns_with_the_replacement_and_removal_version(fn, message, value):
    result, caught = _warns(fn)
    assert result == value
    assert len(caught) == 1
    assert caught[0].category is DeprecationWarning
    assert str(caught[0].message) == message
    assert caught[0].filename == __file__  # points at the caller's line


@pytest.mark.parametrize("fn, message", [
    (try_me, "try_me message"), (lambda: Holder().preview_method(), "preview_method message"),
    (Preview, "Preview is experimental and may change without notice."),
])
def test_experimental_warns_an_experimental_warning(fn, message):
    _, caught = _warns(fn)
    assert len(caught) == 1 and caught[0].category is ExperimentalWarning
    assert issubclass(ExperimentalWarning, DeprecationWarning)  # filtered alike by default
    assert str(caught[0].message) == message


def test_undecorated_and_marking():
    _, caught = _warns(lambda: Holder())
    assert caught == []
    assert old_function.__name__ == "old_function" and old_function.__doc__ == "Adds."
    assert old_function.__deprecated__ == "old_function message"
    assert is_marked(OldThing).startswith("OldThing is deprecated.")
    assert is_marked(Holder) is None


def test_subclassing_a_deprecated_class_warns_once_and_instances_of_it_do_not():
    _, caught = _warns(lambda: type("Child", (OldThing,), {}))
    assert len(caught) == 1 and "OldThing is deprecated" in str(caught[0].message)
    child_cls = _warns(lambda: type("Child2", (OldThing,), {}))[0]
    obj, caught = _warns(lambda: child_cls(3))
    assert obj.x == 3 and caught == []


def test_category_none_only_marks():
    @deprecated("quiet", category=None)
    def quiet():
        return 1

    assert _warns(quiet) == (1, []) and quiet.__deprecated__ == "quiet"


def test_misuse_is_a_clear_error():
    with pytest.raises(TypeError, match=r"@deprecated\('message'\)"):
        deprecated(lambda: None)


def test_class_without_init_rejects_arguments_like_object():
    with pytest.raises(TypeError, match="takes no arguments"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        Preview(1)
