"""``edgetorch export file.py:factory``: the factory contract (docs: README "Command line"), and a
factory that breaks it gives the usual one-line ``edgetorch: error:``, never a traceback."""

import pytest

pytest.importorskip("torch")

from edgetorch.cli import main  # noqa: E402
from edgetorch.errors import ModelSpecError, UnknownExampleError  # noqa: E402
from edgetorch.examples import load_model_spec  # noqa: E402

FACTORIES = '''\
import torch

def takes_args(x):
    return torch.nn.Linear(2, 2)

def raises():
    raise RuntimeError("my factory broke")

def returns_int():
    return 3

def wrong_inputs():
    return torch.nn.Linear(4, 2), (torch.randn(3, 5),)

def module_only():
    return torch.nn.Linear(4, 2)

def pair():
    return torch.nn.Linear(4, 2), torch.randn(3, 4)
'''

CASES = [
    ("takes_args", r"takes_args\(\) raised TypeError: .*missing 1 required positional argument"),
    ("raises", r"raises\(\) raised RuntimeError: my factory broke \(.*models.py, line 7: "
               r"raise RuntimeError"),
    ("returns_int", r"the factory returned int; a factory takes no arguments and returns "
                    r"\(model, inputs\)"),
    ("wrong_inputs", r"the model's forward on the example inputs \(float32\[3, 5\]\) raised "
                     r"RuntimeError: mat1 and mat2"),
    ("module_only", r"returned only a module, so .* must define example_inputs\(\)"),
    ("missing", r"defines no callable 'missing'"),
]


@pytest.mark.parametrize("factory,message", CASES, ids=[c[0] for c in CASES])
def test_a_wrong_factory_is_one_error_line(tmp_path, capsys, factory, message):
    import re

    src = tmp_path / "models.py"
    src.write_text(FACTORIES)
    assert main(["export", f"{src}:{factory}", "-o", str(tmp_path / "m.pte")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("edgetorch: error: ") and err.count("\n") == 1, err
    assert re.search(message, err), err
    assert "Traceback" not in err


def test_file_that_does_not_import_names_its_line(tmp_path, capsys):
    src = tmp_path / "broken.py"
    src.write_text("import torch\n\ndef make(:\n    pass\n")
    assert main(["export", f"{src}:make", "-o", str(tmp_path / "m.pte")]) == 2
    err = capsys.readouterr().err
    assert "importing the file raised SyntaxError" in err and "line 3" in err, err


def test_unknown_example_is_an_error_line(tmp_path, capsys):
    assert main(["export", "no_such_model", "-o", str(tmp_path / "m.pte")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("edgetorch: error: unknown example model 'no_such_model'; "
                          "available: ") and "mobilenet_v2" in err


def test_errors_are_typed_and_keep_their_old_bases(tmp_path):
    with pytest.raises(UnknownExampleError) as e:
        load_model_spec("no_such_model")
    assert isinstance(e.value, KeyError) and isinstance(e.value, ModelSpecError)
    with pytest.raises(ModelSpecError) as e:
        load_model_spec(f"{tmp_path / 'nowhere.py'}:make")
    assert isinstance(e.value, ValueError)


def test_good_factory_pair(tmp_path):
    src = tmp_path / "models.py"
    src.write_text(FACTORIES)
    model, inputs = load_model_spec(f"{src}:pair")
    assert not model.training and len(inputs) == 1 and tuple(inputs[0].shape) == (3, 4)
