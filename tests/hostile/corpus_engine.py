"""The hostile-input corpus for what reaches the decoding engine: sampling settings, the model cache
and model folders, chat templates, caches of measurements, token shards, resumable jobs, prompt and
question files. Cases run on a tiny random Llama given as `--model` (or installed as the embedded
model's cache), so none needs the real model.

Cases are corpus.py's `Case`, run by `run_case` here: corpus.run_case inside a context a case may
name (`during`), entered in this process before the CLI's child is forked, so the child inherits it
and this process undoes it after: a lock another job holds, or the embedded model's conversion
replaced by installing the tiny model (the real one dequantizes a 270 MB GGUF for 20 s).

`python tests/hostile/corpus_engine.py` runs these cases and prints the tally.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent.parent)]

from corpus import Case, Outcome, run_case as corpus_run_case, run_cli, tally as corpus_tally  # noqa: E402

MODEL = "{tmp}/model"
MODEL_TIMEOUT = 60  # loading the tiny model and decoding a few tokens takes seconds, on a busy machine tens


@dataclass
class EngineCase(Case):
    during: Callable[[Path, Path], contextlib.AbstractContextManager] | None = None  # (root, tmp) -> context
    kernels: bool = False  # time the CPU kernels as a first run does (20 s); else torch's own kernels
    timeout: float = MODEL_TIMEOUT


def run_case(case: Case, tmp: Path) -> Outcome:
    root = tmp / "catalog"  # as corpus.make_root names it
    during = getattr(case, "during", None) or (lambda root, tmp: contextlib.nullcontext())
    saved = os.environ.get("SPECATLAS_PACKED_LINEARS")
    os.environ["SPECATLAS_PACKED_LINEARS"] = "1" if getattr(case, "kernels", False) else "0"
    try:
        with during(root, tmp):
            return corpus_run_case(case, tmp)
    finally:
        if saved is None:
            os.environ.pop("SPECATLAS_PACKED_LINEARS")
        else:
            os.environ["SPECATLAS_PACKED_LINEARS"] = saved


# The tiny model ----------------------------------------------------------------------------------

@lru_cache(maxsize=1)
def _tiny_model() -> Path:
    """tiny_world's `--model` folder, built once per process (copied into each case)."""
    from tests.impls.tiny_world import model_folder

    return model_folder(Path(tempfile.mkdtemp(prefix="tiny-model-")) / "model")


def _model(*edits: Callable[[Path], None], name: str = "model") -> Callable[[Path, Path], None]:
    """A prepare step: the tiny model as tmp/`name`, then `edits` applied to the folder."""
    def prepare(root: Path, tmp: Path) -> None:
        folder = tmp / name
        shutil.copytree(_tiny_model(), folder)
        for edit in edits:
            edit(folder)
    return prepare


def _json_edit(name: str, **changes) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        path = folder / name
        path.write_text(json.dumps(json.loads(path.read_text()) | changes))
    return edit


def _write(name: str, content: str | bytes) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        (folder / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    return edit


def _sparse(name: str, size: int) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        with open(folder / name, "wb") as f:
            f.truncate(size)
    return edit


def _deep(n: int = 100_000) -> str:
    return "[" * n + "]" * n


def _template(text: str) -> Callable[[Path], None]:
    return _json_edit("tokenizer_config.json", chat_template=text)


CHAT = "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}{% if add_generation_prompt %}<a>{% endif %}"


# The embedded model's cache, installed from the tiny model -------------------------------------

def _cache(tmp: Path) -> Path:
    from specatlas.impls.engine.models import EMBEDDED

    return tmp / "cache" / "models" / EMBEDDED


@contextlib.contextmanager
def _tiny_embedded(root: Path, tmp: Path):
    """The embedded model's conversion replaced by installing the tiny model with its manifest."""
    from specatlas.impls.engine import models

    def convert(folder, gguf_name, target):
        staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=target.parent))
        shutil.rmtree(staging)
        shutil.copytree(_tiny_model(), staging)
        models.write_manifest(staging)
        models.install_cache(staging, target)

    saved = models._convert_gguf
    models._convert_gguf = convert
    try:
        yield
    finally:
        models._convert_gguf = saved


def _damaged_cache(*edits: Callable[[Path], None]) -> Callable[[Path, Path], None]:
    """A prepare step: a complete cache of the tiny model, then damaged by `edits`."""
    def prepare(root: Path, tmp: Path) -> None:
        from specatlas.impls.engine import models

        target = _cache(tmp)
        target.parent.mkdir(parents=True)
        shutil.copytree(_tiny_model(), target)
        models.write_manifest(target)
        for edit in edits:
            edit(target)
    return prepare


def _zero_weights(folder: Path) -> None:
    path = folder / "model.safetensors"
    data = bytearray(path.read_bytes())
    data[-4096:] = bytes(4096)
    path.write_bytes(bytes(data))


def _cut(name: str, keep: int) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        path = folder / name
        path.write_bytes(path.read_bytes()[:keep])
    return edit


def _cache_healed(root: Path, tmp: Path, text: str) -> str | None:
    from specatlas.impls.engine.models import cache_problem

    problem = cache_problem(_cache(tmp))
    return f"the cache is still damaged: {problem}" if problem else None


# Checks ----------------------------------------------------------------------------------------

def _json_line(text: str) -> dict | None:
    for line in text.splitlines():
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                return json.loads(line)
    return None


def _greedy_tokens(method: str, model: str = MODEL):
    """A check: the run's --json tokens are those of the same run at temperature 0."""
    def check(root: Path, tmp: Path, text: str) -> str | None:
        got = _json_line(text)
        argv = [a.replace("{tmp}", str(tmp)) for a in ["run", method, "--model", model, "--prompt", "abc abc abc",
                                                       "--max-new-tokens", "12", "--json"]]
        (tmp / "greedy").mkdir()
        code, out, err = run_cli(argv, root, tmp / "greedy", 60, cwd=root)
        want = _json_line(out)
        if got is None or want is None:
            return f"no JSON output ({err.strip()[-200:]})"
        if got["tokens"] != want["tokens"]:
            return f"tokens {got['tokens']} differ from greedy {want['tokens']}"
        return None if got.get("sampling_notice") and "greedily" in got["sampling_notice"] else "no notice in --json"
    return check


def _no_escape(root: Path, tmp: Path, text: str) -> str | None:
    return "a raw ESC or BEL reached the terminal" if "\x1b" in text or "\x07" in text or "\x9b" in text else None


def _lacks(fragment: str):
    def check(root: Path, tmp: Path, text: str) -> str | None:
        return f"the output says {fragment!r}" if fragment in text else None
    return check


def _report(predicate: Callable[[dict], str | None]):
    """A check on advise's --json report."""
    def check(root: Path, tmp: Path, text: str) -> str | None:
        report = _json_line(text)
        return "no JSON report" if report is None else predicate(report)
    return check


# Token shards and data folders -----------------------------------------------------------------

def _shard_bytes(conversations, vocab: int = 100) -> bytes:
    from specatlas.impls.families.answers import write_shard

    with tempfile.TemporaryDirectory() as scratch:
        return write_shard(Path(scratch) / "s.npz", conversations, vocab)


def _conversations(k: int, answer: list[int] | None = None):
    from specatlas.impls.families.answers import Conversation, text_sha

    return [Conversation(f"project:train:{k}-{i}", text_sha(f"p{k}-{i}"), [1, 2, 3], answer or [5] * 10, True)
            for i in range(3)]


def _zip_bomb() -> bytes:
    import io
    import zipfile

    from specatlas.impls.families.answers import MAX_SHARD_BYTES

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        with archive.open("answers.npy", "w", force_zip64=True) as member:
            for _ in range(MAX_SHARD_BYTES // (1 << 20) + 8):
                member.write(bytes(1 << 20))
    return buffer.getvalue()


def _data_folder(kind: str = "answers", shard: bytes | None = None, listed: bytes | None = None,
                 count: int = 3) -> Callable[[Path, Path], None]:
    """A prepare step: a train-data folder tmp/td of `count` shards of `kind` (and the tiny model),
    the first replaced on disk by `shard` while the manifest lists the hash of `listed` (default:
    of what is on disk)."""
    def prepare(root: Path, tmp: Path) -> None:
        from specatlas.data_shards import shard_entry
        from specatlas.train_data import MARKER

        _model(_template(CHAT))(root, tmp)
        folder = tmp / "td"
        folder.mkdir(exist_ok=True)  # a lock another job holds may be there already
        (folder / MARKER).write_text("written by specatlas train-data\n")
        entries = []
        for k in range(count):
            conversations = _conversations(k)
            data = _shard_bytes(conversations, 64)
            on_disk = shard if (k == 0 and shard is not None) else data
            name = f"{kind}-{k:05d}.npz"
            (folder / name).write_bytes(on_disk)
            entries.append(shard_entry(name, conversations, listed if (k == 0 and listed is not None) else on_disk))
        other = "magpie" if kind == "answers" else "answers"
        (folder / "manifest.json").write_text(json.dumps({kind: entries, other: []}))
    return prepare


# Locks held by another job ---------------------------------------------------------------------

def _held(lock: Callable[[Path, Path], Path]):
    """A `during` context: another job holds the lock file `lock(root, tmp)` (flock, as
    fsutil.exclusive takes it) while the case runs."""
    @contextlib.contextmanager
    def during(root: Path, tmp: Path):
        path = lock(root, tmp)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            os.close(fd)
    return during


def _bench_lock(root: Path, tmp: Path) -> Path:
    import hashlib

    out = str((tmp / "out").resolve())
    return tmp / "cache" / "locks" / f"bench-{hashlib.sha256(out.encode()).hexdigest()[:16]}.lock"


def _training_lock(root: Path, tmp: Path) -> Path:
    """training.training_lock's file for the tiny model, under the case's cache."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in str(tmp / "model"))
    return tmp / "cache" / "train-features" / f"{safe}-v2.lock"


# Prompt and question files ---------------------------------------------------------------------

def _question(text: str) -> str:
    return json.dumps({"question_id": 1, "category": "mycat", "turns": [text]}, ensure_ascii=False) + "\n"


PROMPTS = 300_000  # all encoded at once, their chat template and tokenizer alone outlast the budget


def _big_prompt_file(root: Path, tmp: Path) -> None:
    (tmp / "many.txt").write_text("".join(f"question number {i}, short and plain?\n" for i in range(PROMPTS)))


OSC52 = "\x1b]52;c;ZWNobyBwd25lZA==\x07 and \x1b[2J\x9b31m"


# The cases -------------------------------------------------------------------------------------

def cases() -> list[Case]:
    run = ["run", "pld", "--model", MODEL, "--prompt", "abc abc abc", "--max-new-tokens", "12"]
    tiny = _model()
    embedded = ["run", "pld", "--prompt", "abc abc abc", "--max-new-tokens", "6"]
    heal = dict(fails=False, message="converting the embedded model again", during=_tiny_embedded, check=_cache_healed)
    advise = ["advise", "pld", "--model", MODEL, "--max-new-tokens", "4", "--minutes", "0.1", "--json"]
    questions = ["bench", "baseline", "--questions", "{tmp}/q.jsonl", "--categories", "nothing-here"]
    td = ["train-data", "--model", MODEL, "--output", "{tmp}/td", "--tokens", "100000", "--magpie", "768"]
    return [
        # -- 1. a point-mass temperature: the greedy text, said so
        *[EngineCase(f"run-temperature-{label}-{method}", ["run", method, "--model", MODEL, "--prompt", "abc abc abc",
                                                          "--max-new-tokens", "12", "--json", "--temperature", value],
                     prepare=tiny, fails=False, check=_greedy_tokens(method))
          for label, value in (("1e-40", "1e-40"), ("denormal", "5e-324"))
          for method in ("baseline", "pld", "specinfer")],
        EngineCase("run-temperature-1e-40-compare", [*run, "--temperature", "1e-40", "--compare"], prepare=tiny,
                   fails=False, message="outputs token-identical", check=_lacks("identity not expected")),
        EngineCase("run-temperature-1e-40-header", [*run, "--temperature", "1e-40"], prepare=tiny, fails=False,
                   message="decoded greedily"),
        # -- 2. a damaged model cache: named, converted again, then used
        EngineCase("cache-config-activation", embedded, prepare=_damaged_cache(_json_edit("config.json", hidden_act="relu")),
                   **heal),
        EngineCase("cache-config-rope-theta", embedded, prepare=_damaged_cache(_json_edit("config.json", rope_theta=1.0)),
                   **heal),
        EngineCase("cache-config-untied", embedded,
                   prepare=_damaged_cache(_json_edit("config.json", tie_word_embeddings=True)), **heal),
        EngineCase("cache-config-context-16", embedded,
                   prepare=_damaged_cache(_json_edit("config.json", max_position_embeddings=16)), **heal),
        EngineCase("cache-weights-zeroed", embedded, prepare=_damaged_cache(_zero_weights), **heal),
        EngineCase("cache-tokenizer-truncated", embedded, prepare=_damaged_cache(_cut("tokenizer.json", 300)), **heal),
        EngineCase("cache-added-chat-template", embedded,
                   prepare=_damaged_cache(_write("chat_template.jinja", "{% for i in range(9) %}x{% endfor %}")), **heal),
        EngineCase("cache-without-manifest", embedded,
                   prepare=_damaged_cache(lambda f: (f / "manifest.json").unlink()), **heal),
        EngineCase("cache-manifest-deep", embedded, prepare=_damaged_cache(_write("manifest.json", _deep())), **heal),
        EngineCase("cache-config-deep", embedded, prepare=_damaged_cache(_write("config.json", _deep())), **heal),
        EngineCase("cache-generation-config-deep", embedded,
                   prepare=_damaged_cache(_write("generation_config.json", _deep())), **heal),
        EngineCase("cache-config-sparse-3gb", embedded, prepare=_damaged_cache(_sparse("config.json", 3 << 30)), **heal),
        # -- 3. deep or huge JSON in a model folder and in caches
        EngineCase("model-config-deep", run, prepare=_model(_write("config.json", _deep())), message="nested too deeply"),
        EngineCase("model-config-sparse-3gb", run, prepare=_model(_sparse("config.json", 3 << 30)),
                   message="3,221,225,472 bytes"),
        EngineCase("model-tokenizer-config-deep", run, prepare=_model(_write("tokenizer_config.json", _deep())),
                   message="nested too deeply"),
        EngineCase("kernel-cache-deep", run, prepare=tiny, fails=False, message="ignoring the damaged kernel choices",
                   during=_kernel_cache(_deep()), kernels=True, timeout=120),
        EngineCase("kernel-cache-sparse", run, prepare=tiny, fails=False, message="ignoring the damaged kernel choices",
                   during=_kernel_cache(None), kernels=True, timeout=120),
        # -- 4. chat templates: sandboxed, bounded in time, memory and output
        EngineCase("chat-template-endless-loops", run, message="did not finish within",
                   prepare=_model(_template("{% for a in range(99999) %}{% for b in range(99999) %}{% for c in "
                                            "range(99999) %}{% endfor %}{% endfor %}{% endfor %}"))),
        EngineCase("chat-template-doubling", run, message="chat template",
                   prepare=_model(_template("{% set ns = namespace(s='xxxxxxxx') %}{% for i in range(60) %}"
                                            "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}"))),
        EngineCase("chat-template-huge-output", run, message="wrote over",
                   prepare=_model(_template("{% for i in range(99999) %}{{ 'x' * 999 }}{% endfor %}"))),
        EngineCase("chat-template-raises", run, message="chat template failed: no",
                   prepare=_model(_template("{{ raise_exception('no') }}"))),
        EngineCase("chat-template-recursion", run, message="chat template",
                   prepare=_model(_template("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"))),
        EngineCase("chat-template-python-escape", run, message="chat template failed",
                   prepare=_model(_template("{{ messages.__class__.__mro__[1].__subclasses__() }}"))),
        EngineCase("chat-template-jinja-file-loops", run, message="did not finish within",
                   prepare=_model(_write("chat_template.jinja", "{% for a in range(99999) %}{% for b in range(99999) %}"
                                         "{% endfor %}{% endfor %}"))),
        EngineCase("advise-chat-template-loops", advise, message="did not finish within",
                   prepare=_model(_template("{% for a in range(99999) %}{% for b in range(99999) %}{% endfor %}"
                                            "{% endfor %}"))),
        EngineCase("run-good-chat-template", run, prepare=_model(_template(CHAT)), fails=False, message="tokens/s"),
        # -- 5. token shards and train-data's resume
        EngineCase("train-data-resume-changed-shard", td, message="does not match the hash in its manifest",
                   prepare=_data_folder("magpie", shard=_shard_bytes(_conversations(9), 64),
                                        listed=_shard_bytes(_conversations(0), 64))),
        EngineCase("train-data-zip-bomb-shard", td, message="unpacks to",
                   prepare=_data_folder("magpie", shard=_zip_bomb())),
        EngineCase("train-data-shard-outside-vocabulary", td, message="outside the vocabulary of 64",
                   prepare=_data_folder("magpie", shard=_shard_bytes(_conversations(0, [5, 70000, 6]), 1 << 17))),
        EngineCase("train-zip-bomb-shard", ["train", "medusa", "--model", MODEL, "--data", "{tmp}/td", "--output",
                                            "{tmp}/head", "--steps", "1"], message="unpacks to",
                   prepare=_data_folder(shard=_zip_bomb())),
        EngineCase("train-shard-outside-vocabulary", ["train", "medusa", "--model", MODEL, "--data", "{tmp}/td",
                                                      "--output", "{tmp}/head", "--steps", "1"],
                   message="outside the vocabulary of 64",
                   prepare=_data_folder(shard=_shard_bytes(_conversations(0, [5, 64, 6]), 100))),
        # -- 6. two jobs on one output: the second is refused in one line
        EngineCase("train-data-twice-at-once", td, prepare=_data_folder("magpie"), message="already running",
                   during=_held(lambda root, tmp: tmp / "td" / ".specatlas-train-data")),
        EngineCase("bench-twice-at-once", ["bench", "baseline", "--model", MODEL, "--out", "{tmp}/out",
                                           "--max-new-tokens", "2"], prepare=tiny, message="already running",
                   during=_held(_bench_lock)),
        EngineCase("train-twice-at-once", ["train", "medusa", "--model", MODEL, "--data", "{tmp}/td", "--output",
                                           "{tmp}/head", "--steps", "1"], prepare=_data_folder(),
                   message="another specatlas training job", during=_held(_training_lock)),
        # -- 7. prompt and question files
        EngineCase("questions-line-separator", questions, {"../q.jsonl": _question("one\u2028two")},
                   message="the file has: mycat"),
        EngineCase("questions-next-line", questions, {"../q.jsonl": _question("one\u0085two\u000ctwo")},
                   message="the file has: mycat"),
        EngineCase("questions-latin-1", questions, {"../q.jsonl": _question("caf\u00e9").encode("latin-1")},
                   message="q.jsonl:1: byte 0xe9 at offset 54 is not UTF-8"),
        EngineCase("questions-second-line-latin-1", questions,
                   {"../q.jsonl": (_question("ok") + _question("na\u00efve")).encode("latin-1")},
                   message="q.jsonl:2: byte 0xef at offset 110 is not UTF-8"),
        EngineCase("questions-upper-case-suffix", [*questions[:3], "{tmp}/Q.JSONL", *questions[4:]],
                   {"../Q.JSONL": _question("one\u2028two")}, message="the file has: mycat"),
        EngineCase("advise-upper-case-jsonl", [*advise[:2], "--prompts", "{tmp}/p.JSONL", *advise[2:]],
                   {"../p.JSONL": json.dumps({"prompt": "abc abc"}) + "\nnot json\n"}, prepare=tiny,
                   message="p.JSONL:2: expected a JSON object"),
        EngineCase("advise-line-separator", [*advise[:2], "--prompts", "{tmp}/p.jsonl", *advise[2:]],
                   {"../p.jsonl": json.dumps({"prompt": "one\u2028two\u0085three"}, ensure_ascii=False) + "\n"},
                   prepare=tiny, fails=False,
                   check=_report(lambda r: None if r["prompts"]["count"] == 1 else f"{r['prompts']['count']} prompts")),
        EngineCase("advise-latin-1", [*advise[:2], "--prompts", "{tmp}/p.txt", *advise[2:]],
                   {"../p.txt": "ok\ncaf\u00e9\n".encode("latin-1")}, message="p.txt:2: byte 0xe9 at offset 6 is not UTF-8"),
        EngineCase("advise-large-prompt-file", [*advise[:2], "--prompts", "{tmp}/many.txt", *advise[2:-2], "0.25",
                                                "--json"], timeout=90,
                   prepare=lambda root, tmp: (_model(_template(CHAT))(root, tmp), _big_prompt_file(root, tmp)),
                   fails=False, check=_report(lambda r: None if r["prompts"]["measured"] >= 1 and r["prompts"]["count"]
                                              == PROMPTS else f"measured {r['prompts']}")),
        EngineCase("advise-terminal-escapes", ["advise", "pld", "--model", MODEL, "--max-new-tokens", "4", "--minutes",
                                               "0.1", "--prompts", "{tmp}/p.txt"], {"../p.txt": f"hi {OSC52}\n"},
                   prepare=tiny, fails=False, check=_no_escape),
        EngineCase("run-model-name-escapes", ["run", "pld", "--model", "{tmp}/m\x1b]52;c;eA==\x07", "--prompt", "abc",
                                              "--max-new-tokens", "4"],
                   prepare=_model(name="m\x1b]52;c;eA==\x07"), fails=False, check=_no_escape),
        EngineCase("run-prompt-file-name-escapes", ["run", "pld", "--prompt-file", "{tmp}/\x1b[2Jnone"],
                   message="--prompt-file", check=_no_escape),
        # -- 8. a path is not a method id, whether or not it names a file
        EngineCase("run-path-to-existing-yaml", ["run", "../../secret", "--prompt", "hi"], {"../secret.yaml": "x: 1\n"},
                   message="unknown method", check=_lacks("cataloged")),
        EngineCase("run-absolute-path-to-existing-yaml", ["run", "{tmp}/secret", "--prompt", "hi"],
                   {"../secret.yaml": "x: 1\n"}, message="unknown method", check=_lacks("cataloged")),
        EngineCase("run-path-to-missing-yaml", ["run", "../../nothing", "--prompt", "hi"], message="unknown method"),
    ]


def _kernel_cache(content: str | None):
    """A `during` context: the kernel-choice cache of this machine holds `content` (None: a sparse
    3 GB file)."""
    @contextlib.contextmanager
    def during(root: Path, tmp: Path):
        import hashlib

        from specatlas.impls.engine.cpu_kernels import machine

        key = hashlib.sha256(json.dumps(machine(), sort_keys=True).encode()).hexdigest()[:16]
        path = tmp / "cache" / "kernels" / f"{key}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        if content is None:
            _sparse(path.name, 3 << 30)(path.parent)
        else:
            path.write_text(content)
        yield
    return during


def tally() -> int:
    return corpus_tally(cases(), run_case)


if __name__ == "__main__":
    raise SystemExit(tally())
