"""`specatlas run` answers bad input with one clear line, before loading anything."""

import pytest

from specatlas.cli import main


@pytest.mark.parametrize("argv, expected", [
    (["pdl"], "unknown method 'pdl'; closest: pld"),
    (["ankner2024hydra"], "ankner2024hydra is cataloged but has no reference implementation yet; implemented: baseline"),
    (["pld", "--max-new-tokens", "0"], "--max-new-tokens must be at least 1"),
    (["pld", "--top-p", "1.5"], "--top-p must be in (0, 1]"),
    (["pld", "--temperature", "-1"], "--temperature must be >= 0"),
    (["pld", "--draft-length", "many"], "--draft-length must be 'paper', 'auto' or a positive integer"),
    (["pld", "--top-k", "-2"], "--top-k must be >= 0"),
    (["pld", "--model", "/no/such/folder"], "/no/such/folder does not exist"),
    (["pld", "--device", "cuda:7"], "device 'cuda:7' is not available"),
    (["pld", "--dtype", "int3"], "unknown dtype 'int3'"),
])
def test_bad_input_gets_one_clear_line(argv, expected, capsys):
    if argv[0] == "ankner2024hydra":
        from specatlas.paths import papers_dir

        if not (papers_dir() / "ankner2024hydra.yaml").exists():
            pytest.skip("papers/ankner2024hydra.yaml is not in this checkout")
    status = main(["run", *argv, "--prompt", "hi"])
    err = capsys.readouterr().err
    assert status != 0
    assert expected in err and err.count("\n") == 1 and "Traceback" not in err
