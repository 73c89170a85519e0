// The researcher's target drawing (templates/description_targets.html): the board fills the form's field.
(() => {
  const field = document.getElementById("hex-target-board");
  let board = new Array(180).fill(0);
  try { if (field.value) board = JSON.parse(field.value); } catch (_) { /* a refused board: start blank */ }
  if (!Array.isArray(board) || board.length !== 180) board = new Array(180).fill(0);
  field.value = JSON.stringify(board);
  new window.HexBoard(document.getElementById("hex-board"), {
    board, label: "The target image", onChange: (now) => { field.value = JSON.stringify(now); } });
})();
