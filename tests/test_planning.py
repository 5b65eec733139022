"""The mesh and the one memory plan of notebooks 10 (fine-tuning through KerasHub) and 11 (GRPO through Tunix), from
a model's sizes (`nbkit.llm.model_sizes`), against figures worked by hand."""

from __future__ import annotations

import json

import pytest
from conftest import REPO

from nbkit.errors import DataError, ParameterError
from nbkit.llm import model_sizes, planning

GEMMA3 = {"1b": model_sizes.GEMMA3_CONFIGS["Gemma 3 1B"], "4b": model_sizes.GEMMA3_CONFIGS["Gemma 3 4B"]}
PARTS = ("weights", "trained state", "activations")
TINY = dict(num_layers=2, num_embed=128, embed_dim=64, hidden_dim=128, num_heads=4, head_dim=16, num_kv_heads=1)


def fine_tuning(config, mesh, sequence_length, per_replica_batch, rank, targets=("query", "value"), **given):
    """Notebook 10's plan of a KerasHub `config` on a v5e-8 (8 chips of 15.75 GiB) unless `given` says otherwise."""
    given = {"devices": 8, "chip_gib": 15.75, **given}
    sizes = model_sizes.from_config(config)
    return planning.memory_plan(
        sizes, given["devices"], mesh, per_replica_batch, sequence_length, rank, targets, chip_gib=given["chip_gib"]
    )


def grpo(config, rank, rows, tokens, mesh="auto", weight_bytes=2, chip_gib=15.75):
    """Notebook 11's plan on 8 chips: the mesh as it picks it, a step's rows split over every device."""
    sizes = model_sizes.from_config(config)
    fsdp, tp = planning.pick_mesh(sizes, 8, rows, mesh)
    return planning.memory_plan(sizes, 8, (fsdp, tp), rows / 8, tokens, rank, (), weight_bytes, chip_gib, grpo=True)


# The two cases (61, item 3), worked by hand from the configs (not the code's output); bytes, exactly.
# Gemma 3 1B fine-tuned (KerasHub's preset config: V 262,144, h 1152, i 6912 one gate's width, L 26, nq 4, nkv 1,
# d 256), LoRA rank 4 on query and value, bfloat16, SEQUENCE_LENGTH 256, PER_REPLICA_BATCH 2, MESH auto on 8 chips:
#   parameters: V h = 301,989,888; a layer: attention 2 h d (nq + nkv) = 2*1152*256*5 = 2,949,120 (q and out
#     1,179,648 each, k and v 294,912 each), feed-forward 3 h i = 23,887,872, norms 4h + 2d (Gemma 3's query and
#     key norms) = 5,120 -> 26,842,112; x 26 = 697,894,912; + the final norm 1,152 -> 999,885,952
#   weights: x 2 bytes, data parallel (whole on each chip) = 1,999,771,904 bytes (1.862 GiB)
#   LoRA (KerasHub: A holds every axis but the last): q 4*(4*1152 + 256) = 19,456, v 4*(1152 + 256) = 5,632;
#     x 26 = 652,288 parameters x 16 bytes (float32 weight, gradient, AdamW's two moments) = 10,436,608 (9.95 MiB)
#   activations a token: a layer 6h 6,912 + 4i 27,648 + 3 (nq + nkv) d 3,840 + 3 nq x 256 3,072 = 41,472 values x
#     2 bytes x 26 = 2,156,544; logits V x (2 + 4 + 4) = 2,621,440 -> 4,777,984 bytes; x 2 x 256 tokens =
#     2,446,327,808 (2.278 GiB)
#   total 4,456,536,320 bytes (4.150 GiB) of 15.75 GiB: fits, data parallel.
# Gemma 2 2B by GRPO (Hugging Face's config.json: V 256,000, h 2304, i 9216, L 26, nq 8, nkv 4, d 256), LoRA rank 64
# on every kernel, bfloat16, BATCH_SIZE 4 x NUM_GENERATIONS 4 = 16 rows of 256 + 768 = 1,024 tokens, on 8 chips:
#   mesh: tp 4 first: 256,000, 8 heads, 9216 and 4 kv heads divide by 4, 2304 by 2 x 4, 16 rows by 2 -> 2 x 4
#   parameters: V h = 589,824,000; a layer: attention 2*2304*256*12 = 14,155,776, feed-forward 3*2304*9216 =
#     63,700,992, norms 4h = 9,216 -> 77,865,984; x 26 = 2,024,515,584; + 2,304 -> 2,614,341,888
#   weights: x 2 bytes / 8 chips (Tunix's FSDP splits every array over every device) = 653,585,472 (0.609 GiB)
#   LoRA (qwix: A holds the contracted axes; k and v one kernel): q 2304 + 8*256 = 4,352, kv 2304 + 2*4*256 =
#     4,352, out 8*256 + 2304 = 4,352, gate, up and down 2304 + 9216 = 11,520 each -> 47,616 x 64 x 26 =
#     79,233,024 parameters x 16 bytes / 8 = 158,466,048 (151.1 MiB); the reference: the base itself, 0
#   KV cache: 16 / 8 = 2 rows a chip x 1,024 tokens x 26 layers x 2 (k, v) x 4 heads x 256 x 2 bytes = 218,103,808
#     (208.0 MiB)
#   activations a token: a layer 6h 13,824 + 4i 36,864 + 3*12*256 9,216 + 3*8*1,024 24,576 = 84,480 x 2 x 26 =
#     4,392,960; logits 256,000 x 10 = 2,560,000 -> 6,952,960 bytes; x 2 rows x 1,024 = 14,239,662,080 (13.26 GiB)
#   total 15,269,817,408 bytes (14.22 GiB): over 90% of 15.75 GiB (14.175) by 0.05 GiB; 256 + 512 tokens fit.
def test_one_memory_plan_for_gemma_3_1b_fine_tuning_and_gemma_2_2b_grpo_as_worked_by_hand():
    one = fine_tuning(GEMMA3["1b"], None, 256, 2, 4)
    assert one.parameters == 999_885_952 and one.trained == 652_288 and one.mesh == (8, 1) and one.fits
    assert one.parts == {"weights": 1_999_771_904, "trained state": 10_436_608, "activations": 2_446_327_808}
    assert one.total == 4_456_536_320
    two_b = {"model_type": "gemma2", "vocab_size": 256000, "hidden_size": 2304, "intermediate_size": 9216}
    two_b.update(num_hidden_layers=26, num_attention_heads=8, num_key_value_heads=4, head_dim=256)
    two = grpo(two_b, 64, 4 * 4, 256 + 768)
    assert two.parameters == 2_614_341_888 and two.trained == 79_233_024 and two.mesh == (2, 4)
    assert two.parts == {
        "weights": 653_585_472,
        "trained state": 158_466_048,
        "reference": 0,
        "KV cache": 218_103_808,
        "activations": 14_239_662_080,
    }
    assert two.total == 15_269_817_408 and not two.fits
    assert "the activations the most (13.26 GiB). Lower BATCH_SIZE, NUM_GENERATIONS" in two.describe()
    assert grpo(two_b, 64, 4 * 4, 256 + 512).fits
    # The same sizes, however they are named: KerasHub's config (Gemma 2's intermediate_dim is both gates' width)
    # and Tunix's ModelConfig.
    keras_hub = dict(vocabulary_size=256000, hidden_dim=2304, intermediate_dim=2 * 9216, num_layers=26)
    keras_hub.update(num_query_heads=8, num_key_value_heads=4, head_dim=256)
    tunix = dict(num_embed=256000, embed_dim=2304, hidden_dim=9216, num_layers=26, num_heads=8, num_kv_heads=4)
    assert model_sizes.from_config(keras_hub) == model_sizes.from_config(two_b)
    assert model_sizes.from_config(dict(tunix, head_dim=256)) == model_sizes.from_config(two_b)


# Hand-worked memory of Gemma 3 with LoRA on q and v, rank 16, SEQUENCE_LENGTH 256, 1 pair a chip (the notebook's
# defaults), data parallel on a v5e-8 (15.75 GiB a chip), from the configs (hidden h, intermediate i, heads nq/nkv,
# head_dim d = 256, layers L, vocabulary V = 262,144), worked by hand (not the code's output):
# 1B (h 1152, i 6912, nq 4, nkv 1, L 26):
#   weights: V h = 301,989,888; a layer: q 4*1152*256 = 1,179,648, k = v = 294,912, out 1,179,648, two gates
#     2 * 1152*6912 = 15,925,248, ffw_linear 7,962,624 -> 26,836,992 (+ norms ~7k); 26 layers 697,761,792 (+180k);
#     ~999.9 M parameters x 2 bytes (bfloat16) = 1,999.8 MB = 1.862 GiB
#   LoRA: q 16*(4*1152 + 256) = 77,824, v 16*(1152 + 256) = 22,528; x 26 = 2,609,152 parameters x 16 bytes
#     (float32 weight, gradient, AdamW's two moments) = 41,746,432 bytes = 39.8 MiB
#   activations a token and layer, bf16: 6h = 6,912; 4i = 27,648 (two gates, gelu, product); 3 (nq + nkv) d =
#     3,840 (q k v, after norm and RoPE, attention's result); 3 nq x 256 = 3,072 (attention weights, float32
#     + bf16) -> 41,472 values x 2 bytes = 82,944; x 26 layers x 256 tokens = 552,075,264; logits 256 V x (2 + 4
#     + 4) bytes (bf16, the loss' float32, its gradient) = 671,088,640 -> 1,223,163,904 bytes = 1.139 GiB
#   total ~3.04 GiB of 15.75: fits one chip.
# 4B (h 2560, i 10240, nq 8, nkv 4, L 34):
#   weights: V h = 671,088,640; a layer: q 5,242,880, k = v = 2,621,440, out 5,242,880, gates 52,428,800,
#     ffw_linear 26,214,400 -> 94,371,840 (+ norms); 34 layers 3,208,642,560 -> ~3,880 M x 2 = 7.227 GiB
#   LoRA: q 16*(8*2560 + 256) = 331,776, v 16*(4*2560 + 256) = 167,936; x 34 = 16,990,208 x 16 = 259.3 MiB
#   activations: 6h 15,360 + 4i 40,960 + 3*12*256 9,216 + 3*8*256 6,144 = 71,680 x 2 = 143,360 bytes; x 34 x 256
#     = 1,247,805,440; logits 671,088,640 -> 1,918,894,080 bytes = 1.787 GiB
#   total ~9.27 GiB of 15.75 (90%: 14.18): fits one chip. The introduction's "a 4B model does not fit a chip" was
#   the wrong side; d3b5fd8's plan said 8.76 GiB (its activations 1.28 GiB: 12h + 3i + scores, logits once).
HAND_GIB = {"1b": (1.862, 39.8 / 1024, 1.139, 3.041), "4b": (7.227, 259.3 / 1024, 1.787, 9.268)}


@pytest.mark.parametrize("size", ["1b", "4b"])
def test_the_memory_plan_against_a_figure_worked_by_hand(size):
    plan = fine_tuning(GEMMA3[size], None, 256, 1, 16)
    found = [plan.parts[name] / 2**30 for name in PARTS] + [plan.total / 2**30]
    assert found == pytest.approx(HAND_GIB[size], rel=2e-3) and plan.mesh == (8, 1) and plan.fits
    source = (REPO / "notebooks" / "10_llm_finetune.py").read_text()
    assert "a 4B model does not" not in source and "4B (7.2 GiB of weights) fit one chip" in source


def test_the_memory_plan_on_a_v5e_8():
    # 4B at 512 tokens x 2 a chip: activations 2 x 512 x (34 x 155,648 + 10 V) bytes = 7.55 GiB beside 7.23 GiB of
    # weights do not fit one chip; split over 8 its weights take 0.90 GiB a chip.
    four = fine_tuning(GEMMA3["4b"], None, 512, 2, 8)
    assert four.mesh == (1, 8) and four.fits and 3.7e9 < four.parameters < 4.1e9
    assert four.parts["weights"] == pytest.approx(four.parameters * 2 / 8)
    too_long = fine_tuning(GEMMA3["4b"], (1, 8), 8192, 1, 8)
    assert not too_long.fits and "the activations the most" in too_long.describe()
    assert "a shorter SEQUENCE_LENGTH (now 8192)" in too_long.describe()
    assert fine_tuning(
        GEMMA3["4b"], (1, 8), 8192, 1, 8, chip_gib=None
    ).fits  # a CPU: the memory is unknown, not checked
    assert planning.parse_mesh("2x4", 8) == (2, 4) and planning.parse_mesh("data", 8) == (8, 1)
    with pytest.raises(ParameterError, match="MESH='3x3'"):
        planning.parse_mesh("3x3", 8)
    # Sweep of issue 59, case 12: on one CPU device it suggested '2x0'; now it says how to get 8.
    with pytest.raises(
        ParameterError, match=r"the 1 devices here \(one device: on a CPU, SIMULATE_DEVICES=8 .*'1x1'\)"
    ):
        planning.parse_mesh("2x4", 1)


def test_the_plan_counts_lora_as_laid_out_and_names_what_does_not_fit():
    # Item 22 of issue 50: d3b5fd8 counted LoRA's state whole on every chip and advised a smaller preset or
    # MESH='1x8', not LORA_RANK. 1B, rank 8 on q and v, 1x8: per layer q's A 4*1152*8 / 8 = 4,608 and B 8*256 =
    # 2,048, v's A 1152*8 / 8 = 1,152 and B 2,048 -> 9,856 x 26 layers x 16 bytes = 4,100,096 bytes a chip.
    assert fine_tuning(GEMMA3["1b"], (1, 8), 256, 1, 8).parts["trained state"] == 4_100_096
    every = ["query", "key", "value", "attention_output", "ffw_gating", "ffw_gating_2", "ffw_linear"]
    big = fine_tuning(GEMMA3["4b"], (8, 1), 256, 1, 255, every)
    assert (
        not big.fits
        and "the trained state the most" in big.describe()
        and "a smaller LORA_RANK (now 255)" in big.describe()
    )
    assert fine_tuning(GEMMA3["4b"], (1, 8), 256, 1, 255, every).fits  # split 8 ways


def test_a_lora_rank_or_a_model_axis_the_model_cannot_take_is_refused_before_the_build():
    # Items 8 and 23 of issue 50: on d3b5fd8 rank 1000 on a hidden size of 64 trained 2.27 M LoRA parameters
    # (exact match 0), and a model axis of 3 met a raw IndivisibleError at the build.
    tiny = dict(num_layers=2, num_query_heads=4, num_key_value_heads=1, hidden_dim=64, intermediate_dim=128)
    tiny.update(head_dim=32, vocabulary_size=200, use_query_key_norm=True)
    with pytest.raises(
        ParameterError,
        match=r"LORA_RANK=1000 is at or above 32, the smallest dimension of the query kernels \(256 x 32\)",
    ):
        fine_tuning(tiny, None, 32, 2, 1000, chip_gib=None)
    with pytest.raises(ParameterError, match=r"LORA_RANK=64 is at or above 64, .* ffw_linear kernels \(128 x 64\)"):
        fine_tuning(tiny, None, 32, 2, 64, ["ffw_linear"], chip_gib=None)
    assert fine_tuning(
        tiny, None, 32, 2, 16, ["query", "ffw_linear"], chip_gib=None
    ).fits  # the notebook's tiny default
    with pytest.raises(
        ParameterError, match=r"MESH=1x3: .* hidden axis \(64\) .* 3 devices do not divide 64.* MESH='3x1'"
    ):
        fine_tuning(tiny, (1, 3), 32, 2, 16, devices=3, chip_gib=None)
    assert fine_tuning(GEMMA3["4b"], None, 512, 2, 8, devices=6).mesh == (3, 2)  # 2 divides 2,560; 6 not


def test_a_mesh_that_does_not_divide_the_model_is_refused():
    sizes = model_sizes.from_config(dict(TINY, num_embed=130))
    tiny = model_sizes.from_config(TINY)
    with pytest.raises(ParameterError, match=r"MESH 2x4 .* the vocabulary \(130\) does not divide by 4"):
        planning.pick_mesh(sizes, 8, 16, (2, 4))
    with pytest.raises(ParameterError, match=r"query heads \(4\) does not divide by 8"):
        planning.pick_mesh(tiny, 8, 16, (1, 8))
    with pytest.raises(
        ParameterError, match=r"rows a step \(BATCH_SIZE x NUM_GENERATIONS\) \(6\) does not divide by 4"
    ):
        planning.pick_mesh(tiny, 8, 6, (4, 2))
    # Sweep 6, poor: 6 simulated devices advised MESH or BATCH_SIZE, and neither can fix a width of 64 over 6.
    with pytest.raises(ParameterError, match=r"width \(64\) does not divide by the 6 devices.* set SIMULATE_DEVICES"):
        planning.pick_mesh(tiny, 6, 12, "auto")
    assert planning.pick_mesh(tiny, 8, 16, "auto") == (2, 4) and planning.pick_mesh(sizes, 8, 16, "auto") == (4, 2)


def test_the_grpo_plan_of_gemma_3_1b_and_gemma_2_2b_on_a_v5e_8():
    gemma3_1b = dict(
        num_layers=26, num_embed=262144, embed_dim=1152, hidden_dim=6912, num_heads=4, head_dim=256, num_kv_heads=1
    )
    gemma2_2b = dict(
        num_layers=26, num_embed=256128, embed_dim=2304, hidden_dim=9216, num_heads=8, head_dim=256, num_kv_heads=4
    )
    one = grpo(gemma3_1b, 64, 4 * 4, 256 + 256)  # notebook 11's full profile
    assert 0.95e9 < one.parameters < 1.05e9 and one.fits and one.parts["reference"] == 0
    two = grpo(gemma2_2b, 0, 8 * 4, 256 + 768)
    assert 2.5e9 < two.parameters < 2.7e9 and two.parts["reference"] == two.parts["weights"]
    assert two.parts["trained state"] == pytest.approx(two.parameters * 16 / 8)
    huge = grpo(gemma2_2b, 0, 64 * 16, 4096)
    assert not huge.fits and "Lower BATCH_SIZE, NUM_GENERATIONS" in huge.describe()


# Gemma 4 (issue 59), worked by hand from Hugging Face's text configs (model_sizes.GEMMA4_CONFIGS; not the code's
# output). Both: V 262,144, head size d 256 (global layers 512), per-layer embeddings P 256 a layer, bfloat16.
# E2B: W 1536, F 6144, L 35 (global every 5th: 4, 9, ..., 34), 8 query heads, 1 K/V head; the last 20 layers (15-34)
# share K/V (no key, value or key norm of their own) and have a double-wide MLP (2F). So 12 local and 3 global layers
# own K/V, 16 local and 4 global share it.
#   model: embedding V W 402,653,184 + final norm 1,536; per-layer table V L P 2,348,810,240, its projection W L P
#     13,762,560 and norm 256
#   every layer: 4 norms 6,144 + scalar 1 + the per-layer input's gate and up projection 2 W P 786,432 + its norm
#     1,536 = 794,113; local q + out 2 W 8 d 6,291,456, k + v 2 W d 786,432, norms 512 (shared: 256); global q + out
#     12,582,912, k + v 1,572,864, norms 1,024 (512); MLP 3 W F 28,311,552 (shared: 56,623,104)
#   own local 36,184,065 x 12 = 434,208,780; own global 43,262,465 x 3 = 129,787,395; shared local 63,708,929 x 16
#     = 1,019,342,864; shared global 70,000,641 x 4 = 280,002,564 -> 4,628,569,379 parameters (8.62 GiB in bf16)
#   fine-tuning (notebook 10's defaults: LoRA 16 on query and value, 256 tokens, 1 pair a chip), MESH auto: data
#     parallel, weights 9,257,138,758 bytes; LoRA: q 16 (8 W + d) 200,704 local, 204,800 global, x 35 layers; v
#     16 (W + d) 28,672 / 32,768 in the 15 layers that own it -> 7,495,680 x 16 bytes = 119,930,880; activations a
#     token: a layer 6W 9,216 + 4 x its MLP (24,576; shared 49,152) + 3 (8 + 1) x its d (6,912; global 13,824) +
#     3 x 8 x 256 6,144 -> 562,176 + 161,280 + 1,142,784 + 313,344; the per-layer inputs 35 (3P + 2W) 134,400 ->
#     2,313,984 x 2 bytes + logits V x 10 = 7,249,408 x 256 tokens = 1,855,848,448 -> 11,232,918,086 (10.46 GiB)
#   GRPO (notebook 11's defaults: LoRA 64 on every kernel, 4 x 4 rows of 256 + 256 tokens): mesh 2 x 4 (tp 4
#     divides V, 8 heads, F, P; fsdp 2 the 16 rows and P), weights / 8 = 1,157,142,344.75; LoRA 64 x (rows + columns)
#     a layer: own local q 3,584 + kv 2,048 + out 3,584 + MLP 23,040; own global q 5,632, kv 2,560, out 5,632; shared
#     layers no kv and MLP 41,472 -> 2,064,384 x 12 + 2,359,296 x 3 + 3,112,960 x 16 + 3,375,104 x 4 = 95,158,272
#     x 16 / 8 = 190,316,544; KV cache 2 rows x 512 tokens x (12 x 2 x 256 + 3 x 2 x 512) x 2 bytes = 18,874,368;
#     activations a token as above with 3 x 8 x 512 12,288: 635,904 + 179,712 + 1,241,088 + 337,920 + 134,400 =
#     2,529,024 x 2 + 2,621,440 = 7,679,488 x 2 rows x 512 = 7,863,795,712 -> 9,230,128,968.75 (8.60 GiB)
# E4B: W 2560, F 10240, L 42 (global every 6th), 2 K/V heads; the last 18 share K/V, no double-wide MLP: 20 local
# and 4 global layers own K/V, 15 and 3 share it.
#   model: 671,088,640 + 2,560 + V L P 2,818,572,288 + W L P 27,525,120 + 256; every layer 10,240 + 1 + 1,310,720 +
#     2,560 = 1,323,521 and MLP 78,643,200; local q + out 10,485,760, k + v 2,621,440; global 20,971,520, 5,242,880
#   93,074,433 x 20 + 106,182,145 x 4 + 90,452,737 x 15 + 100,938,753 x 3 -> 7,463,013,418 (13.90 GiB: a chip's
#     90% with no room left for the rest): MESH auto splits the width over 8 chips, weights 1,865,753,354.5 a chip
#   LoRA: q 16 (8 W + d) 331,776 x 35 + 335,872 x 7, v 16 (2 W + d) 86,016 x 20 + 90,112 x 4 -> 16,044,032; a chip
#     holds A's width / 8: q 16 (2,560 + 256) x 35 + 16 (2,560 + 512) x 7, v 16 (640 + 256) x 20 + 16 (640 + 512) x
#     4 = 2,281,472 x 16 = 36,503,552; activations a token: local 15,360 + 40,960 + 7,680 + 6,144 = 70,144 x 35,
#     global 77,824 x 7, per-layer 42 x 5,888 -> 3,247,104 x 2 + 2,621,440 = 9,115,648 x 256 = 2,333,605,888
#   total 4,235,862,794.5 bytes (3.94 GiB)
def test_gemma_4_e2b_and_e4b_fine_tuning_and_e2b_grpo_as_worked_by_hand():
    e2b, e4b = (model_sizes.GEMMA4_CONFIGS[f"Gemma 4 {name}"] for name in ("E2B", "E4B"))
    one = fine_tuning(e2b, None, 256, 1, 16)
    assert one.parameters == 4_628_569_379 and one.trained == 7_495_680 and one.mesh == (8, 1) and one.fits
    assert one.parts == {"weights": 9_257_138_758, "trained state": 119_930_880, "activations": 1_855_848_448}
    four = fine_tuning(e4b, None, 256, 1, 16)
    assert four.parameters == 7_463_013_418 and four.trained == 16_044_032 and four.mesh == (1, 8) and four.fits
    assert four.parts == {"weights": 1_865_753_354.5, "trained state": 36_503_552, "activations": 2_333_605_888}
    assert not fine_tuning(e4b, (8, 1), 256, 1, 16).fits  # the weights alone fill a chip
    two = grpo(e2b, 64, 4 * 4, 256 + 256)
    assert two.parameters == 4_628_569_379 and two.trained == 95_158_272 and two.mesh == (2, 4) and two.fits
    assert two.parts == {
        "weights": 1_157_142_344.75,
        "trained state": 190_316_544,
        "reference": 0,
        "KV cache": 18_874_368,
        "activations": 7_863_795_712,
    }


def test_gemma_4_plans_on_a_v5e_8_for_each_size():
    # The 26B-A4B's experts under KerasHub: every expert's activations for every token (4 x 128 x 704 a token and
    # layer); a longer sequence than the default does not fit, and the plan names the activations and what to lower.
    plans = {name: fine_tuning(config, None, 256, 1, 16) for name, config in model_sizes.GEMMA4_CONFIGS.items()}
    assert {name: plan.mesh for name, plan in plans.items()} == {
        "Gemma 4 E2B": (8, 1),
        "Gemma 4 E4B": (1, 8),
        "Gemma 4 26B-A4B": (1, 8),
        "Gemma 4 31B": (1, 8),
    }
    assert all(plan.fits for plan in plans.values())
    assert round(plans["Gemma 4 26B-A4B"].parameters / 1e9, 2) == 25.23
    assert round(plans["Gemma 4 31B"].parameters / 1e9, 2) == 30.70
    moe = fine_tuning(model_sizes.GEMMA4_CONFIGS["Gemma 4 26B-A4B"], None, 1024, 1, 16)
    assert (
        not moe.fits and "the activations the most" in moe.describe() and "SEQUENCE_LENGTH (now 1024)" in moe.describe()
    )
    dense = dict(model_sizes.GEMMA4_CONFIGS["Gemma 4 26B-A4B"], enable_moe_block=False)
    assert moe.parts["activations"] > 3 * fine_tuning(dense, (1, 8), 1024, 1, 16).parts["activations"]


def test_gemma_4s_sizes_are_kerashubs_parameter_count_in_every_naming():
    # Tiny Gemma4Backbones with every part the plan counts: per-layer embeddings, global layers with their own head
    # size and K=V, KV-shared layers with a double-wide MLP; and a mixture of experts.
    import keras_hub

    dense = dict(vocabulary_size=96, image_size=896, num_layers=6, num_query_heads=4, num_key_value_heads=2)
    dense.update(hidden_dim=64, intermediate_dim=128, head_dim=16, global_head_dim=32, num_global_key_value_heads=1)
    dense.update(sliding_window_pattern=3, num_kv_shared_layers=3, hidden_size_per_layer_input=8)
    dense.update(vocab_size_per_layer_input=96, use_double_wide_mlp=True, vision_encoder=None)
    moe = dict(dense, num_kv_shared_layers=0, hidden_size_per_layer_input=0, use_double_wide_mlp=False)
    moe.update(enable_moe_block=True, num_experts=4, expert_intermediate_dim=16, num_experts_per_token=2)
    for config in (dense, moe):
        backbone = keras_hub.models.Gemma4Backbone(**config)
        sizes = model_sizes.from_config({"class_name": "Gemma4Backbone", "config": backbone.get_config()})
        assert sizes.parameters == backbone.count_params() and sizes.global_layers == (2, 5)
    # The same sizes as Hugging Face's config.json and Tunix's ModelConfig name them.
    hugging_face = dict(model_type="gemma4_text", vocab_size=96, hidden_size=64, intermediate_size=128)
    hugging_face.update(num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=2, head_dim=16)
    hugging_face.update(global_head_dim=32, num_global_key_value_heads=1, attention_k_eq_v=True)
    hugging_face.update(layer_types=["sliding_attention", "sliding_attention", "full_attention"] * 2)
    hugging_face.update(num_kv_shared_layers=3, use_double_wide_mlp=True, hidden_size_per_layer_input=8)
    tunix = dict(num_layers=6, num_embed=96, embed_dim=64, hidden_dim=128, num_heads=4, head_dim=16, num_kv_heads=2)
    tunix.update(per_layer_input_dim=8, num_global_kv_heads=1, global_key_size=32, k_eq_v_global=True)
    tunix.update(frac_shared_layers=0.5, override_kv_shared_ffw_hidden=256)
    tunix["attention_pattern"] = ("AttentionType.LOCAL_SLIDING", "AttentionType.LOCAL_SLIDING", "AttentionType.GLOBAL")
    wanted = model_sizes.from_config(dict(dense, layer_types=None))
    assert model_sizes.from_config({"text_config": hugging_face}) == wanted == model_sizes.from_config(tunix)


def test_a_presets_vision_and_audio_encoders_are_counted_from_its_weights_headers(tmp_path):
    # A tiny Gemma 4 with both towers saved as a KerasHub preset: the plan keeps them whole on every chip, in float32.
    import keras_hub

    vision = keras_hub.models.Gemma4VisionEncoder(
        image_size=32, patch_size=8, pool_size=2, num_layers=2, num_heads=2, head_dim=8, num_key_value_heads=2,
        hidden_dim=16, intermediate_dim=32, output_dim=64,
    )  # fmt: skip
    audio = keras_hub.models.Gemma4AudioEncoder(
        input_feat_size=16, hidden_size=16, num_heads=2, num_layers=1, output_proj_dims=16, output_dim=64,
        sscp_conv_channels=(8, 4),
    )  # fmt: skip
    backbone = keras_hub.models.Gemma4Backbone(
        vocabulary_size=300, image_size=32, num_layers=2, num_query_heads=4, num_key_value_heads=1, hidden_dim=64,
        intermediate_dim=128, head_dim=16, vision_encoder=vision, audio_encoder=audio, num_audio_tokens_per_clip=4,
    )  # fmt: skip
    backbone.save_to_preset(str(tmp_path / "preset"))
    config = json.loads((tmp_path / "preset" / "config.json").read_text())
    sizes = model_sizes.from_config(config, tmp_path / "preset")
    assert sizes.vision == vision.count_params() + audio.count_params() > 0
    assert sizes.parameters + sizes.vision == backbone.count_params()
    plan = planning.memory_plan(sizes, 8, (8, 1), 1, 16, 2, chip_gib=15.75)
    assert plan.parts["weights"] == sizes.parameters * 2 + sizes.vision * 4
    (tmp_path / "preset" / "model.weights.h5").write_bytes(b"cut short")
    with pytest.raises(DataError, match="model.weights.h5 cannot be read as Keras weights"):
        model_sizes.from_config(config, tmp_path / "preset")


FAMILY_CONFIGS = [
    ({"class_name": "GemmaBackbone", "config": {"vocabulary_size": 8}}, "gemma"),
    ({"class_name": "GemmaBackbone", "config": {"final_logit_soft_cap": 30.0, "use_post_ffw_norm": True}}, "gemma2"),
    ({"class_name": "Gemma3Backbone", "config": {}}, "gemma3"),
    ({"class_name": "Gemma4Backbone", "config": {}}, "gemma4"),
    ({"model_type": "gemma"}, "gemma"),
    ({"model_type": "gemma2"}, "gemma2"),
    ({"model_type": "gemma3", "text_config": {"model_type": "gemma3_text"}}, "gemma3"),
    ({"model_type": "gemma3_text"}, "gemma3"),
    ({"model_type": "gemma4", "text_config": {"model_type": "gemma4_text"}}, "gemma4"),
    ({"model_type": "gemma4_text"}, "gemma4"),
    (model_sizes.GEMMA3_CONFIGS["Gemma 3 1B"], "gemma3"),  # a backbone's config alone, by its keys
    ({"vocabulary_size": 8, "global_head_dim": 512}, "gemma4"),
    ({"num_embed": 8, "frac_shared_layers": 0.5}, "gemma4"),
    ({"num_embed": 8, "family": "gemma2"}, "gemma2"),
]


@pytest.mark.parametrize("config, family", FAMILY_CONFIGS)
def test_the_family_is_read_from_the_config(config, family):
    assert model_sizes.family(config) == family


@pytest.mark.parametrize(
    "kind", [{"class_name": "Gemma3nBackbone"}, {"model_type": "paligemma"}, {"model_type": "llama"}]
)
def test_another_model_is_named_not_taken_for_a_gemma(kind):
    with pytest.raises(ParameterError, match="not a Gemma this notebook trains"):
        model_sizes.family(kind)


def test_pick_mesh_checks_what_tunix_shards_of_gemma_4():
    sizes = model_sizes.from_config(dict(model_sizes.GEMMA4_CONFIGS["Gemma 4 E4B"], hidden_size_per_layer_input=12))
    with pytest.raises(ParameterError, match=r"per-layer embedding width \(12\) does not divide by 8"):
        planning.pick_mesh(sizes, 8, 16, "1x8")
    moe = model_sizes.from_config(dict(model_sizes.GEMMA4_CONFIGS["Gemma 4 26B-A4B"], num_global_key_value_heads=6))
    with pytest.raises(ParameterError, match=r"global layers' key/value heads \(K=V\) \(6\) does not divide by 4"):
        planning.pick_mesh(moe, 8, 16, "2x4")
    assert planning.pick_mesh(moe, 8, 16, "auto") == (4, 2)
    # One K=V head (Tunix's Gemma 4 12B preset): Tunix 0.1.7 splits it over tp all the same, and fails past tp 1.
    one = model_sizes.from_config(dict(model_sizes.GEMMA4_CONFIGS["Gemma 4 31B"], num_global_key_value_heads=1))
    assert planning.pick_mesh(one, 8, 16, "auto") == (8, 1)
