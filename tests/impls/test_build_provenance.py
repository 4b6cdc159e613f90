"""A method's build returns the trained files it loaded on its decoder (`SpeculativeDecoder.weights`),
its provenance: each build names its own files only, whatever other build runs beside or inside it."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest

from specatlas.impls.engine.draft_length import DraftLengthPolicy
from specatlas.impls.engine.head_folders import weight_file
from specatlas.impls.families.fr_spec import FR_SPEC_FRACTION
from specatlas.impls.registry import METHODS

from .tiny_world import VOCAB, TinyWorld

PAPER = DraftLengthPolicy.paper()


def expected(world: TinyWorld, spec) -> dict[str, Path]:
    """What `spec`'s build on the world reads besides the target and the given draft model: its
    head's weight file (named as given), FR-Spec's ranking beside it, the world's datastore."""
    files = {}
    if spec.trained_head:
        folder = world.heads[spec.trained_head]
        files[str(folder)] = folder / weight_file(lambda name: (folder / name).is_file())
    if spec.id == "zhao2025fr":
        ranking = world.heads["eagle"] / f"freq_{VOCAB // FR_SPEC_FRACTION}.pt"
        files[str(ranking)] = ranking
    if spec.uses_datastore:
        files[f"datastore {world.datastore.name}"] = world.datastore
    return files


@pytest.mark.parametrize("spec", list(METHODS.values()), ids=lambda spec: spec.id)
def test_a_build_returns_the_trained_files_it_loaded(world, spec):
    assert world.build(spec, PAPER).weights == expected(world, spec)


def test_builds_at_once_on_two_threads_report_only_their_own_files(world):
    specs = [METHODS["cai2024medusa"], METHODS["hu2025sam-eagle2"], METHODS["zhao2025fr"], METHODS["ankner2024hydra"]]
    built: dict[str, list] = {spec.id: [] for spec in specs}
    barrier = threading.Barrier(2)

    def build(batch):
        barrier.wait()  # the two threads' loads interleave
        for _ in range(3):
            for spec in batch:
                built[spec.id].append(world.build(spec, PAPER).weights)

    threads = [threading.Thread(target=build, args=(specs[i::2],)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for spec in specs:
        assert built[spec.id] == [expected(world, spec)] * 3, spec.id


def test_a_bench_row_built_inside_another_rows_build_keeps_its_own_weights(world, tmp_path, monkeypatch):
    """`specatlas bench` digests what each row's build returned: a build that builds another row
    on its way (nested) records its own head only, and the inner row its own."""
    from specatlas.bench import contenders as cs
    from specatlas.bench.provenance import file_digests
    from specatlas.impls.engine.models import EMBEDDED
    from specatlas.impls.families import checkpoints

    shipped = tmp_path.resolve() / "heads"
    for family in ("medusa", "eagle3"):  # the world's heads as the shipped ones
        shutil.copytree(world.heads[family], shipped / f"{EMBEDDED}-{family}")
    monkeypatch.setattr(checkpoints, "SHIPPED_HEADS", shipped)

    def row(method_id, build=None):
        spec = METHODS[method_id]
        return cs.built(build or (lambda: cs.specatlas_method(spec, world.target, None, PAPER)), method_id, spec.name,
                        "specatlas", spec.lossless, PAPER.name)

    inner = []
    outer = row("cai2024medusa", lambda: inner.append(row("li2025eagle")) or
                cs.specatlas_method(METHODS["cai2024medusa"], world.target, None, PAPER))
    for contender, family in ((outer, "medusa"), (inner[0], "eagle3")):
        folder = shipped / f"{EMBEDDED}-{family}"
        assert contender.error is None
        weights = folder / weight_file(lambda name: (folder / name).is_file())
        assert contender.weights == {folder.name: file_digests([weights])[0]}, family
