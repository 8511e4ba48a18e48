"""transformers models from a local folder (or a hub name already in the local cache):
seq2seq models such as Flan-T5, the IRCoT paper's open model, and causal models.

Nothing is fetched at run time: the hub is switched offline before transformers is imported.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Sequence
from typing import Any

from mhindex.lm.base import (
    Completion,
    LanguageModel,
    LMError,
    LMProvider,
    Messages,
    StopWhen,
    as_messages,
    cut_at_stop,
    tokens_within,
    transcript,
)


class TransformersModel(LanguageModel):
    def __init__(self, source: str, threads: int | None = None, context_length: int | None = None) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            import torch
            import transformers
            from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer
        except ImportError:
            raise LMError("hf: models need transformers and torch: pip install 'mhindex[transformers]'") from None
        try:
            config = AutoConfig.from_pretrained(source, local_files_only=True)
            self._tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=True)
            loader = AutoModelForSeq2SeqLM if config.is_encoder_decoder else AutoModelForCausalLM
            self._model = loader.from_pretrained(source, local_files_only=True)
        except (OSError, ValueError) as error:
            first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise LMError(f"cannot load a transformers model from {source} without the network: {first}") from None
        if threads:
            torch.set_num_threads(threads)
        self.threads = torch.get_num_threads()
        transformers.utils.logging.set_verbosity_error()
        transformers.utils.logging.disable_progress_bar()
        self._model.eval()
        self._torch = torch
        self._seq2seq = bool(config.is_encoder_decoder)
        self._parameters = sum(p.numel() for p in self._model.parameters())
        self.name = f"hf:{source}"
        limit = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
        if not limit and self._seq2seq:
            limit = 6000  # T5's relative positions have no hard limit; IRCoT fed Flan-T5 up to ~6k tokens
        self.context_length = context_length or int(limit or 2048)
        self._identity = f"hf:{os.path.abspath(source) if os.path.exists(source) else source}"

    @property
    def identity(self) -> str:
        return self._identity

    @property
    def parameters(self) -> int | None:
        return self._parameters

    @property
    def seq2seq(self) -> bool:
        return self._seq2seq

    def chat(
        self,
        messages: Messages,
        max_tokens: int = 256,
        stop: Sequence[str] = (),
        temperature: float = 0.0,
        logprobs: bool = False,
        stop_when: StopWhen | None = None,
        keep: int = 0,
        seed: int | None = None,
    ) -> Completion:
        """Through the tokenizer's chat template; a model without one (Flan-T5) reads the turns as
        "User:"/"Assistant:" lines, the way its instruction data looks."""
        prompt = self.chat_prompt(messages) or transcript(messages)
        return self.complete(prompt, max_tokens, stop, temperature, logprobs, stop_when, seed=seed)

    def chat_prompt(self, messages: Messages) -> str | None:
        if not getattr(self._tokenizer, "chat_template", None):
            return None
        made = self._tokenizer.apply_chat_template(as_messages(messages), tokenize=False, add_generation_prompt=True)
        return str(made)

    def complete(
        self,
        prompt: str,
        max_tokens: int = 256,
        stop: Sequence[str] = (),
        temperature: float = 0.0,
        logprobs: bool = False,
        stop_when: StopWhen | None = None,
        keep: int = 0,
        seed: int | None = None,
    ) -> Completion:
        started = time.perf_counter()
        inputs = self._tokenizer(prompt, return_tensors="pt", return_token_type_ids=False)
        prompt_tokens = int(inputs["input_ids"].shape[1])
        generate: dict[str, Any] = {"max_new_tokens": max_tokens, "do_sample": temperature > 0}
        if temperature > 0:
            generate["temperature"] = temperature
        if self._tokenizer.pad_token_id is None and self._tokenizer.eos_token_id is not None:
            generate["pad_token_id"] = self._tokenizer.eos_token_id
        if logprobs:
            generate |= {"output_scores": True, "return_dict_in_generate": True}
        if stop_when is not None:
            generate["stopping_criteria"] = self._stopping(stop_when, 0 if self.seq2seq else prompt_tokens)
        # A seeded sample draws from a generator of its own: the caller's (torch's global one) is left as it was.
        forked = self._torch.random.fork_rng(devices=[]) if seed is not None else contextlib.nullcontext()
        with forked, self._torch.inference_mode():
            if seed is not None:
                self._torch.manual_seed(seed)
            output: Any = self._model.generate(**inputs, **generate)
            sequences = output.sequences if logprobs else output
            scores = (
                self._model.compute_transition_scores(sequences, output.scores, normalize_logits=True)[0].tolist()
                if logprobs
                else []
            )
        new = sequences[0] if self.seq2seq else sequences[0][prompt_tokens:]
        if self.seq2seq:
            new = new[1:] if len(new) and int(new[0]) == self._model.config.decoder_start_token_id else new
        text = self._tokenizer.decode(new, skip_special_tokens=True)
        completion_tokens = int(
            (new != (self._tokenizer.pad_token_id if self._tokenizer.pad_token_id is not None else -1)).sum()
        )
        truncated = cut_at_stop(text, stop)
        pairs = [
            (self._tokenizer.decode([int(t)], skip_special_tokens=True), float(v))
            for t, v in zip(new[-len(scores) :] if scores else [], scores)
        ]
        return Completion(
            text=truncated,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            seconds=time.perf_counter() - started,
            prompt_tokens_evaluated=prompt_tokens,
            finish_reason="stop_when"
            if stop_when is not None and stop_when(text)
            else "stop"
            if truncated != text or completion_tokens < max_tokens
            else "length",
            token_logprobs=tokens_within(pairs, truncated) if logprobs else None,
        )

    def _stopping(self, stop_when: StopWhen, skip: int) -> Any:
        """transformers' hook for ending generation: decode what is new after each token."""
        from transformers import StoppingCriteria, StoppingCriteriaList

        tokenizer = self._tokenizer

        class Until(StoppingCriteria):
            def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> bool:
                return bool(stop_when(tokenizer.decode(input_ids[0][skip:], skip_special_tokens=True)))

        return StoppingCriteriaList([Until()])

    def count_tokens(self, text: str) -> int:
        return len(self._tokenizer(text, add_special_tokens=False)["input_ids"])


#: a transformers folder (or a cached hub name), offline
HF = LMProvider(
    "hf:PATH",
    lambda rest, request: TransformersModel(rest, threads=request.threads, context_length=request.context_length),
)
