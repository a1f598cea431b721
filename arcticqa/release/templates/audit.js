"use strict";
(function () {
  // Only textContent and attributes are written: nothing from the data is ever parsed as HTML.
  var summary = JSON.parse(document.getElementById("audit-summary").textContent);
  var rows = Array.prototype.slice.call(document.querySelectorAll("#rejections tbody tr"));
  var stageSel = document.getElementById("filter-stage");
  var ruleSel = document.getElementById("filter-rule");
  var text = document.getElementById("filter-text");
  var shown = document.getElementById("shown-count");

  function applyFilters() {
    var stage = stageSel.value, rule = ruleSel.value, needle = text.value.toLowerCase();
    var n = 0;
    rows.forEach(function (tr) {
      var ok = (!stage || tr.dataset.stage === stage) && (!rule || tr.dataset.rule === rule) &&
        (!needle || tr.textContent.toLowerCase().indexOf(needle) !== -1);
      tr.hidden = !ok;
      if (ok) { n += 1; }
    });
    shown.textContent = n + " of " + summary.rejections + " shown";
  }

  function openDetail(anchor) {
    var target = document.getElementById(anchor);
    if (!target) { return; }
    document.querySelectorAll("section.detail").forEach(function (s) { s.hidden = true; });
    target.hidden = false;
    document.getElementById("detail-title").textContent = target.dataset.label;
    target.scrollIntoView();
  }

  // links are plain #anchors, so every paper and item has an address; the hash opens it
  function openFromHash() {
    if (location.hash.length > 1) { openDetail(decodeURIComponent(location.hash.slice(1))); }
  }

  [stageSel, ruleSel].forEach(function (el) { el.addEventListener("change", applyFilters); });
  text.addEventListener("input", applyFilters);
  window.addEventListener("hashchange", openFromHash);
  applyFilters();
  openFromHash();
  document.body.dataset.ready = "1";
})();
