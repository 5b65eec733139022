"""Each Gemma family's chat turns, text only, as its own chat template writes them and notebooks 10 and 11 train them:
the markers that open and close a turn, and the Jinja template a Hugging Face folder carries (tokenizer_config.json's
chat_template) so that transformers and vLLM give the prompt the model was trained on, and the tokenizer files that
carry it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# Gemma, Gemma 2 and Gemma 3: <bos>, then each turn's text, trimmed, between <start_of_turn> and <end_of_turn> (the
# assistant's role is "model"), a system message before the first user turn's text with a blank line between, and the
# model's turn opened.
GEMMA = (
    "{{ bos_token }}"
    "{%- if messages[0]['role'] == 'system' -%}"
    "{%- set first = messages[0]['content'] + '\\n\\n' -%}{%- set turns = messages[1:] -%}"
    "{%- else -%}{%- set first = '' -%}{%- set turns = messages -%}{%- endif -%}"
    "{%- for message in turns -%}"
    "{%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}"
    "{{ '<start_of_turn>' + role + '\\n' + (first if loop.first else '') }}"
    "{{ message['content'] | trim + '<end_of_turn>\\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<start_of_turn>model\\n' }}{%- endif -%}"
)
# Gemma 4: <bos>, then each turn, a system one included, between <|turn>role and <turn|> (Google's template for
# gemma-4-*-it, text only and without thinking: `<|turn>user\n...<turn|>\n<|turn>model\n`; its end of turn <turn|> is
# id 106 in Gemma 4's vocabulary and, with <eos>, a stop token).
_GEMMA4 = (
    "{{ bos_token }}"
    "{%- for message in messages -%}"
    "{%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}"
    "{{ '<|turn>' + role + '\\n' + message['content'] | trim + '<turn|>\\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|turn>model\\n' }}{%- endif -%}"
)
_SPECIALS = ("bos", "eos", "pad", "unk")  # the tokens tokenizer_config.json names
# family -> (the piece that opens a turn, the one that ends it, the template)
TURNS = {
    "gemma": ("<start_of_turn>", "<end_of_turn>", GEMMA),
    "gemma2": ("<start_of_turn>", "<end_of_turn>", GEMMA),
    "gemma3": ("<start_of_turn>", "<end_of_turn>", GEMMA),
    "gemma4": ("<|turn>", "<turn|>", _GEMMA4),
}


def write_tokenizer_files(folder: Path, tokenizer: Any, template: str) -> list[str]:
    """tokenizer_config.json (the special tokens from the SentencePiece `tokenizer`, `template` unless the folder
    has a template of its own) and special_tokens_map.json. An added token the folder names at an id where the
    tokenizer has another piece (KerasHub 0.32 writes Gemma 4's <img> at the unknown piece's id) is dropped: it
    would rename that id in transformers. Returns what was dropped."""
    tokenizer_config_file = folder / "tokenizer_config.json"
    tokenizer_config = json.loads(tokenizer_config_file.read_text()) if tokenizer_config_file.is_file() else {}
    tokenizer_config.update(
        {
            "tokenizer_class": "GemmaTokenizer",
            **{f"{key}_token": tokenizer.id_to_piece(getattr(tokenizer, f"{key}_id")()) for key in _SPECIALS},
            "add_bos_token": True,
            "add_eos_token": False,
            "clean_up_tokenization_spaces": False,
        }
    )
    tokenizer_config.setdefault("chat_template", template)
    added = tokenizer_config.get("added_tokens_decoder", {})
    wrong = {
        i: t
        for i, t in added.items()
        if not 0 <= int(i) < len(tokenizer) or tokenizer.id_to_piece(int(i)) != t["content"]
    }
    if added:
        tokenizer_config["added_tokens_decoder"] = {i: t for i, t in added.items() if i not in wrong}
    tokenizer_config_file.write_text(json.dumps(tokenizer_config, indent=1))
    special = {f"{key}_token": tokenizer_config[f"{key}_token"] for key in _SPECIALS}
    (folder / "special_tokens_map.json").write_text(json.dumps(special, indent=1))
    return [
        f"tokenizer_config.json's added token {t['content']} at id {i} (not its piece there): dropped"
        for i, t in wrong.items()
    ]
