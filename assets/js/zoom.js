// Progressive enhancement for pictures in a scrollable box (the plan's task graph): the buttons of
// a [data-zoom-for] bar zoom the box's SVG out and in, fit it to the box's width, or show it at its
// actual size; the SVG's viewBox keeps it sharp at every size. The picture starts fitted to the
// box's width when that keeps three quarters of its size (its text stays readable), else at its
// actual size, scrolling. Without JavaScript the bar stays hidden and the box scrolls.
(function () {
  "use strict";
  var STEP = 1.25, MIN = 0.1, MAX = 4;
  Array.prototype.forEach.call(document.querySelectorAll("[data-zoom-for]"), function (bar) {
    var box = document.getElementById(bar.getAttribute("data-zoom-for"));
    var svg = box && box.querySelector("svg");
    if (!svg) { return; }
    var w = parseFloat(svg.getAttribute("width")), h = parseFloat(svg.getAttribute("height"));
    if (!(w > 0 && h > 0)) { return; }
    var level = bar.querySelector(".zoom-level");
    var scale = 1;
    function fit() { return Math.min(1, (box.clientWidth - 2) / w); }
    function set(s) {
      scale = Math.max(MIN, Math.min(MAX, s));
      svg.setAttribute("width", String(Math.round(w * scale)));
      svg.setAttribute("height", String(Math.round(h * scale)));
      if (level) { level.textContent = Math.round(scale * 100) + "%"; }
    }
    bar.addEventListener("click", function (event) {
      var b = event.target.closest("button[data-zoom]");
      if (!b) { return; }
      switch (b.getAttribute("data-zoom")) {
        case "in": set(scale * STEP); break;
        case "out": set(scale / STEP); break;
        case "fit": set(fit()); break;
        default: set(1);
      }
    });
    bar.hidden = false;
    set(fit() >= 0.75 ? fit() : 1);
  });
})();
