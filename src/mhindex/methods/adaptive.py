"""Adaptive-RAG (Jeong et al., NAACL 2024; starsuzi/Adaptive-RAG @0c88670): a small classifier reads the question
and routes it to no retrieval (A: NoR), one retrieval (B: OneR) or multi-step retrieval (C: IRCoT), and that
method answers. The record says which route it took (`adaptive.route`) and how sure the router was.

The router is trained by `mhindex train adaptive --from EVAL_FOLDER` (training/adaptive.py) from an evaluation's
own answers, labelled as the release labels them: the simplest method that answered a question right. The
release's classifier is a fine-tuned T5-large; here it is a softmax layer over the packaged MiniLM encoder's
question vectors (trained in seconds on CPU, as EfficientRAG's models are trained here): the paper's router with
a smaller reader of the question. The routed methods are mhindex's NoR, OneR and IRCoT, with this method's
reader settings, IRCoT's K (`-k`, 4; the release's multi-step config retrieves 6) and OneR's (`--oner-k`, 15).
`eval` leaves out the questions the router learnt from (`trained_on`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from mhindex.backends.base import Retriever
from mhindex.encoders import PACKAGED_ENCODER, make_encoder
from mhindex.errors import UsageError
from mhindex.lm.base import LanguageModel
from mhindex.methods.base import Answer, Method, MethodContext, Query, TraceStep, trace_step
from mhindex.methods.ircot import IRCoT, IRCoTSettings
from mhindex.methods.nor import NoRetrieval
from mhindex.methods.oner import OneRetrieval, OneRSettings
from mhindex.methods.settings import ReaderSettings
from mhindex.options import option

ROUTES = ("A", "B", "C")  # the release's labels: no retrieval, single-step, multi-step
ROUTER_FILE, TRAINED_FILE = "router.npz", "trained.json"


def routers_root(home: Path) -> Path:
    return home / "models" / "adaptive"


@dataclass(frozen=True)
class AdaptiveSettings(IRCoTSettings):
    oner_k: int = option(15, "Adaptive: paragraphs for a question routed to one retrieval (OneR's K).", min=1)
    router: str | None = option(
        None,
        "Adaptive: a trained router's folder \\[default: the one trained for the corpus].",
        metavar="DIR",
        reads="folder",
    )


class Router:
    """The trained classifier: question vectors (MiniLM, normalised) times a weight matrix, softmax over A, B, C."""

    def __init__(self, folder: Path, models: Path, threads: int = 1) -> None:
        import numpy as np

        path = folder / ROUTER_FILE
        if not path.is_file():
            raise UsageError(f"{folder}: no Adaptive-RAG router here: run 'mhindex train adaptive --from EVAL_FOLDER'")
        with np.load(path) as saved:
            self.weights, self.bias = saved["weights"], saved["bias"]
        self.folder, self.about = folder, json.loads((folder / TRAINED_FILE).read_text())
        self.encoder = make_encoder(PACKAGED_ENCODER, "onnx-int8", 128, threads, models)
        self.sha256 = hashlib.sha256(path.read_bytes()).hexdigest()

    def probabilities(self, questions: list[str]) -> Any:
        import numpy as np

        return softmax(np.asarray(self.encoder.encode_queries(questions)) @ self.weights + self.bias)


def softmax(logits: Any) -> Any:
    """Each row's probabilities over the routes (the training's and the router's)."""
    import numpy as np

    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


def _settings_for(kind: type, settings: AdaptiveSettings, **changed: Any) -> Any:
    """A routed method's settings: the fields it shares with these, then `changed`."""
    shared = {f.name: getattr(settings, f.name) for f in fields(kind) if hasattr(settings, f.name)}
    return kind(**{**shared, **changed})


class Adaptive(Method):
    name = "adaptive"
    title = "Adaptive-RAG"
    paper = "Adaptive-RAG (Jeong et al., NAACL 2024; starsuzi/Adaptive-RAG): a classifier routes to NoR, OneR or IRCoT"
    Settings = AdaptiveSettings

    settings: AdaptiveSettings

    def __init__(
        self, retriever: Retriever | None, lm: LanguageModel, settings: AdaptiveSettings, context: MethodContext
    ) -> None:
        super().__init__(retriever, lm, settings, context)
        folder = Path(settings.router) if settings.router else None
        if folder is None and context.home is not None and context.corpus is not None:
            folder = routers_root(context.home) / context.corpus
        if folder is None:
            raise UsageError("the adaptive method needs a trained router: --router DIR, or a corpus's own")
        self.router = Router(folder, (context.home or folder) / "models", lm.threads or 1)
        reader = _settings_for(ReaderSettings, settings)
        self.routes: dict[str, Method] = {
            "A": NoRetrieval(retriever, lm, reader, context),
            "B": OneRetrieval(retriever, lm, _settings_for(OneRSettings, settings, k=settings.oner_k), context),
            "C": IRCoT(retriever, lm, _settings_for(IRCoTSettings, settings), context),
        }

    recorded_keys = ("router", "router_sha256")

    def recorded_models(self) -> dict[str, Any]:
        return {"router": str(self.router.folder), "router_sha256": self.router.sha256}

    def trained_on(self) -> set[str]:
        return set(self.router.about.get("question_ids", []))

    @classmethod
    def resumable(cls, home: Path) -> list[Path]:
        return list(routers_root(home).glob(".*.partial"))  # a training's encoded questions (training/adaptive.py)

    def answer(self, query: Query) -> Answer:
        probabilities = [float(p) for p in self.router.probabilities([query.question])[0]]
        route = ROUTES[max(range(len(ROUTES)), key=probabilities.__getitem__)]
        routed = self.routes[route]
        answer = routed.answer(query)
        answer.method = self.name
        answer.details = {**answer.details, "adaptive": {"route": route, "method": routed.name,
                          "probabilities": dict(zip(ROUTES, probabilities, strict=True))}}  # fmt: skip
        return answer

    @classmethod
    def trace_steps(cls, record: dict[str, Any]) -> list[TraceStep]:
        """Where the router sent the question, then the routed method's own steps."""
        details = record.get("adaptive")
        if not isinstance(details, dict):
            return super().trace_steps(record)
        from mhindex.methods import method_class

        shown = ", ".join(f"{route} {p:.2f}" for route, p in details.get("probabilities", {}).items())
        routed = method_class(str(details.get("method"))).trace_steps(record)
        return [trace_step(f"Route {details.get('route')}: {details.get('method')}", [["router", shown]]), *routed]
