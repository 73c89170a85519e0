// A consolidation step (templates/consolidation_step.html): boards, diffs and the gold board's fix.
(() => {
  if (window.HexBoard) window.HexBoard.mountAll();  // now, not at DOMContentLoaded: the diffs need them
  document.querySelectorAll("[data-diff-against]").forEach((el) => {
    if (el.hexBoard) el.hexBoard.diff(JSON.parse(el.dataset.diffAgainst));
  });
  const box = document.getElementById("hex-gold");
  if (!window.HexBoard || !box) return;
  const instructor = JSON.parse(box.dataset.instructor);
  const field = document.getElementById("hex-gold-board");
  const say = document.getElementById("hex-gold-diff");
  // The field carries the board only when it differs from the instructor's (a fix).
  const sync = (board) => {
    const changed = board.some((c, t) => c !== instructor[t]);
    field.value = changed ? JSON.stringify(board) : "";
    const n = widget.diff(instructor).length;
    say.textContent = n ? `${n} tiles differ from the instructor's board: the gold board will be fixed.`
                        : "Same as the instructor's board.";
  };
  const widget = new window.HexBoard(box, {board: JSON.parse(box.dataset.board), shifted: box.dataset.shifted,
    label: "The gold board after the step", onChange: (board) => sync(board)});
  document.querySelectorAll(".hex-copy").forEach((b) => b.addEventListener("click", () => {
    widget.setBoard(JSON.parse(b.dataset.board));
    sync(widget.getBoard());
  }));
  sync(widget.getBoard());
})();
