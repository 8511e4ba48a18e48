"""The methods' hyperparameters, with the IRCoT paper's values as defaults."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Settings:
    # Paragraphs per retrieval. IRCoT tunes K in {2,4,6,8} (OneR: up to 15) per dataset on dev;
    # None takes the method's default (ircot 4, oner 15).
    k: int | None = None
    max_steps: int = 8  # reasoning steps before IRCoT gives up on reaching "answer is:"
    max_paragraphs: int = 15  # IRCoT's paragraph budget
    distractors: int = 2  # M: distractors beside the gold paragraphs in each demonstration (1, 2 or 3)
    reader: str = "auto"  # direct | cot; auto: direct for flan_t5-style prompts, cot otherwise (the paper's best)
    style: str = "auto"  # codex | flan_t5; auto: flan_t5 for seq2seq transformers models
    demos_from: str | None = None  # demonstration set; default: the corpus's dataset, else musique
    max_demos: int | None = None  # at most this many demonstrations (default: as many as fit)
    demo_budget: int | None = None  # tokens for demonstrations (default: half the context)
    max_paragraph_words: int = 350  # long paragraphs are cut for the prompt
    step_tokens: int = 100  # tokens for one reasoning step
    answer_tokens: int = 100  # tokens for the reader's answer
    iirc_pages: int = 2  # IIRC: pages the model is asked to name before retrieval

    def __post_init__(self) -> None:
        from mhindex.errors import UsageError

        if self.reader not in ("auto", "direct", "cot"):
            raise UsageError(f"--reader must be direct, cot or auto, not {self.reader!r}")
        if self.style not in ("auto", "codex", "flan_t5"):
            raise UsageError(f"--prompt-style must be codex, flan_t5 or auto, not {self.style!r}")
        if self.distractors not in (1, 2, 3):
            raise UsageError("--distractors must be 1, 2 or 3 (the released demonstration sets)")
        for name in ("k", "max_steps", "max_paragraphs", "max_paragraph_words", "step_tokens", "answer_tokens"):
            value = getattr(self, name)
            if value is not None and value < 1:
                flag = "-k" if name == "k" else f"--{name.replace('_', '-')}"
                raise UsageError(f"{flag} must be at least 1")
