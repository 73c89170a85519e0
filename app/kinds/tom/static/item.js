// The worker's page of a Common-ToM item (templates/item.html): a long dialogue scrolls in its box.
(() => {
  // A window longer than the screen has room for (a phone): the dialogue scrolls in a box of
  // its own, so that the question, Yes, No and Next stay in view without scrolling the page,
  // and the utterance with the stop sign is scrolled to the middle of that box.
  const box = document.querySelector(".dialogue"), next = document.getElementById("submit");
  if (!box || !next) return;
  const fit = () => {
    box.style.maxHeight = "";
    box.classList.remove("scrolls");
    box.removeAttribute("tabindex");
    const over = next.getBoundingClientRect().bottom + window.scrollY + 16 - window.innerHeight;
    if (over <= 0) return;
    box.style.maxHeight = Math.max(120, box.clientHeight - over) + "px";
    box.classList.add("scrolls");
    box.tabIndex = 0;  // a box that scrolls is reached by keyboard too
    const target = box.querySelector(".target");
    if (target) {
      const b = box.getBoundingClientRect(), t = target.getBoundingClientRect();
      box.scrollTop += t.top - b.top - (box.clientHeight - t.height) / 2;
    }
  };
  fit();
  addEventListener("load", fit);
  addEventListener("resize", fit);
})();
