/// The page served at `GET /`: a live view of the relay in plain HTML and JavaScript, no external resources.
///
/// It shows heart rate with a chart of `hr_mean_bpm` per `session_frame`, an RR tachogram built from the
/// `rr_intervals_ms` of `biosignal_frame` samples, HRV (RMSSD, SDNN, pNN50), breathing (from RR, else the camera's),
/// the session and each sensor's state, and the event log. Every live value has a stable element id
/// (`hr`, `rmssd`, `sdnn`, `pnn50`, `resp`, `rr-last`, `beats`, `session`, `sensors`, `summary`, `conn`); the
/// `metrics` element carries the `seq` and `session_id` of the `session_frame` on display as `data-seq` and
/// `data-session`, and the `rr-chart` canvas the `seq` of the newest `biosignal_frame` as `data-seq`.
///
/// The token comes from the URL fragment (`/#token=TOKEN`, never sent to the server; without one the page tries
/// without a token, as `--no-auth` allows, and otherwise says how to get one), and is kept
/// in the browser's localStorage; it is sent as the `bearer.TOKEN` WebSocket subprotocol, since browsers cannot set
/// an Authorization header on a WebSocket. A connection refused before it opens is told apart from a network failure
/// by asking `GET /v1/relay` with the token, which answers 401 for a refused token.
enum DashboardPage {
    static let html = #"""
<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>hr-gateway relay</title>
<link rel="icon" href="data:,">
<style>
  body { font: 15px system-ui, sans-serif; margin: 1.5rem; background: #111; color: #eee; }
  h1 { font-size: 1.1rem; font-weight: 600; }
  h2 { font-size: .95rem; font-weight: 600; color: #bbb; margin: 1.2rem 0 .3rem; }
  .big { font-size: 4rem; font-weight: 700; color: #f55; }
  .unit { font-size: 1rem; color: #aaa; }
  .row { display: flex; gap: 2rem; flex-wrap: wrap; align-items: baseline; }
  .k { color: #999; }
  .bad { color: #f80; }
  #auth { display: none; border: 1px solid #f80; padding: .6rem; max-width: 700px; }
  #sensors { display: inline; margin: 0; padding: 0; list-style: none; }
  #sensors li { display: inline; margin-right: 1rem; }
  #sensors li[data-state="streaming"], #sensors li[data-state="connected"] { color: #6d6; }
  canvas { background: #1b1b1b; width: 100%; max-width: 720px; height: 160px; display: block; }
  #log { font: 12px ui-monospace, monospace; white-space: pre; max-height: 14rem; overflow: auto; color: #bbb; }
  button, input { font: inherit; }
</style>
</head>
<body>
<h1>hr-gateway relay <span id="conn" class="k">connecting…</span></h1>
<div id="auth"></div>
<div id="metrics" class="row">
  <div><span id="hr" class="big">–</span> <span class="unit">bpm</span></div>
  <div><span class="k">RMSSD</span> <span id="rmssd">–</span> ms</div>
  <div><span class="k">SDNN</span> <span id="sdnn">–</span> ms</div>
  <div><span class="k">pNN50</span> <span id="pnn50">–</span> %</div>
  <div><span class="k">breathing</span> <span id="resp">–</span> /min <span id="resp-source" class="k"></span></div>
</div>
<div class="row">
  <div><span class="k">session</span> <span id="session">none</span> <span id="frame" class="k"></span></div>
  <div><span class="k">sensors</span> <ul id="sensors"><li>–</li></ul></div>
</div>
<h2>Heart rate (bpm, mean over the window, up to 5 min)</h2>
<canvas id="hr-chart" width="720" height="160"></canvas>
<h2>RR tachogram (ms per beat, up to 2 min) — last <span id="rr-last">–</span> ms, <span id="beats">0</span> beats</h2>
<canvas id="rr-chart" width="720" height="160"></canvas>
<div><span class="k">last session</span> <span id="summary">–</span></div>
<p><button id="forget">Forget token</button></p>
<div id="log"></div>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
const HR_SPAN_MS = 300000, RR_SPAN_MS = 120000;
const RR_COLORS = ["#5af", "#fc5", "#c7f", "#5d9"];
const hrPoints = [];          // {t, v}: emitted_at_ms, hr_mean_bpm
const rrSamples = new Map();  // "device|timestamp_ms" -> {device, t, rr}: samples with RR intervals
const sensors = new Map();    // "source|device_id" -> sensor
let lastSeq = 0, epoch = null, retry = 500, ws = null, generation = 0, retryTimer = null;

function token() {
  const fromUrl = /[#&]token=([^&]+)/.exec(location.hash);
  if (fromUrl) {
    localStorage.setItem("hrg-token", decodeURIComponent(fromUrl[1]));
    history.replaceState(null, "", location.pathname);
  }
  // No token yet: try without one (a gateway in --no-auth mode takes it); a refusal says how to get one.
  return localStorage.getItem("hrg-token") || "";
}
$("forget").onclick = () => { localStorage.removeItem("hrg-token"); location.reload(); };
window.addEventListener("hashchange", () => { if (/[#&]token=/.test(location.hash)) connect(); });

function log(m) {
  const el = $("log");
  el.textContent = (JSON.stringify(m) + "\n" + el.textContent).slice(0, 20000);
}

function fixed(v, digits) { return typeof v === "number" && isFinite(v) && v > 0 ? v.toFixed(digits) : "–"; }

// One chart: series of {t, v} on a time axis ending at the newest point and spanning the data, at least a quarter
// of spanMs and at most spanMs; grid and value labels in grey.
function plot(canvas, series, spanMs, pad) {
  const g = canvas.getContext("2d"), w = canvas.width, h = canvas.height, left = 44;
  g.clearRect(0, 0, w, h);
  const all = series.flatMap((s) => s.points);
  if (all.length === 0) return;
  const end = Math.max(...all.map((p) => p.t)), first = Math.min(...all.map((p) => p.t));
  const start = Math.min(end - spanMs / 4, Math.max(end - spanMs, first));
  const shown = all.filter((p) => p.t >= start);
  const lo = Math.min(...shown.map((p) => p.v)) - pad, hi = Math.max(...shown.map((p) => p.v)) + pad;
  const x = (t) => left + (t - start) * (w - left - 4) / (end - start);
  const y = (v) => h - 6 - (v - lo) * (h - 12) / (hi - lo);
  g.font = "11px system-ui, sans-serif"; g.fillStyle = "#888"; g.strokeStyle = "#333"; g.lineWidth = 1;
  for (const v of [lo + pad, (lo + hi) / 2, hi - pad]) {
    g.beginPath(); g.moveTo(left, y(v)); g.lineTo(w, y(v)); g.stroke();
    g.fillText(v.toFixed(0), 2, y(v) + 4);
  }
  for (const s of series) {
    const pts = s.points.filter((p) => p.t >= start);
    g.strokeStyle = s.color; g.fillStyle = s.color; g.lineWidth = 2; g.beginPath();
    pts.forEach((p, i) => (i ? g.lineTo(x(p.t), y(p.v)) : g.moveTo(x(p.t), y(p.v))));
    g.stroke();
    for (const p of pts) g.fillRect(x(p.t) - 2, y(p.v) - 2, 4, 4);
  }
}

function drawHR() { plot($("hr-chart"), [{color: "#f55", points: hrPoints}], HR_SPAN_MS, 5); }

// Beat times: walking back from a device's newest sample, each RR interval ends where the next one began, or at its
// notification's timestamp when that is earlier (beats were lost in between).
function drawRR() {
  const newest = Math.max(...[...rrSamples.values()].map((s) => s.t));
  for (const [k, s] of rrSamples) if (s.t < newest - RR_SPAN_MS) rrSamples.delete(k);
  const byDevice = new Map();
  for (const s of [...rrSamples.values()].sort((a, b) => b.t - a.t)) {
    if (!byDevice.has(s.device)) byDevice.set(s.device, []);
    byDevice.get(s.device).push(s);
  }
  let count = 0, last = null;
  const series = [...byDevice.keys()].sort().map((device, i) => {
    const points = [];
    let t = Infinity;
    for (const s of byDevice.get(device)) {
      t = Math.min(t, s.t);
      for (let j = s.rr.length - 1; j >= 0; j--) { points.unshift({t, v: s.rr[j]}); t -= s.rr[j]; }
    }
    count += points.length;
    if (points.length && (!last || points[points.length - 1].t > last.t)) last = points[points.length - 1];
    return {color: RR_COLORS[i % RR_COLORS.length], points};
  });
  plot($("rr-chart"), series, RR_SPAN_MS, 20);
  $("beats").textContent = String(count);
  if (last) $("rr-last").textContent = last.v.toFixed(0);
}

// Frames repeat the window's samples: one entry per device and notification.
function addSamples(samples) {
  for (const s of samples || []) {
    const rr = s.rr_intervals_ms || [];
    if (rr.length) rrSamples.set((s.device_id || s.source) + "|" + s.timestamp_ms, {device: s.device_id || s.source, t: s.timestamp_ms, rr});
  }
}

function showSensors() {
  const ul = $("sensors");
  ul.replaceChildren();
  for (const s of sensors.values()) {
    const li = document.createElement("li");
    li.dataset.source = s.source; li.dataset.device = s.device_id || ""; li.dataset.state = s.state;
    li.textContent = (s.device_id || s.source) + " (" + s.source + "): " + s.state + (s.message ? " — " + s.message : "");
    ul.append(li);
  }
  if (!sensors.size) ul.append(Object.assign(document.createElement("li"), {textContent: "–"}));
}

function showFrame(m) {
  const x = m.metrics || {};
  $("metrics").dataset.seq = String(m.seq); $("metrics").dataset.session = m.session_id;
  $("hr").textContent = fixed(x.hr_mean_bpm, 0);
  $("rmssd").textContent = fixed(x.rmssd_ms, 0);
  $("sdnn").textContent = fixed(x.hr_sdnn_ms, 0);
  $("pnn50").textContent = x.rr_count ? x.pnn50.toFixed(0) : "–";
  const fromRR = typeof x.resp_rate_rr_bpm === "number";
  $("resp").textContent = fixed(fromRR ? x.resp_rate_rr_bpm : x.breathing_rate_bpm, 1);
  $("resp-source").textContent = fromRR ? "from RR" : typeof x.breathing_rate_bpm === "number" ? "camera" : "";
  $("frame").textContent = "frame " + m.seq + " at " + new Date(m.emitted_at_ms).toLocaleTimeString();
  if (x.hr_mean_bpm > 0) hrPoints.push({t: m.emitted_at_ms, v: x.hr_mean_bpm});
  while (hrPoints.length && hrPoints[0].t < m.emitted_at_ms - HR_SPAN_MS) hrPoints.shift();
  drawHR();
}

function handle(m) {
  if (m.relay_seq) lastSeq = Math.max(lastSeq, m.relay_seq);
  switch (m.type) {
    case "welcome":
      if (epoch === m.epoch && lastSeq) ws.send(JSON.stringify({command: "hello", resume: {epoch, last_seq: lastSeq}}));
      epoch = m.epoch; break;
    case "gateway_status":
      $("session").textContent = m.session ? m.session.session_id : "none";
      sensors.clear();
      for (const s of m.sensors || []) sensors.set(s.source + "|" + (s.device_id || ""), s);
      showSensors(); break;
    case "sensor_status":
      sensors.set(m.source + "|" + (m.device_id || ""), m);
      showSensors(); break;
    case "session_frame":
      if (!m.replayed || m.seq > Number($("metrics").dataset.seq || 0)) showFrame(m);
      break;
    case "biosignal_frame":
      addSamples(m.samples);
      if (!rrSamples.size) break;
      if (!m.replayed || m.seq > Number($("rr-chart").dataset.seq || 0)) $("rr-chart").dataset.seq = String(m.seq);
      drawRR(); break;
    case "session_summary": {
      const x = m.metrics || {};
      $("summary").textContent = m.session_id + ": " + m.duration_actual_sec + " s, mean " + fixed(x.hr_mean_bpm, 0)
        + " bpm, RMSSD " + fixed(x.rmssd_ms, 0) + " ms";
      $("summary").dataset.session = m.session_id;
      break;
    }
  }
  if (m.delivery === "reliable") ws.send(JSON.stringify({command: "ack", relay_seq: m.relay_seq}));
  if (m.type !== "heartbeat" && m.type !== "biosignal_frame" && m.type !== "session_frame") log(m);
}

function refused() {
  $("conn").textContent = "token refused (HTTP 401)";
  $("conn").className = "bad";
  $("auth").style.display = "block";
  $("auth").textContent = (localStorage.getItem("hrg-token") ? "The relay refused this token (wrong or revoked). "
    : "The relay needs a token. ") + "Create one on the gateway with "
    + "`hr-gateway token create --read-only --name browser`, then open this page as /#token=TOKEN.";
}

function connect() {
  const mine = ++generation;
  clearTimeout(retryTimer);
  if (ws) { ws.onclose = null; ws.close(); }
  const t = token();
  let opened = false;
  $("auth").style.display = "none"; $("conn").className = "k"; $("conn").textContent = "connecting…";
  const url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/v1/relay";
  ws = new WebSocket(url, t ? ["hrrelay.v1", "bearer." + t] : ["hrrelay.v1"]);
  ws.onopen = () => { opened = true; $("conn").textContent = "connected"; retry = 500; };
  ws.onmessage = (e) => handle(JSON.parse(e.data));
  ws.onclose = async () => {
    if (mine !== generation) return;
    if (!opened) {
      // Browsers hide the refused upgrade's status: ask the plain endpoint, which answers 401 to a bad token.
      const status = await fetch("/v1/relay", {headers: t ? {Authorization: "Bearer " + t} : {}, cache: "no-store"})
        .then((r) => r.status, () => 0);
      if (mine !== generation) return;
      if (status === 401) { refused(); return; }
    }
    $("conn").textContent = "disconnected, retrying in " + (retry / 1000).toFixed(1) + " s…";
    retryTimer = setTimeout(connect, retry); retry = Math.min(retry * 2, 10000);
  };
}
connect();
</script>
</body>
</html>
"""#
}
