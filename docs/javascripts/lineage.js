// Lineage diagrams (drawn at build time): hovering or focusing a paper's box highlights its edges
// and the boxes at their other ends. Without JavaScript the diagrams read the same, unhighlighted.
(function () {
  "use strict";

  function mark(svg, id, on) {
    for (const edge of svg.querySelectorAll("path.sa-edge")) {
      if (edge.dataset.from !== id && edge.dataset.to !== id) continue;
      edge.classList.toggle("sa-hot", on);
      const other = edge.dataset.from === id ? edge.dataset.to : edge.dataset.from;
      for (const node of svg.querySelectorAll("a.sa-node")) {
        if (node.dataset.id === other) node.classList.toggle("sa-hot", on);
      }
    }
  }

  function init() {
    for (const svg of document.querySelectorAll("svg.sa-lineage-svg")) {
      for (const node of svg.querySelectorAll("a.sa-node")) {
        for (const [event, on] of [["mouseenter", true], ["mouseleave", false], ["focus", true], ["blur", false]]) {
          node.addEventListener(event, () => mark(svg, node.dataset.id, on));
        }
      }
    }
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
