// Work in progress on an item page, kept in this tab's sessionStorage under
// "<prefix><assignment id>" so that a reload resumes it (navigation's walks and pairs, STS
// markers and pairs, Hexagons' boards). One copy for every kind: the kinds' pages load it
// before their own scripts. TabKeep(prefix, id) is null without an assignment id (the
// researcher's preview keeps nothing).
(function () {
  "use strict";
  function TabKeep(prefix, id) {
    if (!id) return null;
    const key = prefix + id;
    return {
      key: key,
      // The state saved before, if valid(state) accepts it (no valid: any), else null. The keys
      // of earlier assignments (same prefix) are done with (sent) and go.
      load: function (valid) {
        try {
          for (let i = sessionStorage.length - 1; i >= 0; i--) {
            const k = sessionStorage.key(i);
            if (k && k.startsWith(prefix) && k !== key) sessionStorage.removeItem(k);
          }
          const s = JSON.parse(sessionStorage.getItem(key) || "null");
          return s && (!valid || valid(s)) ? s : null;
        } catch (_) { return null; }
      },
      save: function (state) {
        try { sessionStorage.setItem(key, JSON.stringify(state)); }
        catch (_) { /* storage full or off: the answer is still sent, only not resumable */ }
      },
    };
  }
  window.TabKeep = TabKeep;
})();
