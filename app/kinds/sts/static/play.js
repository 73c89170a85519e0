// The play study's page: each move goes to the server with the moves before it, and the grid it
// draws comes back (the page never holds the seed). Moves wait in a queue and are sent one at a
// time, so fast typing keeps its order and no move is sent after the episode ended.
(function () {
  const root = document.getElementById("sts-play");
  if (!root) return;
  const grid = document.getElementById("sts-grid"), status = document.getElementById("sts-play-status");
  const stepText = document.getElementById("sts-play-step"), input = document.getElementById("sts-actions");
  const form = document.getElementById("answer-form");
  // minigrid's actions: 0 left, 1 right, 2 forward, 3 pick up, 4 drop, 5 toggle.
  const KEYS = { ArrowLeft: 0, ArrowRight: 1, ArrowUp: 2, p: 3, d: 4, t: 5 };
  let actions = [], shown = null, busy = false, sendWhenIdle = false, confirmed = false;
  const queue = [];

  function show(state) {
    shown = state;
    grid.src = state.frame;
    input.value = JSON.stringify(actions);
    stepText.textContent = `step ${state.step} of at most ${state.max_steps}`;
    status.classList.toggle("done", state.success);
    status.classList.toggle("ended", state.done && !state.success);
    if (state.success) {
      status.textContent = `Mission accomplished in ${state.step} steps. Press Enter to send.`;
    } else if (state.done) {
      status.textContent = `The episode ended after ${state.step} steps without success. Undo, or press Enter to send.`;
    } else {
      status.textContent = state.step ? "Keep going: do what the instruction says."
                                      : "Arrows turn and move the agent (the red triangle); p, d and t pick up, drop and toggle.";
    }
  }

  async function fetchState(next) {
    const r = await fetch(`${root.dataset.url}?actions=${next.join(",")}`,
                          { credentials: "same-origin", headers: { Accept: "application/json" } });
    const body = await r.json().catch(() => ({}));
    if (!r.ok) throw new Error(body.detail || `the server answered ${r.status}`);
    return body;
  }

  async function pump() {
    if (busy) return;
    busy = true;
    try {
      while (queue.length) {
        const move = queue.shift();
        let next;
        if (move === "undo") {
          if (!actions.length) continue;
          next = actions.slice(0, -1);
        } else if (move === "load") {
          next = actions;
        } else {
          if (shown && shown.done) continue;  // nothing follows the end of an episode
          next = [...actions, move];
        }
        const state = await fetchState(next);
        actions = next;
        show(state);
      }
    } catch (err) {
      queue.length = 0;
      sendWhenIdle = false;
      status.textContent = `The grid could not be drawn (${err.message}). Try the move again.`;
    } finally {
      busy = false;
    }
    if (sendWhenIdle) {
      sendWhenIdle = false;
      form.requestSubmit();
    }
  }

  function act(move) {
    confirmed = false;
    queue.push(move);
    pump();
  }

  document.getElementById("sts-pad").addEventListener("click", (e) => {
    const button = e.target.closest("button");
    if (!button) return;
    act(button.id === "sts-undo" ? "undo" : Number(button.dataset.move));
    root.focus();  // so Enter sends rather than pressing the clicked button again
  });

  form.addEventListener("submit", (e) => {
    let wait = null;
    if (busy || queue.length) {
      sendWhenIdle = true;  // sent once the last move is drawn
      wait = "Sending after the last move…";
    } else if (!shown) {
      wait = "The grid has not loaded: reload the page.";
    } else if (!shown.done && !confirmed) {
      confirmed = true;
      wait = "The mission is not done yet. Press Enter again to send your moves anyway, or keep playing.";
    }
    if (wait === null) return;
    // Not sent: keep the page's send-once guard (app.js) from marking the form as sent.
    e.preventDefault(); e.stopPropagation();
    status.textContent = wait;
  });

  document.addEventListener("keydown", (e) => {
    if (e.altKey || e.ctrlKey || e.metaKey || e.target.matches("input[type=text], textarea, select")) return;
    const key = e.key.length === 1 ? e.key.toLowerCase() : e.key;
    if (key in KEYS) { e.preventDefault(); act(KEYS[key]); }
    else if (key === "Backspace") { e.preventDefault(); act("undo"); }
  });

  queue.push("load");
  pump();
  root.focus();
})();
