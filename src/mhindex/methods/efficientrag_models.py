"""EfficientRAG's two small models: the Labeler & Tagger and the Filter, both word classifiers
on one transformers encoder (DeBERTa-v3-large in the paper, the packaged MiniLM by default here).

- Labeler & Tagger: `[CLS] query [SEP] chunk [SEP]` (at most 384 tokens); a token head marks each
  chunk word useful or not, and a sequence head on the pooled first token tags the chunk
  <Continue> or <Terminate> (`DebertaForSequenceTokenClassification` in the released
  `src/efficient_rag/model/model.py`, with its two-tag mapping).
- Filter: `[CLS] Query: q Info: i1; Info: i2 [SEP]` (at most 128 tokens); a token head keeps the
  words of the next query.

Labels are per word, on each word's first sub-token, and what a model keeps is whole words: the
released code decodes the kept sub-tokens, which can cut a word in half. Words are split by a
regex instead of spaCy (no spaCy model can be fetched offline), dropping commas as the released
`spacify` does.

A trained model is a folder: the encoder's `config.json`, the tokenizer's files,
`model.safetensors` (encoder and heads) and `efficientrag.json` (its role and what it was
trained on). It needs torch and transformers, imported only when a model is used.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from mhindex.errors import UsageError

TAGS = ("<Continue>", "<Terminate>")
CONTINUE, TERMINATE = 0, 1
LABELER_MAX_LENGTH = 384
FILTER_MAX_LENGTH = 128
QUERY_MAX_WORDS = 64  # the query's share of the labeler's 384 tokens; the chunk gets the rest
META = "efficientrag.json"
IGNORED = -100  # torch's cross-entropy ignore_index: positions without a label

_WORD = re.compile(r"\w+(?:['’.\-]\w+)*|[^\w\s,]")


def words(text: str) -> list[str]:
    return _WORD.findall(text)


def join_words(kept: Sequence[str]) -> str:
    """Kept words back into text, without the space before punctuation."""
    return re.sub(r" (?=[.;:?!)\]])|(?<=[(\[]) ", "", " ".join(kept))


def filter_input(query: str, infos: Sequence[str]) -> str:
    """The Filter's input, as the released `build_query_info_sentence` writes it."""
    return f"Query: {query} " + "; ".join(f"Info: {info}" for info in infos)


def resolve_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise UsageError(f"--device {device}: no CUDA device is available here (torch {torch.__version__})")
    return device


def _torch() -> Any:
    try:
        import torch
        import transformers
    except ImportError:
        raise UsageError(
            "EfficientRAG's models need torch and transformers: pip install 'mhindex[efficientrag]'"
        ) from None
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    transformers.logging.set_verbosity_error()
    return torch, transformers


@functools.cache  # one class, built once torch is imported
def _module_class() -> Any:
    torch, _ = _torch()
    nn = torch.nn

    class WordClassifier(nn.Module):  # type: ignore[misc,name-defined]  # torch has no types here
        """An encoder, a keep/drop head over tokens and, for the Labeler, a tag head over the
        pooled first token (a dense layer and GELU, as DeBERTa's ContextPooler)."""

        def __init__(self, encoder: Any, sequence_labels: int) -> None:
            super().__init__()
            hidden = encoder.config.hidden_size
            self.encoder = encoder
            self.dropout = nn.Dropout(getattr(encoder.config, "hidden_dropout_prob", 0.1))
            self.token_head = nn.Linear(hidden, 2)
            self.sequence_labels = sequence_labels
            if sequence_labels:
                self.pooler = nn.Sequential(nn.Linear(hidden, hidden), nn.GELU())
                self.sequence_head = nn.Linear(hidden, sequence_labels)

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any = None) -> Any:
            extra = {"token_type_ids": token_type_ids} if token_type_ids is not None else {}
            hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask, **extra).last_hidden_state
            token_logits = self.token_head(self.dropout(hidden))
            sequence_logits = (
                self.sequence_head(self.dropout(self.pooler(hidden[:, 0]))) if self.sequence_labels else None
            )
            return token_logits, sequence_logits

    return WordClassifier


class Prediction(NamedTuple):
    kept: list[int]  # indexes of the words kept
    tag: int | None  # CONTINUE or TERMINATE; None for the Filter
    seen: int  # words that fit in the model's input (the rest were truncated)


class WordModel:
    """A Labeler or a Filter: the network, its tokenizer, and turning words into model inputs."""

    def __init__(self, network: Any, tokenizer: Any, role: str, meta: dict[str, Any], device: str) -> None:
        self.network = network
        self.tokenizer = tokenizer
        self.role = role
        self.meta = meta
        self.device = device
        self.max_length = LABELER_MAX_LENGTH if role == "labeler" else FILTER_MAX_LENGTH

    @classmethod
    def fresh(cls, encoder: str, role: str, device: str) -> WordModel:
        """An untrained model on `encoder` (a local transformers folder)."""
        _, transformers = _torch()
        try:
            tokenizer = transformers.AutoTokenizer.from_pretrained(encoder)
            backbone = transformers.AutoModel.from_pretrained(encoder)
        except (OSError, ValueError) as error:
            raise UsageError(f"cannot load the encoder {encoder}: {str(error).splitlines()[0]}") from None
        if not tokenizer.is_fast:
            raise UsageError(f"{encoder}: the tokenizer has no fast version, which word labels need")
        network = _module_class()(backbone, 2 if role == "labeler" else 0)
        return cls(network.to(device), tokenizer, role, {"role": role, "encoder": str(encoder)}, device)

    @classmethod
    def load(cls, folder: Path, role: str, device: str = "cpu") -> WordModel:
        torch, transformers = _torch()
        from safetensors.torch import load_file

        meta_path = folder / META
        if not meta_path.is_file():
            raise UsageError(
                f"{folder}: not an EfficientRAG model folder (no {META}); train one with 'mhindex train efficientrag'"
            )
        meta = orjson.loads(meta_path.read_bytes())
        if meta.get("role") != role:
            raise UsageError(f"{folder}: holds a {meta.get('role')} model, not a {role}")
        config = transformers.AutoConfig.from_pretrained(folder)
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
        network = _module_class()(transformers.AutoModel.from_config(config), 2 if role == "labeler" else 0)
        network.load_state_dict(load_file(folder / "model.safetensors"))
        network.to(device).eval()
        return cls(network, tokenizer, role, meta, device)

    def save(self, folder: Path, **meta: Any) -> None:
        """Write the model into `folder`, replacing it only when complete."""
        from safetensors.torch import save_file

        partial = folder.with_name(folder.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        self.network.encoder.config.save_pretrained(partial)
        self.tokenizer.save_pretrained(partial)
        save_file(
            {k: v.detach().contiguous().cpu() for k, v in self.network.state_dict().items()},
            partial / "model.safetensors",
        )
        self.meta = {**self.meta, **meta}
        (partial / META).write_bytes(orjson.dumps(self.meta, option=orjson.OPT_INDENT_2))
        shutil.rmtree(folder, ignore_errors=True)
        os.replace(partial, folder)

    def encode(self, firsts: Sequence[list[str]], seconds: Sequence[list[str]] | None = None) -> Any:
        """Model inputs for word lists (pairs for the Labeler), and for each example the position
        of each labelled word's first sub-token: the chunk's words for a pair, else all words."""
        if seconds is not None:
            firsts = [first[:QUERY_MAX_WORDS] for first in firsts]
            batch = self.tokenizer(
                list(firsts),
                list(seconds),
                is_split_into_words=True,
                truncation="only_second",
                max_length=self.max_length,
                padding=True,
                return_tensors="pt",
            )
            labelled = 1
        else:
            batch = self.tokenizer(
                list(firsts),
                is_split_into_words=True,
                truncation=True,
                max_length=self.max_length,
                padding=True,
                return_tensors="pt",
            )
            labelled = 0
        positions = []
        for i in range(len(firsts)):
            first_token: dict[int, int] = {}
            for position, (word, sequence) in enumerate(zip(batch.word_ids(i), batch.sequence_ids(i), strict=True)):
                if word is not None and sequence == labelled and word not in first_token:
                    first_token[word] = position
            positions.append(first_token)
        return batch, positions

    def forward(self, batch: Any) -> Any:
        inputs = {
            k: v.to(self.device) for k, v in batch.items() if k in ("input_ids", "attention_mask", "token_type_ids")
        }
        return self.network(**inputs)

    def predict(
        self, firsts: Sequence[list[str]], seconds: Sequence[list[str]] | None = None, batch_size: int = 16
    ) -> list[Prediction]:
        torch, _ = _torch()
        results: list[Prediction] = []
        self.network.eval()
        with torch.inference_mode():
            for start in range(0, len(firsts), batch_size):
                chunk_seconds = seconds[start : start + batch_size] if seconds is not None else None
                batch, positions = self.encode(firsts[start : start + batch_size], chunk_seconds)
                token_logits, sequence_logits = self.forward(batch)
                keep = token_logits.argmax(-1).cpu()
                tags = (
                    sequence_logits.argmax(-1).cpu().tolist()
                    if sequence_logits is not None
                    else [None] * len(positions)
                )
                for row, (first_token, tag) in enumerate(zip(positions, tags, strict=True)):
                    results.append(
                        Prediction(
                            [w for w, p in sorted(first_token.items()) if keep[row, p] == 1], tag, len(first_token)
                        )
                    )
        return results


def find_models(home: Path, corpus: str | None) -> Path | None:
    """The trained models `ask` uses by default: those trained from the corpus asked about, else
    the most recently trained."""
    root = models_root(home)
    if corpus and (root / corpus / "trained.json").is_file():
        return root / corpus
    trained = sorted(root.glob("*/trained.json"), key=lambda p: p.stat().st_mtime) if root.is_dir() else []
    return trained[-1].parent if trained else None


def models_root(home: Path) -> Path:
    return home / "models" / "efficientrag"
