/* What-if: on the form, show only the fields the chosen action takes; on a result, draw the
 * per-category chart, or poll the API while the what-if runs and reload when it ends. */
(function () {
  "use strict";

  var kindParams = document.getElementById("kind-params");
  var kind = document.getElementById("id_kind");
  if (kindParams && kind) {
    var params = JSON.parse(kindParams.textContent);
    var show = function () {
      var k = kind.value;
      var drill = ["none", "policy", "drain"].indexOf(k) < 0;
      var takes = params[k] || [];
      document.querySelectorAll("[data-param]").forEach(function (el) {
        el.hidden = takes.indexOf(el.dataset.param) < 0;
      });
      var fors = {target: drill || k === "drain", unit: k === "drain",
                  policy: k === "policy", placement: k === "policy"};
      document.querySelectorAll("[data-for]").forEach(function (el) {
        el.hidden = !fors[el.dataset.for];
      });
    };
    kind.addEventListener("change", show);
    show();
  }

  var chartData = document.getElementById("whatif-chart-data");
  if (chartData && window.Plotly) {
    var c = JSON.parse(chartData.textContent);
    var traces = c.seeds.map(function (s) {
      return {type: "bar", name: "seed " + s.seed, x: c.categories, y: s.delta};
    });
    Plotly.newPlot("whatif-chart", traces, {
      barmode: "group", margin: {t: 10, b: 120}, yaxis: {title: "GPU-hours (action − baseline)"}
    }, {displayModeBar: false, responsive: true});
  }

  var state = document.getElementById("whatif-state");
  if (state) {
    var st = JSON.parse(state.textContent);
    if (st.status === "pending" || st.status === "running") {
      var poll = function () {
        fetch("/api/whatif/" + st.id, {credentials: "same-origin"})
          .then(function (r) { return r.ok ? r.json() : null; })
          .then(function (d) {
            if (d && d.status !== "pending" && d.status !== "running") {
              window.location.reload();
            } else {
              window.setTimeout(poll, 3000);
            }
          })
          .catch(function () { window.setTimeout(poll, 10000); });
      };
      window.setTimeout(poll, 3000);
    }
  }
}());
