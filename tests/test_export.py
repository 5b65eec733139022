"""nbkit.llm.export's completion of a Hugging Face model folder (issue 60): what KerasHub's export gets wrong or
leaves out written as trained, and the folder read back as transformers reads it. In-process, no torch: the
weights against transformers' own model are compared in Kaggle's lane (tests/matrix/test_smoke_runs.py)."""

from __future__ import annotations

import io
import json

import numpy as np
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
    rope = export._gemma3_rope(10_000.0, 1_000_000.0, 8.0)  # Gemma 3 4B's global factor
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


# A tiny Gemma 4 as notebook 10 builds one (6 layers: sliding, sliding, global, then 3 sharing their keys and values,
# the double-wide MLP there, per-layer embeddings, a global head size of its own, partial RoPE on the global layers,
# a final soft cap), its norms perturbed so that a norm read wrong shows; with K=V on the global layers or not.
TURNS4 = [
    f"<|turn>user\nhow many words: apple river {w}<turn|>\n<|turn>model\n<answer>{n}</answer><turn|>"
    for n, w in enumerate(["stone", "cloud green", "tree house old", "light dark blue fast"] * 8)
]
PROMPT4 = "<|turn>user\nhow many words: apple river stone<turn|>\n<|turn>model\n"


def keras_hub_gemma4_export(folder, key_is_value: bool):
    """(KerasHub 0.32's export of the tiny Gemma 4 in `folder`, its tokenizer's proto, the ids of TURNS4[3] and
    KerasHub's logits on them), the export as KerasHub writes it."""
    import keras
    import keras_hub

    proto = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(TURNS4), model_writer=proto, model_type="BPE", vocab_size=80, hard_vocab_limit=False,
        minloglevel=2, **export.gemma_pieces(["<|turn>", "<turn|>", "\n", "<answer>", "</answer>"]),
    )  # fmt: skip
    tokenizer = keras_hub.models.Gemma4Tokenizer(proto.getvalue(), has_vision_tokens=False, has_video_tokens=False)
    keras.utils.set_random_seed(0)
    backbone = keras_hub.models.Gemma4Backbone(
        vocabulary_size=tokenizer.vocabulary_size(), image_size=896, num_layers=6, num_query_heads=2,
        num_key_value_heads=1, hidden_dim=32, intermediate_dim=64, head_dim=8, global_head_dim=16,
        sliding_window_size=8, sliding_window_pattern=3, final_logit_soft_cap=30.0,
        global_rope_partial_rotary_factor=0.25, num_kv_shared_layers=3, hidden_size_per_layer_input=8,
        use_double_wide_mlp=True, num_global_key_value_heads=1 if key_is_value else None, vision_encoder=None,
        dtype="float32",
    )  # fmt: skip
    rng = np.random.default_rng(1)
    for weight in backbone.weights:
        if "norm" in weight.path or "scalar" in weight.path:
            weight.assign(np.asarray(weight) + rng.normal(0, 0.3, weight.shape).astype("float32"))
    preprocessor = keras_hub.models.Gemma4CausalLMPreprocessor(tokenizer, sequence_length=40)
    keras_hub.models.Gemma4CausalLM(backbone=backbone, preprocessor=preprocessor).export_to_transformers(str(folder))
    ids = np.array([[2, *sentencepiece.SentencePieceProcessor(model_proto=proto.getvalue()).encode(TURNS4[3])]])
    inputs = {"token_ids": ids, "padding_mask": np.ones_like(ids, bool), "position_ids": np.arange(ids.shape[1])[None]}
    logits = np.asarray(backbone.token_embedding(backbone(inputs), reverse=True))
    return proto.getvalue(), ids, logits


@pytest.mark.parametrize("key_is_value", [False, True])
def test_a_keras_hub_gemma4_export_is_completed_and_tunix_computes_what_keras_hub_computed(tmp_path, key_is_value):
    # Issue 59: KerasHub 0.32's Gemma 4 config.json lacks the proportional RoPE and K=V (transformers then computes
    # another model) and names Gemma4TextModel; its weights, named model.*, do not load in Tunix 0.1.7 (notebook 11).
    import jax.numpy as jnp
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    from tunix.models.gemma4 import model as gemma4
    from tunix.models.gemma4 import params_safetensors

    folder = tmp_path / "transformers"
    proto, ids, keras_logits = keras_hub_gemma4_export(folder, key_is_value)
    said = export.write_for_transformers(folder, proto, made_by="KerasHub 0.32.0")
    assert said == [
        "KerasHub 0.32.0's export wrote architectures ['Gemma4TextModel'] -> ['Gemma4ForCausalLM']: corrected",
        *(
            ["KerasHub 0.32.0's export wrote attention_k_eq_v None -> True (as the weights say): corrected"]
            * key_is_value
        ),
        "KerasHub 0.32.0's export wrote rope_parameters' full_attention rope_type None -> 'proportional': corrected",
        "KerasHub 0.32.0's export wrote rope_parameters' sliding_attention rope_type None -> 'default': corrected",
        "KerasHub 0.32.0's export wrote weights named model.* -> * (as Tunix 0.1.7 reads them): corrected",
        f"KerasHub 0.32.0's export wrote {9 - key_is_value} unused key/value weights of the KV-shared layers added as "
        f"zeros (Tunix 0.1.7's): corrected",
        "KerasHub 0.32.0's export wrote tokenizer_config.json's added token <img> at id 3 (not its piece there): "
        "dropped: corrected",
    ]
    config = AutoConfig.from_pretrained(folder)
    assert MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[config.model_type] == config.architectures[0] == "Gemma4ForCausalLM"
    assert config.rope_parameters["full_attention"] == {
        "rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1_000_000.0,
    }  # fmt: skip
    assert config.attention_k_eq_v is key_is_value and (config.bos_token_id, config.eos_token_id) == (2, 1)
    end_of_turn = sentencepiece.SentencePieceProcessor(model_proto=proto).piece_to_id("<turn|>")
    assert json.loads((folder / "generation_config.json").read_text())["eos_token_id"] == [1, end_of_turn]
    tokenizer = AutoTokenizer.from_pretrained(folder)
    system = [{"role": "system", "content": "Count."}, {"role": "user", "content": "how many words: apple"}]
    assert tokenizer.apply_chat_template(system, add_generation_prompt=True, tokenize=False) == (
        "<bos><|turn>system\nCount.<turn|>\n<|turn>user\nhow many words: apple<turn|>\n<|turn>model\n"
    )
    turns = [{"role": "user", "content": "how many words: apple river stone"}]
    checked = export.check_for_transformers(folder, TURNS4, [(turns, "<bos>" + PROMPT4)])
    assert "Gemma 4's config and weight names" in checked and "32 texts' ids and 1 chat prompts" in checked
    assert export.write_for_transformers(folder, proto) == []  # complete: nothing more to say
    # Tunix 0.1.7 loads the folder (notebook 11's route) and computes what KerasHub computed, past the window.
    local, full = gemma4.AttentionType.LOCAL_SLIDING, gemma4.AttentionType.GLOBAL
    sizes = dict(num_layers=6, num_embed=config.vocab_size, embed_dim=32, hidden_dim=64, num_heads=2, head_dim=8)
    tunix_config = gemma4.ModelConfig(
        **sizes, num_kv_heads=1, num_global_kv_heads=1, k_eq_v_global=key_is_value, global_key_size=16,
        sliding_window_size=8, per_layer_input_dim=8, attention_pattern=(local, local, full), frac_shared_layers=0.5,
        override_kv_shared_ffw_hidden=128, param_dtype=jnp.float32, dtype=jnp.float32,
    )  # fmt: skip
    model = params_safetensors.create_model_from_safe_tensors(str(folder), tunix_config, None)
    length = ids.shape[1]
    tunix_logits, _ = model(ids, np.arange(length)[None], None, np.tril(np.ones((length, length), bool))[None])
    assert length > 16 and np.abs(np.asarray(tunix_logits) - keras_logits).max() < 1e-4 * np.abs(keras_logits).max()
    # A folder that would be read otherwise is named: K=V said where the weights have values of their own.
    written = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**written, "attention_k_eq_v": not key_is_value}))
    with pytest.raises(RunError, match=f"config.json's attention_k_eq_v {not key_is_value} where the weights say"):
        export.check_for_transformers(folder, TURNS4[:1])
