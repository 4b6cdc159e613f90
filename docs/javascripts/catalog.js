// The catalog table: filters and sorting over the JSON that the site generator embeds in the
// catalog page (<script type="application/json" id="sa-catalog-data">). Every value is put into
// the page with textContent or as a property, never as HTML. Filters and sort live in the
// address's query (?node=extra-heads&sort=speedup&dir=desc): replaceState keeps it current, so a
// view can be shared, and Back from a paper page returns to the same view. "BibTeX of these N
// papers" downloads the shown rows' entries, each as `specatlas bib` writes it (embedded by the
// site generator), in the table's order.
(function () {
  "use strict";

  const COLUMNS = [
    { key: "title", label: "Paper" },
    { key: "year", label: "Year" },
    { key: "venue", label: "Venue" },
    { key: "tags", label: "Tags" },
    { key: "links", label: "Links" },
    { key: "speedup", label: "Speedup" },
    { key: "lossless", label: "Lossless" },
    { key: "implemented", label: "Runnable" },
  ];
  const SORTABLE = new Set(["title", "year", "venue", "speedup", "lossless", "implemented"]);
  const DESCENDING_FIRST = new Set(["year", "speedup", "implemented"]);
  const LOSSLESS = { true: "yes", false: "no", null: "–" };
  // Query parameter -> element id; checkboxes are "1" when set.
  const PARAMS = { node: "sa-filter-node", from: "sa-filter-from", to: "sa-filter-to", venue: "sa-filter-venue",
    lossless: "sa-filter-lossless", code: "sa-filter-code", run: "sa-filter-implemented", q: "sa-filter-text" };

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

  function authors(list) {
    return list.length > 4 ? list.slice(0, 3).join(", ") + " et al." : list.join(", ");
  }

  function cell(paper, key) {
    if (key === "title") {
      return el("div", {}, [el("a", { href: paper.href, textContent: paper.title }),
        el("div", { className: "sa-authors", textContent: authors(paper.authors), title: paper.authors.join(", ") })]);
    }
    if (key === "year") {
      const [year, month] = paper.posted.split("-");
      const posted = month === "00" ? year : year + "-" + month;
      return el("div", {}, [String(paper.year), el("div", { className: "sa-authors", textContent: "posted " + posted })]);
    }
    if (key === "tags") {
      return el("div", {}, paper.tags.map((t) => el("a", { href: t.href, textContent: t.name, className: "sa-chip" })));
    }
    if (key === "links") {
      return el("div", {}, paper.links.map((l) => el("a", { href: l.url, textContent: l.label, className: "sa-link-badge",
        rel: "noopener" })));
    }
    if (key === "speedup") {
      if (paper.speedup === null) return "–";
      return el("span", { textContent: paper.speedup + "×", title: paper.speedup_setting });
    }
    if (key === "lossless") return LOSSLESS[paper.lossless];
    if (key === "implemented") return paper.implemented ? "yes" : "";
    return String(paper[key]);
  }

  function sortValue(paper, key) {
    if (key === "year") return paper.year * 10000 + Number(paper.posted.replace("-", ""));
    const value = paper[key];
    if (typeof value === "string") return value.toLowerCase();
    if (value === null || value === undefined) return -Infinity;
    return Number(value);
  }

  function init() {
    const root = document.getElementById("sa-catalog");
    const source = document.getElementById("sa-catalog-data");
    if (!root || !source) return;
    const data = JSON.parse(source.textContent);
    const papers = data.papers;
    for (const paper of papers) {  // what the text filter searches
      paper.haystack = [paper.title, paper.id, ...paper.authors, ...paper.aliases].join(" ").toLowerCase();
    }

    // Each node's count is of the papers that the other filters let through, so it says what
    // choosing the node would show; render() keeps it current.
    const nodeSelect = select("sa-filter-node", "Taxonomy", [["", "any node"]]);
    const nodeOptions = [];
    const nodeLabel = (node, n) => "\u00a0\u00a0".repeat(node.depth) + node.name + " (" + n + ")";
    for (const facet of data.facets) {
      const group = el("optgroup", { label: facet.name });
      for (const node of facet.nodes) {
        const option = el("option", { value: node.id, textContent: nodeLabel(node, node.count) });
        nodeOptions.push([node, option]);
        group.append(option);
      }
      nodeSelect.querySelector("select").append(group);
    }
    const years = [...new Set(papers.map((p) => p.year))].sort((a, b) => b - a);
    const venues = [...new Set(papers.map((p) => p.venue))].sort();
    const controls = [
      el("label", { className: "sa-filter" }, ["Search ", el("input", { type: "search", id: "sa-filter-text",
        placeholder: "title, author or method name" })]),
      nodeSelect,
      select("sa-filter-from", "Year from", [["", "any"], ...years.map((y) => [String(y), String(y)])]),
      select("sa-filter-to", "to", [["", "any"], ...years.map((y) => [String(y), String(y)])]),
      select("sa-filter-venue", "Venue", [["", "any"], ...venues.map((v) => [v, v])]),
      select("sa-filter-lossless", "Lossless", [["", "any"], ["true", "yes"], ["false", "no"], ["null", "not a method"]]),
      el("label", { className: "sa-filter" }, [el("input", { type: "checkbox", id: "sa-filter-code" }), " has code"]),
      el("label", { className: "sa-filter" }, [el("input", { type: "checkbox", id: "sa-filter-implemented" }), " runnable here"]),
    ];
    const count = el("span", { id: "sa-count" });
    const download = el("a", { id: "sa-bibtex", className: "md-button sa-bibtex", href: "#", download: "specatlas.bib" });
    let shown = [];
    download.addEventListener("click", () => {  // the file is made when asked for, from the rows shown
      const text = shown.map((paper) => paper.bibtex).join("\n\n") + "\n";
      if (download.href.startsWith("blob:")) URL.revokeObjectURL(download.href);
      download.href = URL.createObjectURL(new Blob([text], { type: "application/x-bibtex" }));
    });
    const status = el("p", { className: "sa-count" }, [count, " ", download]);
    const tbody = el("tbody");
    const headRow = el("tr");
    const table = el("table", { id: "sa-table" }, [el("thead", {}, [headRow]), tbody]);
    let sortKey = "year";
    let descending = true;

    for (const column of COLUMNS) {
      if (!SORTABLE.has(column.key)) {
        headRow.append(el("th", { textContent: column.label }));
        continue;
      }
      const button = el("button", { type: "button", textContent: column.label, className: "sa-sort" });
      button.dataset.key = column.key;
      button.addEventListener("click", () => {
        descending = sortKey === column.key ? !descending : DESCENDING_FIRST.has(column.key);
        sortKey = column.key;
        update();
      });
      headRow.append(el("th", {}, [button]));
    }

    const byId = (id) => document.getElementById(id);

    function matches(paper, anyNode) {
      const node = anyNode ? "" : byId("sa-filter-node").value;
      const from = byId("sa-filter-from").value, to = byId("sa-filter-to").value;
      const venue = byId("sa-filter-venue").value;
      const lossless = byId("sa-filter-lossless").value;
      const words = byId("sa-filter-text").value.toLowerCase().split(/\s+/).filter(Boolean);
      return (!node || paper.nodes.includes(node))
        && (!from || paper.year >= Number(from)) && (!to || paper.year <= Number(to))
        && (!venue || paper.venue === venue)
        && (!lossless || String(paper.lossless) === lossless)
        && (!byId("sa-filter-code").checked || paper.code)
        && (!byId("sa-filter-implemented").checked || paper.implemented)
        && words.every((w) => paper.haystack.includes(w));
    }

    function readState() {
      const query = new URLSearchParams(window.location.search);
      if (query.get("year") && !query.get("from") && !query.get("to")) {  // an address from before year ranges
        query.set("from", query.get("year"));
        query.set("to", query.get("year"));
      }
      for (const [param, id] of Object.entries(PARAMS)) {
        const input = byId(id);
        const value = query.get(param) || "";
        if (input.type === "checkbox") input.checked = value === "1";
        else if (input.tagName !== "SELECT" || [...input.options].some((o) => o.value === value)) input.value = value;
      }
      const key = query.get("sort");
      if (key && SORTABLE.has(key)) {
        sortKey = key;
        descending = query.get("dir") !== "asc";
      }
    }

    function writeState() {
      const query = new URLSearchParams();
      for (const [param, id] of Object.entries(PARAMS)) {
        const input = byId(id);
        const value = input.type === "checkbox" ? (input.checked ? "1" : "") : input.value;
        if (value) query.set(param, value);
      }
      if (sortKey !== "year" || !descending) {
        query.set("sort", sortKey);
        query.set("dir", descending ? "desc" : "asc");
      }
      const text = query.toString();
      const url = window.location.pathname + (text ? "?" + text : "") + window.location.hash;
      if (url !== window.location.pathname + window.location.search + window.location.hash) {
        window.history.replaceState(window.history.state, "", url);
      }
    }

    function render() {
      shown = papers.filter((paper) => matches(paper, false)).sort((a, b) => {
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
      download.textContent = "BibTeX of these " + shown.length + " papers";
      download.hidden = shown.length === 0;
      download.download = "specatlas-" + (window.location.search.slice(1).replace(/[^a-z0-9=&-]/gi, "").replace(/[=&]/g, "-") || "all") + ".bib";
      const perNode = new Map();
      for (const paper of papers) {
        if (!matches(paper, true)) continue;
        for (const id of paper.nodes) perNode.set(id, (perNode.get(id) || 0) + 1);
      }
      for (const [node, option] of nodeOptions) {
        const text = nodeLabel(node, perNode.get(node.id) || 0);
        if (option.textContent !== text) option.textContent = text;
      }
    }

    function update() {
      writeState();
      render();
    }

    root.replaceChildren(el("div", { className: "sa-filters" }, controls), status,
      el("div", { className: "sa-table-wrap" }, [table]));
    for (const input of root.querySelectorAll("select, input")) {
      input.addEventListener(input.type === "search" ? "input" : "change", update);
    }
    readState();
    render();
    // Back/Forward into this page from the cache: the address is the truth, not the form state.
    window.addEventListener("pageshow", (event) => {
      if (event.persisted) {
        readState();
        render();
      }
    });
  }

  // Material's instant navigation is off, so every page load runs this once.
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
