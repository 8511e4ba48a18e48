"""Sweeps: one method over a grid of its settings in one `eval`, and the setting tuned on questions
disjoint from those it is reported on (IRCoT's paper: K chosen on 100 dev questions).

`--sweep oner.k=5,7,9 --sweep ircot.k=2,4,6,8` (a setting without `METHOD.` applies to every method
that has it) runs each method once per value, as a variant named `oner@k=5`: its own predictions
file (`oner@k=5.jsonl`) and its own settings in run.json, one loaded LM and index for all.
Several sweeps of one method multiply (`k` x `max_steps`).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mhindex.errors import UsageError
from mhindex.options import declared

VARIANT = "@"


@dataclass(frozen=True)
class Variant:
    name: str  # "oner@k=5", or the method's own name when it is not swept
    method: str
    overrides: dict[str, Any]
    #: what a tuning chooses among: the variants a sweep made of one method, or of one row of a paper's table
    #: (`ircot@reader=cot`, whose sweep makes `ircot@reader=cot,k=2`...); the method's name when not given
    group: str = ""

    @property
    def tuned_as(self) -> str:
        return self.group or self.method


def _value(method: str, field: str, text: str) -> Any:
    from mhindex.methods import method_class

    fields = declared(method_class(method).Settings)
    if field not in fields:
        own = ", ".join(sorted(fields))
        raise UsageError(f"--sweep {method}.{field}: {method} has no setting {field!r} (its settings: {own})")
    kind = fields[field][2]
    try:
        if kind is bool:
            if text.lower() not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError(text)
            return text.lower() in ("true", "1", "yes")
        return kind(text)
    except ValueError:
        raise UsageError(f"--sweep {method}.{field}: {text!r} is not a {kind.__name__}") from None


def parse_sweeps(sweeps: list[str], methods: list[str]) -> dict[str, dict[str, list[Any]]]:
    """`[METHOD.]FIELD=V1,V2,...` -> {method: {field: [values]}} (option names as flags or fields)."""
    from mhindex.methods import method_class

    grid: dict[str, dict[str, list[Any]]] = {}
    for sweep in sweeps:
        target, equals, values = sweep.partition("=")
        if not equals or not values.strip():
            raise UsageError(f"--sweep {sweep!r}: write [METHOD.]SETTING=V1,V2,... e.g. --sweep ircot.k=2,4,6,8")
        scope, dot, field = target.strip().rpartition(".")
        field = field.strip().lstrip("-").replace("-", "_")
        owners = [scope] if dot else [m for m in methods if field in declared(method_class(m).Settings)]
        if dot and scope not in methods:
            raise UsageError(f"--sweep {sweep!r}: {scope} is not among the methods evaluated ({', '.join(methods)})")
        if not owners:
            raise UsageError(f"--sweep {sweep!r}: none of {', '.join(methods)} has a setting {field!r}")
        for method in owners:
            parsed = [_value(method, field, v.strip()) for v in values.split(",") if v.strip()]
            grid.setdefault(method, {})[field] = list(dict.fromkeys(parsed))
    return grid


def variant_name(method: str, overrides: dict[str, Any]) -> str:
    """`oner@k=5`; the method's own name without overrides."""
    if not overrides:
        return method
    return method + VARIANT + ",".join(f"{k}={v}" for k, v in overrides.items())


def variants(
    methods: list[str], grid: dict[str, dict[str, list[Any]]], rows: Sequence[tuple[str, dict[str, Any]]] = ()
) -> list[Variant]:
    """Every row (a method with its settings: a paper's table's), then every method, once per combination of its
    swept values, in the order given; a row's settings stay under its sweep's."""
    found: dict[str, Variant] = {}
    for method, fixed in [*rows, *((method, {}) for method in methods)]:
        base = variant_name(method, fixed)
        fields = {field: values for field, values in grid.get(method, {}).items() if field not in fixed}
        if not fields:
            found.setdefault(base, Variant(base, method, dict(fixed), base))
            continue
        for values in itertools.product(*fields.values()):
            overrides = {**fixed, **dict(zip(fields, values, strict=True))}
            found.setdefault(variant_name(method, overrides), Variant(variant_name(method, overrides), method,
                                                                      overrides, base))  # fmt: skip
    return list(found.values())


def _reseeded(method: str, settings: Any, draw: int) -> dict[str, Any] | None:
    """`Method.reseeded`, checked: a plug-in's that fails or gives what is not its settings is one line."""
    from mhindex.methods import method_class

    try:
        found = method_class(method).reseeded(settings, draw)
    except Exception as error:  # noqa: BLE001 - a plug-in's code: said in one line, not a traceback
        raise UsageError(
            f"method {method}: reseeded(settings, {draw}) failed: {type(error).__name__}: {error}"
        ) from None
    if found is not None and (not isinstance(found, dict) or not set(found) <= set(declared(type(settings)))):
        raise UsageError(f"method {method}: reseeded(settings, {draw}) gave {found!r}, not settings of its own")
    return found


def with_draws(runs: list[Variant], settings: dict[str, Any], seeds: int) -> tuple[list[Variant], dict[str, list[str]]]:
    """`eval --seeds N`: each variant whose method samples under its settings (`Method.reseeded`) run N times, on
    seeds no two draws share, each draw a variant of its own (`react@fallback=cot-sc,sc_seed=21`, its own predictions
    file) beside the first, which keeps its name; and each sampled variant's draws by its name, the first first."""
    if seeds < 2:
        return runs, {}
    found: list[Variant] = []
    draws: dict[str, list[str]] = {}
    for variant in runs:
        found.append(variant)
        reseeds = [_reseeded(variant.method, settings[variant.name], draw) for draw in range(1, seeds)]
        if reseeds[0] is None:
            continue
        draws[variant.name] = [variant.name]
        for reseed in reseeds:
            overrides = {**variant.overrides, **(reseed or {})}
            name = variant_name(variant.method, overrides)
            found.append(Variant(name, variant.method, overrides, variant.tuned_as))
            draws[variant.name].append(name)
    names = [v.name for v in found]
    if twice := next((name for name in names if names.count(name) > 1), None):
        raise UsageError(f"--seeds {seeds}: {twice} would be both a row of its own (a --sweep of its seed) and another "
                         "row's draw: sweep other settings, and let --seeds choose the seeds")  # fmt: skip
    if not draws:
        methods = ", ".join(dict.fromkeys(v.method for v in runs))
        raise UsageError(f"--seeds {seeds}: none of {methods} samples under its settings (each answers greedily), so "
                         "every seed would answer the same")  # fmt: skip
    return found, draws


def base_method(name: str) -> str:
    return name.partition(VARIANT)[0]


def with_overrides(settings: Any, overrides: dict[str, Any], name: str) -> Any:
    """A method's settings with a variant's values, checked as the command line checks them."""
    import dataclasses

    from mhindex.options import check_choices

    for field, value in overrides.items():
        opt = declared(type(settings))[field][1]
        if isinstance(value, int | float) and not isinstance(value, bool):
            if (opt.min is not None and value < opt.min) or (opt.max is not None and value > opt.max):
                raise UsageError(f"--sweep {name}: {field}={value} is outside {opt.min} to {opt.max}")
    changed = dataclasses.replace(settings, **overrides)
    check_choices(changed)
    return changed


#: recall and the answer's F1 and EM; a retrieval evaluation's ranking measures (eval/ranking.py)
TUNE_METRICS = ("recall", "f1", "em", "ndcg_10", "map", "mrr")


def _score(values: dict[str, Any], variant: Variant) -> float:
    got = values[variant.name]
    return -1.0 if got is None else float(got)


def choose_settings(
    runs: list[Variant], scores: dict[str, dict], metric: str, questions: list[dict], split: str, seed: int
) -> dict[str, dict]:
    """Each method's best variant on the tuning questions by `metric` (ties: the first in grid order),
    recorded with what it was chosen on."""
    chosen: dict[str, dict] = {}
    for method in dict.fromkeys(v.tuned_as for v in runs):
        mine = [v for v in runs if v.tuned_as == method]
        values = {v.name: scores[v.name].get(metric) for v in mine}
        best = max(mine, key=functools.partial(_score, values))  # max() keeps the first of equals
        chosen[method] = {
            "chosen": best.name,
            "setting": best.overrides,
            "metric": metric,
            "scores": values,
            "chosen_on": {
                "split": split,
                "questions": len(questions),
                "seed": seed,
                "ids": [q["id"] for q in questions],
            },
        }
    return chosen
