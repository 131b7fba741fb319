// Marks which plots loaded, so a broken image is visible in the page (and to tests reading the DOM).
"use strict";
window.addEventListener("load", function () {
  const plots = Array.from(document.querySelectorAll("img.plot"));
  const loaded = plots.filter(function (img) { return img.complete && img.naturalWidth > 0; });
  const status = document.getElementById("plot-status");
  status.textContent = loaded.length + " of " + plots.length + " plots loaded";
  status.dataset.loaded = String(loaded.length);
  status.dataset.total = String(plots.length);
});
