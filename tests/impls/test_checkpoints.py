"""Published draft-checkpoint layouts load, bad ones fail in one line, and saving round-trips.

The synthetic checkpoints are written key by key from reference_impls/CHECKPOINT_FORMATS.md,
not from our modules' state dicts, so a drift of our layout from the published one fails here.
"""

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from specatlas.impls.families.checkpoints import CheckpointError, _read_weights, load
from specatlas.impls.families import FAMILIES
from specatlas.impls.families.eagle import EagleHead
from specatlas.impls.families.eagle3 import Eagle3Head
from specatlas.impls.families.hydra import HydraHeads
from specatlas.impls.families.medusa import MedusaHeads
from specatlas.impls.families.redrafter import DRAFT_VOCAB, RecurrentDrafter
from specatlas.impls.families.blocks import HeadCache, LayerConfig
from specatlas.impls.engine import weight_storage
from specatlas.impls.engine.weight_storage import SCALE, pack, stored
from tests.impls.toy import tiny_llama

H, V, HEADS, KV, HD, I = 32, 16, 4, 2, 8, 64  # tiny_llama's sizes


@pytest.fixture(scope="module")
def target():
    return tiny_llama(0, layers=6).float()


def llama_config(**extra):
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": H, "intermediate_size": I,
            "num_attention_heads": HEADS, "num_key_value_heads": KV, "num_hidden_layers": 1, "rms_norm_eps": 1e-6,
            "rope_theta": 10000.0, "vocab_size": V, "max_position_embeddings": 128, **extra}


def attention_and_mlp(prefix, width):
    g = torch.Generator().manual_seed(len(prefix) + width)
    r = lambda *shape: torch.randn(*shape, generator=g) * 0.2  # noqa: E731
    return {f"{prefix}self_attn.q_proj.weight": r(HEADS * HD, width), f"{prefix}self_attn.k_proj.weight": r(KV * HD, width),
            f"{prefix}self_attn.v_proj.weight": r(KV * HD, width), f"{prefix}self_attn.o_proj.weight": r(H, HEADS * HD),
            f"{prefix}mlp.gate_proj.weight": r(I, H), f"{prefix}mlp.up_proj.weight": r(I, H),
            f"{prefix}mlp.down_proj.weight": r(H, I), f"{prefix}post_attention_layernorm.weight": 1 + r(H)}


def eagle1_weights():
    return {"fc.weight": torch.randn(H, 2 * H) * 0.2, "fc.bias": torch.randn(H) * 0.1,
            **attention_and_mlp("layers.0.", H)}


def eagle3_weights(draft_vocab=8):
    d2t = torch.tensor([0, 1, 1, 2, 3, 5, 6, 8])[:draft_vocab]  # target id = draft id + d2t[draft id]
    t2d = torch.zeros(V, dtype=torch.bool)
    t2d[torch.arange(draft_vocab) + d2t] = True
    return {"fc.weight": torch.randn(H, 3 * H) * 0.2, "midlayer.hidden_norm.weight": 1 + 0.1 * torch.randn(H),
            "midlayer.input_layernorm.weight": 1 + 0.1 * torch.randn(H), **attention_and_mlp("midlayer.", 2 * H),
            "norm.weight": torch.ones(H), "lm_head.weight": torch.randn(draft_vocab, H), "d2t": d2t, "t2d": t2d}


def medusa_weights(heads=3, own_vocab=True):
    out = {}
    for k in range(heads):
        out[f"{k}.0.linear.weight"], out[f"{k}.0.linear.bias"] = torch.randn(H, H) * 0.2, torch.randn(H) * 0.1
        if own_vocab:
            out[f"{k}.1.weight"] = torch.randn(V, H)
    return out


def hydra_weights(heads=3, own_vocab=True):
    """zankner/Hydra HydraMLP's state dict (grounded heads, one layer): head k's first ResBlock
    reads (k + 2) x H and has a res_connection projection; hydra_lm_head.{k} has a bias."""
    out = {}
    for k in range(heads):
        width = (k + 2) * H
        out[f"hydra_mlp.{k}.0.linear.weight"], out[f"hydra_mlp.{k}.0.linear.bias"] = torch.randn(H, width) * 0.2, torch.randn(H) * 0.1
        out[f"hydra_mlp.{k}.0.res_connection.weight"] = torch.randn(H, width) * 0.2
        out[f"hydra_mlp.{k}.0.res_connection.bias"] = torch.randn(H) * 0.1
        if own_vocab:
            out[f"hydra_lm_head.{k}.weight"], out[f"hydra_lm_head.{k}.bias"] = torch.randn(V, H), torch.randn(V)
    return out


HYDRA_CONFIG = {"hydra_num_heads": 3, "hydra_num_layers": 1, "hydra_head_arch": "mlp", "grounded_heads": True,
                "hidden_state_offset": 0, "base_model_name_or_path": "org/tiny"}


def redrafter_weights(layers=2):
    """apple/ml-recurrent-drafter's `Drafter` state dict (rnn on, exit_dim 2H): ResBlocks
    `lm_head.{j}.linear` over [h, s], the vocabulary projection `lm_head.{L}` without bias, the
    RNN's `rnn_u` (with the bias) and `rnn_w`."""
    out = {f"lm_head.{layers}.weight": torch.randn(V, 2 * H) * 0.3, "rnn_u.weight": torch.randn(H, H) * 0.2,
           "rnn_u.bias": torch.randn(H) * 0.1, "rnn_w.weight": torch.randn(H, H) * 0.2}
    for j in range(layers):
        out[f"lm_head.{j}.linear.weight"], out[f"lm_head.{j}.linear.bias"] = torch.randn(2 * H, 2 * H) * 0.1, torch.randn(2 * H) * 0.1
    return out


REDRAFTER_CONFIG = {"model_type": "recurrent_drafting_drafter", "vocab_size": V, "hidden_size": H, "exit_dim": 2 * H,
                    "num_draft_layers": 2, "num_lookback_tokens": -1, "rnn": True}


def write(folder, config, weights, name):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    if name.endswith(".safetensors"):
        from safetensors.torch import save_file

        save_file(weights, str(folder / name))
    else:
        torch.save(weights, folder / name)
    return folder


def test_eagle1_published_layout_loads_and_matches_transformers_layer(tmp_path, target):
    weights = eagle1_weights()
    ckpt = load(write(tmp_path / "e1", llama_config(bias=True), weights, "pytorch_model.bin"), target)
    assert (ckpt.family, ckpt.layout, ckpt.hidden_layers) == ("eagle", "eagle", (6,))
    # The same layer through transformers' LlamaDecoderLayer with its input norm removed.
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

    config = LlamaConfig(**{k: v for k, v in llama_config().items() if k not in ("architectures", "model_type")})
    config._attn_implementation = "sdpa"
    reference = LlamaDecoderLayer(config, 0)
    reference.load_state_dict({k[len("layers.0."):]: v for k, v in weights.items() if k.startswith("layers.0.")},
                              strict=False)
    reference.input_layernorm = torch.nn.Identity()
    embeds, features = torch.randn(1, 5, H), torch.randn(1, 5, H)
    positions = torch.arange(5)[None]
    x = torch.nn.functional.linear(torch.cat([embeds, features], -1), weights["fc.weight"], weights["fc.bias"])
    mask = torch.full((5, 5), float("-inf")).triu(1)[None, None]
    expected = reference(x, attention_mask=mask, position_ids=positions,
                         position_embeddings=LlamaRotaryEmbedding(config)(x, positions))
    expected = expected[0] if isinstance(expected, tuple) else expected
    torch.testing.assert_close(ckpt.head(embeds, features, positions), expected, atol=1e-5, rtol=1e-4)


def test_eagle_head_with_cache_equals_full_sequence(target):
    head = EagleHead(LayerConfig.from_dict(llama_config())).eval()
    embeds, features, positions = torch.randn(1, 7, H), torch.randn(1, 7, H), torch.arange(7)[None]
    full = head(embeds, features, positions)
    cache = HeadCache()
    first = head(embeds[:, :4], features[:, :4], positions[:, :4], cache)
    rest = [head(embeds[:, t : t + 1], features[:, t : t + 1], positions[:, t : t + 1], cache) for t in range(4, 7)]
    torch.testing.assert_close(torch.cat([first, *rest], 1), full, atol=1e-5, rtol=1e-4)


def test_eagle3_published_layout_loads_with_draft_vocabulary(tmp_path, target):
    weights = eagle3_weights()
    config = llama_config(draft_vocab_size=8, target_hidden_size=H)
    ckpt = load(write(tmp_path / "e3", config, weights, "model.safetensors"), target)
    assert (ckpt.family, ckpt.layout, ckpt.hidden_layers) == ("eagle3", "eagle3", (2, 3, 3))
    assert ckpt.head.to_target(torch.arange(8)).tolist() == [0, 2, 3, 5, 7, 10, 12, 15]
    hidden, logits = ckpt.head(torch.randn(1, 3, H), torch.randn(1, 3, 3 * H), torch.arange(3)[None])
    assert hidden.shape == (1, 3, H) and logits.shape == (1, 3, 8)
    # A later draft step feeds the head's own H-wide output back: fc is skipped.
    again, _ = ckpt.head(torch.randn(1, 1, H), hidden[:, -1:], torch.tensor([[3]]))
    assert again.shape == (1, 1, H)


def test_eagle3_vllm_renames_load_the_same_head(tmp_path, target):
    weights = eagle3_weights()
    config = llama_config(draft_vocab_size=8, eagle_aux_hidden_state_layer_ids=[1, 3, 4])
    reference = load(write(tmp_path / "ref", config, weights, "model.safetensors"), target)
    vllm = {("layers.0." + k[len("midlayer."):] if k.startswith("midlayer.") else k): v
            for k, v in weights.items() if k != "t2d"}
    vllm["draft_id_to_target_id"] = vllm.pop("d2t")
    loaded = load(write(tmp_path / "vllm", config, {"model." + k: v for k, v in vllm.items()}, "model.safetensors"), target)
    assert loaded.layout == "vllm-eagle3" and loaded.hidden_layers == (1, 3, 4)
    for key, value in reference.head.state_dict().items():
        assert torch.equal(loaded.head.state_dict()[key], value), key


@pytest.mark.parametrize("name", ["medusa_lm_head.pt", "medusa_lm_head.safetensors"])
def test_medusa_v1_and_v2_published_layouts(tmp_path, target, name):
    v1 = load(write(tmp_path / "v1", {"medusa_num_heads": 3, "medusa_num_layers": 1,
                                      "base_model_name_or_path": "org/tiny"}, medusa_weights(), name), target, "tiny")
    assert (v1.layout, len(v1.head), v1.head.own_vocab) == ("medusa-v1", 3, True)
    assert v1.head(torch.randn(2, H)).shape == (3, 2, V)
    weights = medusa_weights(own_vocab=False)
    v2 = load(write(tmp_path / "v2", {"medusa_num_heads": 3, "medusa_num_layers": 1, "version": "2"}, weights, name),
              target)
    assert v2.layout == "medusa-v2" and not v2.head.own_vocab
    x = torch.randn(2, H)
    block = x + torch.nn.functional.silu(torch.nn.functional.linear(x, weights["1.0.linear.weight"], weights["1.0.linear.bias"]))
    torch.testing.assert_close(v2.head(x, target.lm_head.weight)[1], target.lm_head(block))


@pytest.mark.parametrize("own_vocab", [True, False])
def test_hydra_published_layout_computes_hydras_heads(tmp_path, target, own_vocab):
    weights = hydra_weights(own_vocab=own_vocab)
    ckpt = load(write(tmp_path / "h", HYDRA_CONFIG, weights, "hydra_lm_head.pt"), target, "tiny")
    assert (ckpt.family, ckpt.layout, len(ckpt.head), ckpt.hidden_layers) == \
        ("hydra", "hydra" if own_vocab else "hydra-shared-lm-head", 3, (6,))
    hidden, embeds = torch.randn(2, H), torch.randn(2, 3, H)  # head 2 reads the hidden state and 3 embeddings
    x = torch.cat([hidden, embeds.flatten(1)], -1)
    linear = torch.nn.functional.linear
    block = linear(x, weights["hydra_mlp.2.0.res_connection.weight"], weights["hydra_mlp.2.0.res_connection.bias"]) + \
        torch.nn.functional.silu(linear(x, weights["hydra_mlp.2.0.linear.weight"], weights["hydra_mlp.2.0.linear.bias"]))
    expected = linear(block, weights["hydra_lm_head.2.weight"], weights["hydra_lm_head.2.bias"]) if own_vocab else \
        target.lm_head(block)
    got = ckpt.head.logits(2, ckpt.head.features(2, hidden, embeds), target.lm_head.weight)
    torch.testing.assert_close(got, expected)


def test_redrafter_published_layout_computes_its_recurrence(tmp_path, target):
    weights = redrafter_weights()
    ckpt = load(write(tmp_path / "r", REDRAFTER_CONFIG, weights, "model.safetensors"), target, "tiny")
    assert (ckpt.family, ckpt.layout, ckpt.hidden_layers) == ("redrafter", "redrafter", (6,))
    linear, silu = torch.nn.functional.linear, torch.nn.functional.silu
    hidden, e1, e2 = torch.randn(2, H), torch.randn(2, H), torch.randn(2, H)
    s1 = silu(linear(torch.zeros(2, H), weights["rnn_u.weight"], weights["rnn_u.bias"]) + linear(e1, weights["rnn_w.weight"]))
    s2 = silu(linear(s1, weights["rnn_u.weight"], weights["rnn_u.bias"]) + linear(e2, weights["rnn_w.weight"]))
    x = torch.cat([hidden, s2], -1)
    for j in range(2):
        x = x + silu(linear(x, weights[f"lm_head.{j}.linear.weight"], weights[f"lm_head.{j}.linear.bias"]))
    state = ckpt.head.step(ckpt.head.step(torch.zeros(2, H), e1), e2)
    torch.testing.assert_close(ckpt.head.logits(hidden, state), linear(x, weights["lm_head.2.weight"]))
    del weights["rnn_w.weight"]
    with pytest.raises(CheckpointError, match="missing keys: rnn_w.weight"):
        load(write(tmp_path / "m", REDRAFTER_CONFIG, weights, "model.safetensors"), target)
    with pytest.raises(CheckpointError, match="num_draft_layers = 100 is not a size"):
        load(write(tmp_path / "n", REDRAFTER_CONFIG | {"num_draft_layers": 100}, redrafter_weights(), "model.safetensors"), target)


def test_redrafter_draft_vocabulary_round_trips_and_a_mismatched_layout_fails_in_one_line(tmp_path, target):
    """The layout `specatlas train` writes: the projection over a draft vocabulary, `d2t` mapping its
    ids to target ids (EAGLE-3's map). It saves and loads with the same outputs; a config or d2t that
    does not match the weights is one line, and the published full-vocabulary layout still loads."""
    torch.manual_seed(0)
    used = torch.tensor([1, 4, 5, 9, 15])
    head = FAMILIES["redrafter"].head(H, V, used)
    for parameter in head.parameters():
        parameter.data = torch.randn_like(parameter) * 0.3
    FAMILIES["redrafter"].save(stored(head), tmp_path / "d", target, "tiny")
    config = json.loads((tmp_path / "d" / "config.json").read_text())
    assert config["draft_vocab_size"] == 5 and config["vocab_size"] == V and config["exit_dim"] == H
    loaded = load(tmp_path / "d", target, "tiny").head
    assert loaded.to_target(torch.arange(5)).tolist() == used.tolist()
    x, e = torch.randn(3, H), torch.randn(3, H)
    state = torch.zeros_like(x)
    torch.testing.assert_close(loaded.logits(x, loaded.step(state, e)), head.logits(x, head.step(state, e)))
    from safetensors.torch import load_file
    weights = load_file(tmp_path / "d" / "model.safetensors")
    without = {k: v for k, v in weights.items() if k != "d2t"}
    bad = {"no d2t": (config, without, "names a draft vocabulary of 5 tokens but the weights have no d2t"),
           "d2t of another size": (config | {"draft_vocab_size": 4}, weights, "d2t must be 4 whole-number offsets"),
           "d2t twice the same id": (config, weights | {"d2t": torch.tensor([1, 3, 2, 6, 11])}, "same target id twice"),
           "d2t past the vocabulary": (config, weights | {"d2t": torch.tensor([1, 3, 3, 6, 12])}, "outside the target's"),
           "full projection, d2t": (config, {k: v for k, v in weights.items() if not k.startswith("lm_head.2.weight")}
                                    | {"lm_head.2.weight": torch.zeros(V, H)},
                                    "projects to 16 tokens, not its draft vocabulary of 5")}
    for name, (cfg, w, message) in bad.items():
        with pytest.raises(CheckpointError, match=message):
            load(write(tmp_path / name.replace(" ", "-"), cfg, w, "model.safetensors"), target)
    old = {k: v for k, v in redrafter_weights().items()}
    old["lm_head.2.weight"] = torch.zeros(5, 2 * H)
    with pytest.raises(CheckpointError, match="projects to 5 tokens, not the target's vocabulary of 16 \\(no d2t\\)"):
        load(write(tmp_path / "old", REDRAFTER_CONFIG, old, "model.safetensors"), target)
    assert not hasattr(load(write(tmp_path / "published", REDRAFTER_CONFIG, redrafter_weights(), "model.safetensors"),
                            target).head, "d2t")


def test_redrafter_head_for_the_embedded_model_ships_in_a_few_megabytes():
    """SmolLM2-135M's sizes (H 576, 49,152 tokens): the paper's full projection at exit_dim 2H is
    ~115 MB in float16; the head `specatlas train redrafter` writes is under 5 MB."""
    head = FAMILIES["redrafter"].head(576, 49152, torch.arange(DRAFT_VOCAB))
    size = sum(t.numel() * t.element_size() for t in pack(head.state_dict()).values())
    assert size < 5e6, f"{size / 1e6:.1f} MB"
    published = sum(p.numel() * 2 for p in RecurrentDrafter(576, 49152).parameters())
    assert published > 100e6


def test_unsupported_hydra_heads_fail_clearly(tmp_path, target):
    config = HYDRA_CONFIG | {"hydra_head_arch": "prefix-mlp"}
    with pytest.raises(CheckpointError, match="arch 'prefix-mlp'.* not supported"):
        load(write(tmp_path / "p", config, hydra_weights(), "hydra_lm_head.pt"), target)
    weights = hydra_weights()
    del weights["hydra_mlp.1.0.res_connection.bias"]
    with pytest.raises(CheckpointError, match="missing keys: hydra_mlp.1.0.res_connection.bias"):
        load(write(tmp_path / "m", HYDRA_CONFIG, weights, "hydra_lm_head.pt"), target)


def test_medusa_vllm_layout(tmp_path, target):
    weights = {}
    for k, (key, value) in enumerate(sorted(medusa_weights().items())):
        head, j, rest = key.split(".", 2)
        weights[f"lm_heads.{head}.weight" if rest == "weight" else f"blocks.{head}.layers.{j}.{rest.split('.')[-1]}"] = value
    ckpt = load(write(tmp_path / "vm", {"num_heads": 3, "num_hidden_layers": 1, "medusa_fc_bias": True}, weights,
                      "model.safetensors"), target)
    assert ckpt.layout == "vllm-medusa" and len(ckpt.head) == 3 and ckpt.head.own_vocab


def test_speculators_fusion_fc_is_eagle_fc(tmp_path, target):
    weights = eagle1_weights()
    weights["fusion_fc.weight"], weights["fusion_fc.bias"] = weights.pop("fc.weight"), weights.pop("fc.bias")
    assert load(write(tmp_path / "sp", llama_config(), weights, "model.safetensors"), target).layout == "speculators-eagle"


def test_missing_key_fails_in_one_line_naming_it(tmp_path, target):
    weights = eagle1_weights()
    del weights["layers.0.mlp.down_proj.weight"]
    with pytest.raises(CheckpointError) as error:
        load(write(tmp_path / "broken", llama_config(), weights, "pytorch_model.bin"), target)
    message = str(error.value)
    assert "missing keys: layers.0.mlp.down_proj.weight" in message and "\n" not in message


@pytest.mark.parametrize("problem, match", [
    (lambda w, c: w.update({"layers.0.input_layernorm.weight": torch.ones(H)}), "unexpected keys: layers.0.input_layernorm.weight"),
    (lambda w, c: w.update({"fc.weight": torch.randn(H, 3 * H)}), r"fc.weight has shape \(32, 96\), expected \(32, 64\)"),
    (lambda w, c: c.update(hidden_size=64), "hidden size 64, the target 32"),
    (lambda w, c: c.update(vocab_size=32000), "vocabulary of 32000"),
    (lambda w, c: c.update(base_model_name_or_path="lmsys/vicuna-7b-v1.3"), "trained for lmsys/vicuna-7b-v1.3"),
])
def test_mismatches_fail_clearly(tmp_path, target, problem, match):
    weights, config = eagle1_weights(), llama_config()
    problem(weights, config)
    with pytest.raises(CheckpointError, match=match):
        load(write(tmp_path / "bad", config, weights, "model.safetensors"), target, "tiny")


def test_unreadable_sources_fail_clearly(tmp_path, target):
    with pytest.raises(CheckpointError, match="no such checkpoint folder"):
        load(tmp_path / "nowhere", target)
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "config.json").write_text("{}")
    with pytest.raises(CheckpointError, match="no weights"):
        load(tmp_path / "empty", target)
    write(tmp_path / "other", {}, {"encoder.weight": torch.ones(2)}, "model.safetensors")
    with pytest.raises(CheckpointError, match="not a Medusa, Hydra, EAGLE, EAGLE-3, Kangaroo, DistillSpec, PaSS, SpecDec\\+\\+, ReDrafter, PARD, PARD-2 or DFlash checkpoint"):
        load(tmp_path / "other", target)


def outputs(family, head, lm_head, x, features):
    """What a head computes from (x, features), whatever its family's calling convention."""
    if family == "medusa":
        return head(x, lm_head.weight)
    if family == "redrafter":  # two recurrent steps, reading `features` as the drafted tokens' embeddings
        return head.logits(x, head.step(head.step(torch.zeros_like(x), features), -features))
    if family == "hydra":
        embeds = features[..., None, :].expand(*features.shape[:-1], len(head), features.shape[-1])
        return [head.logits(k, head.features(k, x, embeds[..., : k + 1, :]), lm_head.weight) for k in range(len(head))]
    return head(x, features, torch.arange(x.shape[1])[None])


@pytest.mark.parametrize("family", ["medusa", "hydra", "eagle", "eagle3", "redrafter"])
def test_save_in_published_layout_then_load_gives_the_same_outputs(tmp_path, target, family, monkeypatch):
    monkeypatch.setattr(weight_storage, "SMALLEST", 64)  # the tiny heads' matrices go int8 as real ones do
    torch.manual_seed(0)
    layer = LayerConfig.from_dict(llama_config())
    head = {"medusa": lambda: MedusaHeads(H, 3), "hydra": lambda: HydraHeads(H, 3), "eagle": lambda: EagleHead(layer),
            "eagle3": lambda: Eagle3Head(layer, H, V, 8), "redrafter": lambda: RecurrentDrafter(H, V)}[family]()
    for parameter in head.parameters():  # away from the zero init
        parameter.data = torch.randn_like(parameter) * 0.3
    stored(head)  # what `specatlas train` evaluates and saves: the stored precision
    FAMILIES[family].save(head, tmp_path / family, target, "tiny")
    loaded = load(tmp_path / family, target, "tiny")
    assert loaded.family == family
    x, features = torch.randn(1, 4, H), torch.randn(1, 4, 3 * H if family == "eagle3" else H)
    torch.testing.assert_close(outputs(family, loaded.head, target.lm_head, x, features),
                               outputs(family, head, target.lm_head, x, features))


@pytest.mark.model
def test_run_with_a_broken_checkpoint_fails_in_one_line(tmp_path, capsys, embedded):
    from specatlas.cli import main

    weights = {f"{k}.0.linear.{name}": torch.zeros(576, 576) if name == "weight" else torch.zeros(576)
               for k in range(4) for name in ("weight", "bias")}
    del weights["2.0.linear.bias"]
    write(tmp_path / "broken", {"medusa_num_heads": 4, "medusa_num_layers": 1}, weights, "medusa_lm_head.pt")
    status = main(["run", "medusa", "--prompt", "hi", "--device", "cpu", "--drafter-checkpoint", str(tmp_path / "broken")])
    err = capsys.readouterr().err.strip()
    assert status == 1 and "missing keys: 2.0.linear.bias" in err and len(err.splitlines()) == 1 and "Traceback" not in err


SHIPPED = sorted(path for path in (Path(__file__).resolve().parents[2] / "reference_impls" / "trained_heads").glob("*")
                 if (path / "config.json").is_file())
# Our own layouts (Kangaroo's adapter, DistillSpec's layers) are built on the target's layers and
# config: they round-trip on the embedded model itself; the published layouts on a shape-only target.
OURS = [path for path in SHIPPED if json.loads((path / "config.json").read_text()).get("specatlas_family")]
PUBLISHED = [path for path in SHIPPED if path not in OURS]


class ShapeOnlyTarget(torch.nn.Module):
    """What the loader reads of a target: its config and parameters' device and dtype."""

    def __init__(self, config: dict):
        super().__init__()
        self.config = SimpleNamespace(_name_or_path=config["base_model_name_or_path"], **{
            key: config[key] for key in ("hidden_size", "vocab_size")}, num_hidden_layers=30)
        self.lm_head = torch.nn.Linear(config["hidden_size"], config["vocab_size"], bias=False)


def assert_stored_as_trained(path: Path) -> None:
    """A head `specatlas train` wrote: every matrix int8 beside its float16 row scales (as
    `weight_storage.pack` stores them), every other float tensor float16."""
    from safetensors import safe_open

    with safe_open(str(path), "pt") as f:
        raw = {key: f.get_slice(key) for key in f.keys()}
    for key, tensor in raw.items():
        dtype, shape = tensor.get_dtype(), tensor.get_shape()
        if key.endswith(SCALE):
            assert dtype == "F16" and raw[key[: -len(SCALE)]].get_dtype() == "I8", key
        elif len(shape) == 2 and shape[0] * shape[1] >= weight_storage.SMALLEST and dtype not in ("I64", "BOOL"):
            assert dtype == "I8" and key + SCALE in raw, f"{path.parent.name}: {key} is {dtype}, not int8 with scales"
        else:
            assert dtype in ("F16", "I64", "BOOL"), f"{path.parent.name}: {key} is {dtype}"


@pytest.mark.parametrize("folder", PUBLISHED, ids=lambda path: path.name)
def test_shipped_heads_load_and_round_trip_through_the_published_layout(tmp_path, folder):
    config = json.loads((folder / "config.json").read_text())
    target = ShapeOnlyTarget(config)
    shipped = load(folder, target, config["base_model_name_or_path"])
    assert_stored_as_trained(folder / FAMILIES[shipped.family].weight_file)
    stored = _read_weights(folder)[1]
    for key, value in shipped.head.state_dict().items():
        assert torch.equal(value.to(stored[key].dtype), stored[key]), key
    FAMILIES[shipped.family].save(shipped.head, tmp_path / "again", target, config["base_model_name_or_path"])
    again = load(tmp_path / "again", target, config["base_model_name_or_path"])
    # results name a shipped head without this machine's path; any other folder as the user gave it
    assert shipped.describe() == f"{shipped.layout} checkpoint {folder.name} (shipped)"
    assert again.describe() == f"{again.layout} checkpoint {tmp_path / 'again'}"
    x, features = torch.randn(1, 3, config["hidden_size"]), torch.randn(1, 3, config["hidden_size"])
    torch.testing.assert_close(outputs(shipped.family, again.head, target.lm_head, x, features),
                               outputs(shipped.family, shipped.head, target.lm_head, x, features))
    card = (folder / "README.md").read_text()
    assert "specatlas train" in card and "Held-out mean accepted tokens" in card


@pytest.mark.model
@pytest.mark.parametrize("folder", OURS, ids=lambda path: path.name)
def test_shipped_adapters_and_drafters_round_trip_on_the_embedded_model(tmp_path, embedded, folder):
    config, target = json.loads((folder / "config.json").read_text()), embedded.model
    shipped = load(folder, target, embedded.name)
    assert_stored_as_trained(folder / FAMILIES[shipped.family].weight_file)
    stored = _read_weights(folder)[1]
    for key, value in shipped.head.state_dict().items():
        assert torch.equal(value.to(stored[key].dtype), stored[key]), key
    extra = {key: config[key] for key in ("exit_layer", "num_hidden_layers", "draft_vocab_size") if key in config}
    FAMILIES[shipped.family].save(shipped.head, tmp_path / "again", target, embedded.name, extra)
    again = load(tmp_path / "again", target, embedded.name)
    if shipped.family == "kangaroo":
        states = torch.randn(1, 5, config["hidden_size"])
        run = lambda head: head(states, torch.arange(5)[None])  # noqa: E731
    elif hasattr(shipped.head, "drafter"):
        tokens = torch.tensor([[1, 2, 3, 4, 5]])
        run = lambda head: head.drafter(target)(input_ids=tokens).logits  # noqa: E731
    else:  # PaSS's look-ahead embeddings, SpecDec++'s acceptance head: no model of their own to run here
        run = lambda head: torch.cat([p.float().flatten() for p in head.parameters()])  # noqa: E731
    with torch.no_grad():
        torch.testing.assert_close(run(again.head), run(shipped.head))
    card = (folder / "README.md").read_text()
    assert "specatlas train" in card and "Held-out mean accepted tokens" in card


def test_stored_weights_are_int8_rows_that_load_back_to_what_was_evaluated(tmp_path, target, monkeypatch):
    """`pack` keeps each matrix within half a step of its row's int8 grid, vectors in float16 and
    integers as they are; `stored` rounds a module to exactly what a loader reads back."""
    torch.manual_seed(0)
    monkeypatch.setattr(weight_storage, "SMALLEST", 64)
    state = {"w": torch.randn(64, 128), "zero": torch.zeros(64, 128), "small": torch.randn(4, 8), "bias": torch.randn(64),
             "ids": torch.arange(7)}
    packed = pack(state)
    assert {k: v.dtype for k, v in packed.items()} == {"w": torch.int8, "w" + SCALE: torch.float16, "zero": torch.int8,
                                                       "zero" + SCALE: torch.float16, "small": torch.float16,
                                                       "bias": torch.float16, "ids": torch.int64}
    step = packed["w" + SCALE].float()
    assert ((packed["w"].float() * step - state["w"]).abs() <= step / 2 + 1e-3 * step).all()
    assert packed["w"].abs().amax(1).eq(127).all() and packed["zero"].eq(0).all()
    head = HydraHeads(H, 2)
    for parameter in head.parameters():
        parameter.data = torch.randn_like(parameter)
    before = {k: v.clone() for k, v in head.state_dict().items()}
    stored(head)
    assert any(not torch.equal(before[k], v) for k, v in head.state_dict().items())  # it did round
    FAMILIES["hydra"].save(head, tmp_path / "h", target, "tiny")
    assert_stored_as_trained(tmp_path / "h" / "model.safetensors")
    loaded = load(tmp_path / "h", target, "tiny").head.state_dict()
    assert all(torch.equal(loaded[k], v) for k, v in head.state_dict().items())


@pytest.mark.parametrize("change, message", [
    (lambda w: w.pop("0.0.linear.weight" + SCALE), "0.0.linear.weight is int8 without its scales"),
    (lambda w: w.update({"0.0.linear.weight" + SCALE: torch.ones(3, 1).half()}), "has shape \\(3, 1\\)"),
    (lambda w: w.update({"0.0.linear.bias" + SCALE: torch.ones(H, 1).half()}), "scales no int8 tensor"),
])
def test_a_broken_int8_file_fails_in_one_line_naming_the_key(tmp_path, target, change, message, monkeypatch):
    monkeypatch.setattr(weight_storage, "SMALLEST", 64)
    weights = pack(medusa_weights(own_vocab=False))
    change(weights)
    with pytest.raises(CheckpointError, match=message):
        load(write(tmp_path / "m", {"medusa_num_heads": 3, "medusa_num_layers": 1}, weights, "medusa_lm_head.safetensors"),
             target)


HEADS_BUDGET_MB = 80  # CONTRIBUTING.md states it (DFlash's five draft layers, its paper's depth, are 19 MB)


def test_the_shipped_heads_stay_small():
    """Every trained head for the embedded model ships in the repository: together the twelve stay
    under the budget CONTRIBUTING.md states (int8 storage; the first ten in float16 were 69 MB), so a
    clone stays quick and a retrain adds little history."""
    root = Path(__file__).resolve().parents[2]
    folder = root / "reference_impls" / "trained_heads"
    sizes = {path.relative_to(folder).as_posix(): path.stat().st_size for path in folder.rglob("*") if path.is_file()}
    assert sum(sizes.values()) < HEADS_BUDGET_MB * 1e6, sorted(sizes.items(), key=lambda item: -item[1])[:5]
    assert f"Size budget: {HEADS_BUDGET_MB} MB" in (root / "CONTRIBUTING.md").read_text(encoding="utf-8")
