"""A Gemma's sizes, one description that notebooks 10 and 11 read: from a KerasHub backbone's config (a preset's
config.json "config"), a Hugging Face config.json, or the sizes Tunix's ModelConfig takes, each of which names the
same size otherwise (KerasHub's hidden_dim is Hugging Face's hidden_size and Tunix's embed_dim)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Each size -> its name in (KerasHub's GemmaBackbone / Gemma3Backbone config, Hugging Face's config.json, Tunix's
# ModelConfig), in the order Hugging Face's Gemma configs list them.
NAMES = {
    "vocabulary": ("vocabulary_size", "vocab_size", "num_embed"),
    "width": ("hidden_dim", "hidden_size", "embed_dim"),
    "feed_forward": ("intermediate_dim", "intermediate_size", "hidden_dim"),
    "layers": ("num_layers", "num_hidden_layers", "num_layers"),
    "heads": ("num_query_heads", "num_attention_heads", "num_heads"),
    "kv_heads": ("num_key_value_heads", "num_key_value_heads", "num_kv_heads"),
    "head_dim": ("head_dim", "head_dim", "head_dim"),
}
_KERAS_HUB, HUGGING_FACE, TUNIX = range(3)  # a naming's place in NAMES' tuples


@dataclass(frozen=True)
class Sizes:
    """A Gemma's text model (and any frozen vision encoder's parameters): `feed_forward` is one gate's width."""

    vocabulary: int
    width: int
    feed_forward: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    query_key_norm: bool = False  # Gemma 3's query and key norms
    vision: int = 0  # a vision encoder's parameters (Gemma 3's SigLIP: frozen, whole on every chip)

    @property
    def parameters(self) -> int:
        """The text model's: the embedding (tied to the logits), each layer's attention and gated feed-forward
        kernels and its norms (4 of the width; Gemma 3's query and key norms 2 of head_dim), the final norm."""
        attention = 2 * self.width * self.head_dim * (self.heads + self.kv_heads)  # q, k, v and the output
        norms = 4 * self.width + 2 * self.head_dim * self.query_key_norm
        layer = attention + 3 * self.width * self.feed_forward + norms
        return self.vocabulary * self.width + self.layers * layer + self.width


def from_config(config: dict[str, Any]) -> Sizes:
    """The sizes of a KerasHub backbone config, a Hugging Face config.json (its text_config where it has one) or
    Tunix's ModelConfig sizes, told apart by the name of the vocabulary's size."""
    config = config.get("text_config", config)
    naming = next(i for i in (_KERAS_HUB, HUGGING_FACE, TUNIX) if NAMES["vocabulary"][i] in config)
    found = {size: config[names[naming]] for size, names in NAMES.items()}
    if naming == _KERAS_HUB and "use_query_key_norm" not in config:
        found["feed_forward"] //= 2  # KerasHub's Gemma (1 and 2) gives both gates' width; Gemma 3 one gate's
    gemma3 = "use_query_key_norm" in config or str(config.get("model_type", "")).startswith("gemma3")
    return Sizes(**found, query_key_norm=gemma3, vision=_vision(config))


def rope_settings(config: dict[str, Any]) -> tuple[float, float, float]:
    """(local base frequency, global base frequency, global scaling factor) of a Gemma 3 config.json as transformers 5
    reads it (rope_parameters, else the older rope_local_base_freq, rope_theta and rope_scaling, else its defaults):
    what Tunix must be given, and what the kit's exports must say."""
    rope = config.get("rope_parameters") or {}
    local = rope.get("sliding_attention", {}).get("rope_theta") or config.get("rope_local_base_freq", 10_000)
    full = rope.get("full_attention", {})
    factor = full.get("factor") or (config.get("rope_scaling") or {}).get("factor", 1.0)
    return float(local), float(full.get("rope_theta") or config.get("rope_theta", 1_000_000)), float(factor)


def _vision(config: dict[str, Any]) -> int:
    """The parameters of a KerasHub Gemma 3's SigLIP encoder: its layers (attention 4 w^2, MLP 2 w x intermediate),
    patch and position embeddings, and the projection into the text model's width; 0 without one."""
    vision = (config.get("vision_encoder") or {}).get("config")
    if not vision:
        return 0
    width, patch = vision["hidden_dim"], vision["patch_size"]
    layers = width * (vision["num_layers"] * (4 * width + 2 * vision["intermediate_dim"]) + 3 * patch**2)
    return layers + width * ((vision["image_size"] // patch) ** 2 + config["hidden_dim"])


# KerasHub's Gemma 3 presets' text models (config.json's "config"), for plans made without the files:
# (layers, query heads, key/value heads, hidden, intermediate); vocabulary 262,144 and head_dim 256 in all.
GEMMA3_CONFIGS = {
    f"Gemma 3 {name}": dict(
        zip(("num_layers", "num_query_heads", "num_key_value_heads", "hidden_dim", "intermediate_dim"), sizes),
        vocabulary_size=262144,
        head_dim=256,
        use_query_key_norm=True,
    )
    for name, sizes in {
        "1B": (26, 4, 1, 1152, 6912),
        "4B": (34, 8, 4, 2560, 10240),
        "12B": (48, 16, 8, 3840, 15360),
    }.items()
}
