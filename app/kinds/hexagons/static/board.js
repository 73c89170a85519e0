// The Hexagons board (Lachmy et al. 2022): 10 rows x 18 columns of flat-top hexagons, tile
// index = row * 18 + col, 8 colours. One component for every Hexagons page: painting by mouse,
// touch and keyboard, a paint log, undo, read-only views and a diff highlight.
// API and keyboard map: docs/kinds/hexagons-board.md.
(function () {
  "use strict";
  const ROWS = 10, COLS = 18, N = ROWS * COLS;
  const NS = "http://www.w3.org/2000/svg";
  const COLOURS = [
    { name: "white", hex: "#ffffff", light: false },
    { name: "black", hex: "#111111", light: true },
    { name: "yellow", hex: "#ffe03d", light: false },
    { name: "green", hex: "#2fa84f", light: false },
    { name: "red", hex: "#e5322d", light: false },
    { name: "blue", hex: "#1e6fd9", light: true },
    { name: "purple", hex: "#8e3fb0", light: true },
    { name: "orange", hex: "#f5901e", light: false },
  ];
  // viewBox units: R circumradius, H tile height; P leaves room for the outer strokes.
  const R = 10, H = Math.sqrt(3) * R, P = 2;
  const WIDTH = 2 * P + 2 * R + (COLS - 1) * 1.5 * R;
  const HEIGHT = 2 * P + (ROWS + 0.5) * H;

  function isShifted(col, shifted) { return col % 2 === (shifted === "even" ? 0 : 1); }

  function checkShifted(shifted) {
    if (shifted === undefined || shifted === null) return "odd";
    if (shifted !== "odd" && shifted !== "even") throw new TypeError('shifted must be "odd" or "even"');
    return shifted;
  }

  function centre(tile, shifted) {
    const r = Math.floor(tile / COLS), c = tile % COLS;
    return [P + R + 1.5 * R * c, P + H / 2 + H * r + (isShifted(c, shifted) ? H / 2 : 0)];
  }

  function hexPoints(x, y, radius) {
    const h = (Math.sqrt(3) * radius) / 2;
    return [[x + radius, y], [x + radius / 2, y + h], [x - radius / 2, y + h],
            [x - radius, y], [x - radius / 2, y - h], [x + radius / 2, y - h]]
      .map((p) => p[0].toFixed(2) + "," + p[1].toFixed(2)).join(" ");
  }

  function at(r, c) { return r >= 0 && r < ROWS && c >= 0 && c < COLS ? r * COLS + c : null; }

  // The six neighbours, null off the board. A shifted (lower) column meets its side columns
  // at rows r (upper) and r + 1 (lower); an unshifted one at rows r - 1 and r.
  function neighbours(tile, shifted) {
    shifted = checkShifted(shifted);
    const r = Math.floor(tile / COLS), c = tile % COLS;
    const up = isShifted(c, shifted) ? r : r - 1;
    return { n: at(r - 1, c), ne: at(up, c + 1), se: at(up + 1, c + 1),
             s: at(r + 1, c), sw: at(up + 1, c - 1), nw: at(up, c - 1) };
  }

  // Arrow keys. Up/Down: same column. Left/Right: the side neighbour in the same row, so a run
  // of Right presses zigzags half a tile and keeps its height; with Shift, the other side
  // neighbour. Off the board: stay.
  function move(tile, key, shifted, shift) {
    const nb = neighbours(tile, shifted);
    const r = Math.floor(tile / COLS), c = tile % COLS, low = isShifted(c, checkShifted(shifted));
    let to = null;
    if (key === "ArrowUp") to = nb.n;
    else if (key === "ArrowDown") to = nb.s;
    else if (key === "ArrowRight") to = shift ? (low ? nb.se : nb.ne) : at(r, c + 1);
    else if (key === "ArrowLeft") to = shift ? (low ? nb.sw : nb.nw) : at(r, c - 1);
    else if (key === "Home") to = at(r, 0);
    else if (key === "End") to = at(r, COLS - 1);
    else if (key === "PageUp") to = at(0, c);
    else if (key === "PageDown") to = at(ROWS - 1, c);
    return to === null ? tile : to;
  }

  function normalise(board) {
    if (typeof board === "string") board = Array.from(board.trim(), Number);
    if (!board || board.length !== N) throw new TypeError("a board has " + N + " tiles");
    const out = Array.from(board, Number);
    out.forEach((v, i) => {
      if (!Number.isInteger(v) || v < 0 || v > 7) throw new TypeError("tile " + i + ": colour " + board[i] + " is not 0-7");
    });
    return out;
  }

  function svg(name, attrs, parent) {
    const e = document.createElementNS(NS, name);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }

  function html(name, attrs, parent, text) {
    const e = document.createElement(name);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }

  let counter = 0;

  function HexBoard(element, options) {
    if (!(this instanceof HexBoard)) return new HexBoard(element, options);
    if (typeof element === "string") element = document.querySelector(element);
    if (!element) throw new TypeError("HexBoard needs an element");
    options = options || {};
    const self = this, uid = "hexboard-" + ++counter;
    const shifted = checkShifted(options.shifted);
    let board = options.board ? normalise(options.board) : new Array(N).fill(0);
    let readonly = !!options.readonly;
    // enterPaints: false leaves Enter to the page (execution: Enter is Next step); Space paints.
    const enterPaints = options.enterPaints !== false;
    let colour = options.colour === undefined ? 1 : Number(options.colour);
    if (!(colour >= 0 && colour <= 7)) throw new TypeError("colour must be 0-7");
    let cursor = 0, log = [], undoStack = [], t0 = performance.now();
    let against = null, numbers = !!options.numbers, stroke = null, destroyed = false;
    const onChange = typeof options.onChange === "function" ? options.onChange : null;

    element.classList.add("hexboard");
    element.dataset.shifted = shifted;

    // Toolbar: palette, undo, numbers.
    const bar = html("div", { class: "hexboard-toolbar" }, element);
    const palette = html("div", { class: "hexboard-palette", role: "group", "aria-label": "Colour" }, bar);
    const swatches = COLOURS.map((col, i) => {
      const b = html("button", { type: "button", class: "hexboard-swatch", "data-colour": String(i),
                                 "aria-label": i + " " + col.name, title: col.name + " (key " + i + ")" }, palette);
      const chip = html("span", { class: "hexboard-chip", "aria-hidden": "true" }, b);
      chip.style.background = col.hex;
      html("span", { class: "hexboard-digit", "aria-hidden": "true" }, b, String(i));
      b.addEventListener("click", () => setColour(i, true));
      return b;
    });
    const undoBtn = html("button", { type: "button", class: "hexboard-undo", title: "Undo (z)" }, bar, "Undo");
    undoBtn.addEventListener("click", () => self.undo());
    const numBtn = html("button", { type: "button", class: "hexboard-numbers-toggle", "aria-pressed": "false" }, bar,
                        "Show numbers");
    numBtn.addEventListener("click", () => self.showNumbers(!numbers));
    // On a touch screen the tiles stay finger-sized (board.css), so a phone shows part of the
    // board; a finger drag paints, so these buttons scroll it (shown only when it overflows).
    const pans = [["left", "\u25C0", -1], ["right", "\u25B6", 1]].map(([side, glyph, dir]) => {
      const b = html("button", { type: "button", class: "hexboard-pan hexboard-pan-" + side,
                                 "aria-label": "Scroll the board " + side, title: "Scroll the board " + side }, bar, glyph);
      b.addEventListener("click", () => {
        surface.scrollBy({ left: dir * Math.max(40, surface.clientWidth * 0.6), behavior: "instant" });
      });
      b.hidden = true;
      return b;
    });
    if (options.toolbar === false) bar.hidden = true;

    // The focusable surface holding the SVG.
    const surface = html("div", { class: "hexboard-surface", role: "application",
                                  "aria-roledescription": "hexagon board",
                                  "aria-label": options.label || "Hexagons board, 10 rows by 18 columns",
                                  "aria-describedby": uid + "-help" }, element);
    const root = svg("svg", { viewBox: "0 0 " + WIDTH.toFixed(2) + " " + HEIGHT.toFixed(2),
                              class: "hexboard-svg", "aria-hidden": "true", focusable: "false" }, surface);
    const gTiles = svg("g", { class: "hexboard-tiles" }, root);
    const gNumbers = svg("g", { class: "hexboard-numbers" }, root);
    const gDiff = svg("g", { class: "hexboard-diffs" }, root);
    const tiles = [], titles = [], texts = [];
    for (let t = 0; t < N; t++) {
      const [x, y] = centre(t, shifted);
      const poly = svg("polygon", { points: hexPoints(x, y, R), class: "hexboard-tile", "data-tile": String(t),
                                    "data-row": String(Math.floor(t / COLS)), "data-col": String(t % COLS),
                                    stroke: "#6b6b6b", "stroke-width": "1", "stroke-linejoin": "round" }, gTiles);
      titles.push(svg("title", {}, poly));
      tiles.push(poly);
    }
    // Cursor on top of everything: a dark outer and a light inner line read on every colour.
    const gCursor = svg("g", { class: "hexboard-cursor" }, root);
    const cursorOuter = svg("polygon", { class: "hexboard-cursor-outer", fill: "none", stroke: "#000",
                                         "stroke-width": "3.4", "stroke-linejoin": "round" }, gCursor);
    const cursorInner = svg("polygon", { class: "hexboard-cursor-inner", fill: "none", stroke: "#fff",
                                         "stroke-width": "1.4", "stroke-linejoin": "round" }, gCursor);

    function drawPans() {
      const over = surface.scrollWidth > surface.clientWidth + 1;
      const at = surface.scrollLeft, end = surface.scrollWidth - surface.clientWidth;
      pans[0].hidden = pans[1].hidden = !over || readonly;
      pans[0].disabled = at <= 1;
      pans[1].disabled = at >= end - 1;
      element.dataset.overflows = String(over);
    }
    surface.addEventListener("scroll", drawPans, { passive: true });
    const resizing = window.ResizeObserver ? new ResizeObserver(drawPans) : null;
    if (resizing) resizing.observe(surface);
    else window.addEventListener("resize", drawPans);

    // The keys of a board that paints; a read-only one only shows, so it names no keys.
    const help = html("p", { id: uid + "-help", class: "hexboard-sr" }, element);
    function drawHelp() {
      help.textContent = readonly ? "A view only: this board cannot be painted." :
        "Arrow keys move between neighbouring tiles (Shift with Left or Right: the other side neighbour); " +
        "digits 0 to 7 choose a colour; " + (enterPaints ? "Space or Enter paints" : "Space paints") + "; Z undoes.";
    }
    const live = html("div", { class: "hexboard-sr hexboard-live", "aria-live": "polite", role: "status" }, element);

    function announce(text) { live.textContent = text; }

    function drawTile(t) {
      const col = COLOURS[board[t]];
      tiles[t].setAttribute("fill", col.hex);
      tiles[t].setAttribute("data-colour", String(board[t]));
      titles[t].textContent = "tile " + t + " (row " + Math.floor(t / COLS) + ", column " + (t % COLS) + "): " + col.name;
      if (texts[t]) texts[t].setAttribute("class", "hexboard-number" + (col.light ? " light" : ""));
    }

    function drawCursor() {
      const [x, y] = centre(cursor, shifted);
      cursorOuter.setAttribute("points", hexPoints(x, y, R));
      cursorInner.setAttribute("points", hexPoints(x, y, R - 1.6));
      surface.dataset.cursor = String(cursor);
    }

    function drawDiff() {
      while (gDiff.firstChild) gDiff.removeChild(gDiff.firstChild);
      tiles.forEach((p) => p.removeAttribute("data-diff"));
      if (!against) { delete element.dataset.diffCount; return []; }
      const differ = [];
      for (let t = 0; t < N; t++) {
        if (board[t] === against[t]) continue;
        differ.push(t);
        tiles[t].setAttribute("data-diff", "true");
        // Dashed light line over a dark one, inset so it does not hide under the neighbours.
        const [x, y] = centre(t, shifted);
        svg("polygon", { class: "hexboard-diff-outer", points: hexPoints(x, y, R - 2.2), fill: "none",
                         stroke: "#000", "stroke-width": "2.6", "data-tile": String(t) }, gDiff);
        svg("polygon", { class: "hexboard-diff-inner", points: hexPoints(x, y, R - 2.2), fill: "none",
                         stroke: "#ff2fa0", "stroke-width": "1.3", "stroke-dasharray": "3 2" }, gDiff);
      }
      element.dataset.diffCount = String(differ.length);
      return differ;
    }

    function drawNumbers() {
      gNumbers.style.display = numbers ? "" : "none";
      numBtn.setAttribute("aria-pressed", String(numbers));
      element.classList.toggle("hexboard-show-numbers", numbers);
      if (!numbers || texts.length) return;
      for (let t = 0; t < N; t++) {
        const [x, y] = centre(t, shifted);
        texts[t] = svg("text", { x: x.toFixed(2), y: (y + 2.3).toFixed(2), "text-anchor": "middle" }, gNumbers);
        texts[t].textContent = String(t);
        drawTile(t);
      }
    }

    function drawMode() {
      element.classList.toggle("hexboard-readonly", readonly);
      element.dataset.readonly = String(readonly);
      palette.hidden = readonly;
      undoBtn.hidden = readonly;
      undoBtn.disabled = !undoStack.length;
      // A read-only board is no tab stop: it only shows.
      if (readonly) { surface.removeAttribute("tabindex"); if (document.activeElement === surface) surface.blur(); }
      else surface.setAttribute("tabindex", "0");
      surface.setAttribute("aria-disabled", String(readonly));
      drawHelp();
      drawPans();
    }

    function setColour(c, announceIt) {
      colour = c;
      swatches.forEach((b, i) => b.setAttribute("aria-pressed", String(i === c)));
      element.dataset.colour = String(c);
      if (announceIt) announce("colour " + COLOURS[c].name);
      element.dispatchEvent(new CustomEvent("hexboard:colour", { bubbles: true, detail: { colour: c } }));
    }

    function emit(action) {
      const copy = board.slice();
      if (onChange) onChange(copy, action);
      element.dispatchEvent(new CustomEvent("hexboard:change", { bubbles: true, detail: { board: copy, action: action } }));
    }

    // One paint of one tile; the same colour again records nothing.
    function paint(t, c) {
      if (readonly || destroyed || t === null || board[t] === c) return null;
      return apply(t, c, false, "tile " + t + " painted " + COLOURS[c].name);
    }

    // Tile t takes colour c, logged, drawn, announced (`said`) and emitted; a paint (not an
    // undo) can itself be undone.
    function apply(t, c, undo, said) {
      const previous = board[t];
      board[t] = c;
      const ms = Math.round(performance.now() - t0);
      log.push([t, c, ms]);
      if (!undo) undoStack.push([t, previous]);
      undoBtn.disabled = !undoStack.length;
      drawTile(t);
      if (against) drawDiff();
      announce(said);
      const action = { tile: t, colour: c, previous: previous, ms: ms, undo: undo };
      emit(action);
      return action;
    }

    function setCursor(t, say) {
      cursor = t;
      drawCursor();
      if (say) announce("tile " + t + ", row " + Math.floor(t / COLS) + ", column " + (t % COLS) + ": " + COLOURS[board[t]].name);
    }

    // Client (CSS pixel) point -> tile, from the geometry: nothing drawn on top can hide a tile.
    function tileAt(clientX, clientY) {
      const m = root.getScreenCTM();
      if (!m) return null;
      const p = new DOMPoint(clientX, clientY).matrixTransform(m.inverse());
      const c0 = Math.round((p.x - P - R) / (1.5 * R));
      let best = null, bestD = Infinity;
      for (let c = c0 - 1; c <= c0 + 1; c++) {
        if (c < 0 || c >= COLS) continue;
        const r0 = Math.round((p.y - P - H / 2 - (isShifted(c, shifted) ? H / 2 : 0)) / H);
        for (let r = r0 - 1; r <= r0 + 1; r++) {
          const t = at(r, c);
          if (t === null) continue;
          const [x, y] = centre(t, shifted);
          const d = (p.x - x) ** 2 + (p.y - y) ** 2;
          if (d < bestD) { bestD = d; best = t; }
        }
      }
      if (best === null) return null;
      const [x, y] = centre(best, shifted);
      const dx = Math.abs(p.x - x), dy = Math.abs(p.y - y);
      return dy <= H / 2 && Math.sqrt(3) * dx + dy <= Math.sqrt(3) * R + 1e-6 ? best : null;
    }

    function strokeTo(x, y) {
      // Sample the segment every quarter tile so a fast drag still paints each tile it crosses.
      const m = root.getScreenCTM(), px = m ? Math.abs(m.a) * R / 2 : 4;
      const steps = Math.max(1, Math.ceil(Math.hypot(x - stroke.x, y - stroke.y) / px));
      for (let i = 1; i <= steps; i++) {
        const t = tileAt(stroke.x + ((x - stroke.x) * i) / steps, stroke.y + ((y - stroke.y) * i) / steps);
        if (t !== null && t !== stroke.last) { stroke.last = t; setCursor(t, false); paint(t, colour); }
      }
      stroke.x = x; stroke.y = y;
    }

    function onPointerDown(e) {
      if (readonly || stroke || (e.pointerType === "mouse" && e.button !== 0)) return;
      const t = tileAt(e.clientX, e.clientY);
      if (t === null) return;
      e.preventDefault();
      surface.focus({ preventScroll: true });
      stroke = { id: e.pointerId, x: e.clientX, y: e.clientY, last: t };
      try { root.setPointerCapture(e.pointerId); } catch (_) { /* synthetic events have no capture */ }
      setCursor(t, false);
      paint(t, colour);
    }
    function onPointerMove(e) {
      if (stroke && e.pointerId === stroke.id && !readonly) strokeTo(e.clientX, e.clientY);
    }
    function onPointerEnd(e) { if (stroke && e.pointerId === stroke.id) stroke = null; }

    function onKey(e) {
      if (readonly || e.altKey) return;
      const k = e.key;
      let handled = true;
      if ((e.ctrlKey || e.metaKey) && (k === "z" || k === "Z") && !e.shiftKey) self.undo();
      else if (e.ctrlKey || e.metaKey) handled = false;
      else if (k.startsWith("Arrow") || k === "Home" || k === "End" || k === "PageUp" || k === "PageDown") {
        setCursor(move(cursor, k, shifted, e.shiftKey), true);
      } else if (k.length === 1 && k >= "0" && k <= "7") setColour(Number(k), true);
      else if (k === " " || (k === "Enter" && enterPaints)) {
        if (!paint(cursor, colour)) announce("tile " + cursor + " is already " + COLOURS[colour].name);
      } else if (k === "z" || k === "Z") self.undo();
      else if (k === "n" || k === "N") self.showNumbers(!numbers);
      else handled = false;
      if (handled) { e.preventDefault(); e.stopPropagation(); }
    }

    root.addEventListener("pointerdown", onPointerDown);
    root.addEventListener("pointermove", onPointerMove);
    root.addEventListener("pointerup", onPointerEnd);
    root.addEventListener("pointercancel", onPointerEnd);
    root.addEventListener("lostpointercapture", onPointerEnd);
    surface.addEventListener("keydown", onKey);

    this.getBoard = () => board.slice();
    this.setBoard = (b) => {
      board = normalise(b);
      undoStack = [];
      for (let t = 0; t < N; t++) drawTile(t);
      drawDiff();
      drawMode();
    };
    this.actions = () => log.map((a) => a.slice());
    this.resetLog = () => { log = []; t0 = performance.now(); };
    // Reverts the last paint not yet undone (one tile); logged as the paint it makes.
    this.undo = () => {
      if (readonly || destroyed) return null;
      if (!undoStack.length) { announce("nothing to undo"); return null; }
      const [t, previous] = undoStack.pop();
      return apply(t, previous, true, "undone: tile " + t + " back to " + COLOURS[previous].name);
    };
    this.setReadonly = (value) => { readonly = !!value; stroke = null; drawMode(); };
    this.isReadonly = () => readonly;
    this.diff = (other) => {
      against = other === null || other === undefined ? null : normalise(other);
      return drawDiff();
    };
    this.getColour = () => colour;
    this.setColour = (c) => {
      c = Number(c);
      if (!(Number.isInteger(c) && c >= 0 && c <= 7)) throw new TypeError("colour must be 0-7");
      setColour(c, false);
    };
    this.getCursor = () => cursor;
    this.setCursor = (t) => {
      if (!(Number.isInteger(t) && t >= 0 && t < N)) throw new TypeError("tile must be 0-179");
      setCursor(t, false);
    };
    this.showNumbers = (on) => { numbers = !!on; drawNumbers(); };
    this.paint = (t, c) => paint(t, c === undefined ? colour : Number(c));
    this.destroy = () => {
      if (destroyed) return;
      destroyed = true;
      stroke = null;
      root.removeEventListener("pointerdown", onPointerDown);
      surface.removeEventListener("keydown", onKey);
      if (resizing) resizing.disconnect();
      else window.removeEventListener("resize", drawPans);
      [bar, surface, help, live].forEach((n) => n.remove());
      element.classList.remove("hexboard", "hexboard-readonly", "hexboard-show-numbers");
      ["shifted", "readonly", "colour", "diffCount"].forEach((k) => delete element.dataset[k]);
      if (element.hexBoard === self) delete element.hexBoard;
    };
    this.element = element;
    this.shifted = shifted;

    for (let t = 0; t < N; t++) drawTile(t);
    setColour(colour, false);
    setCursor(0, false);
    drawNumbers();
    drawMode();
    element.hexBoard = this;
  }

  HexBoard.ROWS = ROWS;
  HexBoard.COLS = COLS;
  HexBoard.COLOURS = COLOURS.map((c) => ({ name: c.name, hex: c.hex }));
  HexBoard.neighbours = neighbours;
  HexBoard.move = (tile, key, shifted, shift) => move(tile, key, checkShifted(shifted), !!shift);

  // Declarative use: <div data-hexboard data-board="[...] or 180 digits" data-shifted="odd"
  // data-readonly data-colour="1" data-numbers></div>, mounted on load and on htmx swaps.
  HexBoard.mountAll = function (scope) {
    scope = scope || document;
    const found = Array.from(scope.querySelectorAll ? scope.querySelectorAll("[data-hexboard]") : []);
    if (scope.matches && scope.matches("[data-hexboard]")) found.unshift(scope);
    return found.filter((el) => !el.hexBoard).map((el) => {
      const d = el.dataset;
      const b = d.board ? (d.board.trim().startsWith("[") ? JSON.parse(d.board) : d.board) : undefined;
      const flag = (v) => v !== undefined && v !== "false";
      return new HexBoard(el, { board: b, shifted: d.shifted || undefined, readonly: flag(d.readonly),
                                colour: d.colour === undefined ? undefined : Number(d.colour),
                                numbers: flag(d.numbers) });
    });
  };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", () => HexBoard.mountAll());
  else HexBoard.mountAll();
  document.addEventListener("htmx:load", (e) => HexBoard.mountAll(e.detail && e.detail.elt));

  window.HexBoard = HexBoard;
})();
