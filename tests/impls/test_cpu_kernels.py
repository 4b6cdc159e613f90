"""Kernels chosen by measurement: each shape and row count runs the kernel timed faster, packed oneDNN
linears compute what the default kernel does, choices are cached per machine, and decoding through
them stays lossless (greedy output of every drafter equal to the baseline's on a real transformer)."""

import json

import pytest
import torch

from specatlas.impls.engine import cpu_kernels
from specatlas.impls.engine.decoding import SpeculativeDecoder
from specatlas.impls.engine.draft_length import FixedLength
from specatlas.impls.engine.drafting import PromptLookup
from specatlas.impls.drafters.model_free.recycling import PAPER_TREE, TokenRecycling

from .toy import tiny_llama

pytestmark = pytest.mark.skipif(not cpu_kernels.available(), reason="this torch build has no oneDNN linear ops")


def float32_llama(seed: int):
    return tiny_llama(seed, vocab=64).to(torch.float32)


@pytest.fixture
def every_row_packed(monkeypatch):
    """Timings that make the packed kernel win at every row count (no measuring in tests)."""
    def fake(out_features, in_features, rows=cpu_kernels.ROWS, rounds=3):
        return {"rows": list(rows), "mkl_ms": [2.0] * len(rows), "onednn-packed_ms": [1.0] * len(rows)}

    monkeypatch.setattr(cpu_kernels, "measure", fake)


def test_packed_linears_agree_with_the_default_kernel_at_every_row_count(tmp_path, every_row_packed):
    model = float32_llama(0)
    ids = torch.randint(0, 64, (1, 140))
    counts = [*range(1, 41), 63, 64, 65, 100, 140]  # measured counts, counts between and past them
    expected = [model(input_ids=ids[:, :rows]).logits for rows in counts]
    assert cpu_kernels.pack_linears(model, tmp_path) == cpu_kernels.packed_layers(model) == 2 * 7 + 1
    assert cpu_kernels.pack_linears(model, tmp_path) == 2 * 7 + 1  # packing twice swaps nothing more
    for rows, logits in zip(counts, expected):
        assert torch.allclose(model(input_ids=ids[:, :rows]).logits, logits, rtol=1e-4, atol=1e-5), rows


def test_each_shape_and_row_count_gets_the_kernel_measured_faster(tmp_path, monkeypatch):
    def fake(out_features, in_features, rows=cpu_kernels.ROWS, rounds=3):  # packed wins at 2-3 rows, and past 32 for the head
        packed = [1.0 if r in (2, 3) or (out_features == 64 and r > 32) else 3.0 for r in rows]
        return {"rows": list(rows), "mkl_ms": [2.0] * len(rows), "onednn-packed_ms": packed}

    monkeypatch.setattr(cpu_kernels, "measure", fake)
    model = float32_llama(3)
    cpu_kernels.pack_linears(model, tmp_path)
    head, attention = model.lm_head, model.model.layers[0].self_attn.q_proj
    assert head.packed_rows == {2, 3, 48, 64, 96, 128} and attention.packed_rows == {2, 3}
    assert "64x32: onednn-packed at 2-3, 48-128 rows" in cpu_kernels.describe(model)
    calls = []
    monkeypatch.setattr(cpu_kernels, "_packed_product", lambda *args: calls.append(args[0].shape[0]) or
                        torch.nn.functional.linear(args[0], head.weight if args[0].shape[-1] == 32 else None))
    head(torch.randn(1, 4, 32))
    head(torch.randn(1, 3, 32))
    head(torch.randn(1, 50, 32))  # between 48 and 64: 48 decides
    assert calls == [3, 50]


def test_choices_are_measured_once_per_machine_and_a_damaged_cache_is_measured_again(tmp_path, monkeypatch, capsys):
    measured = []

    def fake(out_features, in_features, rows=cpu_kernels.ROWS, rounds=3):
        measured.append((out_features, in_features))
        return {"rows": list(rows), "mkl_ms": [2.0] * len(rows), "onednn-packed_ms": [1.0] * len(rows)}

    monkeypatch.setattr(cpu_kernels, "measure", fake)
    cpu_kernels.pack_linears(float32_llama(4), tmp_path)
    shapes = len(measured)
    cpu_kernels.pack_linears(float32_llama(4), tmp_path)
    assert len(measured) == shapes == 4  # q/o, k/v, gate/up/head, down; the second model reads the cache
    (cache,) = (tmp_path / "kernels").glob("*.json")
    assert json.loads(cache.read_text())["machine"]["torch"] == torch.__version__
    cache.write_text("{not json")
    cpu_kernels.pack_linears(float32_llama(4), tmp_path)
    assert len(measured) == 2 * shapes and f"ignoring the damaged kernel choices {cache}" in capsys.readouterr().err


def test_the_packed_copy_follows_the_weight_through_to(tmp_path, every_row_packed):
    model = float32_llama(5)
    ids = torch.randint(0, 64, (1, 6))
    cpu_kernels.pack_linears(model, tmp_path)
    assert "packed" not in model.state_dict() and not any(key.endswith(".packed") for key in model.state_dict())
    model.to(torch.float64)
    assert cpu_kernels.packed_layers(model) == 0  # float64: the default kernel
    double = model(input_ids=ids).logits
    model.to(torch.float32)
    assert cpu_kernels.packed_layers(model) == 2 * 7 + 1
    assert torch.allclose(model(input_ids=ids).logits.double(), double, rtol=1e-4, atol=1e-5)


def test_a_gradient_through_packed_linears_is_the_default_kernels(tmp_path, every_row_packed):
    """The packed kernel has no backward: an input that needs a gradient (PaSS trains its look-ahead
    embeddings through the frozen target) takes the default kernel, and gets its gradient."""
    model = float32_llama(2).requires_grad_(False)
    embeds = torch.randn(1, 5, model.config.hidden_size)
    grads = []
    for pack in (False, True):
        if pack:
            cpu_kernels.pack_linears(model, tmp_path)
        x = embeds.clone().requires_grad_(True)
        model(inputs_embeds=x).logits.sum().backward()
        grads.append(x.grad)
    torch.testing.assert_close(grads[1], grads[0], rtol=1e-4, atol=1e-5)


def test_only_float32_cpu_linears_are_packed(tmp_path, every_row_packed):
    assert cpu_kernels.pack_linears(tiny_llama(0), tmp_path) == 0  # float64


def test_decoding_through_packed_linears_stays_token_identical_to_the_baseline(tmp_path):
    model = float32_llama(1)
    cpu_kernels.pack_linears(model, tmp_path)  # measured for real: whatever wins here
    baseline = SpeculativeDecoder(model)
    drafters = {"prompt lookup": PromptLookup(), "token recycling": TokenRecycling(PAPER_TREE)}
    for name, drafter in drafters.items():
        decoder = SpeculativeDecoder(model, drafter, draft_length=FixedLength(6))
        for prompt in ([1, 2, 3, 1, 2], [5, 9, 5, 9, 5, 9, 5], list(range(20))):
            assert decoder.generate(prompt, 24).tokens == baseline.generate(prompt, 24).tokens, name


def test_default_kernels_suspends_packing_inside_only(tmp_path, every_row_packed):
    """Only the models named, only while inside: another packed model keeps its kernel (the
    suspension is no process-wide switch, which PEARL's drafter thread would also see)."""
    model, other = float32_llama(2), float32_llama(2)
    ids = torch.randint(0, 64, (1, 8))
    stock = model(input_ids=ids).logits
    for packed in (model, other):
        cpu_kernels.pack_linears(packed, tmp_path)
        # A packed head of zeros tells which path ran (the head has no bias).
        packed.lm_head.packed = torch.ops.mkldnn._reorder_linear_weight(torch.zeros_like(packed.lm_head.weight), None)
    with torch.no_grad():
        with cpu_kernels.default_kernels(model):
            assert torch.equal(model(input_ids=ids).logits, stock)
            assert cpu_kernels.suspended(model) and not cpu_kernels.suspended(other)
            assert not other(input_ids=ids).logits.any()
        assert not model(input_ids=ids).logits.any() and not cpu_kernels.suspended(model)


def test_calibrate_times_the_curve_on_default_and_measured_kernels(tmp_path, monkeypatch, every_row_packed, capsys):
    """`specatlas calibrate --kernels`: the default curve runs torch's kernel only, the measured one
    the packed kernel (it wins at every row count here); each is its own calibration, never the
    other's cached one; `both` prints them side by side."""
    from specatlas.cli import main

    from .tiny_world import model_folder

    monkeypatch.setenv("SPECATLAS_CACHE", str(tmp_path / "cache"))
    folder = model_folder(tmp_path / "tiny")
    calls = {"packed": 0, "default": 0}
    packed_product, linear = cpu_kernels._packed_product, cpu_kernels.F.linear

    def counted(kernel, function):
        def run(*args, **kwargs):
            calls[kernel] += 1
            return function(*args, **kwargs)
        return run

    monkeypatch.setattr(cpu_kernels, "available", lambda: True)  # its own check runs both kernels once
    monkeypatch.setattr(cpu_kernels, "_packed_product", counted("packed", packed_product))
    monkeypatch.setattr(cpu_kernels.F, "linear", counted("default", linear))
    for kernels, ran, idle in (("measured", "packed", "default"), ("default", "default", "packed")):
        calls.update(packed=0, default=0)
        assert main(["calibrate", "--model", str(folder), "--max-width", "3", "--kernels", kernels]) == 0
        assert calls[ran] > 0 and calls[idle] == 0, (kernels, calls)
        out = capsys.readouterr().out.splitlines()
        assert out[2] == f"new tokens | {kernels}: ms per forward | x one-token step"
        assert [line.split("|")[0].strip() for line in out[3:]] == ["1", "2", "3"]
    assert main(["calibrate", "--model", str(folder), "--max-width", "3", "--kernels", "both"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "kernels, default: torch's own (mkl on CPU) everywhere"
    assert out[2].startswith("kernels, measured: ") and "onednn-packed at 1-128 rows" in out[2]
    assert out[3] == "new tokens | default: ms per forward | x one-token step | measured: ms per forward | x one-token step"
    rows = [[cell.strip() for cell in line.split("|")] for line in out[4:]]
    assert [row[0] for row in rows] == ["1", "2", "3"] and all(len(row) == 5 for row in rows)
    assert rows[0][2] == rows[0][4] == "1.00"  # each curve relative to its own one-token forward


def test_load_model_runs_the_kernels_its_caller_names(tmp_path, every_row_packed, monkeypatch):
    """torch's own unless the caller names the measured choice; the commands' choice
    (`machine_kernels`) is the measured one, torch's own under SPECATLAS_PACKED_LINEARS=0."""
    from specatlas.impls.engine import models

    from .tiny_world import model_folder

    folder = str(model_folder(tmp_path / "model"))
    monkeypatch.setenv("SPECATLAS_CACHE", str(tmp_path / "cache"))
    cpu = torch.device("cpu")
    assert cpu_kernels.packed_layers(models.load_model(folder, cpu, torch.float32).model) == 0
    measured = cpu_kernels.KernelChoice(measured=True, cache_dir=tmp_path / "cache")
    assert cpu_kernels.packed_layers(models.load_model(folder, cpu, torch.float32, kernels=measured).model) > 0
    monkeypatch.delenv("SPECATLAS_PACKED_LINEARS", raising=False)
    assert models.machine_kernels() == measured
    monkeypatch.setenv("SPECATLAS_PACKED_LINEARS", "0")
    assert not models.machine_kernels().measured
