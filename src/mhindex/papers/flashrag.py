"""FlashRAG's two result tables (RUC-NLPIR/FlashRAG @1ee5249, README.md, "Supporting Methods"): F1 on HotpotQA and
2WikiMultihopQA of its 2024-2025 methods table (Llama3-8B-instruct, e5-base-v2 retrieving 5 passages of the
December 2018 Wikipedia, its default prompt, greedy, 32 tokens), and F1 on HotpotQA, 2WikiMultihopQA and MuSiQue
of its reasoning-methods table (each method's released checkpoint, as its setting column names it). FlashRAG's
other columns (NQ, TriviaQA, PopQA, WebQA, Bamboogle) are not datasets mhindex builds."""

from __future__ import annotations

from mhindex.papers import Measure, PaperRow, PaperTable

_OTHER = "not a method of mhindex"
_ITS_OWN = "mhindex runs {0} as its own release does, with other prompts than FlashRAG's implementation of it"
_ROUTER = (
    "needs a router trained from an evaluation's answers (mhindex train adaptive --from EVAL_FOLDER); then add it "
    "with --method adaptive"
)


def _row(label: str, hotpotqa: float, wikimqa: float, why_not: str = _OTHER) -> PaperRow:
    return PaperRow(label, {"hotpotqa": (hotpotqa,), "2wikimultihopqa": (wikimqa,)}, why_not)


def _reasoning(label: str, hotpotqa: float, wikimqa: float, musique: float, why_not: str = _OTHER) -> PaperRow:
    return PaperRow(label, {"hotpotqa": (hotpotqa,), "2wikimultihopqa": (wikimqa,), "musique": (musique,)}, why_not)


TABLE = PaperTable(
    "FlashRAG",
    "FlashRAG (RUC-NLPIR/FlashRAG README): F1, Llama3-8B-instruct with e5 top 5 over wiki-18; the reasoning rows "
    "each their released checkpoint",
    (Measure("F1", "f1"),),
    (
        _row("Naive Generation", 28.4, 33.9),
        _row("Standard RAG", 35.3, 21.0),
        _row("AAR-contriever-kilt", 33.4, 19.8),
        _row("LongLLMLingua", 37.5, 25.0),
        _row("RECOMP-abstractive", 37.5, 32.4),
        _row("Selective-Context", 34.4, 18.5),
        _row("Trace", 34.0, 15.5),
        _row("Spring", 42.6, 37.3),
        _row("SuRe", 33.4, 20.6),
        _row("REPLUG", 31.2, 21.1),
        _row("SKR", 32.4, 23.4),
        _row("Adaptive-RAG", 39.1, 28.4, _ROUTER),
        _row("Ret-Robust", 35.8, 43.4),
        _row("Self-RAG", 29.6, 25.1),
        _row("FLARE", 28.0, 33.9),
        _row("Iter-Retgen, ITRG", 38.3, 21.6, _ITS_OWN.format("Iter-RetGen (EfficientRAG's baseline)")),
        _row("IRCoT", 41.5, 32.4, _ITS_OWN.format("IRCoT")),
        _row("RQRAG", 33.5, 35.8),
        # Reasoning-based methods
        _reasoning("Search-R1", 54.5, 42.6, 29.2),
        _reasoning("R1-Searcher", 49.0, 49.1, 24.7),
        _reasoning("O2-Searcher", 43.4, 48.6, 19.0),
        _reasoning("AutoRefine", 54.0, 50.3, 23.6),
        _reasoning("ReaRAG", 42.9, 41.6, 21.2),
        _reasoning("CoRAG", 56.6, 60.7, 31.9),
        _reasoning("SimpleDeepSearcher", 49.0, 49.1, 24.7),
    ),
    "FlashRAG's F1 normalises as SQuAD does, as mhindex's F1; its 2024 rows have no MuSiQue column",
)
