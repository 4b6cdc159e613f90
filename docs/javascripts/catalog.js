// The catalog table: filters and sorting over the JSON that the site generator embeds in the
// catalog page (<script type="application/json" id="sa-catalog-data">). Every value is put into
// the page with textContent or as a property, never as HTML.
(function () {
  "use strict";

  const COLUMNS = [
    { key: "title", label: "Paper" },
    { key: "posted", label: "Posted" },
    { key: "venue", label: "Venue" },
    { key: "drafting", label: "Drafting" },
    { key: "verification", label: "Verification" },
    { key: "lossless", label: "Lossless" },
    { key: "code", label: "Code" },
    { key: "implemented", label: "Runnable" },
  ];
  const LOSSLESS = { true: "yes", false: "no", null: "–" };

  function el(tag, props, children) {
    const node = Object.assign(document.createElement(tag), props || {});
    for (const child of children || []) node.append(child);
    return node;
  }

  function select(id, label, options) {
    const box = el("select", { id: id });
    for (const [value, text] of options) box.append(el("option", { value: value, textContent: text }));
    return el("label", { className: "sa-filter" }, [label + " ", box]);
  }

  function cell(paper, key) {
    const value = paper[key];
    if (key === "title") return el("a", { href: paper.href, textContent: value });
    if (Array.isArray(value)) return value.join(", ");
    if (key === "lossless") return LOSSLESS[value];
    if (key === "code" || key === "implemented") return value ? "yes" : "";
    return String(value);
  }

  function sortValue(paper, key) {
    const value = paper[key];
    if (Array.isArray(value)) return value.join(", ").toLowerCase();
    if (typeof value === "string") return value.toLowerCase();
    return value === null ? -1 : Number(value);
  }

  function init() {
    const root = document.getElementById("sa-catalog");
    const source = document.getElementById("sa-catalog-data");
    if (!root || !source) return;
    const data = JSON.parse(source.textContent);
    const papers = data.papers;

    const nodeSelect = select("sa-filter-node", "Taxonomy", [["", "any node"]]);
    for (const facet of data.facets) {
      const group = el("optgroup", { label: facet.name });
      for (const node of facet.nodes) {
        const text = "\u00a0\u00a0".repeat(node.depth) + node.name + " (" + node.count + ")";
        group.append(el("option", { value: node.id, textContent: text }));
      }
      nodeSelect.querySelector("select").append(group);
    }
    const years = [...new Set(papers.map((p) => p.year))].sort((a, b) => b - a);
    const venues = [...new Set(papers.map((p) => p.venue))].sort();
    const controls = {
      node: nodeSelect,
      year: select("sa-filter-year", "Year", [["", "any"], ...years.map((y) => [String(y), String(y)])]),
      venue: select("sa-filter-venue", "Venue", [["", "any"], ...venues.map((v) => [v, v])]),
      lossless: select("sa-filter-lossless", "Lossless", [["", "any"], ["true", "yes"], ["false", "no"], ["null", "not a method"]]),
      code: el("label", { className: "sa-filter" }, [el("input", { type: "checkbox", id: "sa-filter-code" }), " has code"]),
      implemented: el("label", { className: "sa-filter" }, [el("input", { type: "checkbox", id: "sa-filter-implemented" }), " runnable here"]),
      text: el("label", { className: "sa-filter" }, ["Title ", el("input", { type: "search", id: "sa-filter-text", placeholder: "words in the title" })]),
    };
    const count = el("p", { id: "sa-count", className: "sa-count" });
    const tbody = el("tbody");
    const headRow = el("tr");
    const table = el("table", { id: "sa-table" }, [el("thead", {}, [headRow]), tbody]);
    let sortKey = "posted";
    let descending = true;

    for (const column of COLUMNS) {
      const button = el("button", { type: "button", textContent: column.label, className: "sa-sort" });
      button.dataset.key = column.key;
      button.addEventListener("click", () => {
        descending = sortKey === column.key ? !descending : column.key === "posted";
        sortKey = column.key;
        render();
      });
      headRow.append(el("th", {}, [button]));
    }

    const value = (id) => document.getElementById(id);

    function matches(paper) {
      const node = value("sa-filter-node").value;
      const year = value("sa-filter-year").value;
      const venue = value("sa-filter-venue").value;
      const lossless = value("sa-filter-lossless").value;
      const words = value("sa-filter-text").value.toLowerCase().split(/\s+/).filter(Boolean);
      const title = paper.title.toLowerCase();
      return (!node || paper.nodes.includes(node))
        && (!year || String(paper.year) === year)
        && (!venue || paper.venue === venue)
        && (!lossless || String(paper.lossless) === lossless)
        && (!value("sa-filter-code").checked || paper.code)
        && (!value("sa-filter-implemented").checked || paper.implemented)
        && words.every((w) => title.includes(w));
    }

    function render() {
      const shown = papers.filter(matches).sort((a, b) => {
        const x = sortValue(a, sortKey), y = sortValue(b, sortKey);
        const order = x < y ? -1 : x > y ? 1 : a.id < b.id ? -1 : 1;
        return descending ? -order : order;
      });
      tbody.replaceChildren(...shown.map((paper) => {
        const row = el("tr", {}, COLUMNS.map((c) => el("td", {}, [cell(paper, c.key)])));
        row.dataset.id = paper.id;
        return row;
      }));
      for (const button of headRow.querySelectorAll("button")) {
        const active = button.dataset.key === sortKey;
        button.parentElement.setAttribute("aria-sort", active ? (descending ? "descending" : "ascending") : "none");
      }
      count.textContent = "Showing " + shown.length + " of " + papers.length + " records";
    }

    root.replaceChildren(el("div", { className: "sa-filters" }, Object.values(controls)), count,
      el("div", { className: "sa-table-wrap" }, [table]));
    for (const input of root.querySelectorAll("select, input")) {
      input.addEventListener(input.type === "search" ? "input" : "change", render);
    }
    render();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
