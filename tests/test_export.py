"""nbkit.llm.export's completion of a Hugging Face model folder (issue 60): what KerasHub's export gets wrong or
leaves out written as trained, and the folder read back as transformers reads it. In-process, no torch: the
weights against transformers' own model are compared in Kaggle's lane (tests/matrix/test_smoke_runs.py)."""

from __future__ import annotations

import io
import json

import pytest
import sentencepiece
from transformers import AutoConfig, AutoTokenizer

from nbkit.errors import RunError
from nbkit.llm import export

TEXTS = [
    f"<start_of_turn>user\nhow many words: apple river {w}<end_of_turn>\n<start_of_turn>model\n<answer>{n}</answer>"
    for n, w in enumerate(["stone", "cloud green", "tree house old", "light dark blue fast"] * 8)
]
PROMPT = "<start_of_turn>user\nhow many words: apple river stone<end_of_turn>\n<start_of_turn>model\n"


def tokenizer_proto(gemma_shaped: bool = True) -> bytes:
    """A SentencePiece BPE model learned from TEXTS: as notebooks 10 and 11 learn theirs (Gemma's ids and special
    pieces, byte fallback, no dummy prefix), or as they did before issue 60 (<s>/</s>, bos 1 / eos 2)."""
    proto = io.BytesIO()
    shape = (
        dict(byte_fallback=True, **export.gemma_pieces(["<start_of_turn>", "<end_of_turn>", "<answer>", "</answer>"]))
        if gemma_shaped
        else dict(
            pad_id=0,
            bos_id=1,
            eos_id=2,
            unk_id=3,
            user_defined_symbols=["<start_of_turn>", "<end_of_turn>"],
            normalization_rule_name="identity",
            remove_extra_whitespaces=False,
        )
    )
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(TEXTS),
        model_writer=proto,
        model_type="BPE",
        vocab_size=300 if gemma_shaped else 60,
        hard_vocab_limit=False,
        minloglevel=2,
        **shape,
    )
    return proto.getvalue()


def keras_hub_0_31_folder(folder, proto: bytes):
    """What KerasHub 0.31.1's Gemma 3 export writes besides the weights (measured here): bos 1 / eos 2 whatever the
    tokenizer says, no RoPE scaling, no generation_config.json, a tokenizer_config.json without a chat template."""
    folder.mkdir()
    config = {
        "architectures": ["Gemma3ForCausalLM"],
        "model_type": "gemma3_text",
        "vocab_size": 300,
        "pad_token_id": 0,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "hidden_size": 32,
        "intermediate_size": 64,
        "head_dim": 16,
        "rope_theta": 1_000_000.0,
        "sliding_window": 64,
        "layer_types": ["sliding_attention", "full_attention"],
    }
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "GemmaTokenizer"}))
    (folder / "tokenizer.model").write_bytes(proto)
    return folder


def test_a_keras_hub_0_31_export_is_completed_and_reads_back_as_trained(tmp_path):
    proto = tokenizer_proto()
    folder = keras_hub_0_31_folder(tmp_path / "transformers", proto)
    rope = export.gemma3_rope(10_000.0, 1_000_000.0, 8.0)  # Gemma 3 4B's global factor
    said = export.write_for_transformers(folder, proto, rope, made_by="KerasHub 0.31.1")
    assert said == [
        "KerasHub 0.31.1's export wrote bos_token_id 1 -> 2: corrected",
        "KerasHub 0.31.1's export wrote eos_token_id 2 -> 1: corrected",
        "KerasHub 0.31.1's export wrote RoPE (local base, global base, global factor) (10000.0, 1000000.0, 1.0) -> "
        "(10000.0, 1000000.0, 8.0): corrected",
    ]
    config = AutoConfig.from_pretrained(folder)  # as transformers reads it
    assert (config.bos_token_id, config.eos_token_id, config.pad_token_id) == (2, 1, 0)
    assert config.rope_parameters["full_attention"]["factor"] == 8.0
    assert config.rope_parameters["sliding_attention"]["rope_theta"] == 10_000.0
    generation = json.loads((folder / "generation_config.json").read_text())
    end_of_turn = sentencepiece.SentencePieceProcessor(model_proto=proto).piece_to_id("<end_of_turn>")
    assert generation["eos_token_id"] == [1, end_of_turn] and end_of_turn == 6
    tokenizer = AutoTokenizer.from_pretrained(folder)
    turns = [{"role": "user", "content": " how many words: apple river stone\n"}]  # trimmed, as Gemma's template does
    assert tokenizer.apply_chat_template(turns, add_generation_prompt=True, tokenize=False) == "<bos>" + PROMPT
    system = [{"role": "system", "content": "Count."}, {"role": "user", "content": "how many words: apple"}]
    assert tokenizer.apply_chat_template(system, add_generation_prompt=True, tokenize=False) == (
        "<bos><start_of_turn>user\nCount.\n\nhow many words: apple<end_of_turn>\n<start_of_turn>model\n"
    )
    checked = export.check_for_transformers(folder, TEXTS, [(turns, "<bos>" + PROMPT)])
    assert "32 texts' ids and 1 chat prompts in transformers" in checked
    assert export.write_for_transformers(folder, proto, rope) == []  # written as trained: nothing more to say


def test_a_folder_that_would_load_otherwise_than_trained_is_refused(tmp_path):
    # The tokenizers notebooks 10 and 11 learned before issue 60 (a dummy prefix, <s> and </s>): transformers'
    # GemmaTokenizer adds <bos> and <eos> past the vocabulary and splits the text otherwise.
    old = tokenizer_proto(gemma_shaped=False)
    folder = keras_hub_0_31_folder(tmp_path / "old", old)
    export.write_for_transformers(folder, old)
    with pytest.raises(RunError, match="transformers' tokenizer splits '<start_of_turn>user") as refused:
        export.check_for_transformers(folder, TEXTS)
    assert "Nothing was published" in str(refused.value)
    proto = tokenizer_proto()
    folder = keras_hub_0_31_folder(tmp_path / "kept", proto)
    export.write_for_transformers(folder, proto)
    (folder / "tokenizer.model").write_bytes(old)  # a tokenizer other than the one the ids were written from
    with pytest.raises(RunError, match="config.json bos_token_id 2 where the tokenizer has 1"):
        export.check_for_transformers(folder, TEXTS)
    # A tokenizer without <end_of_turn>: a model trained with it cannot end its turn where transformers stops.
    no_turns = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(TEXTS), model_writer=no_turns, vocab_size=60, hard_vocab_limit=False, minloglevel=2
    )
    with pytest.raises(RunError, match="the tokenizer lacks <end_of_turn>, a <bos> or an <eos> piece"):
        export.write_for_transformers(keras_hub_0_31_folder(tmp_path / "no-turns", proto), no_turns.getvalue())
    # A template of the folder's own that gives other turns than the training prompt's is named.
    folder = keras_hub_0_31_folder(tmp_path / "template", proto)
    other = "{{ bos_token }}{% for m in messages %}{{ m['content'] }}{% endfor %}"
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": other}))
    export.write_for_transformers(folder, proto)  # the folder's own template kept
    turns = [{"role": "user", "content": "how many words: apple river stone"}]
    with pytest.raises(RunError, match="the chat template gives '<bos>how many words"):
        export.check_for_transformers(folder, TEXTS, [(turns, "<bos>" + PROMPT)])
