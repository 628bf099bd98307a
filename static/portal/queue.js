// Keyboard shortcuts on a review queue's work page (X6): j/→ next, k/← previous,
// d done & next, s skip, o open the trace. Ignored while typing in a field.
(function () {
  "use strict";
  const go = (id) => {
    const link = document.getElementById(id);
    if (link) window.location.assign(link.href);
  };
  const press = (id) => {
    const button = document.getElementById(id);
    if (button) button.click();
  };
  const keys = {
    j: () => go("next"), ArrowRight: () => go("next"),
    k: () => go("previous"), ArrowLeft: () => go("previous"),
    d: () => press("done"), s: () => press("skip"), o: () => go("open-trace"),
  };
  document.addEventListener("keydown", (event) => {
    const target = event.target;
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (target instanceof HTMLElement && target.closest("input, textarea, select, [contenteditable]")) return;
    const action = keys[event.key];
    if (!action) return;
    event.preventDefault();
    action();
  });
})();
