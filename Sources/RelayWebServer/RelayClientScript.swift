/// `GET /relay.js`: the relay client the dashboard and the overlay share (no external resources).
///
/// `hrRelay.connect({onMessage, onState, keepFragment, recentFramesMs})`:
/// - the token comes from the URL fragment (`#token=TOKEN`, never sent to the server) and is kept in the browser's
///   localStorage (the fragment is then removed from the address bar, unless `keepFragment`, which an OBS browser
///   source wants); without one the page tries without a token, as `--no-auth` allows;
/// - it is sent as the `bearer.TOKEN` WebSocket subprotocol, since browsers cannot set an Authorization header on a
///   WebSocket; a connection refused before it opens is told apart from a network failure by asking `GET /v1/relay`
///   with the token, which answers 401 for a refused token;
/// - reliable events are acknowledged, a reconnection to the same gateway resumes after the last `relay_seq` seen
///   (`hello`; events seen while a resume runs count once its answer is in, since newer ones come before the
///   replayed), and a lost connection is retried with backoff (0.5 s doubling to 10 s);
/// - with `recentFramesMs`, a connection with nothing to resume asks for the `session_frame` events of that span
///   (`hello{recent_frames_ms}`), so a page just loaded draws its charts at once;
/// - `onState(state, detail)` gets `connecting`, `connected`, `refused` (`detail.hadToken`) or `disconnected`
///   (`detail.retryMs`).
/// `hrRelay.token()` is the token in use ("" without one), `hrRelay.forget()` drops it, and
/// `hrRelay.fetch(path)` is `fetch` with the token as a Bearer header (for `/v1/sessions`).
enum RelayClientScript {
    static let javascript = #"""
"use strict";
const hrRelay = (() => {
  let ws = null, generation = 0, retry = 500, retryTimer = null, epoch = null, lastSeq = 0, options = {};
  // A resume in flight on this connection, and the highest relay_seq seen during it.
  let resuming = false, seenMax = 0;

  function token() {
    const fromUrl = /[#&]token=([^&]+)/.exec(location.hash);
    if (fromUrl) {
      localStorage.setItem("hrg-token", decodeURIComponent(fromUrl[1]));
      if (!options.keepFragment) history.replaceState(null, "", location.pathname + location.search);
    }
    return localStorage.getItem("hrg-token") || "";
  }

  function state(s, detail) { if (options.onState) options.onState(s, detail || {}); }

  function authorized(path, init) {
    const t = token();
    return fetch(path, Object.assign({cache: "no-store"}, init || {},
      {headers: t ? {Authorization: "Bearer " + t} : {}}));
  }

  function handle(m) {
    if (m.type === "welcome") {
      resuming = false;
      // The same gateway run (epoch) after a lost connection: ask for what was missed.
      if (epoch === m.epoch && lastSeq) {
        ws.send(JSON.stringify({command: "hello", resume: {epoch, last_seq: lastSeq}}));
        resuming = true;
        seenMax = lastSeq;
      } else {
        if (epoch !== m.epoch) lastSeq = 0;
        // Nothing to resume (a page just loaded, or a new gateway run): the recent frames, to draw charts from.
        if (options.recentFramesMs) ws.send(JSON.stringify({command: "hello", recent_frames_ms: options.recentFramesMs}));
      }
      epoch = m.epoch;
    }
    // While a resume runs, newer events (redelivered reliable ones, live ones) come before the replayed ones: the
    // resume point moves only once the hello's answer, which follows the last replayed event, is in.
    if (m.relay_seq) {
      if (resuming) seenMax = Math.max(seenMax, m.relay_seq);
      else lastSeq = Math.max(lastSeq, m.relay_seq);
    }
    if (resuming && m.type === "command_result" && m.command === "hello") {
      resuming = false;
      lastSeq = Math.max(lastSeq, seenMax);
    }
    try { if (options.onMessage) options.onMessage(m); }
    finally { if (m.delivery === "reliable") ws.send(JSON.stringify({command: "ack", relay_seq: m.relay_seq})); }
  }

  function open() {
    const mine = ++generation;
    clearTimeout(retryTimer);
    if (ws) { ws.onclose = null; ws.close(); }
    const t = token();
    let opened = false;
    state("connecting");
    const url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/v1/relay";
    ws = new WebSocket(url, t ? ["hrrelay.v1", "bearer." + t] : ["hrrelay.v1"]);
    ws.onopen = () => { opened = true; retry = 500; state("connected"); };
    ws.onmessage = (e) => handle(JSON.parse(e.data));
    ws.onclose = async () => {
      if (mine !== generation) return;
      if (!opened) {
        // Browsers hide the refused upgrade's status: ask the plain endpoint, which answers 401 to a bad token.
        const status = await authorized("/v1/relay").then((r) => r.status, () => 0);
        if (mine !== generation) return;
        if (status === 401) { state("refused", {hadToken: !!t}); return; }
      }
      state("disconnected", {retryMs: retry});
      retryTimer = setTimeout(open, retry); retry = Math.min(retry * 2, 10000);
    };
  }

  function connect(o) {
    options = o || {};
    window.addEventListener("hashchange", () => { if (/[#&]token=/.test(location.hash)) open(); });
    open();
  }

  function forget() { localStorage.removeItem("hrg-token"); }

  return {connect, token, forget, fetch: authorized};
})();
"""#
}
