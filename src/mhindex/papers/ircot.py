"""IRCoT's Table 4 (Trivedi et al., ACL 2023, arXiv 2212.10509): answer F1 of NoR ("ZeroR"), OneR and IRCoT
retrieval, each with the Direct and the CoT prompting reader, for Flan-T5-XXL and GPT3 (code-davinci-002), BM25
over each dataset's own corpus; the mean of three runs with different demonstrations (the ± is left out)."""

from __future__ import annotations

from mhindex.papers import Measure, PaperRow, PaperTable


def _row(label: str, flan_t5: tuple[float, float, float, float], gpt3: tuple[float, float, float, float]) -> PaperRow:
    datasets = ("hotpotqa", "2wikimultihopqa", "musique", "iirc")
    return PaperRow(label, {d: (f, g) for d, f, g in zip(datasets, flan_t5, gpt3, strict=True)})


TABLE = PaperTable(
    "IRCoT",
    "Trivedi et al., ACL 2023, Table 4: answer F1, Flan-T5-XXL and GPT3 (code-davinci-002), BM25",
    (Measure("F1 (Flan-T5-XXL)", "f1"), Measure("F1 (GPT3)", "f1")),
    (
        _row("ZeroR QA, Direct", (25.3, 32.7, 13.7, 28.9), (41.0, 38.5, 19.0, 40.9)),
        _row("ZeroR QA, CoT", (22.9, 31.7, 10.3, 24.4), (47.5, 41.2, 25.2, 52.1)),
        _row("OneR QA, Direct", (49.7, 51.2, 25.8, 40.0), (50.7, 46.4, 20.4, 40.1)),
        _row("OneR QA, CoT", (43.1, 47.8, 17.6, 34.5), (53.6, 54.8, 29.4, 49.8)),
        _row("IRCoT QA, Direct", (59.1, 66.5, 30.8, 42.5), (60.6, 63.5, 36.0, 47.9)),
        _row("IRCoT QA, CoT", (52.0, 55.1, 24.9, 36.5), (60.7, 68.0, 36.5, 49.9)),
    ),
    "K is tuned in the paper (OneR K in 5-15, IRCoT K in 2-8, on 100 dev questions): --sweep and --tune-on do it",
)
