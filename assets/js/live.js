// Progressive enhancement: an element with data-live-src is refreshed from that URL every two
// seconds while its content says the deployment is running (data-status="running"). Without
// JavaScript the page still works; reload to see progress.
(function () {
  "use strict";
  var box = document.querySelector("[data-live-src]");
  if (!box) { return; }
  var src = box.getAttribute("data-live-src");
  function running() {
    return box.querySelector('[data-status="running"]') !== null;
  }
  function tick() {
    if (!running()) { return; }
    fetch(src, { cache: "no-store" })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        box.innerHTML = html;
        if (!running()) { window.location.reload(); return; }
        window.setTimeout(tick, 2000);
      })
      .catch(function () { window.setTimeout(tick, 5000); });
  }
  window.setTimeout(tick, 2000);
})();
