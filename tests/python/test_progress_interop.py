"""tqdm bars when tqdm is installed (silent otherwise), and the paper's PyTorch checkpoints
through the restricted unpickler of `sps convert`."""
import builtins
import sys

import numpy as np
import pytest

import sps
from conftest import SOURCE_DIR, run_sps

FIXTURES = SOURCE_DIR / "tests" / "interop" / "fixtures"


def test_train_shows_a_tqdm_bar_and_nothing_without_tqdm(world, tmp_path, capfd, monkeypatch):
    pytest.importorskip("tqdm", reason="tqdm is not installed (Debian: python3-tqdm)")
    from conftest import micro_recipe
    recipe = micro_recipe(tmp_path / "r.yaml", world.data, "standard", tmp_path / "a", steps=4)
    sps.train(recipe)
    err = capfd.readouterr().err
    assert "train" in err and "tokens" in err
    real_import = builtins.__import__

    def no_tqdm(name, *args, **kwargs):
        if name.startswith("tqdm"):
            raise ImportError("no tqdm here")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_tqdm)
    monkeypatch.delitem(sys.modules, "tqdm.auto", raising=False)
    sps.train(recipe, {"system.out_dir": tmp_path / "b"})
    captured = capfd.readouterr()
    # No progress without tqdm: stderr holds at most the trainer's warnings (a micro recipe's
    # batches span few documents).
    assert captured.out == ""
    assert all(line.startswith("sps: warning: ") for line in captured.err.splitlines()), captured.err


def test_a_reference_checkpoint_loads_as_sps_convert_imports_it(tmp_path):
    pt = FIXTURES / "sps_fp32_compiled.pt"
    if not pt.exists():
        pytest.skip(f"{pt} is not in this checkout")
    model = sps.from_torch_checkpoint(pt)
    run_sps("convert", pt, "--to", "sps", "--out", tmp_path / "converted")
    converted = sps.load(tmp_path / "converted")
    assert model.config == converted.config
    tokens = np.arange(1, 9)
    np.testing.assert_array_equal(model.logits(tokens), converted.logits(tokens))
    for name, array in model.state_dict().items():
        np.testing.assert_array_equal(array, converted.state_dict()[name])
    # The logits the reference code computed for make_fixtures.py's tokens.
    want = np.fromfile(FIXTURES / "logits_sps.f32", np.float32).reshape(8, -1)
    np.testing.assert_allclose(model.logits([5, 17, 61, 3, 40, 22, 9, 30]), want, atol=2e-4)
