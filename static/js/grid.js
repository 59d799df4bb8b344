// The grid pages (issue 30): poll /api/grids/NAME/ every few seconds and redraw each source's
// tables from the cells the server formatted (twin/pages/grid_rows.py), so the numbers read
// exactly as the first render's.
(function () {
  "use strict";
  var root = document.getElementById("grid-sources");
  if (!root) { return; }
  var api = root.getAttribute("data-api");
  var every = 1000 * Number(root.getAttribute("data-refresh-s") || 3);
  var COLUMNS = null;  // from the endpoint (twin/pages/grid_rows.py)

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined) { e.textContent = text; }
    return e;
  }

  function cell(c) {
    var td = el("td");
    if (c.key) { td.setAttribute("data-key", c.key); }
    if (c.health) { td.className = "health"; td.setAttribute("data-health", c.health); }
    if (c.title) { td.title = c.title; }
    if (c.href) { td.appendChild(el("a", { href: c.href }, c.text)); } else { td.textContent = c.text; }
    return td;
  }

  function table(cls, columns, rows, empty, extra) {
    var t = el("table", { "class": cls }), head = el("tr"), body = el("tbody");
    columns.forEach(function (c) { head.appendChild(el("th", {}, c)); });
    t.appendChild(el("thead")).appendChild(head);
    rows.forEach(function (row) {
      var tr = el("tr");
      if (cls === "grid-places") { tr.setAttribute("data-place", row[0].text); }
      row.forEach(function (c) { tr.appendChild(cell(c)); });
      body.appendChild(tr);
    });
    if (extra) { body.appendChild(extra); }
    if (!rows.length && !extra) {
      body.appendChild(el("tr")).appendChild(el("td", { colspan: columns.length, "class": "muted" }, empty));
    }
    t.appendChild(body);
    return t;
  }

  function section(s) {
    var sec = el("section", { "class": "card grid-source", "data-source": s.source });
    var h = el("h2", {}, s.source + " ");
    var age = "updated " + s.age + " ago" + (s.when ? " · " + s.when : "") + (s.stale ? " · stale" : "");
    h.appendChild(el("small", { "class": "grid-age" + (s.stale ? " stale" : ""), "data-age": "" }, age));
    sec.appendChild(h);
    if (s.error) { sec.appendChild(el("p", { "class": "message error" }, s.error)); return sec; }
    var total = null;
    if (s.total_cells) {
      total = el("tr", { "class": "grid-total", "data-total": "" });
      s.total_cells.forEach(function (c) { total.appendChild(cell({ text: c.text, key: c.key })); });
    }
    var places = table("grid-places", COLUMNS.place, s.places, "", total);
    places.setAttribute("data-source", s.source);
    sec.appendChild(places);
    sec.appendChild(el("h3", {}, "WAN links"));
    sec.appendChild(table("grid-links", COLUMNS.link, s.links, "no WAN link"));
    sec.appendChild(el("h3", {}, "Moves"));
    sec.appendChild(table("grid-moves", COLUMNS.move, s.moves, "no move"));
    return sec;
  }

  // The Incidents card (templates/grid_incidents.html): one table per source, open first.
  function incidents(view) {
    var card = document.getElementById("grid-incidents");
    if (!card) { return; }
    while (card.children.length > 1) { card.removeChild(card.lastChild); }
    view.sources.forEach(function (s) {
      if (s.error) { return; }
      card.appendChild(el("h3", {}, s.source));
      var rows = (s.incidents || []).map(function (i) { return i.cells; });
      var t = table("grid-incidents", COLUMNS.incident, rows, "no incident");
      t.setAttribute("data-source", s.source);
      var trs = t.tBodies[0].rows;
      (s.incidents || []).forEach(function (i, k) {
        trs[k].setAttribute("data-incident", i.kind);
        trs[k].setAttribute("data-target", i.target);
        trs[k].setAttribute("data-state", i.state);
      });
      card.appendChild(t);
    });
  }

  function draw(view) {
    if (!view.sources.length) { return; }
    COLUMNS = view.columns;
    var parts = view.sources.map(section);
    while (root.firstChild) { root.removeChild(root.firstChild); }
    parts.forEach(function (p) { root.appendChild(p); });
    incidents(view);
    root.setAttribute("data-refreshed", String(Date.now()));
  }

  function poll() {
    fetch(api, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (view) { if (view) { draw(view); } })
      .catch(function () { /* the next poll tries again */ })
      .then(function () { window.setTimeout(poll, every); });
  }
  window.setTimeout(poll, every);
})();
