// The instructor's page (templates/description_item.html): steps written and painted, kept in
// this tab. Loaded where the template stands, after its markup, board.js and keep.js.
(() => {
  const box = document.getElementById("hex-board");
  const form = box.closest("form");
  const text = document.getElementById("hex-instruction");
  const message = document.getElementById("hex-message");
  const initial = JSON.parse(box.dataset.initial);
  const target = JSON.parse(document.getElementById("hex-target").dataset.board);
  const shifted = JSON.parse(box.dataset.layout).shifted;
  const steps = [];
  let board = initial.slice(), actions = [], began = performance.now();
  const differ = () => board.reduce((n, c, t) => n + (c !== target[t] ? 1 : 0), 0);
  const say = (m) => { message.textContent = m; message.hidden = !m; };
  const show = () => {
    const n = differ();
    document.getElementById("hex-diff").textContent = n ? `${n} tiles differ from the target.` : "Your board shows the target.";
  };
  if (window.HexBoard) new window.HexBoard(document.getElementById("hex-target"), {
    shifted, board: target, readonly: true, toolbar: false, label: "The target image" });
  // Every paint, undos included as the paint they make, so replaying the actions gives the board.
  const widget = window.HexBoard ? new window.HexBoard(box, {
    shifted, board: board.slice(), label: "Your board",
    onChange: (now, action) => { board = now.slice(); actions.push([action.tile, action.colour, Math.round(performance.now() - began)]); show(); keep(); },
  }) : null;
  // What a reload resumes: the steps added, the board and paints of the step being written,
  // its text, the time on it and the colour.
  const store = window.HexKeep ? window.HexKeep("proctor-hex-desc:", document.getElementById("hex-describe").dataset.assignment) : null;
  const keep = () => {
    if (store) store.save({steps, board, actions, text: text.value, colour: widget ? widget.getColour() : null,
                           ms: performance.now() - began});
  };
  text.addEventListener("input", () => keep());
  box.addEventListener("hexboard:colour", () => keep());
  const save = () => {
    document.getElementById("hex-steps").value = JSON.stringify(steps);
    const list = document.getElementById("hex-written");
    list.replaceChildren(...steps.map((s) => { const li = document.createElement("li"); li.textContent = s.instruction; return li; }));
    list.scrollTop = list.scrollHeight;  // the newest step in view in the list's own box
    document.getElementById("hex-pos").textContent = steps.length + 1;
    document.getElementById("hex-remove-step").disabled = !steps.length;
    show();
    keep();
  };
  const addStep = () => {
    const instruction = text.value.trim();
    if (!instruction) { say("Write the step's instruction first."); text.focus(); return false; }
    steps.push({ instruction, board: board.slice(), actions: actions.slice() });
    text.value = ""; actions = []; began = performance.now();
    say(""); save(); text.focus();
    return true;
  };
  document.getElementById("hex-add-step").addEventListener("click", addStep);
  // The last step goes; the board is again as it was before it.
  document.getElementById("hex-remove-step").addEventListener("click", () => {
    const gone = steps.pop();
    if (!gone) return;
    board = (steps.length ? steps[steps.length - 1].board : initial).slice();
    actions = []; began = performance.now();
    if (widget) widget.setBoard(board.slice());
    text.value = gone.instruction;
    save();
  });
  form.addEventListener("submit", (ev) => {
    let ok = true;
    if (text.value.trim()) ok = addStep();
    else if (actions.length) { say("Write the instruction for what you painted, or undo it."); ok = false; }
    if (ok && !steps.length) { say("Write at least one step."); ok = false; }
    // Stopped here, the page's one-submit guard never sees (and never locks) a refused send.
    if (!ok) { ev.preventDefault(); ev.stopPropagation(); }
  });
  const isBoard = (b) => window.HexKeep.isBoard(b, initial.length);
  const saved = store && store.load((s) => Array.isArray(s.steps) && isBoard(s.board)
    && window.HexKeep.isActions(s.actions) && typeof s.text === "string"
    && s.steps.every((st) => st && typeof st.instruction === "string" && isBoard(st.board)
                             && window.HexKeep.isActions(st.actions)));
  if (saved) {
    saved.steps.forEach((st) => steps.push({instruction: st.instruction, board: st.board, actions: st.actions}));
    board = saved.board.slice();
    actions = saved.actions;
    text.value = saved.text;
    began = performance.now() - (Number(saved.ms) || 0);
    if (widget) widget.setBoard(board.slice());
    if (widget && window.HexKeep.isColour(saved.colour)) widget.setColour(saved.colour);
  }
  save();
})();
