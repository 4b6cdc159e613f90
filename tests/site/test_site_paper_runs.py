"""A paper page says how to run the method on your own model and GPU, points at the head trained
here (its model card, the acceptance curve), and shows losslessness per variant where the record
lists variants; Which method? shows the lossless variants beside a method that is not lossless as a whole."""

from specatlas.paths import repo_root
from specatlas.site import pages
from specatlas.site.catalog import load_catalog

REPO = "https://github.com/specatlas/specatlas"


def test_a_head_method_links_its_model_card_curve_and_own_model_command():
    catalog = load_catalog(repo_root())
    trained = pages.trained_here(catalog)
    assert trained["eagle3"]["curves"] and "smollm2-135m-instruct-eagle3" in trained["eagle3"]["heads"]
    page = pages.paper_page(catalog, catalog.by_id["li2025eagle"], "", trained=trained, repo_url=REPO)
    run = page[page.index("## Run it"):page.index("## BibTeX")]
    assert "specatlas run li2025eagle --model lmsys/vicuna-13b-v1.3 --device cuda --drafter-checkpoint yuhuili/EAGLE3-Vicuna1.3-13B" in run
    assert f"({REPO}/tree/HEAD/reference_impls/trained_heads/smollm2-135m-instruct-eagle3)" in run
    assert "(../training.md#curve)" in run and "(../training.md#heads)" in run
    # a variant that runs by its own id is on its paper's page
    sam = pages.paper_page(catalog, catalog.by_id["hu2025sam"], "", trained=trained)
    assert "specatlas run hu2025sam-eagle2 --model lmsys/vicuna-7b-v1.3 --device cuda --drafter-checkpoint yuhuili/EAGLE-Vicuna-7B-v1.3" in sam
    # no head: no training links
    pld = pages.paper_page(catalog, catalog.by_id["saxena2023prompt"], "", trained=trained)
    assert "training.md" not in pld and "specatlas run saxena2023prompt --model lmsys/vicuna-7b-v1.3 --device cuda" in pld


def test_losslessness_is_shown_per_variant():
    catalog = load_catalog(repo_root())
    page = pages.paper_page(catalog, catalog.by_id["cai2024medusa"], "")
    assert "- **Lossless:** per variant (not every variant is):" in page
    assert "    - Medusa\\-1 heads on a frozen backbone, exact verification: yes" in page
    assert "    - typical acceptance: no" in page and "Lossless:** no" not in page
    choose = pages.choose_page(catalog, pages.measured_results(catalog))
    assert "| no (yes for: Medusa\\-1 heads on a frozen backbone, exact verification) |" in choose


def test_a_variant_note_citing_working_notes_is_left_out():
    catalog = load_catalog(repo_root())
    paper = catalog.by_id["tiwari2025quantspec"]
    # The validator refuses such a note in a record; the page leaves it out should one get through.
    variants = [v.model_copy(update={"note": "as two reading notes of the paper say"}) for v in paper.lossless_variants]
    paper = paper.model_copy(update={"lossless_variants": variants})
    page = pages.paper_page(catalog, paper, "")
    assert "reading notes" not in page and "8\\-bit hierarchical KV cache: no\n" in page  # the variant, without its note
