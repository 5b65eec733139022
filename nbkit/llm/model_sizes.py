"""A Gemma's sizes, one description that notebooks 10 and 11 read: from a KerasHub backbone's config (a preset's
config.json "config"), a Hugging Face config.json, or the sizes Tunix's ModelConfig takes, each of which names the
same size otherwise (KerasHub's hidden_dim is Hugging Face's hidden_size and Tunix's embed_dim). And the family
(Gemma, Gemma 2, 3 or 4) each of them describes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nbkit.errors import ParameterError

# Each size -> its name in (KerasHub's GemmaBackbone / Gemma3Backbone / Gemma4Backbone config, Hugging Face's
# config.json, Tunix's ModelConfig), in the order Hugging Face's Gemma configs list them.
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
# Gemma 4's own sizes, named alike (None: that naming has no such key; see _gemma4 for the rest).
_GEMMA4_NAMES = {
    "per_layer_width": ("hidden_size_per_layer_input", "hidden_size_per_layer_input", "per_layer_input_dim"),
    "per_layer_vocabulary": ("vocab_size_per_layer_input", "vocab_size_per_layer_input", None),
    "global_head_dim": ("global_head_dim", "global_head_dim", "global_key_size"),
    "global_kv_heads": ("num_global_key_value_heads", "num_global_key_value_heads", "num_global_kv_heads"),
    "experts": ("num_experts", "num_experts", "num_experts"),
    "expert_feed_forward": ("expert_intermediate_dim", "moe_intermediate_size", "expert_dim"),
    "experts_per_token": ("num_experts_per_token", "top_k_experts", "num_experts_per_tok"),
}
# The families, by KerasHub's backbone class and Hugging Face's model_type (Gemma 1 and 2 share KerasHub's class).
# Keys only Gemma 4's configs have (KerasHub's and Hugging Face's, then Tunix's).
_GEMMA4_ONLY = (
    "global_head_dim",
    "num_kv_shared_layers",
    "global_key_size",
    "frac_shared_layers",
    "per_layer_input_dim",
)
_BACKBONES = {"GemmaBackbone": "gemma", "Gemma3Backbone": "gemma3", "Gemma4Backbone": "gemma4"}
_MODEL_TYPES = {
    "gemma": "gemma",
    "gemma2": "gemma2",
    "gemma3": "gemma3",
    "gemma3_text": "gemma3",
    "gemma4": "gemma4",
    "gemma4_text": "gemma4",
}


def family(config: dict[str, Any]) -> str:
    """ "gemma", "gemma2", "gemma3" or "gemma4" of a KerasHub preset's config.json (its class_name), a Hugging Face
    config.json (its model_type), or the config of either's sizes alone (KerasHub's backbone config, Tunix's sizes
    with "family"), by the keys only that family has. Any other model is a ParameterError naming it."""
    if "class_name" in config or "model_type" in config:
        kind = config.get("class_name") or config.get("model_type")
        found = _BACKBONES.get(kind) or _MODEL_TYPES.get(kind)
        if found is None:
            raise ParameterError(
                f"The model is a {kind}, not a Gemma this notebook trains (Gemma, Gemma 2, 3 or 4: KerasHub's "
                f"GemmaBackbone, Gemma3Backbone or Gemma4Backbone; Hugging Face's model_type gemma, gemma2, "
                f"gemma3(_text) or gemma4(_text)). Give such a model."
            )
        if found == "gemma" and "class_name" in config:  # KerasHub's GemmaBackbone holds Gemma 1 and 2
            return family(config.get("config", {}))
        return found
    config = config.get("text_config", config)
    if "family" in config:
        return config["family"]
    if any(key in config for key in _GEMMA4_ONLY):
        return "gemma4"
    if "use_query_key_norm" in config:
        return "gemma3"
    soft_cap = config.get("final_logit_soft_cap") or config.get("final_logit_softcapping")
    return "gemma2" if soft_cap or config.get("use_post_ffw_norm") else "gemma"


@dataclass(frozen=True)
class Sizes:
    """A Gemma's text model (and any frozen vision encoder's parameters): `feed_forward` is one gate's width. Gemma 4
    adds per-layer embeddings (`per_layer_width` a layer for each of `per_layer_vocabulary` tokens), global layers
    (`global_layers`, their indices) with their own head size and K/V heads (one projection for both where
    `key_is_value`), trailing layers that reuse earlier ones' keys and values (`kv_shared_layers`; twice the
    feed-forward width where `double_wide`), and a mixture of experts beside the feed-forward (`experts`, each
    `expert_feed_forward` wide, `experts_per_token` of them used)."""

    vocabulary: int
    width: int
    feed_forward: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    query_key_norm: bool = False  # Gemma 3's and 4's query and key norms
    vision: int = 0  # a vision encoder's parameters (Gemma 3's SigLIP: frozen, whole on every chip)
    per_layer_width: int = 0
    per_layer_vocabulary: int = 0
    global_layers: tuple[int, ...] = ()  # Gemma 4's only: Gemma 3's global layers are sized as the others
    global_head_dim: int = 0
    global_kv_heads: int = 0
    key_is_value: bool = False
    kv_shared_layers: int = 0
    double_wide: bool = False
    experts: int = 0
    expert_feed_forward: int = 0
    experts_per_token: int = 0

    def attention(self, layer: int) -> tuple[int, int, int]:
        """(head size, K/V heads, K/V projections: 2, 1 where K=V, 0 in a KV-shared layer) of `layer`."""
        if layer in self.global_layers:
            key_value = 1 if self.key_is_value else 2
            heads = self.global_kv_heads if self.key_is_value else self.kv_heads
            size = self.global_head_dim
        else:
            key_value, heads, size = 2, self.kv_heads, self.head_dim
        return size, heads, 0 if layer >= self.layers - self.kv_shared_layers else key_value

    def layer_feed_forward(self, layer: int) -> int:
        shared = layer >= self.layers - self.kv_shared_layers
        return self.feed_forward * (2 if self.double_wide and shared else 1)

    @property
    def parameters(self) -> int:
        """The text model's: the embedding (tied to the logits), each layer's attention (query and output, the
        key and value projections it owns) and gated feed-forward kernels and its norms (4 of the width; query and
        key norms of its head size), the final norm. Gemma 4's layers add a scalar, the per-layer input's gate, up
        projection and norm, and the experts (three kernels each, a scale each), their router (a kernel and a scale
        of the width) and its three norms; its model adds the per-layer embedding table, its projection from the
        width and that projection's norm."""
        total = self.vocabulary * self.width + self.width
        gemma4 = self.per_layer_width or self.global_layers or self.experts
        for layer in range(self.layers):
            size, kv_heads, projections = self.attention(layer)
            total += self.width * size * (2 * self.heads + projections * kv_heads)
            total += 3 * self.width * self.layer_feed_forward(layer) + 4 * self.width
            total += size * (1 + (projections > 0)) if self.query_key_norm else 0
            if gemma4:
                total += 1 + (2 * self.width * self.per_layer_width + self.width) * bool(self.per_layer_width)
            if self.experts:
                total += self.experts * (3 * self.width * self.expert_feed_forward + 1)
                total += self.width * self.experts + 4 * self.width
        per_layer = self.layers * self.per_layer_width
        return total + (self.per_layer_vocabulary + self.width) * per_layer + self.per_layer_width


def from_config(config: dict[str, Any]) -> Sizes:
    """The sizes of a KerasHub backbone config (or a preset's whole config.json), a Hugging Face config.json (its
    text_config where it has one) or Tunix's ModelConfig sizes, told apart by the name of the vocabulary's size."""
    config = config.get("config", config) if "class_name" in config else config
    config = config.get("text_config", config)
    naming = next(i for i in (_KERAS_HUB, HUGGING_FACE, TUNIX) if NAMES["vocabulary"][i] in config)
    found = {size: config[names[naming]] for size, names in NAMES.items()}
    kind = family(config)
    if naming == _KERAS_HUB and kind in ("gemma", "gemma2"):
        found["feed_forward"] //= 2  # KerasHub's Gemma (1 and 2) gives both gates' width; Gemma 3 and 4 one gate's
    if kind == "gemma4":
        return Sizes(**found, query_key_norm=True, **_gemma4(config, naming, found["layers"], found["head_dim"]))
    return Sizes(**found, query_key_norm=kind == "gemma3", vision=_vision(config))


def _gemma4(config: dict[str, Any], naming: int, layers: int, head_dim: int) -> dict[str, Any]:
    """Gemma 4's own sizes in `naming`: which layers are global (layer_types; KerasHub's sliding_window_pattern,
    Tunix's attention_pattern repeated), how many trailing layers share K/V (Tunix: a fraction of the layers),
    whether K=V (KerasHub: wherever global layers have K/V heads of their own) and the MLP is double-wide."""
    found = {size: config.get(names[naming]) if names[naming] else None for size, names in _GEMMA4_NAMES.items()}
    found = {size: value or 0 for size, value in found.items()}
    if naming == TUNIX:
        pattern = [str(kind).rsplit(".", 1)[-1] for kind in config.get("attention_pattern") or ()]
        types = ["full" if pattern[i % len(pattern)] == "GLOBAL" else "sliding" for i in range(layers)]
        shared = layers - int(layers - config.get("frac_shared_layers", 0.0) * layers)  # as Tunix counts them
        key_is_value = config.get("k_eq_v_global", False)
        double_wide = bool(config.get("override_kv_shared_ffw_hidden"))
        found["global_head_dim"] = found["global_head_dim"] or 512  # Tunix's default global_key_size
        found["per_layer_vocabulary"] = config["num_embed"] if found["per_layer_width"] else 0
        moe = config.get("enable_moe", False)
    else:
        every = config.get("sliding_window_pattern", 6)
        types = config.get("layer_types") or ["full" if i % every == every - 1 else "sliding" for i in range(layers)]
        shared = config.get("num_kv_shared_layers", 0)
        if naming == HUGGING_FACE:
            key_is_value = config.get("attention_k_eq_v", False)
        else:
            key_is_value = config.get("num_global_key_value_heads") is not None
        double_wide = config.get("use_double_wide_mlp", False)
        found["global_head_dim"] = found["global_head_dim"] or head_dim
        vocabulary = config[NAMES["vocabulary"][naming]]
        found["per_layer_vocabulary"] = (found["per_layer_vocabulary"] or vocabulary) if found["per_layer_width"] else 0
        moe = config.get("enable_moe_block", False)
    if not moe:
        found.update(experts=0, expert_feed_forward=0, experts_per_token=0)
    found["global_kv_heads"] = found["global_kv_heads"] or config[NAMES["kv_heads"][naming]]
    global_layers = tuple(i for i, kind in enumerate(types) if str(kind).startswith("full"))
    return dict(
        found, global_layers=global_layers, key_is_value=key_is_value, kv_shared_layers=shared, double_wide=double_wide
    )


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


def _gemma4_text(layers: int, every: int, width: int, feed_forward: int, heads: int, kv_heads: int, **more: Any):
    """A Gemma 4 text_config as Hugging Face's config.json gives it (its global layers every `every`-th)."""
    types = ["full_attention" if i % every == every - 1 else "sliding_attention" for i in range(layers)]
    config = dict(model_type="gemma4_text", vocab_size=262144, hidden_size=width, intermediate_size=feed_forward)
    config.update(num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads, head_dim=256)
    return dict(config, global_head_dim=512, layer_types=types, final_logit_softcapping=30.0, **more)


# Gemma 4's text models (Hugging Face's config.json text_config; Tunix's gemma4 ModelConfig presets say the same),
# for plans made without the files.
GEMMA4_CONFIGS = {
    "Gemma 4 E2B": _gemma4_text(
        35,
        5,
        1536,
        6144,
        8,
        1,
        num_kv_shared_layers=20,
        use_double_wide_mlp=True,
        hidden_size_per_layer_input=256,
        vocab_size_per_layer_input=262144,
    ),
    "Gemma 4 E4B": _gemma4_text(
        42,
        6,
        2560,
        10240,
        8,
        2,
        num_kv_shared_layers=18,
        hidden_size_per_layer_input=256,
        vocab_size_per_layer_input=262144,
    ),
    "Gemma 4 26B-A4B": _gemma4_text(
        30,
        6,
        2816,
        2112,
        16,
        8,
        num_global_key_value_heads=2,
        attention_k_eq_v=True,
        enable_moe_block=True,
        num_experts=128,
        top_k_experts=8,
        moe_intermediate_size=704,
    ),
    "Gemma 4 31B": _gemma4_text(60, 6, 5376, 21504, 32, 16, num_global_key_value_heads=4, attention_k_eq_v=True),
}
