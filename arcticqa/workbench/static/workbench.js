// Keyboard shortcuts for the common path: a accept, u unsure (both save at once), r reject,
// 1-4 toggle "distractor k is true or defensible" (and choose reject), Enter save (and go on to the
// next item), n next item, p previous item.
"use strict";
document.addEventListener("keydown", function (e) {
  if (e.ctrlKey || e.metaKey || e.altKey) return;
  var t = e.target;
  if (t && (t.tagName === "TEXTAREA" || (t.tagName === "INPUT" && t.type === "text"))) return;
  var form = document.getElementById("verdict-form");
  if (!form) return;
  function choose(v) { document.getElementById("v-" + v).checked = true; }
  function save() { if (form.requestSubmit) form.requestSubmit(); else form.submit(); }
  if (e.key === "a" || e.key === "u") { choose(e.key === "a" ? "accept" : "unsure"); save(); }
  else if (e.key === "r") { choose("reject"); }
  else if (/^[1-4]$/.test(e.key)) {
    var box = form.querySelector('input[data-key="' + e.key + '"]');
    if (box) { box.checked = !box.checked; choose("reject"); }
  } else if (e.key === "Enter") { save(); }
  else if (e.key === "n" || e.key === "p") {
    var link = document.getElementById(e.key === "n" ? "next" : "prev");
    if (link) window.location = link.href;
  }
  else return;
  e.preventDefault();
});
document.documentElement.dataset.ready = "1";
