"""Answer and retrieval metrics, as the papers compute them.

- EM and F1 use the official HotpotQA/SQuAD normalisation (lower case, drop punctuation and
  the articles a/an/the, collapse white space) and take the best over all gold answers and
  aliases, each dataset as its official script does: HotpotQA's (and 2WikiMultihopQA's, which
  is adapted from it) gives F1 0 when either side is yes/no/noanswer and the two differ;
  MuSiQue's (SQuAD's `compute_f1`) has no such rule and scores two empty answers 1.
  2WikiMultihopQA's gold answers include the aliases and demonyms of `answer_id` from its
  `id_aliases.json`, which the corpus builder adds to `answers` when given that file.
- Cover-EM: the normalised gold answer occurs in the normalised prediction, in two variants:
  as whole words (`cover_em`: "paris" covers "in paris" but not "parisian"), and as a plain
  substring (`cover_em_substring`), which is SearChain's (its released `match_or_not`).
- First-answer EM (`first_answer_em`): the first answer of the prediction (a list split on ';'
  or ',' counts its first item) equals a gold answer after normalisation; strict, and no paper's.
- Hit@1 and F1 as KD-CoT scores WebQSP and CWQ (`kdcot_hit1`, `kdcot_f1`; only for questions of
  those datasets), exactly as `pipeline/GPT_inference_steps.py` of the released code does, quirks
  included: see `kdcot_scores`.
- SearChain's cover-EM over everything the LM wrote (`cover_em_generated`): its released client
  (SearChain_w_IR.py) accumulates every chain the LM writes into `predict_answer`, and its
  `match_or_not` is substring containment; the release ships no scoring script, so this is, as far
  as the release shows, what the paper's table reads. It counts a gold answer the question itself
  names, or one the model merely mentions. Only for methods that record their text (SearChain).
- EfficientRAG's EM (`efficientrag_em`), as its released `exact_match` (src/evaluation/
  correctness.py): the normalised prediction is contained in the normalised dataset answer (not
  the aliases), so "1" scores against "12" and an empty prediction scores 1. Its Accuracy
  (`accuracy_llm`) is an LLM's yes/no verdict (eval/judge.py), when eval or score is given a judge.
- Recall (IRCoT): the share of a question's gold paragraphs among those the method retrieved.

F1 and recall come with the half-width of their 95% interval over the sampled questions
(normal approximation), because samples of 50-100 questions are how these tables are usually
grown, and a difference inside that width is not yet a finding.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mhindex.errors import UsageError, one_line
from mhindex.eval.hops import diagnose, hop_summary
from mhindex.eval.ranking import RANKING_METRICS, ranking_scores, scores_retrieval
from mhindex.text import normalize_answer


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def _declared(dataset: str | None):
    from mhindex.corpora import declared_dataset

    return declared_dataset(dataset)


def f1(prediction: str, gold: str, dataset: str | None = None) -> float:
    """F1 as the dataset's official script computes it (its declared `answer_f1` rule)."""
    pred, truth = normalize_answer(prediction), normalize_answer(gold)
    pred_tokens, truth_tokens = pred.split(), truth.split()
    declared = _declared(dataset)
    if declared is not None and declared.answer_f1 == "squad":
        if not pred_tokens or not truth_tokens:
            return float(pred_tokens == truth_tokens)
    elif (pred in ("yes", "no", "noanswer") or truth in ("yes", "no", "noanswer")) and pred != truth:
        return 0.0
    common = Counter(pred_tokens) & Counter(truth_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred_tokens), same / len(truth_tokens)
    return 2 * precision * recall / (precision + recall)


def cover_exact_match(prediction: str, gold: str) -> float:
    truth = normalize_answer(gold)
    return float(bool(truth) and f" {truth} " in f" {normalize_answer(prediction)} ")


def cover_substring(prediction: str, gold: str) -> float:
    truth = normalize_answer(gold)
    return float(bool(truth) and truth in normalize_answer(prediction))


def efficientrag_exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) in normalize_answer(gold))


def first_answer_exact_match(prediction: str, gold: str) -> float:
    first = re.split(r"[;,]", prediction, maxsplit=1)[0]
    return float(bool(normalize_answer(first)) and normalize_answer(first) == normalize_answer(gold))


# The datasets KD-CoT reports, scored by its own rules as well.


def _kdcot_gold(gold: str) -> str:
    gold = unicodedata.normalize("NFKD", gold).encode("ascii", "ignore").decode("utf-8")
    gold = re.sub(r"\W", " ", gold).lower().strip()
    for article in ("the ", "a ", "an "):  # one after the other, as the released code does
        if gold.startswith(article):
            gold = gold[len(article) :]
    return gold


def kdcot_scores(prediction: str, answers: Sequence[str], question: str) -> tuple[float, float]:
    """(Hit@1, F1) of KD-CoT's `exact_match`: containment, not equality.

    The prediction is only lower-cased and stripped; each gold answer counts when it, lower-cased,
    or its NFKD-ASCII form with non-word characters as spaces and a leading article dropped,
    occurs in the prediction. For a question with "year", a gold answer's first four-digit year
    found in the prediction counts too, once more: a gold can count twice, so recall (hits over
    golds) can pass 1, as in the released code. Precision is 1 when anything was hit. A question
    with no gold answer is scored against [""], which every prediction contains (their loader's
    fallback)."""
    prediction = prediction.lower().strip()
    golds = [g.lower().strip() for g in answers] or [""]
    has_year = "year" in question.lower()
    hits = 0
    for gold in golds:
        if gold in prediction or _kdcot_gold(gold) in prediction:
            hits += 1
        if has_year and (year := re.search(r"([1-2][0-9]{3})", gold)) and year.group(0) in prediction:
            hits += 1
    precision = int(hits > 0)
    recall = hits / len(golds)
    return float(precision), (2 * precision * recall) / (precision + recall + 1e-40)


def best(metric, prediction: str, answers: Sequence[str], dataset: str | None = None) -> float:
    """The metric against the closest gold answer; `dataset` picks its official rules where it has any."""
    if metric is f1:
        return max((f1(prediction, gold, dataset) for gold in answers), default=0.0)
    return max((metric(prediction, gold) for gold in answers), default=0.0)


def _scored(metric: AnswerMetric, answer: str, answers: Sequence[str], dataset: str | None) -> float:
    """A metric's score, checked at its door: a plug-in's metric that raises, or gives other than a number from 0 to 1
    (None, NaN, a string), is one line naming it, not a traceback after the predictions are written."""
    try:
        value = best(metric.score, answer, answers, dataset)
    except Exception as error:  # noqa: BLE001 - whatever a plug-in raises is said as its failure
        raise UsageError(f"the metric {metric.key!r} failed on the answer {answer!r}: {one_line(error)}") from None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        raise UsageError(
            f"the metric {metric.key!r} scored the answer {answer!r} as {value!r}, not a number from 0 to 1"
        )
    return float(value)


@dataclass(frozen=True)
class AnswerMetric:
    """One answer metric: its key in metrics.json, its column, what it scores and whose it is."""

    key: str
    column: str
    about: str
    score: Callable[[str, str], float]


# The answer metrics of every table; a new one is one entry here (its scorer above), or an `AnswerMetric`
# declared by another package under the entry-point group `mhindex.metrics` (see `answer_metrics`).
ANSWER_METRICS = (
    AnswerMetric(
        "em",
        "EM",
        "exact match after the official normalisation (HotpotQA, SQuAD, MuSiQue, 2WikiMultihopQA)",
        exact_match,
    ),
    AnswerMetric("f1", "F1", "token F1, each dataset's official rules", f1),
    AnswerMetric(
        "cover_em",
        "Cover-EM",
        "the normalised gold answer occurs in the normalised prediction as whole words",
        cover_exact_match,
    ),
    AnswerMetric(
        "cover_em_substring",
        "Cover-EM (substr.)",
        "SearChain's cover-EM: the normalised gold answer occurs in the normalised prediction, as any substring",
        cover_substring,
    ),
    AnswerMetric(
        "first_answer_em",
        "First-ans. EM",
        "the first answer of the prediction (before ; or ,) equals a gold answer (strict)",
        first_answer_exact_match,
    ),
)


def _metric_problem(loaded: object) -> str | None:
    if not isinstance(loaded, AnswerMetric):
        return "is not an mhindex.eval.metrics.AnswerMetric"
    # A plug-in's column must not stand in for one of mhindex's: its key would replace that figure silently.
    taken = {m.key for m in ANSWER_METRICS} | {key for key, *_ in (*PAPER_METRICS, *KDCOT_METRICS)} | {"recall"}
    if loaded.key in taken and getattr(_BUILTIN, loaded.key, None) is not loaded:
        return f"its key {loaded.key!r} is a built-in measure's, whose figures it would replace"
    return None


def _plugin_metrics():
    from mhindex.registry import Registry

    # A plug-in may not take a built-in's key: the built-ins are named here, as what a clash is checked against.
    builtins = {m.key: f"mhindex.eval.metrics:_BUILTIN.{m.key}" for m in ANSWER_METRICS}
    return Registry("metric", builtins, _metric_problem)


class _Builtins:
    def __init__(self) -> None:
        for metric in ANSWER_METRICS:
            setattr(self, metric.key, metric)


_BUILTIN = _Builtins()
METRICS = _plugin_metrics()


def answer_metrics() -> tuple[AnswerMetric, ...]:
    """The answer metrics of every table: the built-ins, then those of installed plug-ins (a broken one is
    warned about and left out)."""
    return tuple(METRICS.available(every=True).values())  # a metric's column is in every table: all are used


# Scored as one paper's code scores them. A method declares the ones its paper reports
# (`Method.paper_metrics`): a column every row has (EfficientRAG's EM) is shown where a method in the
# table declares it; the others (SearChain's generated text, a judge's verdict) where a row has them.
PAPER_METRICS = (
    (
        "cover_em_generated",
        "Cover-EM (all LM text)",
        "SearChain's match_or_not over everything the LM wrote for the question",
    ),
    (
        "efficientrag_em",
        "EM (EfficientRAG)",
        "EfficientRAG's exact_match: the normalised prediction inside the normalised answer",
    ),
    (
        "cover_em_generated_unnamed",
        "Cover-EM (all LM text, answer not in question)",
        "the same over the questions whose own text does not hold a gold answer (copying such a question covers it)",
    ),
    ("accuracy_llm", "Acc. (LLM judge)", "EfficientRAG's Accuracy: the judge LM says the prediction is correct"),
)
#: paper metrics that every row has, so shown only where a method in the table declares them
EVERY_ROW = frozenset({"efficientrag_em"})
# KD-CoT's (WebQSP, CWQ only): they score a question's answers together, not the best one.
KDCOT_METRICS = (
    (
        "kdcot_hit1",
        "Hit@1 (KD-CoT)",
        "a gold answer (or its ASCII form, or a gold year for year questions) occurs in the prediction",
    ),
    ("kdcot_f1", "F1 (KD-CoT)", "precision 1 if any gold is hit, recall = golds hit / golds"),
)


def retrieval_recall(retrieved_ids: Iterable[str], gold_ids: Sequence[str]) -> float | None:
    """None for a question without gold paragraphs (it does not count in the average)."""
    if not gold_ids:
        return None
    found = set(retrieved_ids)
    return sum(1 for g in set(gold_ids) if g in found) / len(set(gold_ids))


def answers_anything(prediction: Mapping[str, Any]) -> bool:
    """False for a record that says it answers nothing (`"answered": false`: the `retrieve` method, a TREC run or
    `search -` results scored by `score`): its answer columns are "-", never a 0.0 read as a wrong answer."""
    return prediction.get("answered") is not False


def score_one(prediction: dict, question: dict, budget: int | None = None, verdict: bool | None = None) -> dict:
    """Recall counts only the first `budget` paragraphs retrieved, as the paper's "Recall (<=15)".
    `verdict`: the judge's, where one was asked."""
    answer = prediction.get("answer") or ""
    answers = question.get("answers") or []
    dataset = question.get("dataset")
    retrieved = [r["id"] for r in prediction.get("retrieved", [])][:budget]
    if not answers_anything(prediction):  # a retrieval-only record: no answer to score, not an answer scoring 0
        hops = diagnose(prediction, question, budget)
        return {
            **{m.key: None for m in answer_metrics()},
            **({"hops_all": float(all(hop["kept"] for hop in hops))} if hops is not None else {}),
            "recall": retrieval_recall(retrieved, question.get("gold_ids") or []),
            "retrieved": len(retrieved),
        }
    paper: dict[str, float] = {"efficientrag_em": efficientrag_exact_match(answer, answers[0]) if answers else 0.0}
    declared = _declared(dataset)
    if declared is not None and "kdcot_hit1" in declared.paper_metrics:
        paper.update(
            zip(
                (key for key, *_ in KDCOT_METRICS),
                kdcot_scores(answer, answers, question.get("question") or ""),
                strict=True,
            )
        )
    if isinstance(prediction.get("generated"), str):
        paper["cover_em_generated"] = best(cover_substring, prediction["generated"], answers)
        if not best(cover_substring, question.get("question") or "", answers):  # copying the question covers none
            paper["cover_em_generated_unnamed"] = paper["cover_em_generated"]
    if verdict is not None:
        paper["accuracy_llm"] = float(verdict)
    if (hops := diagnose(prediction, question, budget)) is not None:  # every hop's paragraph kept, for paired rows
        paper["hops_all"] = float(all(hop["kept"] for hop in hops))
    return {
        **{m.key: _scored(m, answer, answers, dataset) for m in answer_metrics()},
        **paper,
        "recall": retrieval_recall(retrieved, question.get("gold_ids") or []),
        "retrieved": len(retrieved),
    }


COST = ("lm_calls", "prompt_tokens", "completion_tokens", "seconds")


def ci95_half_width(values: Sequence[float]) -> float | None:
    """1.96 standard errors of the mean; None below two values, where there is no spread to measure."""
    n = len(values)
    if n < 2:
        return None
    mean = sum(values) / n
    variance = sum((v - mean) ** 2 for v in values) / (n - 1)
    return 1.96 * math.sqrt(variance / n)


def aggregate(
    predictions: Sequence[dict], questions: dict[str, dict], budget: int = 15, verdicts: dict[str, bool] | None = None
) -> dict:
    """Averages over the questions given: a question with no prediction or a failed one scores 0.
    Recall is None where no question had gold paragraphs or the method retrieved nothing at all.
    `verdicts`: a judge's per question id (EfficientRAG's Accuracy), where one was asked."""
    rows, costs, failed, cached = [], {c: 0.0 for c in COST}, 0, 0
    departures: dict[str, int] = {}  # where answers depart from the release's reading (methods.base.Answer), by kind
    split: dict[str, float] = {}  # where the model's seconds went (methods.base.call_entry's parts)
    by_id = {p["id"]: p for p in predictions if "id" in p and "error" not in p}
    for qid, question in questions.items():
        prediction = by_id.get(qid)
        row = score_one(prediction or {}, question, budget, None if verdicts is None else verdicts.get(qid, False))
        if prediction is None:
            failed += 1
            prediction = {}
            row["efficientrag_em"] = 0.0  # an empty answer is inside every gold for that measure; no answer is not
        rows.append(row)
        for note in {str(n) for n in prediction.get("departures") or () if isinstance(n, str)}:
            departures[note] = departures.get(note, 0) + 1
        for c in COST:
            costs[c] += float(prediction.get(c) or 0)
        # An answer the call cache served took its calls' time when they were first made: counted so (marked).
        served = prediction.get("lm")
        if isinstance(served, dict):
            costs["seconds"] += float(served.get("cached_calls_seconds") or 0)
            cached += bool(served.get("calls_from_cache"))
            for part, value in (served.get("seconds") or {}).items():
                split[part] = split.get(part, 0.0) + float(value or 0)
    n = len(rows) or 1
    # A method that never retrieves (NoR) has no recall to report, not a recall of 0.
    retrieves = any(p.get("retrieved") or p.get("steps") for p in by_id.values())
    recalls = [r["recall"] for r in rows if r["recall"] is not None] if retrieves else []
    answering = not by_id or any(answers_anything(p) for p in by_id.values())
    summary = {m.key: sum(r[m.key] or 0 for r in rows) / n if answering else None for m in answer_metrics()}
    generated = ["cover_em_generated", "cover_em_generated_unnamed"]
    for key in [k for k, *_ in KDCOT_METRICS] + generated:  # over the questions it applies to, when there are any
        scored = [r[key] for r in rows if key in r]
        if scored:
            summary[key] = sum(scored) / len(scored)
    if answering:
        summary["efficientrag_em"] = sum(r.get("efficientrag_em", 0.0) for r in rows) / n
    if verdicts is not None:
        summary["accuracy_llm"] = sum(r.get("accuracy_llm", 0.0) for r in rows) / n
    if any("rounds" in p for p in by_id.values()):  # SearChain's rounds of feedback, as its paper reports them
        summary["rounds_per_question"] = sum(float(by_id[q].get("rounds") or 0) for q in questions if q in by_id) / n
    if scores_retrieval(list(questions.values())):  # nothing to answer (BEIR's queries): ranking measures instead
        summary = _ranked(by_id, questions, budget)
    elif retrieves and any(q.get("relevance") for q in questions.values()):  # answers and graded judgements: both
        summary.update({k: v for k, v in _ranked(by_id, questions, budget).items() if k != "scored"})
    if "scored" not in summary:
        f1s = [r["f1"] or 0.0 for r in rows] if answering else []
        summary["f1_ci95"] = ci95_half_width(f1s)
        # Percentile bootstrap intervals: inside 0-100% by construction, unlike mean ± 1.96 SE.
        summary["f1_interval"] = paired_bootstrap(f1s)[1] if len(f1s) > 1 else None
    summary.update(
        {
            "recall": sum(recalls) / len(recalls) if recalls else None,
            "recall_ci95": ci95_half_width(recalls),
            "recall_interval": paired_bootstrap(recalls)[1] if len(recalls) > 1 else None,
            "paragraph_budget": budget,
            "retrieved_per_question": sum(r["retrieved"] for r in rows) / n,
            "questions": len(rows),
            "failed": failed,
            **({"departures": dict(sorted(departures.items()))} if departures else {}),
            **({"cached_answers": cached} if cached else {}),
            **{f"{c}_per_question": costs[c] / n for c in COST},
            **{f"lm_{part}_seconds_per_question": value / n for part, value in split.items()},
        }
    )
    if retrieves and (hops := hop_summary(by_id, questions, budget)):  # which hop was missed (eval/hops.py)
        summary["hops"] = hops
    return summary


def _ranked(predictions: dict[str, dict], questions: dict[str, dict], budget: int) -> dict:
    """A retrieval evaluation's summary: each ranking measure's mean over the judged questions, with its
    intervals, and `scored` saying so (the answer columns are left out of its table)."""
    per_question = ranking_scores(predictions, questions, budget)
    summary: dict = {"scored": "retrieval"}
    for key, *_ in RANKING_METRICS:
        values = [scores[key] for scores in per_question.values()]
        summary[key] = sum(values) / len(values) if values else None
        summary[f"{key}_ci95"] = ci95_half_width(values)
        summary[f"{key}_interval"] = paired_bootstrap(values)[1] if len(values) > 1 else None
    return summary


#: What paired comparisons compare: the answer's F1 and EM, and recall of gold paragraphs; for a retrieval
#: evaluation, its ranking measures and recall.
PAIRED_METRICS = ("f1", "em", "recall", "hops_all")  # hops_all: where the questions have hops (eval/hops.py)
PAIRED_RANKING_METRICS = (*(key for key, *_ in RANKING_METRICS), "recall")
BOOTSTRAP_RESAMPLES = 10_000


def paired_bootstrap(differences: Sequence[float], resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0):
    """The mean of per-question differences and its 95% paired bootstrap interval (percentile method,
    Efron and Tibshirani; as Koehn 2004 compares two systems on the same test items): questions are
    resampled with replacement, both methods' scores of a question moving together."""
    import numpy as np

    values = np.asarray(differences, dtype=float)
    if len(values) == 0:
        return None, None
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    for start in range(0, resamples, 1000):  # 1,000 resamples at a time: bounded memory for 10k questions
        rows = min(1000, resamples - start)
        means[start : start + rows] = values[rng.integers(0, len(values), (rows, len(values)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(values.mean()), (float(low), float(high))


#: Fewer paired questions than this, and an interval says nothing: a bootstrap of two questions that both moved by
#: +0.5 "excludes 0" with certainty. Such a difference is starred nowhere, and its interval is said to be too few.
FEWEST_FOR_AN_INTERVAL = 10


TOO_FEW = f"too few questions (under {FEWEST_FOR_AN_INTERVAL})"


def stated_interval(row: Mapping[str, Any]) -> tuple[float, float] | None:
    """A paired difference's 95% interval where its questions are enough to state one, else None: the one rule the
    tables, the report, metrics.json and the Python API all follow (a record written before it may hold one)."""
    interval = row.get("ci95")
    if interval is None or int(row.get("questions") or 0) < FEWEST_FOR_AN_INTERVAL:
        return None
    low, high = interval
    return float(low), float(high)


def interval_text(row: Mapping[str, Any]) -> str:
    """A paired difference's interval as tables print it, or why there is none."""
    interval = stated_interval(row)
    if interval is None:
        return TOO_FEW
    return f"[{interval[0] * 100:+.1f}, {interval[1] * 100:+.1f}]"


def excludes_zero(row: Mapping[str, Any]) -> bool:
    """Whether a paired difference's 95% interval excludes 0 on questions enough to say so (the tables' star)."""
    interval = stated_interval(row)
    return interval is not None and (interval[0] > 0 or interval[1] < 0)


def paired_differences(
    predictions: Mapping[str, Sequence[dict]], questions: dict[str, dict], budget: int = 15
) -> list[dict]:
    """Each pair of methods on the same questions (in the order given: the first minus the second),
    for F1, EM and recall: the mean difference, its 95% paired bootstrap interval, and how many
    questions each method won. A failed or missing answer scores 0, as in the table; recall is
    compared on the questions with gold paragraphs, for methods that both retrieve."""
    rows: dict[str, dict[str, dict]] = {}
    retrieves: dict[str, bool] = {}
    ranking = scores_retrieval(list(questions.values()))
    for name, records in predictions.items():
        by_id = {p["id"]: p for p in records if "id" in p and "error" not in p}
        retrieves[name] = any(p.get("retrieved") or p.get("steps") for p in by_id.values())
        rows[name] = {qid: score_one(by_id.get(qid) or {}, q, budget) for qid, q in questions.items()}
        if ranking:
            for qid, scores in ranking_scores(by_id, questions, budget).items():
                rows[name][qid].update(scores)
    names = list(predictions)
    compared = []
    for i, first in enumerate(names):
        for second in names[i + 1 :]:
            for metric in PAIRED_RANKING_METRICS if ranking else PAIRED_METRICS:
                if metric in (*PAIRED_RANKING_METRICS, "hops_all") and not (retrieves[first] and retrieves[second]):
                    continue
                pairs = [
                    (rows[first][qid][metric], rows[second][qid][metric])
                    for qid in questions
                    if rows[first][qid].get(metric) is not None and rows[second][qid].get(metric) is not None
                ]
                if not pairs:
                    continue
                difference, interval = paired_bootstrap([a - b for a, b in pairs])
                few = len(pairs) < FEWEST_FOR_AN_INTERVAL
                compared.append(
                    {
                        "a": first,
                        "b": second,
                        "metric": metric,
                        "difference": difference,
                        "ci95": None if few else interval,
                        **({"no_interval": TOO_FEW} if few else {}),
                        "questions": len(pairs),
                        "a_better": sum(a > b for a, b in pairs),
                        "b_better": sum(b > a for a, b in pairs),
                    }
                )
                compared[-1]["excludes_zero"] = excludes_zero(compared[-1])
    return compared
