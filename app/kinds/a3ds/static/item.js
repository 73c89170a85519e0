// The worker's page of an A3DS item (templates/item.html): the arrow keys pick a picture.
(() => {
  // The arrow keys pick like 1 and 2.
  const keys = {ArrowLeft: "1", ArrowRight: "2"};
  document.addEventListener("keydown", (ev) => {
    const value = keys[ev.key];
    if (!value || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const box = document.querySelector(`.a3ds-pick input[value="${value}"]`);
    if (box) { box.checked = true; box.focus(); ev.preventDefault(); }
  });
})();
