// Trace list: refresh the changing columns of running and waiting traces every few seconds.
(function () {
  "use strict";
  var script = document.currentScript;
  var endpoint = script.getAttribute("data-live");
  var LIVE = ["queued", "running", "waiting"];

  function liveIds() {
    var ids = [];
    document.querySelectorAll("tr[data-trace]").forEach(function (row) {
      var status = row.querySelector("[data-col=status]");
      if (status && LIVE.indexOf(status.textContent.trim()) >= 0) ids.push(row.getAttribute("data-trace"));
    });
    return ids;
  }

  function apply(trace) {
    var row = document.querySelector('tr[data-trace="' + CSS.escape(trace.trace_id) + '"]');
    if (!row) return;
    var status = row.querySelector("[data-col=status]");
    status.textContent = trace.status;
    status.className = "badge status-" + trace.status;
    ["tokens", "cost", "duration"].forEach(function (col) {
      row.querySelector("[data-col=" + col + "]").textContent = trace[col];
    });
    row.querySelector("[data-col=cost]").title = trace.cost_note; // why a cost is unknown or a lower bound
    var waiting = row.querySelector("[data-col=waiting_for]");
    waiting.textContent = trace.waiting_for;
    waiting.hidden = !trace.waiting_for;
    row.querySelector("[data-col=updated]").textContent = "just now";
    row.classList.toggle("attention", trace.needs_attention || trace.status === "waiting");
  }

  function poll() {
    var ids = liveIds();
    if (!ids.length) return setTimeout(poll, 10000);
    fetch(endpoint + "?ids=" + encodeURIComponent(ids.join(",")), { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : { traces: [] }; })
      .then(function (data) { data.traces.forEach(apply); })
      .catch(function () {})
      .then(function () { setTimeout(poll, 2000); });
  }
  setTimeout(poll, 2000);
})();
