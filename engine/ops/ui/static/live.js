// Live counts on the executions page: one small JSON read every 2 seconds.
(function () {
  var box = document.getElementById("counts");
  if (!box) return;
  var windowName = box.getAttribute("data-window") || "24h";
  function refresh() {
    fetch("/api/counts?window=" + encodeURIComponent(windowName), { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (counts) {
        if (!counts) return;
        box.querySelectorAll("[data-status]").forEach(function (el) {
          var n = counts[el.getAttribute("data-status")];
          if (n !== undefined) el.textContent = n;
        });
      })
      .catch(function () {});
  }
  setInterval(refresh, 2000);
})();

// Live streams on an execution's page: server-sent events from /api/stream, one line a
// value; the browser resumes after the last value it got if the connection drops.
(function () {
  document.querySelectorAll("pre.stream").forEach(function (box) {
    var url = "/api/stream?id=" + encodeURIComponent(box.getAttribute("data-id")) +
      "&key=" + encodeURIComponent(box.getAttribute("data-key"));
    var state = document.getElementById(box.getAttribute("data-state"));
    var count = 0;
    var source = new EventSource(url);
    source.onmessage = function (event) {
      box.appendChild(document.createTextNode(event.data + "\n"));
      count += 1;
      if (state) state.textContent = count + " value(s)";
    };
    source.addEventListener("end", function () {
      source.close();
      if (state) state.textContent = count + " value(s), ended";
    });
  });
})();
