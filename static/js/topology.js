/* Topology: link utilisation by tier and the rack floor (status, power, temperature), redrawn
 * whole with Plotly.react on every frame; clicking a rack cell lists that rack's nodes. */
(function () {
  "use strict";

  var P = window.TwinPanels;
  var rackMap = JSON.parse(document.getElementById("rack-map").textContent);
  var links = document.getElementById("link-heatmaps");
  var RACK_PLOTS = {
    status: { id: "rack-status", colorscale: [[0, "#1f7a4d"], [0.5, "#e0a800"], [1, "#c0392b"]],
              zmin: 0, zmax: 1, unit: "share out" },
    // Plotly's YlOrRd runs dark red to yellow: reversed, the hottest racks are red
    power_kw: { id: "rack-power", colorscale: "YlOrRd", reversescale: true, unit: "kW" },
    outlet_c: { id: "rack-temp", colorscale: "RdBu", unit: "°C" },
  };
  var lastRackFrames = {};

  function withGaps(heatmap) {
    // empty floor positions are marked with heatmap.empty; null leaves a gap in the plot
    return heatmap.z.map(function (row) {
      return row.map(function (v) { return v === heatmap.empty ? null : v; });
    });
  }

  function heatmapTrace(heatmap, style) {
    return Object.assign({
      type: "heatmap", z: withGaps(heatmap), colorbar: { title: { text: style.unit || "" } },
      hovertemplate: heatmap.x + " %{x}, " + heatmap.y + " %{y}: %{z:.3g}<extra></extra>",
    }, style.colorscale ? { colorscale: style.colorscale } : {},
    style.zmin !== undefined ? { zmin: style.zmin, zmax: style.zmax } : {},
    style.reversescale ? { reversescale: true } : {});
  }

  function integerAxis(title, cells) {
    // cell indices: whole-number ticks, about ten of them
    return { title: { text: title }, tickmode: "linear", tick0: 0,
             dtick: Math.max(1, Math.ceil(cells / 10)), showgrid: false };
  }

  function heatmapLayout(heatmap) {
    var note = heatmap.rows_per_cell > 1 || heatmap.cols_per_cell > 1 ?
      " (cells average " + heatmap.rows_per_cell + "×" + heatmap.cols_per_cell + ")" : "";
    var rows = heatmap.z.length;
    var cols = rows ? heatmap.z[0].length : 0;
    var yaxis = integerAxis(heatmap.y, rows);
    yaxis.autorange = "reversed";
    return P.layout({
      title: { text: heatmap.title + note, font: { size: 13 } },
      xaxis: integerAxis(heatmap.x, cols), yaxis: yaxis,
      height: Math.min(520, 160 + 40 * rows),
    });
  }

  function drawLinks(list) {
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
      var traces = [heatmapTrace(heatmap, { colorscale: "Viridis", zmin: 0, zmax: 1,
                                            unit: "utilisation" })];
      var layout = heatmapLayout(heatmap);
      if (heatmap.links_down) {
        // failed links (or links of a failed switch): a red cross on every cell holding one
        var xs = [], ys = [], text = [];
        (heatmap.down || []).forEach(function (row, y) {
          row.forEach(function (share, x) {
            if (share > 0) { xs.push(x); ys.push(y); text.push(Math.round(share * 100) + "% of links out"); }
          });
        });
        traces.push({ type: "scatter", mode: "markers", x: xs, y: ys, text: text,
                      name: "link out", hovertemplate: "%{text}<extra>link out</extra>",
                      marker: { symbol: "x", color: "#d62728", size: 9, line: { width: 2 } } });
        layout.title.text += " — " + heatmap.links_down + " link(s) out";
      }
      Plotly.react(div, traces, layout, P.plotConfig);
    });
  }

  function drawRacks(racks) {
    Object.keys(RACK_PLOTS).forEach(function (key) {
      var style = RACK_PLOTS[key];
      var div = document.getElementById(style.id);
      var heatmap = racks[key];
      P.setText(style.id + "-note", heatmap ? "" : "Not in the live frame (needs the power model).");
      if (!heatmap) return;
      lastRackFrames[key] = heatmap;
      Plotly.react(div, [heatmapTrace(heatmap, style)], heatmapLayout(heatmap), P.plotConfig);
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

  function racksInCell(heatmap, cy, cx) {
    var rb = heatmap.rows_per_cell || 1;
    var cb = heatmap.cols_per_cell || 1;
    var ids = [];
    rackMap.racks.forEach(function (yx, id) {
      if (Math.floor(yx[0] / rb) === cy && Math.floor(yx[1] / cb) === cx) ids.push(id);
    });
    return ids;
  }

  function rackClicked(key, pt) {
    var ids = racksInCell(lastRackFrames[key], pt.y, pt.x);
    if (!ids.length) {
      P.setText("rack-message", "No rack at that position.");
      return;
    }
    loadRack(ids[0], ids.length);
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
              " °C" + (racksInThisCell > 1 ? " · this cell averages " + racksInThisCell + " racks" : ""));
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

  var asked = new URLSearchParams(window.location.search).get("rack");
  if (asked !== null && /^[0-9]{1,9}$/.test(asked)) loadRack(asked, 1);

  TwinLive.on("data", function (msg) {
    var heatmaps = msg.heatmaps || {};
    drawLinks(heatmaps.links || []);
    drawRacks(heatmaps.racks || {});
    drawStorage(heatmaps.storage);
  });
})();
