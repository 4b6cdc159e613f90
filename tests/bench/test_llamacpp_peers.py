"""llama.cpp peers: their rows measured against llama.cpp's own greedy decoding (summary,
leaderboard, result check), a clear line when they cannot run, and the peers themselves on the
embedded model's GGUF file."""

import sys

import pytest
from benchruns import build_run, sample, turn

from specatlas.bench import contenders as cs
from specatlas.bench.check import check
from specatlas.bench.leaderboard_page import measured_markdown
from specatlas.bench.measured import measured_rows
from specatlas.bench.protocol import encode_conversation, llamacpp_ids
from specatlas.cli import main

LOOKUP = "llamacpp-prompt-lookup"
LLAMA_ROWS = {cs.LLAMACPP_GREEDY: {"kind": "peer", "lossless": False, "relative_to": cs.LLAMACPP_GREEDY},
              LOOKUP: {"kind": "peer", "lossless": False, "relative_to": cs.LLAMACPP_GREEDY}}


@pytest.fixture
def llama_run():
    """baseline 4 tokens/s; llama.cpp greedy 8 tokens/s (its first token differs from the baseline's);
    llama.cpp prompt lookup 16 tokens/s, its tokens llama.cpp greedy's."""
    return build_run([
        sample("baseline", "1", "qa", turn([1, 2, 3, 4], 1.0)),
        sample(cs.LLAMACPP_GREEDY, "1", "qa", turn([9, 2, 3, 4], 0.5, timed=False)),
        sample(LOOKUP, "1", "qa", turn([9, 2, 3, 4], 0.25, steps=2, widths={4: 1}, timed=False)),
    ], methods=("baseline", cs.LLAMACPP_GREEDY, LOOKUP), fields=LLAMA_ROWS)


def test_llama_rows_are_measured_against_llama_cpp_greedy(llama_run):
    greedy, lookup = llama_run.summary[cs.LLAMACPP_GREEDY], llama_run.summary[LOOKUP]
    assert greedy["overall"]["speedup"] == 1.0 and lookup["overall"]["speedup"] == 2.0  # not 2.0 and 4.0 over ours
    # prompt lookup's tokens are compared with llama.cpp greedy's; llama.cpp greedy's with our baseline's
    assert lookup["lossless"]["status"] == "pass"
    assert greedy["lossless"]["status"] == "fail" and greedy["lossless"]["first_divergence"]["position"] == 0


def test_leaderboard_shows_llama_rows_apart_over_their_own_greedy(llama_run, write_run):
    path = write_run(llama_run)
    assert check(path) == []  # neither llama row claims token identity, so a divergence is no problem
    page = measured_markdown(path.parent)
    main_table = page[page.index("| # | Method"):page.index("**Other engines")]
    assert "llamacpp" not in main_table
    engines = page[page.index("**Other engines, each against its own greedy decoding**"):]
    lookup_row = next(line for line in engines.splitlines() if line.startswith(f"| {LOOKUP.replace('-', chr(92) + '-')} |"))
    assert "**2.00×** over llamacpp\\-greedy" in lookup_row and "| 16.00 |" in lookup_row
    assert "llamacpp\\-greedy: 1/1" in lookup_row
    greedy_row = next(line for line in engines.splitlines() if line.startswith("| llamacpp\\-greedy |"))
    assert "**1.00×**" in greedy_row and "| 8.00 |" in greedy_row and "our baseline: 0/1" in greedy_row
    assert "llamacpp\\-prompt\\-lookup \\(over llamacpp\\-greedy\\) | – | 2.00× |" in page  # the runs block
    # never the fastest method, and not among the rows other pages quote
    assert {row.method_id for row in measured_rows(path.parent)} == {"baseline"}


def test_list_shows_the_llama_cpp_peers(capsys):
    assert main(["bench", "--list"]) == 0
    out = capsys.readouterr().out
    assert "llamacpp-greedy" in out and "llamacpp-prompt-lookup" in out


def test_missing_llama_cpp_python_is_one_line_naming_make_peers(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # `import llama_cpp` now raises ImportError
    assert main(["bench", LOOKUP]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "llama-cpp-python" in err and "make peers" in err and ".[peers]" in err
    # --all leaves them out, saying why, and measures the rest
    assert llamacpp_ids(["hf-generate", cs.LLAMACPP_GREEDY, LOOKUP], None, []) == ["hf-generate"]
    assert "leaving out llamacpp-greedy, llamacpp-prompt-lookup" in capsys.readouterr().err


def test_another_model_is_refused_in_one_line(capsys):
    assert main(["bench", cs.LLAMACPP_GREEDY, "--model", "some/other-model"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "embedded model's own GGUF file only, not --model some/other-model" in err


@pytest.mark.model
def test_llama_cpp_on_the_embedded_gguf_decodes_our_prompt_ids(embedded, monkeypatch):
    import llama_cpp
    import torch

    from specatlas.impls.engine.draft_length import DraftLengthPolicy
    from specatlas.impls.engine.models import embedded_gguf, eos_ids
    from specatlas.impls.registry import METHODS

    text = "Explain speculative decoding in two sentences."
    prompt = encode_conversation(embedded.tokenizer, [text], [])
    # The GGUF's own tokenizer gives the ids we feed it, chat template's special tokens included.
    vocab = llama_cpp.Llama(str(embedded_gguf()), vocab_only=True, verbose=False)
    chat = embedded.tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                                  add_generation_prompt=True)
    assert vocab.tokenize(chat.encode(), add_bos=False, special=True) == prompt

    stop, threads = eos_ids(embedded.model, embedded.tokenizer), torch.get_num_threads()
    greedy = cs.llamacpp_peer(cs.LLAMACPP_GREEDY, threads).generate(prompt, 16, 0.0, 0, stop)
    assert len(greedy.tokens) == 16 and greedy.steps == 16 and greedy.widths == {1: 15}
    # Our baseline decodes the same weights dequantized to float32: on this prompt the two agree for
    # 29 tokens (they part at a near-tie from llama.cpp's Q4_1 rounding).
    ours = cs.specatlas_method(METHODS["baseline"], embedded.model, None, DraftLengthPolicy.paper())
    assert greedy.tokens == ours.generate(prompt, 16, 0.0, 0, stop).tokens

    fed = []
    evaluate = llama_cpp.Llama.eval
    monkeypatch.setattr(llama_cpp.Llama, "eval", lambda self, tokens: (fed.append(len(tokens)), evaluate(self, tokens)))
    lookup = cs.llamacpp_peer(LOOKUP, threads)
    first = lookup.generate(prompt, 16, 0.0, 0, stop)
    assert first.tokens == greedy.tokens and max(first.widths) > 1  # it drafted, and kept greedy's tokens
    assert fed[0] == len(prompt) and len(fed) == first.steps
    fed.clear()
    again = lookup.generate(prompt, 16, 0.0, 0, stop)
    assert fed[0] == len(prompt)  # the whole prompt again: no cache carried over from the first generation
    assert again.tokens == first.tokens and again.widths == first.widths


@pytest.mark.model
def test_llama_cpp_prompt_lookup_decodes_past_512_tokens_of_context():
    """llama-cpp-python keeps every row's logits with a draft model but sized that buffer to its
    512-token batch unless told logits_all: a longer prompt failed to broadcast (a committed run's
    prompt lookup row died of it)."""
    prompt = [100 + (i * 37) % 4000 for i in range(520)]
    turn = cs.llamacpp_peer(LOOKUP, 2).generate(prompt, 8, 0.0, 0, set())
    assert len(turn.tokens) == 8 and turn.steps == sum(turn.widths.values()) + 1
