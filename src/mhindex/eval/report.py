"""The evaluation table (a row per method, like IRCoT's Table 4) and a recall/F1 bar chart,
as a PNG and, on a terminal, as text bars (like the paper's Figure 3)."""

from __future__ import annotations

from pathlib import Path

COLUMNS = [
    ("EM", "em", "{:.1f}", 100),
    ("F1", "f1", "{:.1f}", 100),
    ("Cover-EM", "cover_em", "{:.1f}", 100),
    ("Hit@1", "hit1", "{:.1f}", 100),
    ("Recall", "recall", "{:.1f}", 100),
    ("#Paras", "retrieved_per_question", "{:.1f}", 1),
    ("LM calls/q", "lm_calls_per_question", "{:.1f}", 1),
    ("Tokens/q", "tokens_per_question", "{:,.0f}", 1),
    ("s/q", "seconds_per_question", "{:.1f}", 1),
]


def _cell(summary: dict, key: str, fmt: str, scale: float) -> str:
    value = summary["prompt_tokens_per_question"] + summary["completion_tokens_per_question"] if key == "tokens_per_question" else summary.get(key)
    if value is None:
        return "-"
    spread = summary.get(f"{key}_ci95")
    return fmt.format(value * scale) + ("" if spread is None else f" ±{spread * scale:.1f}")


def table(metrics: dict[str, dict], title: str):
    from rich.table import Table

    budget = next(iter(metrics.values()))["paragraph_budget"] if metrics else 15
    grid = Table(title=title, title_justify="left", caption="±: half-width of the 95% interval over the sampled questions", caption_justify="left")
    grid.add_column("Method")
    grid.add_column("n", justify="right")
    for label, *_ in COLUMNS:
        grid.add_column(f"Recall (≤{budget})" if label == "Recall" else label, justify="right")
    for name, summary in metrics.items():
        failed = f" ({summary['failed']} failed)" if summary["failed"] else ""
        grid.add_row(name, f"{summary['questions']}{failed}", *(_cell(summary, key, fmt, scale) for _, key, fmt, scale in COLUMNS))
    return grid


def terminal_bars(metrics: dict[str, dict], width: int = 40) -> str:
    lines = []
    for name, summary in metrics.items():
        for label, key in (("recall", "recall"), ("F1", "f1")):
            value = summary.get(key)
            if value is None:
                lines.append(f"{name:>8} {label:>6} {'':<{width}}     -")
                continue
            lines.append(f"{name:>8} {label:>6} {'█' * round(value * width):<{width}} {value * 100:5.1f}")
    return "\n".join(lines)


def bar_chart(metrics: dict[str, dict], path: Path, title: str) -> Path:
    """Grouped bars (retrieval recall, answer F1) per method, drawn with Pillow."""
    from PIL import Image, ImageDraw, ImageFont

    names = list(metrics)
    width, height, margin = max(480, 160 * len(names) + 120), 360, 60
    image = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default()
    plot_bottom, plot_top = height - margin, margin
    draw.text((margin, 18), title, fill="black", font=font)
    for tick in range(0, 101, 20):
        y = plot_bottom - (plot_bottom - plot_top) * tick / 100
        draw.line([(margin - 5, y), (width - 20, y)], fill="#dddddd")
        draw.text((10, y - 6), f"{tick}", fill="black", font=font)
    colours = {"recall": "#4c78a8", "f1": "#f58518"}
    group = (width - margin - 40) / max(1, len(names))
    for i, name in enumerate(names):
        x0 = margin + 20 + i * group
        for j, key in enumerate(("recall", "f1")):
            value = metrics[name].get(key)
            left = x0 + j * 44
            if value is None:  # not applicable (NoR retrieves nothing)
                draw.text((left + 14, plot_bottom - 14), "-", fill="black", font=font)
                continue
            top = plot_bottom - (plot_bottom - plot_top) * value
            draw.rectangle([left, top, left + 38, plot_bottom], fill=colours[key])
            draw.text((left + 4, top - 14), f"{value * 100:.0f}", fill="black", font=font)
        draw.text((x0 + 10, plot_bottom + 8), name, fill="black", font=font)
    for j, (key, label) in enumerate((("recall", "retrieval recall"), ("f1", "answer F1"))):
        draw.rectangle([width - 170, 16 + j * 16, width - 160, 26 + j * 16], fill=colours[key])
        draw.text((width - 154, 14 + j * 16), label, fill="black", font=font)
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path)
    return path
