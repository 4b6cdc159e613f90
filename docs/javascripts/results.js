// Reported results: the tables are rendered at build time (readable without JavaScript); this
// adds sorting by any column (each cell's data-sort value, numeric when every value is) and
// filters by model family, model size, hardware and who measured, over every table of the page.
// The "Jump to" counts follow the filters: "12" unfiltered, "3 of 12" when rows are hidden.
// Filters and sort are kept in the address's query, like the catalog's.
(function () {
  "use strict";

  const FILTERS = [
    { param: "family", attr: "family", label: "Model family" },
    { param: "size", attr: "size", label: "Model size" },
    { param: "hardware", attr: "hardware", label: "Hardware" },
    { param: "by", attr: "by", label: "Measured by" },
  ];

  function el(tag, props, children) {
    const node = Object.assign(document.createElement(tag), props || {});
    for (const child of children || []) node.append(child);
    return node;
  }

  function init() {
    const box = document.getElementById("sa-results-filters");
    const tables = [...document.querySelectorAll("table.sa-sortable")];
    if (!box || !tables.length) return;
    const rows = tables.flatMap((t) => [...t.tBodies[0].rows]);
    const selects = {};
    for (const filter of FILTERS) {
      // A filter whose values have a natural order (model sizes) gets it from the page:
      // data-order-<attr>="a|b|c"; other values sort alphabetically, after the ordered ones.
      const order = (box.dataset["order" + filter.attr[0].toUpperCase() + filter.attr.slice(1)] || "").split("|");
      const rank = (v) => (order.includes(v) ? order.indexOf(v) : order.length);
      const values = [...new Set(rows.map((r) => r.dataset[filter.attr]))]
        .sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
      const input = el("select", { id: "sa-results-" + filter.param });
      input.append(el("option", { value: "", textContent: "any" }));
      for (const value of values) input.append(el("option", { value: value, textContent: value }));
      input.addEventListener("change", update);
      selects[filter.param] = input;
      box.append(el("label", { className: "sa-filter" }, [filter.label + " ", input]));
    }
    const count = el("p", { id: "sa-results-count", className: "sa-count" });
    box.after(count);
    const DEFAULT_SORT = "Speedup (×)";
    let sort = { label: DEFAULT_SORT, descending: true };  // the build's order

    for (const table of tables) {
      for (const th of table.tHead.querySelectorAll("th")) {
        th.querySelector("button").addEventListener("click", () => {
          const label = th.textContent.trim();
          // A new column starts with the largest numbers, or A to Z for text.
          sort = label === sort.label ? { label: label, descending: !sort.descending }
            : { label: label, descending: isNumeric(table, columnOf(table, label)) };
          update();
        });
      }
    }

    function columnOf(table, label) {
      return [...table.tHead.querySelectorAll("th")].findIndex((th) => th.textContent.trim() === label);
    }

    function isNumeric(table, column) {
      return [...table.tBodies[0].rows].every((r) => key(r, column) === null || !isNaN(Number(key(r, column))));
    }

    function key(row, column) {
      const value = row.cells[column] ? row.cells[column].dataset.sort : "";
      return value === "" ? null : value;
    }

    function sortTable(table) {
      const column = columnOf(table, sort.label);
      if (column < 0) return;
      const body = table.tBodies[0];
      const list = [...body.rows];
      const numeric = isNumeric(table, column);
      list.sort((a, b) => {
        const x = key(a, column), y = key(b, column);
        if (x === null || y === null) return (x === null) - (y === null);  // empty cells last
        const order = numeric ? Number(x) - Number(y) : x.localeCompare(y);
        return sort.descending ? -order : order;
      });
      body.append(...list);
      table.tHead.querySelectorAll("th").forEach((th, c) => {
        th.setAttribute("aria-sort", c === column ? (sort.descending ? "descending" : "ascending") : "none");
      });
    }

    function apply() {
      let shown = 0;
      for (const row of rows) {
        const visible = FILTERS.every((f) => !selects[f.param].value || row.dataset[f.attr] === selects[f.param].value);
        row.hidden = !visible;
        shown += visible;
      }
      tables.forEach(sortTable);
      count.textContent = "Showing " + shown + " of " + rows.length + " results";
      for (const table of tables) {
        const jump = document.querySelector('.sa-jump-count[data-table="' + CSS.escape(table.dataset.table || "") + '"]');
        if (!jump) continue;
        const all = table.tBodies[0].rows.length;
        const visible = [...table.tBodies[0].rows].filter((r) => !r.hidden).length;
        jump.textContent = visible === all ? String(all) : visible + " of " + all;
      }
    }

    function readState() {
      const query = new URLSearchParams(window.location.search);
      for (const filter of FILTERS) {
        const value = query.get(filter.param) || "";
        const input = selects[filter.param];
        input.value = [...input.options].some((o) => o.value === value) ? value : "";
      }
      if (query.get("sort")) sort = { label: query.get("sort"), descending: query.get("dir") !== "asc" };
    }

    function writeState() {
      const query = new URLSearchParams();
      for (const filter of FILTERS) if (selects[filter.param].value) query.set(filter.param, selects[filter.param].value);
      if (sort.label !== DEFAULT_SORT || !sort.descending) {
        query.set("sort", sort.label);
        query.set("dir", sort.descending ? "desc" : "asc");
      }
      const text = query.toString();
      window.history.replaceState(window.history.state, "",
        window.location.pathname + (text ? "?" + text : "") + window.location.hash);
    }

    function update() {
      writeState();
      apply();
    }

    readState();
    apply();
    window.addEventListener("pageshow", (event) => {
      if (event.persisted) {
        readState();
        apply();
      }
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
