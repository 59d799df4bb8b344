/* Study page: while the study runs, poll its API, move the progress bar, and reload when
 * it ends (the tables are drawn by the server). */
(function () {
  "use strict";
  var state = document.getElementById("study-state");
  if (!state) { return; }
  var st = JSON.parse(state.textContent);
  if (st.status !== "pending" && st.status !== "running") { return; }
  var bar = document.getElementById("study-progress");
  var count = document.getElementById("study-count");
  var poll = function () {
    fetch("/api/studies/" + st.id, {credentials: "same-origin"})
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (d) {
        if (!d) { window.setTimeout(poll, 5000); return; }
        bar.value = d.done_runs;
        count.textContent = d.done_runs + " of " + d.total_runs + " runs done" +
          (d.failed_runs ? ", " + d.failed_runs + " failed" : "");
        if (d.status !== "pending" && d.status !== "running") {
          window.location.reload();
        } else {
          window.setTimeout(poll, 1500);
        }
      })
      .catch(function () { window.setTimeout(poll, 5000); });
  };
  window.setTimeout(poll, 1500);
}());
