/* Topology: link utilisation by tier and the rack floor (status, power against each rack's
 * budget, outlet temperature), redrawn whole with Plotly.react on every frame.  Axes carry
 * switch, hall and rack names (ids in the frame, names from the page); colour scales are the
 * frame's fixed ones; merged cells show their hottest member.  Clicking a link cell zooms to
 * its switches at full resolution (/api/heatmap), clicking a rack cell lists that rack's nodes
 * (a merged cell opens its hall unmerged, where a rack's click lists its nodes), a table counts
 * racks and nodes out per hall (the frame's ``halls``), and the zoom form cuts out one pod,
 * block of switches or hall. */
(function () {
  "use strict";

  var P = window.TwinPanels;
  var rackMap = JSON.parse(document.getElementById("rack-map").textContent);
  var names = JSON.parse(document.getElementById("heatmap-names").textContent);
  var links = document.getElementById("link-heatmaps");
  var MAX_TICKS = 24;
  var OUT_MARKER = { symbol: "x", color: "#ff2d55", size: 9, line: { width: 2 } };
  // a link out (itself or through a failed switch) is painted in a colour no load takes
  // (Viridis runs purple to yellow), under its cross: the two together, not colour alone
  var DOWN_COLOUR = "#ff2d55";
  var RACK_PLOTS = {
    status: { id: "rack-status", colorscale: [[0, "#1f7a4d"], [0.5, "#e0a800"], [1, "#c0392b"]] },
    // Plotly's YlOrRd runs dark red to yellow: reversed, the racks nearest their budget are red
    power_share: { id: "rack-power", colorscale: "YlOrRd", reversescale: true, percent: true },
    outlet_c: { id: "rack-temp", colorscale: "RdBu" },  // Plotly's RdBu: blue cool, red hot
  };
  var lastRackFrames = {};
  var lastLinkFrames = [];

  function switchName(id) { return names.switches[id] || "switch " + id; }

  function span(a, b, name) { return a === b ? name(a) : name(a) + "…" + name(b); }

  // the name of a heatmap's row i: switches (link tiers), groups (global) or hall rows (racks)
  function rowName(heatmap, i) {
    var run = (heatmap.rows || [])[i];
    if (!run) return String(i);
    if (heatmap.rows_per_hall) {
      return span(run[0], run[1], function (r) {
        var hall = Math.floor(r / heatmap.rows_per_hall);
        return (names.halls[hall] || "hall " + hall) + " row " + (r % heatmap.rows_per_hall);
      });
    }
    if (heatmap.y === "group") return span(run[0], run[1], function (g) { return "group " + g; });
    return span(run[0], run[1], switchName);
  }

  function colName(heatmap, j) {
    var cb = heatmap.cols_per_cell || 1;
    var label = heatmap.x === "uplink" ? "uplink " : heatmap.x === "group" ? "group " : "position ";
    var first = j * cb + (heatmap.x === "uplink" ? 1 : 0);
    return cb > 1 ? label + first + "–" + (first + cb - 1) : label + first;
  }

  // the racks whose floor position falls in cell (cy, cx), by id
  function racksInCell(heatmap, cy, cx) {
    var rb = heatmap.rows_per_cell || 1;
    var cb = heatmap.cols_per_cell || 1;
    var ids = [];
    rackMap.racks.forEach(function (yx, id) {
      if (Math.floor(yx[0] / rb) === cy && Math.floor(yx[1] / cb) === cx) ids.push(id);
    });
    return ids;
  }

  function rackCellNames(heatmap) {
    var rb = heatmap.rows_per_cell || 1;
    var cb = heatmap.cols_per_cell || 1;
    var cells = {};
    rackMap.racks.forEach(function (yx, id) {
      var key = Math.floor(yx[0] / rb) + "," + Math.floor(yx[1] / cb);
      (cells[key] = cells[key] || []).push(names.racks[id] || "rack " + id);
    });
    return heatmap.z.map(function (row, y) {
      return row.map(function (v, x) {
        var here = cells[y + "," + x];
        return here ? (here.length > 1 ? here[0] + "…" + here[here.length - 1] : here[0]) : "";
      });
    });
  }

  function withGaps(heatmap) {
    // empty floor positions are marked with heatmap.empty; null leaves a gap in the plot
    return heatmap.z.map(function (row) {
      return row.map(function (v) { return v === heatmap.empty ? null : v; });
    });
  }

  function valueFormat(scale, percent) {
    return percent || scale.unit === "%" ? "%{z:.1%}" : "%{z:.3g} " + (scale.unit || "");
  }

  function heatmapTrace(heatmap, style, text) {
    var scale = heatmap.scale || {};
    var percent = style.percent || scale.unit === "%";
    var bar = { title: { text: scale.title || "" } };
    if (percent) bar.tickformat = ".0%";
    return Object.assign({
      type: "heatmap", z: withGaps(heatmap), text: text, colorbar: bar,
      zmin: scale.zmin, zmax: scale.zmax, zauto: false,
      hovertemplate: "%{text}: " + valueFormat(scale, percent) + "<extra></extra>",
    }, style.colorscale ? { colorscale: style.colorscale } : {},
    style.reversescale ? { reversescale: true } : {});
  }

  function cellText(heatmap, racks) {
    var rackNames = racks ? rackCellNames(heatmap) : null;
    return heatmap.z.map(function (row, y) {
      var rname = rowName(heatmap, y);
      return row.map(function (v, x) {
        return rackNames ? (rackNames[y][x] || "no rack") + " (" + rname + ")" :
          rname + ", " + colName(heatmap, x);
      });
    });
  }

  // names on an axis: at most MAX_TICKS of them, evenly spaced
  function namedAxis(title, count, nameOf) {
    var step = Math.max(1, Math.ceil(count / MAX_TICKS));
    var vals = [];
    for (var i = 0; i < count; i += step) vals.push(i);
    return { title: { text: title }, tickmode: "array", tickvals: vals,
             ticktext: vals.map(nameOf), showgrid: false, automargin: true };
  }

  function heatmapLayout(heatmap) {
    var merged = heatmap.rows_per_cell > 1 || heatmap.cols_per_cell > 1;
    var note = merged ? " (each cell: the " + (heatmap.rows_per_hall ? "worst" : "highest") +
      " of " + heatmap.rows_per_cell + "×" + heatmap.cols_per_cell + ")" : "";
    var rows = heatmap.z.length;
    var cols = rows ? heatmap.z[0].length : 0;
    var yaxis = namedAxis(heatmap.y, rows, function (i) { return rowName(heatmap, i); });
    yaxis.autorange = "reversed";
    return P.layout({
      title: { text: heatmap.title + note, font: { size: 13 } },
      xaxis: namedAxis(heatmap.x, cols, function (j) { return colName(heatmap, j).replace(/^\D+/, ""); }),
      yaxis: yaxis, height: Math.min(560, 180 + 14 * rows),
      margin: { l: 60, r: 20, t: 40, b: 50 },
    });
  }

  function outMarkers(matrix, label) {
    var xs = [], ys = [], text = [];
    (matrix || []).forEach(function (row, y) {
      row.forEach(function (share, x) {
        if (share > 0) { xs.push(x); ys.push(y); text.push(label(share)); }
      });
    });
    return { type: "scatter", mode: "markers", x: xs, y: ys, text: text, name: "out",
             hovertemplate: "%{text}<extra>out</extra>", marker: OUT_MARKER, showlegend: false };
  }

  // cells holding a link out, painted DOWN_COLOUR over the load (null elsewhere: see-through)
  function downTrace(matrix, text, label) {
    var rows = matrix || [];
    return {
      type: "heatmap", name: "down", showscale: false, hoverongaps: false, zmin: 0, zmax: 1,
      zauto: false, colorscale: [[0, DOWN_COLOUR], [1, DOWN_COLOUR]],
      z: rows.map(function (row) {
        return row.map(function (share) { return share > 0 ? 1 : null; });
      }),
      text: rows.map(function (row, y) {
        return row.map(function (share, x) { return (text[y] || [])[x] + ": " + label(share); });
      }),
      hovertemplate: "%{text}<extra>down</extra>",
    };
  }

  function drawLinks(list) {
    lastLinkFrames = list;
    P.setText("links-empty", list.length ? "" : "No link load yet: no running job spans more than one leaf switch.");
    list.forEach(function (heatmap, i) {
      var id = "link-heatmap-" + i;
      var div = document.getElementById(id);
      if (!div) {
        div = document.createElement("div");
        div.id = id;
        div.className = "chart heatmap";
        links.appendChild(div);
      }
      var text = cellText(heatmap, false);
      var traces = [heatmapTrace(heatmap, { colorscale: "Viridis" }, text)];
      var layout = heatmapLayout(heatmap);
      if (heatmap.links_down) {
        // failed links (or links of a failed switch): a cross on every cell holding one, on
        // the cell painted in the down colour
        var share = function (s) { return Math.round(s * 100) + "% of links out"; };
        traces.push(outMarkers(heatmap.down, share));
        traces.push(downTrace(heatmap.down, text, share));
        layout.title.text += " — " + heatmap.links_down + " link(s) out";
      }
      Plotly.react(div, traces, layout, P.plotConfig);
      if (!div.dataset.clickable) {
        div.dataset.clickable = "1";
        div.on("plotly_click", function (event) { linkClicked(i, event.points[0]); });
      }
    });
  }

  function drawRacks(racks) {
    Object.keys(RACK_PLOTS).forEach(function (key) {
      var style = RACK_PLOTS[key];
      var div = document.getElementById(style.id);
      var heatmap = racks[key];
      P.setText(style.id + "-note", heatmap ? "" : "Waiting for the power model's first " +
                "refresh (every 30 simulated minutes; none without the power model).");
      if (!heatmap) return;
      lastRackFrames[key] = heatmap;
      var text = cellText(heatmap, true);
      if (key === "power_share" && racks.power_kw) {
        text = text.map(function (row, y) {
          return row.map(function (t, x) {
            return t + ", " + P.fmt(racks.power_kw.z[y][x], 1) + " kW";
          });
        });
      }
      var traces = [heatmapTrace(heatmap, style, text)];
      if (racks.status) {
        // racks with nodes down or drained: a cross of fixed size on every floor, so one rack
        // out stays visible when a cell is a few pixels high (100k GPUs: 3 floor rows a cell)
        traces.push(outMarkers(racks.status.z, function (share) {
          return Math.round(share * 100) + "% of nodes out";
        }));
      }
      Plotly.react(div, traces, heatmapLayout(heatmap), P.plotConfig);
      if (!div.dataset.clickable) {
        div.dataset.clickable = "1";
        div.on("plotly_click", function (event) { rackClicked(key, event.points[0]); });
      }
    });
  }

  function drawStorage(tiers) {
    var div = document.getElementById("storage-chart");
    P.setText("storage-note", tiers && tiers.length ? "" : "No storage load yet.");
    if (!tiers || !tiers.length) return;
    var x = tiers.map(function (t) { return t.tier.replace(/_/g, " "); });
    Plotly.react(div, ["demand_gb_s", "supply_gb_s", "capacity_gb_s"].map(function (key) {
      return { type: "bar", name: key.replace("_gb_s", ""), x: x,
               y: tiers.map(function (t) { return t[key]; }) };
    }), P.layout({ barmode: "group", yaxis: { title: { text: "GB/s" } } }), P.plotConfig);
  }

  function rackClicked(key, pt) {
    var heatmap = lastRackFrames[key];
    var ids = racksInCell(heatmap, pt.y, pt.x);
    if (!ids.length) {
      P.setText("rack-message", "No rack at that position.");
      return;
    }
    if (ids.length === 1) {
      loadRack(ids[0], 1);
      return;
    }
    // a merged cell: its hall at full resolution, where each rack is a cell of its own
    var hall = worstHall(key, heatmap.rows[pt.y], heatmap.rows_per_hall);
    P.setText("rack-message", ids.length + " racks in that cell: " + hallName(hall) +
              " unmerged above; click a rack there for its nodes.");
    zoomHall(key, hall);
  }

  function hallName(h) { return names.halls[h] || "hall " + h; }

  // a cell's floor rows may straddle two halls: the one whose summary is worst for the map
  var HALL_WORST = { status: "worst", power_share: "power_share_max", outlet_c: "outlet_c_max" };
  var lastHalls = [];
  function worstHall(key, run, rowsPerHall) {
    var best = Math.floor(run[0] / rowsPerHall);
    var field = HALL_WORST[key];
    for (var h = best + 1; h <= Math.floor(run[1] / rowsPerHall); h++) {
      var a = lastHalls[best] || {}, b = lastHalls[h] || {};
      if ((b[field] || 0) > (a[field] || 0)) best = h;
    }
    return best;
  }

  function zoomHall(key, hall) {
    zoomTier.value = key;
    zoomWhereLabel();
    document.getElementById("zoom-where").value = hall;
    zoomLoad("tier=" + encodeURIComponent(key) + "&hall=" + hall);
    zoomDiv.scrollIntoView({ block: "nearest" });
  }

  // one line per hall: counts the merged maps cannot show, each hall opening its racks
  function drawHalls(halls) {
    lastHalls = halls || [];
    var pct = function (v) { return v === undefined ? "–" : P.fmt(100 * v, 0) + " %"; };
    P.fillTable("hall-summary", (halls || []).map(function (h) {
      return [hallName(h.hall), P.fmt(h.racks, 0), P.fmt(h.racks_out, 0), P.fmt(h.nodes_out, 0),
              h.racks_out ? pct(h.worst) + " out" : "–",
              h.power_kw === undefined ? "–" : P.fmt(h.power_kw / 1000, 2) + " MW",
              pct(h.power_share_max),
              h.outlet_c_max === undefined ? "–" : P.fmt(h.outlet_c_max, 1) + " °C"];
    }), "No racks.");
    var rows = document.getElementById("hall-summary").rows;
    (halls || []).forEach(function (h, i) {
      if (!rows[i]) return;
      rows[i].classList.toggle("has-out", h.racks_out > 0);
      var a = document.createElement("a");
      a.href = "#zoom-chart";
      a.textContent = hallName(h.hall);
      a.addEventListener("click", function (event) {
        event.preventDefault();
        zoomHall("status", h.hall);
      });
      rows[i].cells[0].replaceChildren(a);
    });
  }

  function loadRack(id, racksInThisCell) {
    fetch("/api/racks/" + id, { credentials: "same-origin" })
      .then(function (r) { return r.json().then(function (body) { return [r.ok, body]; }); })
      .then(function (result) {
        if (!result[0]) throw new Error(result[1].error || "request failed");
        showRack(result[1], racksInThisCell);
      })
      .catch(function (err) { P.setText("rack-message", "Could not load the rack: " + err.message); });
  }

  function showRack(rack, racksInThisCell) {
    P.setText("rack-message", "");
    P.setText("rack-name", rack.name + " (rack id " + rack.id + ", " + rack.hall + ", row " +
              rack.row + ", position " + rack.column + ")");
    var live = rack.live || {};
    P.setText("rack-live", "status " + P.fmt(live.status, 2) + " out · " + P.fmt(live.power_kw, 1) +
              " kW of " + P.fmt(rack.power_capacity_kw, 0) + " · outlet " + P.fmt(live.outlet_c, 1) +
              " °C" + (racksInThisCell > 1 ? " · this cell shows the highest of " + racksInThisCell + " racks" : ""));
    // live status is the engine's; the inventory's (operator-set) status stands beside it
    P.fillTable("rack-nodes", rack.nodes.map(function (n) {
      return [n.hostname, n.slot, n.model, n.gpus, n.live_status || "unknown",
              n.status + (n.reason ? " (" + n.reason + ")" : ""), (n.jobs || []).join(", "),
              n.spare ? "spare" : ""];
    }), "No nodes.");
    // each hostname opens its node's page (search and other pages link here with ?rack=)
    var rows = document.getElementById("rack-nodes").rows;
    rack.nodes.forEach(function (n, i) {
      if (n.id === null || n.id === undefined || !rows[i]) return;
      var a = document.createElement("a");
      a.href = "/nodes/" + n.id + "/";
      a.textContent = n.hostname;
      rows[i].cells[0].replaceChildren(a);
    });
    document.getElementById("rack-detail").hidden = false;
    var drill = document.getElementById("rack-drill-link");
    if (drill) drill.href = "/drills/?kind=rack_power&target=" + rack.id;
  }

  // ----------------------------------------------------------------- zoom
  var zoomForm = document.getElementById("zoom-form");
  var zoomTier = document.getElementById("zoom-tier");
  var zoomDiv = document.getElementById("zoom-chart");
  var RACK_ZOOMS = { status: "rack status", power_share: "rack power", outlet_c: "rack outlet temperature" };

  function zoomTiers() {
    var wanted = lastLinkFrames.filter(function (h) { return h.tier; })
      .map(function (h) { return [h.tier, h.tier + " links (by pod)"]; })
      .concat(Object.keys(RACK_ZOOMS).map(function (k) { return [k, RACK_ZOOMS[k] + " (by hall)"]; }));
    var have = Array.prototype.map.call(zoomTier.options, function (o) { return o.value; });
    if (have.join() === wanted.map(function (w) { return w[0]; }).join()) return;
    var chosen = zoomTier.value;
    zoomTier.replaceChildren.apply(zoomTier, wanted.map(function (w) {
      var o = document.createElement("option");
      o.value = w[0];
      o.textContent = w[1];
      return o;
    }));
    if (chosen) zoomTier.value = chosen;
    zoomWhereLabel();
  }

  function zoomWhereLabel() {
    P.setText("zoom-where-label", RACK_ZOOMS[zoomTier.value] ? "hall" : "pod");
  }

  function zoomLoad(query) {
    P.setText("zoom-status", "Loading…");
    fetch("/api/heatmap?" + query, { credentials: "same-origin" })
      .then(function (r) { return r.json().then(function (body) { return [r.ok, body]; }); })
      .then(function (result) {
        if (!result[0]) throw new Error(result[1].error || "request failed");
        zoomDraw(result[1]);
      })
      .catch(function (err) { P.setText("zoom-status", err.message); });
  }

  function zoomDraw(body) {
    var isLinks = !!body.down;
    var rows = body.z.length;
    var cols = rows ? body.z[0].length : 0;
    var text = isLinks ? body.z.map(function (row, y) {
      return row.map(function (v, x) { return body.names[y] + ", uplink " + (x + 1); });
    }) : body.names.map(function (row, y) {
      return row.map(function (n) { return (n || "no rack") + " (row " + y + ")"; });
    });
    if (body.kw) {
      text = text.map(function (row, y) {
        return row.map(function (t, x) { return t + ", " + P.fmt(body.kw[y][x], 1) + " kW"; });
      });
    }
    var style = isLinks ? { colorscale: "Viridis" } : RACK_PLOTS[body.tier];
    var traces = [heatmapTrace({ z: body.z, scale: body.scale }, style, text)];
    lastZoom = body;
    if (!isLinks && body.tier === "status") {
      traces.push(outMarkers(body.z, function (share) {
        return Math.round(share * 100) + "% of nodes out";
      }));
    }
    if (isLinks && body.links_down) {
      traces.push(outMarkers(body.down, function () { return "link out"; }));
      traces.push(downTrace(body.down, text, function () { return "link out"; }));
    }
    var yaxis = namedAxis(isLinks ? "switch" : "row", rows, function (i) {
      return isLinks ? body.names[i] : "row " + i;
    });
    yaxis.autorange = "reversed";
    var title = body.title + (body.hall ? " (" + body.hall + ")" : "") +
      (isLinks && body.links_down ? " — " + body.links_down + " link(s) out" : "");
    Plotly.react(zoomDiv, traces, P.layout({
      title: { text: title, font: { size: 13 } }, yaxis: yaxis,
      xaxis: namedAxis(isLinks ? "uplink" : "rack in row", cols, function (j) {
        return String(isLinks ? j + 1 : j);
      }),
      height: Math.min(900, 200 + 16 * rows), margin: { l: 60, r: 20, t: 40, b: 50 },
    }), P.plotConfig);
    P.setText("zoom-status", "Every " + (isLinks ? "link" : "rack") + " of the cut, unmerged, at t = " +
              P.simTime(body.t) + "." + (isLinks ? "" : " Click a rack for its nodes."));
    if (!zoomDiv.dataset.rackClicks) {
      zoomDiv.dataset.rackClicks = "1";
      zoomDiv.on("plotly_click", function (event) {
        var pt = event.points[0];
        var id = lastZoom && lastZoom.ids && !lastZoom.down ? (lastZoom.ids[pt.y] || [])[pt.x] : -1;
        if (id !== undefined && id !== null && id >= 0) loadRack(id, 1);
      });
    }
  }

  function linkClicked(i, pt) {
    var heatmap = lastLinkFrames[i];
    var run = heatmap && heatmap.rows && heatmap.rows[pt.y];
    if (!heatmap || !heatmap.tier || !run) return;
    zoomTier.value = heatmap.tier;
    zoomWhereLabel();
    zoomLoad("tier=" + encodeURIComponent(heatmap.tier) + "&first=" + run[0] + "&last=" + run[1]);
  }

  var lastZoom = null;
  zoomTier.addEventListener("change", zoomWhereLabel);
  zoomForm.addEventListener("submit", function (event) {
    event.preventDefault();
    var where = document.getElementById("zoom-where").value.trim();
    if (!/^[0-9]{1,9}$/.test(where)) {
      P.setText("zoom-status", "Give a pod or hall number (0, 1, 2 …).");
      return;
    }
    var key = RACK_ZOOMS[zoomTier.value] ? "hall" : "pod";
    zoomLoad("tier=" + encodeURIComponent(zoomTier.value) + "&" + key + "=" + where);
  });

  var asked = new URLSearchParams(window.location.search).get("rack");
  if (asked !== null && /^[0-9]{1,9}$/.test(asked)) loadRack(asked, 1);

  TwinLive.on("data", function (msg) {
    var heatmaps = msg.heatmaps || {};
    drawLinks(heatmaps.links || []);
    zoomTiers();
    drawRacks(heatmaps.racks || {});
    drawHalls(heatmaps.halls);
    drawStorage(heatmaps.storage);
  });
})();
