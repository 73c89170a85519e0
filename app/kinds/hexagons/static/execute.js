// The executor's page (templates/item.html): steps, board, labels and keys. Loaded where the
// template stands, after the markup it uses and board.js, keep.js (a file, not an inline
// script: the pages' Content-Security-Policy allows scripts from our origin only).
(() => {
  const box = document.getElementById("hex-board");
  const form = box.closest("form");
  const root = document.getElementById("hex-exec");
  const texts = [...document.querySelectorAll(".hex-instruction")];
  const n = texts.length;
  const initial = JSON.parse(box.dataset.initial);
  const nextButton = document.getElementById("hex-next");
  const sendButton = document.getElementById("submit");
  const backButton = document.getElementById("hex-back");
  const errorBox = document.getElementById("hex-error");
  let board = initial.slice();
  const steps = texts.map(() => null);
  let k = 0, began = performance.now(), actions = [];
  // The steps painted so far, kept in this tab for a reload (like navigation's walk): the
  // finished steps, the current step's board and paints, and the time spent on it.
  const store = window.HexKeep ? window.HexKeep("proctor-hex-exec:", root.dataset.assignment) : null;
  const keep = () => {
    if (store) store.save({n, k, steps: steps.slice(0, k), board, actions, labels,
                           colour: widget ? widget.getColour() : null, ms: performance.now() - began});
  };
  // The board component (board.js, docs/kinds/hexagons-board.md) reports each paint, undos
  // included as the paint they make, so replaying the actions gives the board.
  const widget = window.HexBoard ? new window.HexBoard(box, {
    shifted: JSON.parse(box.dataset.layout).shifted, board: board.slice(), label: "The board",
    enterPaints: false,  // one key, one meaning: Space paints, Enter is Next step (below)
    onChange: (now, action) => {
      board = now.slice();
      actions.push([action.tile, action.colour, Math.round(performance.now() - began)]);
      save();
    },
  }) : null;
  // The chosen colour is kept with the steps, so a reload paints on in it.
  box.addEventListener("hexboard:colour", () => keep());
  // Abstraction labels (when the study asks for them): one per step, kept when going back.
  const labelField = document.getElementById("hex-labels-field");
  const labels = texts.map(() => ({level: null, mechanisms: []}));
  const levelInputs = [...document.querySelectorAll(".hex-level")];
  const mechInputs = [...document.querySelectorAll(".hex-mechanism")];
  const readLabel = () => {
    const on = levelInputs.find((i) => i.checked);
    labels[k] = {level: on ? Number(on.value) : null, mechanisms: mechInputs.filter((i) => i.checked).map((i) => i.value)};
  };
  const showLabel = () => {
    levelInputs.forEach((i) => (i.checked = labels[k].level !== null && Number(i.value) === labels[k].level));
    mechInputs.forEach((i) => (i.checked = labels[k].mechanisms.includes(i.value)));
  };
  [...levelInputs, ...mechInputs].forEach((i) => i.addEventListener("change", () => save()));
  const save = () => {
    steps[k] = {board: board.slice(), actions: actions.slice()};
    const sent = steps.filter(Boolean);
    document.getElementById("hex-steps").value = JSON.stringify(sent);
    if (labelField) { readLabel(); labelField.value = JSON.stringify(labels.slice(0, sent.length)); }
    keep();
  };
  const paintPage = () => {
    texts.forEach((t, j) => (t.hidden = j !== k));
    document.getElementById("hex-pos").textContent = k + 1;
    backButton.disabled = k === 0;
    nextButton.hidden = k === n - 1;
    sendButton.hidden = k !== n - 1;
    if (labelField) showLabel();
  };
  const show = (to) => {
    if (to < 0 || to >= n) return;
    save();
    k = to;
    // Going back shows an earlier step again; its board and actions start afresh from the
    // board before it, and the later steps are dropped (they were executed on the old one).
    board = (k === 0 ? initial : steps[k - 1].board).slice();
    actions = [];
    for (let j = k; j < n; j++) steps[j] = null;
    if (widget && widget.setBoard) widget.setBoard(board.slice());
    began = performance.now();
    errorBox.hidden = true;
    paintPage();
    save();
  };
  // A reload resumes the steps painted before it (this assignment's, in this tab); the keys
  // of earlier items are done with.
  const isBoard = (b) => window.HexKeep.isBoard(b, initial.length);
  const saved = store && store.load((s) => s.n === n && Number.isInteger(s.k) && s.k >= 0 && s.k < n
    && isBoard(s.board) && Array.isArray(s.actions) && Array.isArray(s.steps) && s.steps.length === s.k
    && s.steps.every((st) => st && isBoard(st.board) && Array.isArray(st.actions)));
  if (saved) {
    k = saved.k;
    saved.steps.forEach((st, j) => (steps[j] = st));
    board = saved.board.slice();
    actions = saved.actions;
    began = performance.now() - (Number(saved.ms) || 0);
    if (Array.isArray(saved.labels) && saved.labels.length === n) saved.labels.forEach((l, j) => (labels[j] = l));
    if (widget && widget.setBoard) widget.setBoard(board.slice());
    if (widget && window.HexKeep.isColour(saved.colour)) widget.setColour(saved.colour);
    paintPage();
  }
  // Keyboard work starts on the board (Space paints there); nothing else on the page takes focus.
  const surface = box.querySelector(".hexboard-surface");
  if (surface && (!document.activeElement || document.activeElement === document.body)) surface.focus({preventScroll: true});
  nextButton.addEventListener("click", () => show(k + 1));
  backButton.addEventListener("click", () => show(k - 1));
  const ready = () => k === n - 1 && steps.slice(0, n - 1).every(Boolean);
  // Keys, before the page's own (static/app.js sends the form on Enter) and the board's: one
  // key, one meaning, wherever the focus is. Enter is Next step (on the board too, where only
  // Space paints) and nothing on the last step; S sends, and only from the last step. A focused
  // button is pressed by its own Enter; text fields keep their keys.
  document.addEventListener("keydown", (ev) => {
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const t = ev.target;
    if (t && t.matches && t.matches("input[type=text], textarea, select")) return;
    if (ev.key === "Enter") {
      if (t && t.tagName === "BUTTON") return;  // a focused button is pressed by its own Enter
      ev.preventDefault(); ev.stopImmediatePropagation();
      if (!ev.repeat && k < n - 1) show(k + 1);
    } else if (ev.key === "s" || ev.key === "S") {
      ev.preventDefault(); ev.stopImmediatePropagation();
      if (!ev.repeat && ready()) form.requestSubmit(sendButton);
    }
  }, true);
  const refuse = (message) => {
    errorBox.textContent = message;
    errorBox.hidden = false;
  };
  form.addEventListener("submit", (ev) => {
    save();
    if (!ready()) {  // every step shown first: nothing unfinished is sent
      ev.preventDefault(); ev.stopImmediatePropagation();
      refuse(`Step ${k + 1} of ${n}: go through every step (Next step) before sending.`);
      return;
    }
    errorBox.hidden = true;
    // The worker's page (annotate/item.html, data-inline) is sent in the background by
    // static/app.js: a refusal shows after Send, in the bar under the board, and this page,
    // its board, its steps and the lease stay; an accepted answer opens the next item.
  });
  save();
})();
