"""The order in which `specatlas advise` spends its budget, on a fake clock with fake methods that
spend its time: no model runs and nothing is timed."""

from benchruns import HARDWARE, build_run, sample, turn

from specatlas import advise
from specatlas.bench.contenders import Contender, Turn
from specatlas.bench.provenance import label
from specatlas.bench.results import Run
from specatlas.impls.engine.draft_length import DraftLengthPolicy

BOTH = [DraftLengthPolicy.paper(), DraftLengthPolicy.cost_aware()]
HERE = label(HARDWARE)


class FakeMachine:
    """A clock, and methods that advance it: plain decoding takes a second a prompt, a method
    1/speedup seconds (1 s without a speed), and building one takes its `load` seconds."""

    def __init__(self, speedups: dict[str, float], load: dict[str, float] | None = None):
        self.now, self.speedups, self.load = 0.0, speedups, load or {}
        self.built: list[str] = []
        self.generated: list[str] = []

    def clock(self) -> float:
        return self.now

    def prepare(self, candidate: advise.Candidate) -> Contender:
        self.built.append(candidate.id)
        self.now += self.load.get(candidate.id, 0.0)
        return Contender(candidate.id, candidate.spec.name, "specatlas", candidate.spec.lossless, "", lambda *a: None,
                         policy=candidate.policy.name)

    def generate(self, contender: Contender, ids: list[int]) -> Turn:
        seconds = 1.0 / self.speedups.get(contender.id, 1.0)
        self.now += seconds
        self.generated.append(contender.id)
        return Turn(list(ids), seconds, len(ids), {1: len(ids)})

    def measure(self, candidates, prompts: int, minutes: float) -> tuple[Run, int]:
        baseline = Contender("baseline", "plain decoding", "specatlas", True, "", lambda *a: None)
        run = advise.empty_run({1: 0.01, 2: 0.012}, baseline)
        done = advise.measure(run, baseline, candidates, [[1, 2, 3, 4]] * prompts, self.prepare, self.generate,
                              minutes * 60, self.clock)
        return run, done


def leaderboard(write_run, seconds: dict[str, float], questions: int = 1, name: str = "run.json", policies=None):
    """A result file of methods taking `seconds` a question (plain decoding: 1 s) on `questions` questions."""
    methods = ("baseline", *seconds)
    samples = [sample(m, str(q), "qa", turn([1, 2, 3, 4], s)) for q in range(questions)
               for m, s in {"baseline": 1.0, **seconds}.items()]
    return write_run(build_run(samples, methods=methods, fields={m: {"policy": p} for m, p in (policies or {}).items()}),
                     name).parent


def test_the_priors_follow_the_result_files(write_run):
    folder = leaderboard(write_run, {"saxena2023prompt": 0.5, "hu2025sam@cost-aware": 0.8, "ankner2024hydra": 2.0},
                         policies={"saxena2023prompt": "paper", "ankner2024hydra": "paper"})
    prior, source = advise.priors(folder, HERE, "cpu", "tiny")
    assert prior == {("saxena2023prompt", "paper"): 2.0, ("hu2025sam", "cost-aware"): 1.25,
                     ("ankner2024hydra", "paper"): 0.5}
    assert source == "speedups on the leaderboard in results/ (1 table of tiny on cpu, this hardware)"
    elsewhere, source = advise.priors(folder, "Another CPU (4 cores, 4 torch threads)", "cpu", "tiny")
    assert elsewhere == prior and source.endswith("other hardware (none measured here))")
    for device, model in (("cuda", "tiny"), ("cpu", "another-model")):  # nothing ranks it: the plain order
        assert advise.priors(folder, HERE, device, model) == (
            {}, f"no result in results/ ranks {model} on {device}: model-free methods first, then the others in "
                "registry order")
    assert advise.priors(None, HERE, "cpu", "tiny")[0] == {}  # outside a checkout

    # A second, larger table on this hardware: each table weighs as much as it measured (4 and 12 tokens).
    leaderboard(write_run, {"saxena2023prompt": 1.0}, questions=3, name="larger.json",
                policies={"saxena2023prompt": "paper"})
    prior, source = advise.priors(folder, HERE, "cpu", "tiny")
    assert prior[("saxena2023prompt", "paper")] == (2.0 * 4 + 1.0 * 12) / 16 and "(2 tables of tiny" in source


def test_a_tiny_budget_goes_to_the_promising_methods_and_builds_nothing_else(write_run):
    folder = leaderboard(write_run, {"saxena2023prompt": 0.5, "li2024eagle@cost-aware": 0.625,
                                     "hu2025sam@cost-aware": 0.8, "ankner2024hydra": 2.0},
                         policies={"saxena2023prompt": "paper", "ankner2024hydra": "paper"})
    prior, _ = advise.priors(folder, HERE, "cpu", "tiny")
    ids = ["ankner2024hydra", "saxena2023prompt", "hu2025sam", "li2024eagle", "fu2024break"]  # registry order
    candidates = advise.waiting(ids, BOTH, prior)
    # Faster than plain decoding by their priors, fastest first; then no prior, model-free first (SAM
    # and Lookahead load nothing; Hydra and EAGLE load a head); then Hydra, expected slower.
    assert [c.id for c in advise.ranked(candidates)] == [
        "saxena2023prompt", "li2024eagle@cost-aware", "hu2025sam@cost-aware",
        "saxena2023prompt@cost-aware", "hu2025sam", "fu2024break", "fu2024break@cost-aware",
        "ankner2024hydra@cost-aware", "li2024eagle", "ankner2024hydra"]

    # 2 seconds: plain decoding (1 s), prompt lookup (0.5 s), then EAGLE's turn begins before the
    # deadline; its 3-second head load is charged to it, and nothing further is built.
    fake = FakeMachine({"saxena2023prompt": 2.0, "li2024eagle@cost-aware": 1.6}, load={"li2024eagle@cost-aware": 3.0})
    run, done = fake.measure(candidates, prompts=3, minutes=2 / 60)
    assert fake.built == ["saxena2023prompt", "li2024eagle@cost-aware"]
    assert fake.generated == ["baseline", "saxena2023prompt", "li2024eagle@cost-aware"] and done == 1
    rows = {r.id: r for r in advise.ranked_rows(candidates, run)}
    assert [r.id for r in advise.ranked_rows(candidates, run)][:2] == ["saxena2023prompt", "li2024eagle@cost-aware"]
    assert (rows["saxena2023prompt"].order, rows["li2024eagle@cost-aware"].order) == (1, 2)
    assert rows["li2024eagle@cost-aware"].setup_seconds == 3.0 and rows["saxena2023prompt"].measured == 2.0
    assert rows["hu2025sam@cost-aware"].status == "not measured" and rows["hu2025sam@cost-aware"].reason == (
        "ranked 3 of 10 (prior 1.25x): the time budget ran out before its turn; raise --minutes")
    assert rows["ankner2024hydra"].reason.startswith("ranked 10 of 10 (prior 0.50x)")
    assert rows["fu2024break"].reason.startswith("ranked 6 of 10 (no prior; model-free)")
    assert rows["li2024eagle"].reason.startswith("ranked 9 of 10 (no prior; loads a head or a drafter)")


def test_measurements_replace_the_priors_and_the_slow_get_no_more_prompts():
    # No priors (the plain order): the model-free first, in registry order, then Hydra.
    candidates = advise.waiting(["ankner2024hydra", "saxena2023prompt", "yang2023inference"], BOTH[:1], {})
    fake = FakeMachine({"saxena2023prompt": 0.5, "yang2023inference": 1.25, "ankner2024hydra": 2.0})
    run, done = fake.measure(candidates, prompts=3, minutes=10)
    # After the first prompt, Hydra (2x here) goes first and prompt lookup (0.5x) is measured no more.
    assert fake.generated == ["baseline", "saxena2023prompt", "yang2023inference", "ankner2024hydra",
                              *["baseline", "ankner2024hydra", "yang2023inference"] * 2] and done == 3
    rows = advise.ranked_rows(candidates, run)
    assert [(r.id, r.order, r.prompts, r.measured) for r in rows] == [
        ("ankner2024hydra", 3, 3, 2.0), ("yang2023inference", 2, 3, 1.25), ("saxena2023prompt", 1, 1, 0.5)]
    assert rows[2].reason == "measured below 0.9x plain decoding's speed: given no more prompts"
    assert rows[0].reason is None and rows[0].identical == rows[0].compared == 3


def test_a_method_slower_only_on_the_last_prompt_was_given_every_prompt():
    # Lookahead is 1.25x on the first two prompts, then so slow on the third that its overall speed falls
    # below 0.9x: it was measured on every prompt, so its row must not say it was given no more.
    class Slowing(FakeMachine):
        def generate(self, contender, ids):
            if contender.id == "yang2023inference":
                self.speedups[contender.id] = 1.25 if self.generated.count(contender.id) < 2 else 0.1
            return super().generate(contender, ids)

    candidates = advise.waiting(["yang2023inference"], BOTH[:1], {})
    fake = Slowing({})
    run, done = fake.measure(candidates, prompts=3, minutes=10)
    [row] = advise.ranked_rows(candidates, run)
    assert done == 3 and row.prompts == 3 and row.measured < 0.9 and row.reason is None


def test_a_method_that_cannot_be_built_is_passed_over():
    candidates = advise.waiting(["cai2024medusa", "saxena2023prompt"], BOTH[:1], {})
    fake = FakeMachine({"saxena2023prompt": 1.5})
    build = fake.prepare

    def prepare(candidate):
        contender = build(candidate)
        if candidate.id == "cai2024medusa":  # as bench.run.built records a failed build
            contender.generate, contender.error = None, "ValueError: no heads for this model"
        return contender

    fake.prepare = prepare
    run, done = fake.measure(candidates, prompts=2, minutes=10)
    assert fake.built == ["saxena2023prompt", "cai2024medusa"] and done == 2
    assert fake.generated == ["baseline", "saxena2023prompt"] * 2  # built once, never measured
    medusa = advise.ranked_rows(candidates, run)[1]
    assert (medusa.status, medusa.reason, medusa.order) == ("unavailable", "ValueError: no heads for this model", None)
