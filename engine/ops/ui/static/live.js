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
