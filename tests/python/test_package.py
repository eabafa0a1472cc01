"""memtrain as a package: the copy `pip install .` put into the environment
imports from any folder, and a module built for another torch refuses to
load, saying which torch it was built for."""

import os
import subprocess
import sys

import torch

import memtrain


def _run(code, cwd, env):
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)


def _without_build_tree():
    # The tests import build/python through PYTHONPATH; a user has none.
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    return env


def test_the_installed_package_imports_from_any_folder(tmp_path):
    result = _run("import torch, memtrain; print(torch.__version__); print(memtrain.__file__)", tmp_path,
                  _without_build_tree())
    assert result.returncode == 0, result.stderr
    version, where = result.stdout.split()
    assert version == torch.__version__
    assert where.startswith(sys.prefix), f"{where} is not in the environment {sys.prefix}"
    assert "site-packages" in where


def test_the_module_says_which_torch_it_was_built_for():
    from memtrain._built_for import TORCH_VERSION
    assert TORCH_VERSION == torch.__version__
    assert memtrain.Module is not None


def test_another_torch_is_refused_by_name(tmp_path):
    # A stand-in torch of another version, found first on the path.
    fake = tmp_path / "torch"
    fake.mkdir()
    (fake / "__init__.py").write_text("__version__ = '2.99.0+other'\n")
    env = _without_build_tree()
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    result = _run("import memtrain", tmp_path, env)
    assert result.returncode != 0
    assert "ImportError: memtrain was built for torch " + torch.__version__ in result.stderr
    assert "this environment has torch 2.99.0+other" in result.stderr
