/* Proctor navigation viewer: what a follower sees standing at one viewpoint of a building.
 *
 * Where the viewpoint has a panorama (an equirectangular photo), the view is cut from it: each
 * canvas pixel looks up the image at its ray's heading and elevation. Otherwise it is drawn
 * from the building's semantic sidecar (rooms, walls, doors, objects, viewpoints), column by
 * column: a 2-D ray per column against the walls of the current floor gives the distance, and
 * the wall band's height shrinks with it. Objects are boxes (or cylinders) hit by the same
 * rays, so nearer walls hide them; doorways are the gaps the walls file leaves, labelled with
 * the room behind them. Navigable neighbours are markers on the floor. There is deliberately
 * no map, goal or path: the follower has only the view and the instruction.
 * API: docs/kinds/navigation-viewer.md.
 *
 * Angles follow the Matterport3D simulator: heading from +y, clockwise seen from above
 * (east = pi/2), in [0, 2 pi); elevation above the horizontal. Positions are metres, z up.
 */
(function (global) {
  "use strict";

  const TAU = 2 * Math.PI;
  const DEG = Math.PI / 180;
  const DEFAULTS = {
    fov: 90 * DEG, // across the canvas width
    step: 15 * DEG, // one arrow key press
    maxElevation: 35 * DEG,
    eyeHeight: 1.5, // camera above the floor when the viewpoint does not say (Matterport's ~1.5 m)
    wallHeight: 2.6,
    doorHeight: 2.05,
    poseInterval: 100, // ms: heading changes reach onPose at most ~10 times a second
    aheadAngle: 25 * DEG, // what the aria-label lists as "ahead"
  };
  const COLOURS = {
    red: [220, 38, 38], blue: [37, 99, 235], green: [22, 163, 74], yellow: [250, 204, 21],
    white: [246, 246, 244], black: [34, 34, 38], brown: [146, 94, 52], grey: [128, 128, 134],
    gray: [128, 128, 134], orange: [245, 125, 22], purple: [139, 72, 209], pink: [236, 110, 170],
  };
  // Pale, unsaturated wall tints, one per room, so rooms tell apart without competing with the
  // object colours an instruction names.
  const TINTS = [[226, 221, 208], [204, 214, 226], [212, 224, 206], [226, 214, 204],
                 [216, 210, 228], [222, 222, 214]];
  const DOOR_HEIGHT = DEFAULTS.doorHeight;
  const MAX_OBJECT_LABELS = 8;
  // Panoramas are decoded at most this wide (a 4096 x 2048 image is 32 MB of pixels), and at
  // most this many are kept decoded: the current one and the last few visited.
  const MAX_PANORAMA_WIDTH = 4096;
  const DECODED_PANORAMAS = 3;
  const STAIRS = 1.0; // metres up or down to a neighbour that make it "stairs" without a sidecar
  const ROUND_TYPES = new Set(["plant", "lamp", "vase", "stool", "bin", "ball", "pot", "barrel"]);

  const wrap = (a) => ((a % TAU) + TAU) % TAU;
  const relative = (a) => { const r = wrap(a); return r > Math.PI ? r - TAU : r; }; // (-pi, pi]
  const clamp = (v, lo, hi) => Math.max(lo, Math.min(hi, v));
  const words = (s) => String(s == null ? "" : s).replace(/_/g, " ").trim();
  const shade = (c, k) => c.map((v) => clamp(v * k, 0, 255) | 0); // [r, g, b] times k
  const mix = (a, b, t) => a.map((v, i) => (v + (b[i] - v) * t) | 0);
  const rgb = (c, k) => `rgb(${shade(c, k).join(",")})`;
  const floorKey = (f) => String(f == null ? 0 : f);

  function byFloor(list) {
    const m = new Map();
    for (const it of list || []) {
      const k = floorKey(it.floor);
      if (!m.has(k)) m.set(k, []);
      m.get(k).push(it);
    }
    return m;
  }

  function boundsOf(room) {
    const [a, b, c, d] = room.bounds;
    return [Math.min(a, c), Math.min(b, d), Math.max(a, c), Math.max(b, d)];
  }

  // Ray p + t*d against segment a-b: t, or Infinity. Also the position u along the segment.
  function raySegment(px, py, dx, dy, w) {
    const ex = w.bx - w.ax, ey = w.by - w.ay;
    const den = dx * ey - dy * ex;
    if (Math.abs(den) < 1e-12) return Infinity;
    const qx = w.ax - px, qy = w.ay - py;
    const t = (qx * ey - qy * ex) / den;
    const u = (qx * dy - qy * dx) / den;
    if (t <= 1e-6 || u < 0 || u > 1) return Infinity;
    raySegment.u = u;
    return t;
  }

  // Ray against an axis-aligned box footprint: [tIn, tOut, face] or null (face 0: x side, 1: y).
  function rayBox(px, py, dx, dy, o) {
    let tIn = -Infinity, tOut = Infinity, face = 0;
    const lo = [o.x0, o.y0], hi = [o.x1, o.y1], p = [px, py], d = [dx, dy];
    for (let k = 0; k < 2; k++) {
      if (Math.abs(d[k]) < 1e-12) {
        if (p[k] < lo[k] || p[k] > hi[k]) return null;
        continue;
      }
      let t1 = (lo[k] - p[k]) / d[k], t2 = (hi[k] - p[k]) / d[k];
      if (t1 > t2) [t1, t2] = [t2, t1];
      if (t1 > tIn) { tIn = t1; face = k; }
      if (t2 < tOut) tOut = t2;
    }
    return tIn <= tOut && tOut > 0 ? [tIn, tOut, face] : null;
  }

  // Ray against an elliptic cylinder inscribed in the footprint: [tIn, tOut, facing] or null.
  function rayEllipse(px, py, dx, dy, o) {
    const ox = (px - o.cx) / o.rx, oy = (py - o.cy) / o.ry, ux = dx / o.rx, uy = dy / o.ry;
    const a = ux * ux + uy * uy, b = 2 * (ox * ux + oy * uy), c = ox * ox + oy * oy - 1;
    const disc = b * b - 4 * a * c;
    if (disc < 0) return null;
    const s = Math.sqrt(disc), tIn = (-b - s) / (2 * a), tOut = (-b + s) / (2 * a);
    if (tOut <= 0) return null;
    const hx = (ox + ux * tIn) / o.rx, hy = (oy + uy * tIn) / o.ry; // normal, unnormalised
    const facing = Math.abs(hx * dx + hy * dy) / (Math.hypot(hx, hy) || 1);
    return [tIn, tOut, facing];
  }

  // The wall above a doorway, so a gap reads as a door and not as the end of a wall: the
  // opening runs between the two wall ends nearest the door, one on either side of it.
  function lintelOf(door, walls) {
    const [cx, cy] = door.position, reach = (Number(door.width) || 1) / 2 + 0.25;
    const ends = [];
    for (const w of walls) {
      for (const [x, y] of [[w.ax, w.ay], [w.bx, w.by]]) {
        const d = Math.hypot(x - cx, y - cy);
        if (d <= reach && d > 1e-6) ends.push({ x, y, d });
      }
    }
    ends.sort((a, b) => a.d - b.d);
    for (let i = 1; i < ends.length; i++) {
      const a = ends[0], b = ends[i];
      if ((a.x - cx) * (b.x - cx) + (a.y - cy) * (b.y - cy) < 0) {
        const len = Math.hypot(b.x - a.x, b.y - a.y);
        return segment(a.x, a.y, b.x, b.y);
      }
    }
    return null;
  }

  // A wall (or lintel) with its length and unit normal, for the ray tests and the shading.
  function segment(ax, ay, bx, by) {
    const len = Math.hypot(bx - ax, by - ay);
    return { ax, ay, bx, by, len, nx: -(by - ay) / len, ny: (bx - ax) / len };
  }

  function pill(ctx, x, y, w, h) {
    ctx.beginPath();
    if (ctx.roundRect) ctx.roundRect(x, y, w, h, h / 2);
    else ctx.rect(x, y, w, h);
  }

  class Viewer {
    constructor(element, options) {
      const o = options || {};
      if (!element) throw new Error("ProctorViewer.mount: no element");
      if (!o.semantics && !o.panoramas) {
        throw new Error("ProctorViewer.mount: semantics or panoramas are required");
      }
      this.opts = Object.assign({}, DEFAULTS);
      for (const k of ["fov", "step"]) if (typeof o[k] === "number" && o[k] > 0) this.opts[k] = o[k];
      this.onMove = o.onMove || null;
      this.onPose = o.onPose || null;
      this.hasSemantics = !!o.semantics;
      this._index(o.semantics || {});
      this.panoramas = {};
      for (const [id, url] of Object.entries(o.panoramas || {})) {
        if (typeof url === "string" && url) this.panoramas[id] = url;
      }
      this._panos = new Map(); // viewpoint -> {state, img, pixels, iw, ih, used}
      this.heading = wrap(Number(o.heading) || 0);
      this.elevation = clamp(Number(o.elevation) || 0, -this.opts.maxElevation, this.opts.maxElevation);
      this._t0 = performance.now();
      this._lastEmit = -Infinity;
      this._lastT = 0;
      this._lastPose = null;
      this._poseTimer = null;
      this._pendingMove = null;
      this._drag = null;
      this._markers = [];
      this._hl = null;
      this._description = "";
      this._build(element);
      this._setScene(o.viewpoint, o.neighbours);
      this._resize();
      this._t0 = performance.now(); // the trace starts at 0 with the starting pose
      this._emit(this._t0);
    }

    // -- public API ------------------------------------------------------------------------

    setViewpoint(id, neighbours, heading) {
      this._setScene(id, neighbours);
      if (typeof heading === "number") this.heading = wrap(heading);
      this._clearPending();
      this.render();
      this._changed(true);
      return this.state();
    }

    turn(delta) {
      if (!delta) return this.state();
      this.heading = wrap(this.heading + delta);
      this.render();
      this._changed(false);
      return this.state();
    }

    tilt(delta) {
      const e = clamp(this.elevation + delta, -this.opts.maxElevation, this.opts.maxElevation);
      if (e === this.elevation) return this.state();
      this.elevation = e;
      this.render();
      this._changed(false);
      return this.state();
    }

    state() {
      return { viewpoint: this.viewpoint, heading: this.heading, elevation: this.elevation };
    }

    highlighted() {
      return this._hl ? this._hl.id : null;
    }

    markers() {
      return this._markers.map((m) => ({ id: m.id, x: m.x, y: m.y, rx: m.rx, ry: m.ry,
                                         highlighted: m.highlighted }));
    }

    describe() {
      return this._description;
    }

    // What the view shows here: "panorama", "generated" (from the sidecar), "loading" (the
    // panorama is on its way) or "none" (no imagery of this viewpoint).
    mode() {
      return this._mode;
    }

    // Milliseconds since mount on the pose trace's clock (for the page's own events).
    now() {
      this._lastT = Math.max(this._lastT, Math.round((performance.now() - this._t0) * 10) / 10);
      return this._lastT;
    }

    move() {
      if (!this._hl || this._pendingMove || !this.onMove) return false;
      const id = this._hl.id;
      // One move at a time: a second Enter or double-click before the page answers with
      // setViewpoint would otherwise record the same step twice.
      this._pendingMove = setTimeout(() => this._clearPending(), 5000);
      const r = this.onMove(id);
      if (r && typeof r.then === "function") r.then(null, () => this._clearPending());
      return true;
    }

    focus() {
      this.canvas.focus({ preventScroll: true });
    }

    destroy() {
      this._destroyed = true;
      clearTimeout(this._poseTimer);
      clearTimeout(this._statusTimer);
      this._clearPending();
      if (this._ro) this._ro.disconnect();
      for (const [target, type, fn] of this._listeners) target.removeEventListener(type, fn);
      this._listeners = [];
      this.root.replaceChildren();
      this.root.classList.remove("proctor-viewer");
    }

    // -- data ------------------------------------------------------------------------------

    _index(sem) {
      this.rooms = new Map();
      (sem.rooms || []).forEach((r, i) => {
        this.rooms.set(r.id, Object.assign({ tint: TINTS[i % TINTS.length] }, r, { box: boundsOf(r) }));
      });
      this.roomsByFloor = byFloor([...this.rooms.values()]);
      this.wallsByFloor = byFloor(sem.walls);
      this.doorsByFloor = byFloor(sem.doors);
      this.objectsByFloor = byFloor(sem.objects);
      this.viewpoints = sem.viewpoints || {};
      this.wallHeight = Number(sem.wall_height) || this.opts.wallHeight;
    }

    _roomAt(x, y, floor, among) {
      for (const r of this.roomsByFloor.get(floor) || []) {
        if (among && !among.includes(r.id)) continue;
        const [x0, y0, x1, y1] = r.box;
        if (x >= x0 && x <= x1 && y >= y0 && y <= y1) return r;
      }
      return null;
    }

    _setScene(id, neighbours) {
      const vp = this.viewpoints[id];
      if (!vp || !vp.position) {
        if (this.hasSemantics && !this.panoramas[id]) throw new Error(`ProctorViewer: unknown viewpoint ${id}`);
        this._setPhotoScene(id, neighbours);
        return;
      }
      const floor = floorKey(vp.floor);
      const [px, py, pz] = vp.position;
      const eyeH = Number(vp.height) || this.opts.eyeHeight;
      const room = this.rooms.get(vp.room) || this._roomAt(px, py, floor);
      const walls = (this.wallsByFloor.get(floor) || [])
        .filter((w) => w.a[0] !== w.b[0] || w.a[1] !== w.b[1])
        .map((w) => segment(w.a[0], w.a[1], w.b[0], w.b[1]));
      const objects = (this.objectsByFloor.get(floor) || []).map((ob) => {
        const [x, y, z] = ob.position, [w, d, h] = ob.size || [0.5, 0.5, 0.5];
        const round = ob.shape ? ob.shape === "round" : ROUND_TYPES.has(words(ob.type));
        const colour = words(ob.colour || ob.color).toLowerCase();
        return {
          id: ob.id, label: words(`${colour} ${words(ob.type)}`), round,
          rgb: COLOURS[colour] || COLOURS.grey,
          cx: x, cy: y, rx: w / 2, ry: d / 2, x0: x - w / 2, x1: x + w / 2, y0: y - d / 2, y1: y + d / 2,
          zTop: z + h / 2 - pz, zBot: z - h / 2 - pz, // relative to the eye
          dist: Math.hypot(x - px, y - py), reach: Math.hypot(w, d) / 2,
        };
      }).sort((a, b) => a.dist - b.dist);
      const doors = (this.doorsByFloor.get(floor) || []).map((dr) => ({
        id: dr.id, x: dr.position[0], y: dr.position[1], rooms: dr.rooms || [],
        lintel: lintelOf(dr, walls), top: Number(dr.height) || DOOR_HEIGHT,
      }));
      this.viewpoint = id;
      this.neighbours = (neighbours || []).map((n) => {
        const there = this.viewpoints[n.id] || {};
        return {
          id: n.id, heading: wrap(Number(n.heading) || 0),
          distance: Number(n.distance) > 0 ? Number(n.distance) : 1,
          floor: there.position ? floorKey(there.floor) : floor, // for "stairs up/down"
          z: there.position ? there.position[2] : pz,
        };
      });
      this.scene = { floor, px, py, pz, eyeH, room, walls, objects, doors, semantic: true };
      this._prefetch();
    }

    // A viewpoint the sidecar does not describe (a Matterport scan): only its panorama, if
    // any, and the ways on, placed by their heading, distance and elevation from here.
    _setPhotoScene(id, neighbours) {
      this.viewpoint = id;
      this.neighbours = (neighbours || []).map((n) => {
        const distance = Number(n.distance) > 0 ? Number(n.distance) : 1;
        const dz = distance * Math.sin(Number(n.elevation) || 0);
        return {
          id: n.id, heading: wrap(Number(n.heading) || 0), distance, z: dz,
          floor: Math.abs(dz) >= STAIRS ? (dz > 0 ? "up" : "down") : "0",
        };
      });
      this.scene = { floor: "0", px: 0, py: 0, pz: 0, eyeH: this.opts.eyeHeight, room: null,
                     walls: [], objects: [], doors: [], semantic: false };
      this._prefetch();
    }

    // -- panoramas -------------------------------------------------------------------------

    // The entry of a viewpoint's panorama, loading it on first use. Same-origin links (the
    // local blob store) are read straight away; other origins (S3) are asked for CORS, and
    // if the bucket does not allow it the image is still shown, cut into column strips.
    _panorama(id) {
      const url = this.panoramas[id];
      if (!url) return null;
      let e = this._panos.get(id);
      if (e) { e.used = performance.now(); return e; }
      e = { state: "loading", used: performance.now() };
      this._panos.set(id, e);
      const cross = new URL(url, global.location.href).origin !== global.location.origin;
      const load = (cors) => {
        const img = new Image();
        if (cors) img.crossOrigin = "anonymous";
        img.onload = () => {
          e.img = img;
          e.state = "ready";
          if (!this._destroyed && this.viewpoint === id) this.render();
        };
        img.onerror = () => {
          if (cors) { load(false); return; }
          e.state = "failed";
          if (!this._destroyed && this.viewpoint === id) this.render();
        };
        img.src = url;
      };
      load(cross);
      return e;
    }

    // Start loading the panoramas one step away, so a move shows its view at once.
    _prefetch() {
      for (const nb of this.neighbours) this._panorama(nb.id);
      this._panorama(this.viewpoint);
    }

    // The panorama's pixels (Uint32, RGBA little-endian), decoding on first use; null when the
    // image came from another origin without CORS (the canvas may not read it).
    _pixels(e) {
      if (e.pixels || e.tainted) return e.pixels || null;
      const img = e.img, iw = Math.min(img.naturalWidth, MAX_PANORAMA_WIDTH);
      const ih = Math.max(1, Math.round((iw * img.naturalHeight) / img.naturalWidth));
      const c = document.createElement("canvas");
      c.width = iw; c.height = ih;
      const g = c.getContext("2d", { willReadFrequently: true });
      g.drawImage(img, 0, 0, iw, ih);
      try {
        e.pixels = new Uint32Array(g.getImageData(0, 0, iw, ih).data.buffer);
        e.iw = iw; e.ih = ih;
      } catch (_) {
        e.tainted = true;
        return null;
      }
      // Keep the few most recently used decoded; the images themselves stay cached.
      const decoded = [...this._panos.values()].filter((x) => x.pixels).sort((a, b) => b.used - a.used);
      for (const x of decoded.slice(DECODED_PANORAMAS)) x.pixels = null;
      return e.pixels;
    }

    // -- DOM and input ---------------------------------------------------------------------

    _build(root) {
      this.root = root;
      root.classList.add("proctor-viewer");
      const canvas = document.createElement("canvas");
      canvas.className = "proctor-viewer-canvas";
      canvas.tabIndex = 0;
      canvas.setAttribute("role", "application");
      canvas.setAttribute("aria-roledescription", "panorama");
      const hint = document.createElement("p");
      hint.className = "proctor-viewer-hint";
      this.hint = hint;
      this._setHint(global.matchMedia && global.matchMedia("(pointer: coarse)").matches);
      const status = document.createElement("div");
      status.className = "proctor-viewer-status";
      status.setAttribute("role", "status");
      status.setAttribute("aria-live", "polite");
      root.replaceChildren(canvas, hint, status);
      this.canvas = canvas;
      this.status = status;
      this.ctx = canvas.getContext("2d");
      this._listeners = [];
      const on = (target, type, fn) => {
        target.addEventListener(type, fn);
        this._listeners.push([target, type, fn]);
      };
      on(canvas, "keydown", (e) => this._key(e));
      on(canvas, "pointerdown", (e) => this._pointerDown(e));
      on(canvas, "pointermove", (e) => this._pointerMove(e));
      on(canvas, "pointerup", (e) => this._pointerUp(e));
      on(canvas, "pointercancel", (e) => this._pointerUp(e));
      on(canvas, "click", (e) => this._click(e));
      on(canvas, "dblclick", (e) => this._dblclick(e));
      if (global.ResizeObserver) {
        this._ro = new ResizeObserver(() => this._resize());
        this._ro.observe(canvas);
      } else {
        on(global, "resize", () => this._resize());
      }
    }

    // Touch screens get touch words (tap, swipe); a mouse or keyboard gets keys and clicks.
    _setHint(touch) {
      this._touch = !!touch;
      this.hint.textContent = touch
        ? "Swipe to look around; tap a marker to walk there."
        : "Drag or press \u2190 \u2192 to look around; click a marker (or press Enter) to walk there.";
    }

    _key(e) {
      if (e.altKey || e.ctrlKey || e.metaKey) return;
      const step = this.opts.step;
      switch (e.key) {
        case "ArrowLeft": this.turn(-step); break;
        case "ArrowRight": this.turn(step); break;
        case "ArrowUp": this.tilt(step); break;
        case "ArrowDown": this.tilt(-step); break;
        case "Enter": this.move(); break; // never submits a surrounding form
        default: return;
      }
      e.preventDefault();
      e.stopPropagation();
    }

    _pointerDown(e) {
      if (e.button !== 0) return;
      if ((e.pointerType === "touch") !== this._touch) this._setHint(e.pointerType === "touch");
      this._drag = { x: e.clientX, y: e.clientY, heading: this.heading, elevation: this.elevation };
      this._press = { x: e.clientX, y: e.clientY, moved: 0 };
      try { this.canvas.setPointerCapture(e.pointerId); } catch (_) { /* synthetic events */ }
      this.canvas.classList.add("dragging");
      this.focus();
    }

    _pointerMove(e) {
      const d = this._drag;
      if (!d) {
        this.canvas.style.cursor = this._markerAt(e.offsetX, e.offsetY) ? "pointer" : "";
        return;
      }
      if (this._press) {
        this._press.moved = Math.max(this._press.moved, Math.hypot(e.clientX - this._press.x, e.clientY - this._press.y));
      }
      // The scene follows the pointer (grab and drag): dragging left turns right.
      const perPx = this.opts.fov / (this.w || 1);
      const heading = wrap(d.heading - (e.clientX - d.x) * perPx);
      const max = this.opts.maxElevation;
      const elevation = clamp(d.elevation + (e.clientY - d.y) * perPx, -max, max);
      if (heading === this.heading && elevation === this.elevation) return;
      this.heading = heading;
      this.elevation = elevation;
      this.render();
      this._changed(false);
    }

    _pointerUp(e) {
      if (!this._drag) return;
      try { this.canvas.releasePointerCapture(e.pointerId); } catch (_) { /* already released */ }
      this._drag = null;
      this.canvas.classList.remove("dragging");
    }

    // One click (or tap) on a marker walks there, as in PanGEA and Street View; a drag that
    // ends on a marker only turns (more than a few pixels moved: 10 for a finger).
    _click(e) {
      const press = this._press;
      this._press = null;
      if (e.detail > 1) return; // the second click of a double-click: its first already walked
      if (press && press.moved > (this._touch ? 10 : 4)) return;
      this._walkedAt = this._walkTo(e) ? performance.now() : -Infinity;
    }

    // A double-click walks once, as before: its first click has walked already, unless that
    // one missed (a slight drag), and then the double-click walks to the marker under it.
    _dblclick(e) {
      if (performance.now() - (this._walkedAt || -Infinity) < 1000) { e.preventDefault(); return; }
      this._walkTo(e);
    }

    _walkTo(e) {
      const m = this._markerAt(e.offsetX, e.offsetY);
      if (!m) return false;
      e.preventDefault();
      this._hl = this.neighbours.find((n) => n.id === m.id) || this._hl;
      return this.move();
    }

    _markerAt(x, y) {
      // Nearest (drawn last, on top) first.
      for (let i = this._markers.length - 1; i >= 0; i--) {
        const m = this._markers[i];
        const ry = Math.max(m.ry, 12), rx = Math.max(m.rx, 12);
        if (((x - m.x) / rx) ** 2 + ((y - m.y) / ry) ** 2 <= 1) return m;
      }
      return null;
    }

    _resize() {
      const r = this.canvas.getBoundingClientRect();
      const dpr = global.devicePixelRatio || 1;
      if (r.width < 1 || r.height < 1) return;
      this.w = r.width;
      this.h = r.height;
      const W = Math.round(r.width * dpr), H = Math.round(r.height * dpr);
      if (this.canvas.width !== W || this.canvas.height !== H) {
        this.canvas.width = W;
        this.canvas.height = H;
      }
      this.ctx.setTransform(W / r.width, 0, 0, H / r.height, 0, 0);
      this.render();
    }

    // -- pose trace ------------------------------------------------------------------------

    _changed(immediate) {
      const now = performance.now();
      const wait = this.opts.poseInterval - (now - this._lastEmit);
      if (immediate || wait <= 0) {
        clearTimeout(this._poseTimer);
        this._poseTimer = null;
        this._emit(now);
      } else if (!this._poseTimer) {
        // Trailing call: the last pose of a quick turn is always recorded.
        this._poseTimer = setTimeout(() => {
          this._poseTimer = null;
          this._emit(performance.now());
        }, wait);
      }
    }

    _emit(now) {
      const p = this.state();
      const last = this._lastPose;
      if (last && last.viewpoint === p.viewpoint && last.heading === p.heading
          && last.elevation === p.elevation) return;
      this._lastEmit = now;
      this._lastT = Math.max(this._lastT, Math.round((now - this._t0) * 10) / 10);
      p.t = this._lastT; // ms since mount, never decreasing
      this._lastPose = p;
      if (this.onPose) this.onPose(Object.assign({}, p));
    }

    _clearPending() {
      clearTimeout(this._pendingMove);
      this._pendingMove = null;
    }

    // -- drawing ---------------------------------------------------------------------------

    render() {
      const W = this.w, H = this.h, s = this.scene;
      if (!W || !H || !s) return;
      const f = W / 2 / Math.tan(this.opts.fov / 2);
      const hz = H / 2 + f * Math.tan(this.elevation); // the horizon's row
      // Walls, doorways and objects are rasterised column by column straight into pixels (a
      // few ms a frame even without a GPU); text and markers are drawn over them.
      const cw = this.canvas.width, ch = this.canvas.height;
      if (!this._img || this._img.width !== cw || this._img.height !== ch) {
        this._img = this.ctx.createImageData(cw, ch);
        this._px = new Uint32Array(this._img.data.buffer);
        // Per column: the wall's distance, the ray, and the nearest lintel's distance and row.
        for (const k of ["_zbuf", "_dx", "_dy", "_cos", "_off", "_lintelT", "_lintelY"]) {
          this[k] = new Float64Array(cw);
        }
      }
      const k = cw / W; // device pixels per CSS pixel
      const dev = { n: cw, ch, f: f * k, hz: hz * k, k };
      const view = { W, H, f, hz };
      // A panorama wins over the generated view; without either the page still gets the
      // ways on, over a plain floor and ceiling, and says why there is nothing to see.
      const pano = this._panorama(this.viewpoint);
      const state = pano ? pano.state : "none";
      const mode = state === "ready" ? "panorama" : state === "loading" ? "loading"
        : s.semantic ? "generated" : "none";
      this._mode = mode;
      if (mode === "generated") {
        this._background(dev);
        this._walls(dev);
        const seen = this._objects(dev);
        this.ctx.putImageData(this._img, 0, 0);
        const labels = [];
        const doors = this._doors(view, labels);
        this._objectLabels(view, seen, labels, k);
        this._neighbourMarkers(view);
        this._banner(view);
        this._describe(doors, seen);
        return;
      }
      if (mode === "panorama" && this._pixels(pano)) {
        this._photo(dev, pano);
        this.ctx.putImageData(this._img, 0, 0);
      } else if (mode === "panorama") {
        this._photoStrips(dev, pano);
      } else {
        this._background(dev);
        this.ctx.putImageData(this._img, 0, 0);
        this._notice(view, mode === "loading" ? "Loading the picture\u2026"
          : state === "failed" ? "The picture of this spot could not be loaded" : "No picture of this spot");
      }
      this._neighbourMarkers(view);
      const what = { panorama: "photo of this spot", loading: "loading the picture of this spot",
                     none: "no picture of this spot" }[mode];
      this._announce(what + this._wayOn());
    }

    // The panorama, pixel by pixel: a pixel's ray (the same projection as the generated view,
    // so the markers sit where they would there) has a heading, which picks the image column,
    // and an elevation, which picks the row. The rows depend only on the elevation and the
    // canvas, so they are kept until one changes; turning costs one lookup per pixel.
    _photo({ n, ch, f, hz }, e) {
      const iw = e.iw, ih = e.ih, src = e.pixels, px = this._px;
      const key = `${n}:${ch}:${f}:${hz}:${iw}:${ih}`;
      if (this._photoKey !== key) {
        this._photoKey = key;
        this._photoAz = new Float64Array(n);
        this._photoCols = new Int32Array(n);
        this._photoRows = new Int32Array(n * ch);
        for (let x = 0; x < n; x++) {
          const dx = x + 0.5 - n / 2, r = Math.hypot(dx, f);
          this._photoAz[x] = Math.atan2(dx, f);
          for (let y = 0, o = x; y < ch; y++, o += n) {
            const lat = Math.atan2(hz - (y + 0.5), r);
            this._photoRows[o] = clamp(Math.floor((0.5 - lat / Math.PI) * ih), 0, ih - 1) * iw;
          }
        }
      }
      const cols = this._photoCols, rows = this._photoRows;
      for (let x = 0; x < n; x++) {
        cols[x] = Math.min(iw - 1, Math.floor((wrap(this.heading + this._photoAz[x]) / TAU) * iw));
      }
      for (let y = 0, o = 0; y < ch; y++) {
        for (let x = 0; x < n; x++, o++) px[o] = src[rows[o] + cols[x]] | 0xff000000;
      }
    }

    // The same view from an image the canvas may not read (another origin without CORS): one
    // 1-pixel column of the image per canvas column, stretched linearly between the rows at
    // the column's top and bottom elevations (close to the exact view within the tilt range).
    _photoStrips({ n, ch, f, hz }, e) {
      const ctx = this.ctx, img = e.img, iw = img.naturalWidth, ih = img.naturalHeight;
      ctx.save();
      ctx.setTransform(1, 0, 0, 1, 0, 0);
      ctx.imageSmoothingEnabled = false;
      for (let x = 0; x < n; x++) {
        const dx = x + 0.5 - n / 2, r = Math.hypot(dx, f);
        const u = Math.min(iw - 1, Math.floor((wrap(this.heading + Math.atan2(dx, f)) / TAU) * iw));
        const top = Math.atan2(hz, r), bottom = Math.atan2(hz - ch, r);
        ctx.drawImage(img, u, (0.5 - top / Math.PI) * ih, 1, ((top - bottom) / Math.PI) * ih, x, 0, 1, ch);
      }
      ctx.restore();
    }

    _notice({ W, H }, text) {
      const ctx = this.ctx, size = clamp(W / 40, 13, 20);
      ctx.font = `600 ${size}px system-ui, "DejaVu Sans", sans-serif`;
      const w = ctx.measureText(text).width + size * 1.6, h = size * 1.9;
      pill(ctx, W / 2 - w / 2, H * 0.3 - h / 2, w, h);
      ctx.fillStyle = "rgba(17,24,39,0.78)";
      ctx.fill();
      ctx.fillStyle = "#ffffff";
      ctx.textAlign = "center";
      ctx.textBaseline = "middle";
      ctx.fillText(text, W / 2, H * 0.3 + 0.5);
    }

    // A vertical run of pixels in column i from row y0 to y1 (fractional ends blended, so
    // wall tops and object edges do not stair-step).
    _span(i, y0, y1, c) {
      const ch = this._img.height, cw = this._img.width, px = this._px;
      const a = Math.max(0, y0), b = Math.min(ch, y1);
      if (!(b > a)) return;
      const solid = 0xff000000 | (c[2] << 16) | (c[1] << 8) | c[0];
      const blend = (y, w) => {
        if (w >= 0.999) { px[y * cw + i] = solid; return; }
        const p = px[y * cw + i], v = 1 - w;
        const r = (p & 255) * v + c[0] * w, g = ((p >> 8) & 255) * v + c[1] * w;
        const bl = ((p >> 16) & 255) * v + c[2] * w;
        px[y * cw + i] = 0xff000000 | ((bl | 0) << 16) | ((g | 0) << 8) | (r | 0);
      };
      const ya = Math.floor(a), yb = Math.floor(b);
      if (ya === yb) { blend(ya, b - a); return; }
      blend(ya, ya + 1 - a);
      for (let y = ya + 1, o = (ya + 1) * cw + i; y < yb; y++, o += cw) px[o] = solid;
      if (yb < ch) blend(yb, b - yb);
    }

    _background({ n, ch, hz }) {
      const px = this._px;
      const ceil0 = [243, 241, 236], ceil1 = [201, 197, 188]; // near, at the horizon
      const floor0 = [138, 130, 118], floor1 = [203, 194, 177]; // at the horizon, near
      for (let y = 0; y < ch; y++) {
        let c;
        if (y < hz) c = mix(ceil0, ceil1, hz > 0 ? y / hz : 1);
        else c = mix(floor0, floor1, (y - hz) / Math.max(1, ch - hz));
        px.fill(0xff000000 | (c[2] << 16) | (c[1] << 8) | c[0], y * n, (y + 1) * n);
      }
    }

    _walls({ n, f, hz }) {
      const s = this.scene, walls = s.walls;
      const up = this.wallHeight - s.eyeH, down = s.eyeH;
      for (let i = 0; i < n; i++) {
        const off = Math.atan((i + 0.5 - n / 2) / f);
        const a = this.heading + off, dx = Math.sin(a), dy = Math.cos(a), c = Math.cos(off);
        this._off[i] = off; this._dx[i] = dx; this._dy[i] = dy; this._cos[i] = c;
        let best = Infinity, hit = null, u = 0;
        for (const w of walls) {
          const t = raySegment(s.px, s.py, dx, dy, w);
          if (t < best) { best = t; hit = w; u = raySegment.u; }
        }
        this._zbuf[i] = best;
        this._lintelT[i] = Infinity;
        if (!hit) continue;
        const perp = best * c;
        // Tint from the room just in front of the wall: the next room shows through a doorway.
        const room = this._roomAt(s.px + dx * (best - 0.05), s.py + dy * (best - 0.05), s.floor);
        const tint = room ? room.tint : TINTS[0];
        const lit = this._wallLight(dx, dy, hit, u, best, perp, f);
        const yBot = hz + (f * down) / perp, yBase = hz + (f * (down - 0.09)) / perp;
        this._span(i, hz - (f * up) / perp, yBase, shade(tint, lit));
        this._span(i, yBase, yBot, shade(tint, lit * 0.68));
        for (const d of s.doors) { // the wall above a doorway between here and that wall
          if (!d.lintel || d.top >= this.wallHeight) continue;
          const t = raySegment(s.px, s.py, dx, dy, d.lintel);
          if (t >= best || t >= this._lintelT[i]) continue;
          const lu = raySegment.u, p = t * c, yB = hz - (f * (d.top - down)) / p;
          const lroom = this._roomAt(s.px + dx * (t - 0.05), s.py + dy * (t - 0.05), s.floor);
          const ltint = lroom ? lroom.tint : TINTS[0];
          const lk = this._wallLight(dx, dy, d.lintel, lu, t, p, f);
          this._span(i, hz - (f * up) / p, yB - 1, shade(ltint, lk));
          this._span(i, yB - 1, yB, shade(ltint, lk * 0.62)); // the frame's edge
          this._lintelT[i] = t;
          this._lintelY[i] = yB;
        }
      }
    }

    // Brighter where the wall faces the viewer, darker far away; corners and door jambs get a
    // dark line about a pixel wide at any distance.
    _wallLight(dx, dy, w, u, t, perp, f) {
      let k = (0.62 + 0.38 * Math.abs(dx * w.nx + dy * w.ny)) * Math.max(0.5, Math.exp(-t / 16));
      if ((Math.min(u, 1 - u) * w.len * f) / perp < 1.2) k *= 0.62;
      return k;
    }

    _objects({ n, ch, f, hz }) {
      const s = this.scene, fov = this.opts.fov;
      const hits = [];
      for (const o of s.objects) {
        if (o.dist <= o.reach) continue; // standing on it (a rug): nothing sensible to draw
        const rel = relative(Math.atan2(o.cx - s.px, o.cy - s.py) - this.heading);
        if (Math.abs(rel) > fov / 2 + Math.asin(Math.min(1, o.reach / o.dist))) continue;
        const tIn = new Float64Array(n).fill(Infinity), tOut = new Float64Array(n);
        const lit = new Float64Array(n);
        let any = false;
        for (let i = 0; i < n; i++) {
          const r = o.round ? rayEllipse(s.px, s.py, this._dx[i], this._dy[i], o)
                            : rayBox(s.px, s.py, this._dx[i], this._dy[i], o);
          if (!r || r[0] < 0.1 || r[0] >= this._zbuf[i]) continue;
          tIn[i] = r[0]; tOut[i] = Math.min(r[1], this._zbuf[i]);
          lit[i] = o.round ? 0.6 + 0.4 * r[2] : (r[2] === 0 ? 0.86 : 1);
          any = true;
        }
        if (!any) continue;
        hits.push({ o, tIn, tOut, lit, spans: [], cols: 0, x0: Infinity, x1: -Infinity, top: Infinity,
                    centre: Infinity });
      }
      // Visibility, nearest first: a column counts when the object shows above or below what
      // nearer objects already cover there (a fridge behind a couch still shows).
      const coverTop = new Float64Array(n).fill(Infinity);
      const coverBot = new Float64Array(n).fill(-Infinity);
      for (const h of hits) {
        const { o } = h;
        for (let i = 0; i < n; i++) {
          if (h.tIn[i] === Infinity) { h.spans.push(null); continue; }
          const pN = h.tIn[i] * this._cos[i], pF = h.tOut[i] * this._cos[i];
          let yTopN = hz - (f * o.zTop) / pN, yBotN = hz - (f * o.zBot) / pN;
          let yTopF = hz - (f * o.zTop) / pF, yBotF = hz - (f * o.zBot) / pF;
          if (h.tIn[i] > this._lintelT[i]) { // seen through a doorway: below its lintel only
            const yL = this._lintelY[i];
            yTopN = Math.max(yTopN, yL); yTopF = Math.max(yTopF, yL);
            yBotN = Math.max(yBotN, yL); yBotF = Math.max(yBotF, yL);
          }
          const top = o.zTop < 0 ? yTopF : yTopN, bot = o.zBot > 0 ? yBotF : yBotN;
          h.spans.push([yTopN, yBotN, yTopF, yBotF]);
          if ((top < coverTop[i] - 1 || bot > coverBot[i] + 1) && bot > 0 && top < ch) {
            h.cols++;
            h.x0 = Math.min(h.x0, i); h.x1 = Math.max(h.x1, i);
            h.top = Math.min(h.top, top);
            h.centre = Math.min(h.centre, Math.abs(this._off[i]));
          }
          coverTop[i] = Math.min(coverTop[i], top);
          coverBot[i] = Math.max(coverBot[i], bot);
        }
      }
      // Drawn farthest first: front face, the top seen from above, the bottom seen from below.
      for (let j = hits.length - 1; j >= 0; j--) {
        const h = hits[j], { o } = h, sp = h.spans;
        const fade = Math.max(0.72, 1 - o.dist / 40);
        for (let i = 0; i < n; i++) {
          if (!sp[i]) continue;
          const [yTopN, yBotN, yTopF, yBotF] = sp[i];
          const k = h.lit[i] * fade * (!sp[i - 1] || !sp[i + 1] ? 0.7 : 1);
          if (o.zTop < 0) this._span(i, yTopF, yTopN, shade(o.rgb, Math.min(1.12, k * 1.12)));
          if (o.zBot > 0) this._span(i, yBotN, yBotF, shade(o.rgb, k * 0.7));
          this._span(i, yTopN, yBotN, shade(o.rgb, k));
          this._span(i, yTopN - 0.5, yTopN + 0.5, shade(o.rgb, k * 0.55)); // the front's top edge
        }
      }
      return hits.filter((h) => h.cols >= 2);
    }

    _doors({ W, H, f, hz }, labels) {
      const s = this.scene, here = s.room ? s.room.id : null, seen = [];
      for (const d of s.doors) {
        const vx = d.x - s.px, vy = d.y - s.py, dist = Math.hypot(vx, vy);
        if (dist < 0.4) continue;
        const rel = relative(Math.atan2(vx, vy) - this.heading);
        if (Math.abs(rel) > this.opts.fov / 2) continue;
        const ux = vx / dist, uy = vy / dist;
        if (s.walls.some((w) => raySegment(s.px, s.py, ux, uy, w) < dist - 0.05)) continue;
        // The room behind the gap: the door's room that lies past it, else the one not here.
        const beyond = this._roomAt(d.x + ux * 0.3, d.y + uy * 0.3, s.floor, d.rooms)
          || this.rooms.get(d.rooms.find((r) => r !== here));
        if (!beyond || beyond.id === here) continue;
        const name = words(beyond.type || beyond.id);
        const perp = dist * Math.cos(rel);
        const x = W / 2 + f * Math.tan(rel);
        const y = hz - (f * 0.25) / perp;
        const size = clamp((f * 0.16) / perp, 11, 17);
        this._label(name, x, clamp(y, 40, H - 30), size, "door", labels);
        seen.push({ rel, text: `doorway to the ${name}` });
      }
      return seen;
    }

    _objectLabels({ H, f }, seen, labels, k) {
      // The nearest few only: a real house has hundreds of objects, and a wall of labels
      // hides the view it describes.
      for (const h of seen.filter((x) => x.cols >= 3 * k).slice(0, MAX_OBJECT_LABELS)) {
        const x = (h.x0 + h.x1 + 1) / 2 / k, top = h.top / k;
        const size = clamp((f * 0.14) / Math.max(h.o.dist, 0.5), 11, 15);
        this._label(h.o.label, x, clamp(top - size, 40, H - 20), size, "object", labels, h.o.rgb);
      }
    }

    // A text pill, nudged upwards until it overlaps no label already placed.
    _label(text, x, y, size, kind, placed, swatch) {
      const ctx = this.ctx;
      ctx.font = `600 ${size}px system-ui, "DejaVu Sans", sans-serif`;
      const pad = size * 0.45, dot = swatch ? size * 0.8 : 0;
      const w = ctx.measureText(text).width + 2 * pad + dot, h = size + pad;
      let x0 = clamp(x - w / 2, 2, this.w - w - 2), y0 = y - h / 2;
      for (let tries = 0; tries < 6; tries++) {
        const clash = placed.find((r) => x0 < r[0] + r[2] && r[0] < x0 + w
                                         && y0 < r[1] + r[3] && r[1] < y0 + h);
        if (!clash) break;
        y0 = clash[1] - h - 2;
      }
      placed.push([x0, y0, w, h]);
      pill(ctx, x0, y0, w, h);
      ctx.fillStyle = kind === "door" ? "rgba(17,24,39,0.78)" : "rgba(255,255,255,0.88)";
      ctx.fill();
      if (kind !== "door") { ctx.strokeStyle = "rgba(17,24,39,0.35)"; ctx.lineWidth = 1; ctx.stroke(); }
      if (swatch) {
        ctx.beginPath();
        ctx.arc(x0 + pad + size * 0.3, y0 + h / 2, size * 0.3, 0, TAU);
        ctx.fillStyle = rgb(swatch, 1);
        ctx.fill();
        ctx.strokeStyle = "rgba(17,24,39,0.5)";
        ctx.stroke();
      }
      ctx.fillStyle = kind === "door" ? "#ffffff" : "#111827";
      ctx.textBaseline = "middle";
      ctx.textAlign = "left";
      ctx.fillText(text, x0 + pad + dot, y0 + h / 2 + 0.5);
    }

    _neighbourMarkers({ W, H, f, hz }) {
      const ctx = this.ctx, s = this.scene, half = this.opts.fov / 2;
      let hl = null;
      for (const nb of this.neighbours) {
        const rel = Math.abs(relative(nb.heading - this.heading));
        if (rel <= half && (!hl || rel < hl.rel)) hl = { rel, nb };
      }
      this._hl = hl ? hl.nb : null;
      const shown = [];
      for (const nb of this.neighbours) {
        const rel = relative(nb.heading - this.heading);
        if (Math.abs(rel) > half + 4 * DEG) continue;
        const perp = Math.max(0.3, nb.distance * Math.cos(rel));
        const rx = clamp((f * 0.3) / perp, 12, 0.085 * W);
        const ry = rx * 0.42;
        const x = W / 2 + f * Math.tan(rel);
        // On the floor where it lies, but never below the bottom edge (the view shows the floor
        // only from ~3 m on): near markers sit in the bottom band, larger.
        const lift = s.semantic ? 0 : nb.z; // without a sidecar: the neighbour's height from here
        const y = clamp(hz + (f * (s.eyeH - lift)) / perp, Math.min(hz + ry + 6, H - ry - 8), H - ry - 8);
        shown.push({ id: nb.id, nb, x, y, rx, ry, highlighted: nb === this._hl, dist: nb.distance });
      }
      shown.sort((a, b) => (a.highlighted - b.highlighted) || (b.dist - a.dist));
      for (const m of shown) {
        ctx.beginPath();
        ctx.ellipse(m.x, m.y, m.rx, m.ry, 0, 0, TAU);
        ctx.fillStyle = m.highlighted ? "rgba(37,99,235,0.88)" : "rgba(255,255,255,0.6)";
        ctx.fill();
        ctx.lineWidth = m.highlighted ? 3 : 2;
        ctx.strokeStyle = m.highlighted ? "#ffffff" : "rgba(17,24,39,0.55)";
        ctx.stroke();
        ctx.beginPath(); // a chevron pointing away from the viewer: "walk this way"
        ctx.moveTo(m.x - m.rx * 0.42, m.y + m.ry * 0.38);
        ctx.lineTo(m.x, m.y - m.ry * 0.42);
        ctx.lineTo(m.x + m.rx * 0.42, m.y + m.ry * 0.38);
        ctx.lineWidth = Math.max(2, m.rx * 0.12);
        ctx.lineJoin = "round";
        ctx.strokeStyle = m.highlighted ? "#ffffff" : "rgba(17,24,39,0.7)";
        ctx.stroke();
        const stairs = m.nb.floor !== s.floor ? (m.nb.z > s.pz ? "stairs up" : "stairs down") : "";
        const distance = `Enter \u23ce ${m.dist.toFixed(1)} m`;
        const text = m.highlighted ? (stairs ? `${distance} \u00b7 ${stairs}` : distance) : stairs;
        if (text) {
          ctx.font = `600 ${clamp(W / 64, 11, 14)}px system-ui, "DejaVu Sans", sans-serif`;
          ctx.textAlign = "center";
          ctx.textBaseline = "bottom";
          ctx.lineWidth = 3;
          ctx.strokeStyle = "rgba(17,24,39,0.75)";
          ctx.strokeText(text, m.x, m.y - m.ry - 4);
          ctx.fillStyle = "#ffffff";
          ctx.fillText(text, m.x, m.y - m.ry - 4);
        }
      }
      this._markers = shown;
      // Ways on outside the view: a small chevron at the side to turn to.
      const left = this.neighbours.some((nb) => relative(nb.heading - this.heading) < -(half + 4 * DEG));
      const right = this.neighbours.some((nb) => relative(nb.heading - this.heading) > half + 4 * DEG);
      for (const [on, x, dir] of [[left, 22, -1], [right, W - 22, 1]]) {
        if (!on) continue;
        const y = H - 30;
        ctx.beginPath();
        ctx.arc(x, y, 14, 0, TAU);
        ctx.fillStyle = "rgba(17,24,39,0.55)";
        ctx.fill();
        ctx.beginPath();
        ctx.moveTo(x - 3 * dir, y - 6);
        ctx.lineTo(x + 4 * dir, y);
        ctx.lineTo(x - 3 * dir, y + 6);
        ctx.lineWidth = 2.5;
        ctx.strokeStyle = "#ffffff";
        ctx.stroke();
      }
    }

    _banner({ W }) {
      const ctx = this.ctx, room = this.scene.room;
      const name = room ? words(room.type || room.id) : "";
      if (!name) return;
      const text = name.charAt(0).toUpperCase() + name.slice(1);
      const size = clamp(W / 45, 13, 18);
      ctx.font = `700 ${size}px system-ui, "DejaVu Sans", sans-serif`;
      const w = ctx.measureText(text).width + size * 1.6, h = size * 1.7;
      ctx.beginPath();
      pill(ctx, W / 2 - w / 2, 8, w, h);
      ctx.fillStyle = "rgba(17,24,39,0.8)";
      ctx.fill();
      ctx.fillStyle = "#ffffff";
      ctx.textAlign = "center";
      ctx.textBaseline = "middle";
      ctx.fillText(text, W / 2, 8 + h / 2 + 0.5);
    }

    _describe(doors, objects) {
      const s = this.scene, limit = this.opts.aheadAngle;
      const room = s.room ? words(s.room.type || s.room.id) : "unknown room";
      const items = doors.filter((d) => Math.abs(d.rel) <= limit)
        .map((d) => ({ rel: Math.abs(d.rel), text: d.text }))
        .concat(objects.filter((h) => h.centre <= limit)
          .map((h) => ({ rel: h.centre, text: h.o.label })))
        .sort((a, b) => a.rel - b.rel)
        .map((it) => it.text)
        .filter((t, i, all) => all.indexOf(t) === i)
        .slice(0, 4);
      const centre = this._zbuf[Math.floor(this._zbuf.length / 2)];
      const ahead = items.length ? items.join(", ") : (centre < Infinity ? "wall" : "open space");
      this._announce(`${room}; ahead: ${ahead}` + this._wayOn());
    }

    // "; Enter moves 2.8 m 28 degrees to the right", or that no way on is in view.
    _wayOn() {
      if (!this._hl) return "; no way on in view, turn with the arrow keys";
      const rel = relative(this._hl.heading - this.heading), deg = Math.round(Math.abs(rel) / DEG);
      const where = deg < 8 ? "ahead" : `${deg} degrees to the ${rel > 0 ? "right" : "left"}`;
      return `; Enter moves ${this._hl.distance.toFixed(1)} m ${where}`;
    }

    _announce(text) {
      this._description = text;
      this.canvas.setAttribute("aria-label", text);
      // The live region speaks once the view settles, not at every step of a turn.
      clearTimeout(this._statusTimer);
      this._statusTimer = setTimeout(() => {
        if (this.status.textContent !== text) this.status.textContent = text;
      }, 600);
    }
  }

  global.ProctorViewer = {
    mount: (element, options) => new Viewer(element, options),
    DEFAULTS: Object.freeze(Object.assign({}, DEFAULTS)),
    COLOURS: Object.freeze(Object.assign({}, COLOURS)),
  };
})(typeof window !== "undefined" ? window : globalThis);
