"""`specatlas run` answers bad input with one clear line, before loading anything."""

import pytest

from specatlas.cli import main


@pytest.mark.parametrize("argv, expected", [
    (["pdl"], "unknown method 'pdl'; closest: pld"),
    (["CATALOGED"], "is cataloged but has no reference implementation yet; implemented: "),
    (["pld", "--max-new-tokens", "0"], "--max-new-tokens must be at least 1"),
    (["pld", "--top-p", "1.5"], "--top-p must be in (0, 1]"),
    (["pld", "--temperature", "-1"], "--temperature must be >= 0"),
    (["pld", "--draft-length", "many"], "--draft-length must be 'paper', 'cost-aware' or a positive integer"),
    (["pld", "--top-k", "-2"], "--top-k must be in 0.."),
    (["pld", "--model", "/no/such/folder"], "/no/such/folder does not exist"),
    (["pld", "--device", "cuda:7"], "device 'cuda:7' is not available"),
    (["pld", "--dtype", "int3"], "unknown dtype 'int3'"),
])
def test_bad_input_gets_one_clear_line(argv, expected, capsys):
    if argv[0] == "CATALOGED":  # any cataloged paper without an implementation (they get implemented over time)
        from specatlas.impls.registry import METHODS
        from specatlas.paths import papers_dir

        paper = next((path.stem for path in sorted(papers_dir().glob("*.yaml")) if path.stem not in METHODS), None)
        if paper is None:
            pytest.skip("every cataloged paper is implemented")
        argv, expected = [paper], f"{paper} {expected}"
    status = main(["run", *argv, "--prompt", "hi"])
    err = capsys.readouterr().err
    assert status != 0
    assert expected in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("argv, expected", [
    (["pld", "--prompt", "hi", "--temperature", "nan"], "--temperature must be >= 0"),
    (["pld", "--prompt", "hi", "--temperature", "1e9"], "--temperature must be >= 0 and at most 100"),
    (["pld", "--prompt", "hi", "--top-p", "inf"], "--top-p must be in (0, 1]"),
    (["pld", "--prompt", "hi", "--seed", str(2**64)], "--seed must be in 0..2**63-1"),
    (["pld", "--prompt", "hi", "--draft-length", "\u00b2"], "--draft-length must be 'paper', 'cost-aware' or a positive integer"),
    (["pld", "--prompt", "caf\udce9"], "--prompt is not valid UTF-8 (byte 0xe9 at character 3)"),
    (["pld", "--prompt", "  "], "--prompt is empty"),
])
def test_every_number_and_the_prompt_are_checked_before_loading(argv, expected, capsys):
    status = main(["run", *argv])
    err = capsys.readouterr().err
    assert status == 2 and expected in err and err.count("\n") == 1 and "Traceback" not in err


def test_prompt_file_problems_are_one_line(tmp_path, capsys):
    (tmp_path / "latin1.txt").write_bytes("caf\u00e9".encode("latin-1"))
    assert main(["run", "pld", "--prompt-file", str(tmp_path / "latin1.txt")]) == 2
    assert "byte 0xe9 at offset 3 is not UTF-8; save the file as UTF-8" in capsys.readouterr().err
    assert main(["run", "pld", "--prompt-file", str(tmp_path / "none.txt")]) == 2
    assert "none.txt cannot be read: No such file or directory" in capsys.readouterr().err


@pytest.mark.model
def test_prompt_file_gives_the_same_tokens_as_prompt(tmp_path, capsys):
    import json

    text = "Name three colours.\n\nAnswer in one line: caf\u00e9, \u00fcber, \u2014 fine."
    (tmp_path / "prompt.txt").write_text(text, encoding="utf-8")
    assert main(["run", "baseline", "--prompt-file", str(tmp_path / "prompt.txt"), "--max-new-tokens", "6", "--json"]) == 0
    from_file = json.loads(capsys.readouterr().out)
    assert main(["run", "baseline", "--prompt", text, "--max-new-tokens", "6", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tokens"] == from_file["tokens"] and len(from_file["tokens"]) == 6


@pytest.mark.model
@pytest.mark.parametrize("words, max_new_tokens, message", [
    (9000, 8, "the model's context holds 8192"),  # the prompt alone does not fit
    (3, 8190, "more than the model's 8192-token context"),  # prompt + new tokens do not
])
def test_a_prompt_beyond_the_context_is_refused_before_any_compute(tmp_path, capsys, monkeypatch, words,
                                                                   max_new_tokens, message):
    from specatlas.impls.engine.decoding import SpeculativeDecoder

    def no_compute(*args, **kwargs):
        raise AssertionError("generate ran: the prompt should have been refused first")

    monkeypatch.setattr(SpeculativeDecoder, "generate", no_compute)
    (tmp_path / "long.txt").write_text("word " * words, encoding="utf-8")
    status = main(["run", "baseline", "--prompt-file", str(tmp_path / "long.txt"), "--max-new-tokens", str(max_new_tokens)])
    err = capsys.readouterr().err
    assert status == 2 and message in err
    assert err.count("\n") == 1 and "Traceback" not in err
