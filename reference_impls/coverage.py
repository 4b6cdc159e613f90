"""Why an idea of the taxonomy cannot run here, where the reason is a limit of this engine rather
than work not done yet: taxonomy node id -> one sentence. Read by the site's coverage page
(`specatlas.site.pages.coverage_page`); a node without an entry and without a registered method
simply has no implementation yet. Importable without torch. Each reason is about the node itself
(its children are not assumed to share it).
"""

from __future__ import annotations

NOT_RUNNABLE: dict[str, str] = {
    "seq2seq": "The engine loads decoder-only causal language models (transformers' AutoModelForCausalLM); "
               "encoder-decoder targets such as T5 are not loaded.",
    "diffusion-models": "Diffusion models refine a whole output over denoising steps; the engine's loop drafts and "
                        "verifies the next tokens of a causal language model.",
    "diffusion-lm": "A diffusion language model refines a whole block over denoising steps; the engine's loop "
                    "drafts and verifies the next tokens of a causal language model.",
    "multimodal": "specatlas run and specatlas bench take text prompts only, rendered through the chat "
                  "template: there is no image or audio input.",
    "serving-systems": "The engine decodes one sequence at a time (batch 1), with no request scheduler and no "
                       "batched KV cache; specatlas bench measures batch-1 latency.",
    "benchmark": "Benchmarks are not decoding methods: there is nothing to run (their prompt sets can be "
                 "measured with specatlas bench --questions).",
    "survey": "Surveys are not decoding methods: there is nothing to run.",
    "analysis": "Analyses study when speculation helps without proposing a method: there is nothing to run.",
}
