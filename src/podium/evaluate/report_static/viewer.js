// Trajectory viewer: filter items by text and correctness. Plain JS, no external resources.
"use strict";
(function () {
  const items = Array.from(document.querySelectorAll("details.item"));
  const search = document.getElementById("search");
  const wrongOnly = document.getElementById("wrong-only");
  const counter = document.getElementById("shown");
  function apply() {
    const needle = search.value.toLowerCase();
    let shown = 0;
    for (const item of items) {
      const visible = (!wrongOnly.checked || item.classList.contains("wrong")) &&
        (!needle || item.textContent.toLowerCase().includes(needle));
      item.hidden = !visible;
      if (visible) shown += 1;
    }
    counter.textContent = shown + " of " + items.length + " attempts shown";
  }
  search.addEventListener("input", apply);
  wrongOnly.addEventListener("change", apply);
  apply();
})();
