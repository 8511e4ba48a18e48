"""hf: models through transformers, offline. No real checkpoint (Flan-T5) can be downloaded
here, so the tests build tiny models with random weights and a word-level tokenizer trained on
the samples, save them to a folder exactly as `save_pretrained` does for real checkpoints, and
load them back through `--lm hf:PATH`: the loading, generation, stop and token-counting code
is the real one; only the weights are not trained."""

from __future__ import annotations

import json

import pytest

from conftest import SAMPLES

torch = pytest.importorskip("torch", reason="hf: models need torch (installed by scripts/setup.sh)")
transformers = pytest.importorskip(
    "transformers", reason="hf: models need transformers (installed by scripts/setup.sh)"
)

from mhindex.lm import load_lm  # noqa: E402
from mhindex.lm.base import LMError  # noqa: E402


def tiny_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    texts = [
        p["paragraph_text"]
        for line in (SAMPLES / "musique" / "musique_ans_v1.0_dev.sample.jsonl").read_text().splitlines()[:20]
        for p in json.loads(line)["paragraphs"]
    ]
    tokenizer = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.train_from_iterator(
        texts, trainers.WordLevelTrainer(vocab_size=2000, special_tokens=["<pad>", "</s>", "<unk>"])
    )
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, pad_token="<pad>", eos_token="</s>", unk_token="<unk>"
    )


@pytest.fixture(scope="module")
def t5_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-t5")
    tokenizer = tiny_tokenizer()
    torch.manual_seed(0)
    config = transformers.T5Config(
        vocab_size=len(tokenizer),
        d_model=32,
        d_ff=64,
        d_kv=16,
        num_layers=2,
        num_heads=2,
        pad_token_id=0,
        eos_token_id=1,
        decoder_start_token_id=0,
    )
    transformers.T5ForConditionalGeneration(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def gpt2_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-gpt2")
    tokenizer = tiny_tokenizer()
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        vocab_size=len(tokenizer), n_positions=512, n_embd=32, n_layer=2, n_head=2, eos_token_id=1, bos_token_id=1
    )
    transformers.GPT2LMHeadModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_seq2seq_folder_loads_offline_and_completes(t5_folder):
    model = load_lm(f"hf:{t5_folder}", cache=False)
    inner = model
    assert inner.seq2seq and inner.context_length == 6000
    first = model.complete("Q: What county is Stanley in ?\nA:", max_tokens=8)
    again = model.complete("Q: What county is Stanley in ?\nA:", max_tokens=8)
    assert first.text == again.text  # greedy
    assert first.completion_tokens == 8 and first.prompt_tokens == model.count_tokens(
        "Q: What county is Stanley in ?\nA:"
    )
    assert model.count_tokens("the county") == 2


def test_causal_folder_and_stop_sequences(gpt2_folder):
    model = load_lm(f"hf:{gpt2_folder}", cache=False)
    assert not model.seq2seq and model.context_length == 512
    full = model.complete("the county seat of", max_tokens=12)
    assert full.completion_tokens == 12 and full.finish_reason == "length"
    words = full.text.split()
    assert len(words) >= 2
    stopped = model.complete("the county seat of", max_tokens=12, stop=[" " + words[1]])
    assert stopped.text == full.text[: full.text.index(" " + words[1])]


def test_flan_style_is_chosen_for_seq2seq_models(t5_folder):
    from mhindex.methods.reader import resolve_reader, resolve_style
    from mhindex.methods.settings import ReaderSettings as Settings

    model = load_lm(f"hf:{t5_folder}", cache=False)
    style = resolve_style(Settings(), model)
    assert style == "flan_t5" and resolve_reader(Settings(), style, model) == "direct"  # the paper's choice for Flan-T5


def test_missing_folder_is_one_clear_error(tmp_path):
    with pytest.raises(LMError, match="cannot load a transformers model from .* without the network"):
        load_lm(f"hf:{tmp_path / 'nothing-here'}", cache=False)


def test_log_probabilities_and_conversations(t5_folder, gpt2_folder):
    for folder in (t5_folder, gpt2_folder):
        model = load_lm(f"hf:{folder}", cache=False)
        plain = model.complete("the county seat of", max_tokens=6)
        scored = model.complete("the county seat of", max_tokens=6, logprobs=True)
        assert scored.text == plain.text and plain.token_logprobs is None
        assert len(scored.token_logprobs) == 6 and all(lp <= 0 for _, lp in scored.token_logprobs)
        # Without a chat template the turns are read as a User:/Assistant: transcript.
        turns = [
            {"role": "user", "content": "the county"},
            {"role": "assistant", "content": "seat"},
            {"role": "user", "content": "of"},
        ]
        assert (
            model.chat(turns, max_tokens=4).text
            == model.complete("User: the county\n\nAssistant: seat\n\nUser: of\n\nAssistant:", max_tokens=4).text
        )


def test_stop_when_ends_generation_early(gpt2_folder):
    model = load_lm(f"hf:{gpt2_folder}", cache=False)
    whole = model.complete("the county seat of", max_tokens=12)

    def three_words(text: str) -> bool:
        return len(text.split()) >= 3

    early = model.complete("the county seat of", max_tokens=12, stop_when=three_words)
    assert whole.text.startswith(early.text) and len(early.text.split()) == 3
    assert early.completion_tokens < whole.completion_tokens and early.finish_reason == "stop_when"
