/// The page served at `GET /`: the gateway's app page, plain HTML and JavaScript served by the gateway itself (no
/// external resources, works offline), usable from a phone to a desktop.
///
/// It shows a large live heart rate (the newest reading, with `--raw`; else the frame's mean) with its training zone
/// (share of a maximum heart rate, `?hrmax=190` or the field at the bottom, kept in the browser), the window's mean,
/// HRV (RMSSD, SDNN, pNN50), breathing and live DFA alpha1, the breathing pacer animated from `breathing_cue` events
/// with the heart's answer (RSA, adherence, coherence), charts of heart rate, the RR tachogram and the RMSSD trend, one
/// tile per strap or camera with its state and battery, and the recorded sessions with CSV, EDF+ and JSON downloads
/// (and ECG or accelerometer CSV for a session that recorded them) (`GET /v1/sessions`). An empty state says how to
/// start a session; a refused token or a lost connection is said in words, with what to do. No raw JSON is shown.
///
/// The connection (token from the URL fragment `/#token=TOKEN`, kept in localStorage; reconnection and resume) is
/// `/relay.js` (`RelayClientScript`), shared with the overlay. A page just loaded asks for the last 5 minutes of
/// `session_frame` and `biosignal_frame` events (`hello{recent_frames_ms}`), so the heart-rate chart, the RMSSD trend
/// and the RR tachogram are drawn at once after a reload.
///
/// Stable ids for tests: `hr` (with `data-seq`, `data-source`: `sample` or `frame`, and `data-device` for a sample),
/// `hr-mean`, `straps` (with several devices: a `tr` per device with `data-device`, `data-primary` on the top-level
/// one's; its tile `straps-tile`), `zone` (`data-zone` 0–5), `rmssd`, `sdnn`, `pnn50`, `resp`, `resp-source`, `dfa`,
/// `dfa-zone`, `rr-last`, `beats`, `session`, `frame`, `sensors` (an `li` per source with `data-source`, `data-device`,
/// `data-state`, `data-battery`), `summary` (`data-session`), `conn` (`data-state`), `auth`, `empty`, `pacer`
/// (`data-active`, `data-phase`, `data-cycle`, `data-duration-ms`), `pacer-text`, `pacer-info`, `rsa`, `adherence`,
/// `coherence`, `sessions` (a `tr` per session with `data-session`); `metrics` carries the `seq` and `session_id` of
/// the `session_frame` on display as `data-seq` and `data-session`, the `rr-chart` canvas the `seq` of the newest
/// `biosignal_frame` as `data-seq`; charts are `hr-chart`, `rr-chart` and `hrv-chart`.
enum DashboardPage {
    static let html = #"""
<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="theme-color" content="#111318">
<title>hr-gateway</title>
<link rel="icon" href="data:,">
<style>
  :root { --bg: #111318; --tile: #1a1d24; --line: #2a2e38; --text: #e8e8ea; --dim: #9a9ca4; --hr: #ff5555;
          --ok: #55dd88; --warn: #ff9933; --bad: #ff5555; --z1: #7fa7c9; --z2: #55dd88; --z3: #ffcc55; --z4: #ff9933;
          --z5: #ff5555; }
  * { box-sizing: border-box; }
  body { margin: 0; background: var(--bg); color: var(--text); font: 15px/1.4 system-ui, -apple-system, sans-serif; }
  header { display: flex; align-items: center; justify-content: space-between; gap: .8rem; padding: .8rem 1rem;
           border-bottom: 1px solid var(--line); }
  header h1 { font-size: 1.05rem; margin: 0; font-weight: 700; letter-spacing: .02em; }
  #conn { font-size: .85rem; padding: .2rem .6rem; border-radius: 1rem; background: var(--line); color: var(--dim);
          white-space: nowrap; overflow: hidden; text-overflow: ellipsis; max-width: 60vw; }
  #conn[data-state="connected"] { background: #1d3a2a; color: var(--ok); }
  #conn[data-state="disconnected"] { background: #3a2a1a; color: var(--warn); }
  #conn[data-state="refused"] { background: #3a1d1d; color: var(--bad); }
  .banner { margin: 1rem; padding: .8rem 1rem; border-radius: .6rem; border: 1px solid var(--line); background: var(--tile); }
  #auth { border-color: var(--bad); }
  code { font: .9em ui-monospace, monospace; background: #0c0d10; padding: .05rem .3rem; border-radius: .25rem;
         overflow-wrap: anywhere; }
  main { display: grid; gap: .8rem; padding: .8rem; grid-template-columns: repeat(auto-fit, minmax(300px, 1fr)); }
  .tile { background: var(--tile); border-radius: .8rem; padding: .9rem 1rem; min-width: 0; }
  .wide { grid-column: 1 / -1; }
  .label { color: var(--dim); font-size: .8rem; text-transform: uppercase; letter-spacing: .06em; }
  .hero .value { display: flex; align-items: baseline; gap: .4rem; }
  #hr { font-size: clamp(4.5rem, 18vw, 8rem); font-weight: 800; line-height: 1; color: var(--hr);
        font-variant-numeric: tabular-nums; }
  .unit { color: var(--dim); font-size: 1.1rem; }
  #zone { font-weight: 600; margin-top: .3rem; }
  .zonebar { position: relative; display: flex; height: .5rem; border-radius: .25rem; overflow: hidden; margin: .4rem 0; }
  .zonebar i { flex: 1; opacity: .35; }
  .zonebar i:nth-child(1) { background: var(--z1); } .zonebar i:nth-child(2) { background: var(--z2); }
  .zonebar i:nth-child(3) { background: var(--z3); } .zonebar i:nth-child(4) { background: var(--z4); }
  .zonebar i:nth-child(5) { background: var(--z5); }
  #zone[data-zone="1"] { color: var(--z1); } #zone[data-zone="2"] { color: var(--z2); }
  #zone[data-zone="3"] { color: var(--z3); } #zone[data-zone="4"] { color: var(--z4); }
  #zone[data-zone="5"] { color: var(--z5); }
  #zone-marker { position: absolute; top: 0; bottom: 0; width: 3px; background: #fff; display: none; }
  .sub { color: var(--dim); font-size: .85rem; overflow-wrap: anywhere; }
  .stats { display: grid; grid-template-columns: repeat(2, minmax(0, 1fr)); gap: .8rem; }
  .stat b { font-size: 2rem; font-weight: 700; font-variant-numeric: tabular-nums; }
  .stat small { color: var(--dim); }
  #pacer .stage { position: relative; height: 180px; display: flex; align-items: center; justify-content: center; }
  #pacer-circle { width: 160px; height: 160px; border-radius: 50%; background: radial-gradient(#5aaaff, #2a5a9a);
                  transform: scale(.4); transition-property: transform; transition-timing-function: ease-in-out; }
  #pacer[data-active="0"] #pacer-circle { opacity: .15; }
  #pacer-text { position: absolute; font-size: 1.3rem; font-weight: 700; text-shadow: 0 0 6px #000; }
  .answer { display: flex; flex-wrap: wrap; gap: .4rem 1.2rem; margin-top: .4rem; }
  .answer b { font-variant-numeric: tabular-nums; }
  canvas { width: 100%; height: 160px; display: block; }
  #sensors { list-style: none; margin: .4rem 0 0; padding: 0; display: grid; gap: .5rem;
             grid-template-columns: repeat(auto-fill, minmax(220px, 1fr)); }
  #sensors li { background: #20242c; border-radius: .6rem; padding: .6rem .8rem; border-left: 4px solid var(--line);
                overflow-wrap: anywhere; }
  #sensors li[data-state="streaming"], #sensors li[data-state="connected"] { border-left-color: var(--ok); }
  #sensors li[data-state="error"], #sensors li[data-state="disconnected"] { border-left-color: var(--bad); }
  #sensors li[data-state="reconnecting"], #sensors li[data-state="connecting"] { border-left-color: var(--warn); }
  #sensors .name { font-weight: 600; display: block; }
  table { width: 100%; border-collapse: collapse; font-size: .9rem; }
  th { text-align: left; color: var(--dim); font-weight: 500; }
  th, td { padding: .35rem .4rem; border-bottom: 1px solid var(--line); vertical-align: top; }
  td a { color: #7fb8ff; margin-right: .6rem; }
  footer { display: flex; flex-wrap: wrap; gap: 1rem; align-items: center; padding: 0 1rem 1.5rem; color: var(--dim); }
  button, input { font: inherit; color: inherit; background: #20242c; border: 1px solid var(--line); border-radius: .4rem;
                  padding: .3rem .6rem; }
  input { width: 5rem; }
  [hidden] { display: none !important; }
  @media (max-width: 560px) {
    main { padding: .5rem; gap: .5rem; grid-template-columns: minmax(0, 1fr); }
    .hide-narrow { display: none; }
  }
</style>
</head>
<body>
<header><h1>hr-gateway</h1><div id="conn" data-state="connecting">connecting…</div></header>
<div id="auth" class="banner" hidden></div>
<div id="empty" class="banner" hidden>No session is running. Start one on the gateway, for example
  <code>hr-gateway stream --strap auto --listen 0.0.0.0:8765</code> or <code>hr-gateway breathe --strap auto --listen 0.0.0.0:8765</code>,
  or from a phone app (<code>start_session</code>). This page fills in by itself.</div>
<main>
  <section class="tile hero" id="metrics">
    <div class="label">Heart rate</div>
    <div class="value"><span id="hr">–</span><span class="unit">bpm</span></div>
    <div id="zone" data-zone="0">–</div>
    <div class="zonebar"><i></i><i></i><i></i><i></i><i></i><b id="zone-marker"></b></div>
    <div class="sub">window mean <span id="hr-mean">–</span> bpm</div>
    <div class="sub">session <span id="session">none</span> <span id="frame"></span></div>
  </section>
  <section class="tile stats">
    <div class="stat"><div class="label">RMSSD</div><b id="rmssd">–</b> <small>ms</small></div>
    <div class="stat"><div class="label">SDNN</div><b id="sdnn">–</b> <small>ms</small></div>
    <div class="stat"><div class="label">pNN50</div><b id="pnn50">–</b> <small>%</small></div>
    <div class="stat"><div class="label">Breathing</div><b id="resp">–</b> <small>/min <span id="resp-source"></span></small></div>
    <div class="stat"><div class="label">DFA alpha1</div><b id="dfa">–</b> <small id="dfa-zone"></small></div>
  </section>
  <section class="tile" id="pacer" data-active="0">
    <div class="label">Breathing pacer</div>
    <div class="stage"><div id="pacer-circle"></div><div id="pacer-text">–</div></div>
    <div id="pacer-info" class="sub">No pacer: start a paced session with <code>hr-gateway breathe</code> (or <code>--pattern</code>).</div>
    <div class="answer sub"><span>RSA <b id="rsa">–</b> bpm</span><span>adherence <b id="adherence">–</b> %</span>
      <span>coherence <b id="coherence">–</b></span></div>
  </section>
  <section class="tile wide" id="straps-tile" hidden><div class="label">Straps (the numbers above are the ★ one's)</div>
    <table><thead><tr><th>Device</th><th>Mean</th><th>RMSSD</th><th>DFA alpha1</th></tr></thead>
      <tbody id="straps"></tbody></table></section>
  <section class="tile wide"><div class="label">Heart rate, last 5 minutes (window mean)</div><canvas id="hr-chart"></canvas></section>
  <section class="tile wide"><div class="label">RR tachogram, last 2 minutes: last <span id="rr-last">–</span> ms,
    <span id="beats">0</span> beats</div><canvas id="rr-chart"></canvas></section>
  <section class="tile wide"><div class="label">HRV trend: RMSSD per frame, this session</div><canvas id="hrv-chart"></canvas></section>
  <section class="tile wide"><div class="label">Sources</div><ul id="sensors"></ul>
    <div id="sensors-empty" class="sub">No strap or camera reported yet.</div></section>
  <section class="tile wide"><div class="label">Sessions</div>
    <div class="sub">last summary: <span id="summary">–</span></div>
    <table><thead><tr><th>Started</th><th>Length</th><th class="hide-narrow">Mode</th><th>Pacing</th><th>Download</th></tr></thead>
      <tbody id="sessions"></tbody></table>
    <div id="sessions-note" class="sub"></div>
  </section>
</main>
<footer><button id="forget">Forget token</button>
  <label>Max heart rate <input id="hrmax" type="number" min="100" max="240" inputmode="numeric"></label></footer>
<script src="/relay.js"></script>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
const HR_SPAN_MS = 300000, RR_SPAN_MS = 120000;
const RR_COLORS = ["#55aaff", "#ffcc55", "#cc77ff", "#55dd99"];
const PHASE_TEXT = {inhale: "Breathe in", hold: "Hold", exhale: "Breathe out", hold_out: "Hold"};
const hrPoints = [];          // {t, v}: emitted_at_ms, hr_mean_bpm
const hrvPoints = [];         // {t, v}: emitted_at_ms, rmssd_ms (this session)
const rrSamples = new Map();  // "device|timestamp_ms" -> {device, t, rr}: samples with RR intervals
const sensors = new Map();    // "source|device_id" -> sensor
let sessionId = null, lastSampleAt = 0, pacerTimers = [], pacerIdle = null;
let primaryDevice = null;     // with several straps, the one the frames' top level speaks for (primary_device)

const params = new URLSearchParams(location.search);
if (params.get("hrmax")) localStorage.setItem("hrg-hrmax", params.get("hrmax"));
function hrMax() { const v = Number(localStorage.getItem("hrg-hrmax")); return v >= 100 && v <= 240 ? v : 190; }
$("hrmax").value = String(hrMax());
$("hrmax").onchange = () => { localStorage.setItem("hrg-hrmax", $("hrmax").value); showZone(Number($("hr").textContent)); };
$("forget").onclick = () => { hrRelay.forget(); location.reload(); };

function fixed(v, digits) { return typeof v === "number" && isFinite(v) && v > 0 ? v.toFixed(digits) : "–"; }

// Zones as shares of the maximum heart rate: 1 from 50 %, 2 from 60 %, 3 from 70 %, 4 from 80 %, 5 from 90 %.
function showZone(bpm) {
  const z = $("zone"), marker = $("zone-marker");
  if (!(bpm > 0)) { z.textContent = "–"; z.dataset.zone = "0"; marker.style.display = "none"; return; }
  const share = bpm / hrMax(), zone = share < 0.5 ? 0 : Math.min(5, Math.floor((share - 0.5) * 10) + 1);
  z.dataset.zone = String(zone);
  z.textContent = (zone ? "Zone " + zone : "Resting") + " · " + Math.round(share * 100) + " % of max " + hrMax();
  marker.style.display = "block";
  marker.style.left = Math.max(0, Math.min(100, (share - 0.5) * 200)) + "%";
}

// Canvases are drawn at the device's pixel density and their laid-out width.
function surface(canvas) {
  const ratio = window.devicePixelRatio || 1, w = Math.max(200, canvas.clientWidth), h = 160;
  if (canvas.width !== Math.round(w * ratio)) { canvas.width = Math.round(w * ratio); canvas.height = Math.round(h * ratio); }
  const g = canvas.getContext("2d");
  g.setTransform(ratio, 0, 0, ratio, 0, 0);
  g.clearRect(0, 0, w, h);
  return {g, w, h};
}

// One chart: series of {t, v} on a time axis ending at the newest point and spanning the data, at least a quarter
// of spanMs and at most spanMs; grid and value labels in grey.
function plot(canvas, series, spanMs, pad) {
  const {g, w, h} = surface(canvas), left = 40;
  const all = series.flatMap((s) => s.points);
  g.font = "12px system-ui, sans-serif"; g.fillStyle = "#777";
  if (all.length === 0) { g.fillText("waiting for data", left, h / 2); return; }
  const end = Math.max(...all.map((p) => p.t)), first = Math.min(...all.map((p) => p.t));
  const start = Math.min(end - spanMs / 4, Math.max(end - spanMs, first));
  const shown = all.filter((p) => p.t >= start);
  const lo = Math.min(...shown.map((p) => p.v)) - pad, hi = Math.max(...shown.map((p) => p.v)) + pad;
  const x = (t) => left + (t - start) * (w - left - 4) / (end - start);
  const y = (v) => h - 6 - (v - lo) * (h - 12) / (hi - lo);
  g.strokeStyle = "#2a2e38"; g.lineWidth = 1;
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

function drawHR() { plot($("hr-chart"), [{color: "#ff5555", points: hrPoints}], HR_SPAN_MS, 5); }
// The whole session, however long (at least a minute wide).
function drawHRV() {
  const span = hrvPoints.length ? hrvPoints[hrvPoints.length - 1].t - hrvPoints[0].t : 0;
  plot($("hrv-chart"), [{color: "#55dd88", points: hrvPoints}], Math.max(60000, span), 5);
}

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

// The big number: the newest reading of a strap (or camera) when raw samples come, else the frame's mean.
function showHR(bpm, seq, source, device) {
  if (!(bpm > 0)) return;
  $("hr").textContent = bpm.toFixed(0);
  $("hr").dataset.seq = String(seq);
  $("hr").dataset.source = source;
  $("hr").dataset.device = device || "";
  showZone(bpm);
}

function showSensors() {
  const ul = $("sensors");
  ul.replaceChildren();
  for (const s of sensors.values()) {
    const li = document.createElement("li");
    li.dataset.source = s.source; li.dataset.device = s.device_id || ""; li.dataset.state = s.state;
    const name = Object.assign(document.createElement("span"), {className: "name", textContent: s.device_id || s.source});
    let text = s.source + " · " + s.state;
    if (typeof s.battery_percent === "number") { text += " · battery " + s.battery_percent + " %"; li.dataset.battery = String(s.battery_percent); }
    if (s.message) text += " · " + s.message;
    li.append(name, Object.assign(document.createElement("span"), {className: "sub", textContent: text}));
    ul.append(li);
  }
  $("sensors-empty").hidden = sensors.size > 0;
}

function showFrame(m) {
  const x = m.metrics || {};
  if (m.session_id !== sessionId) newSession(m.session_id);
  $("empty").hidden = true;
  $("metrics").dataset.seq = String(m.seq); $("metrics").dataset.session = m.session_id;
  primaryDevice = x.primary_device || null;
  $("hr-mean").textContent = fixed(x.hr_mean_bpm, 0);
  if (Date.now() - lastSampleAt > 3000 || $("hr").dataset.source !== "sample") showHR(x.hr_mean_bpm, m.seq, "frame");
  $("rmssd").textContent = fixed(x.rmssd_ms, 0);
  $("sdnn").textContent = fixed(x.hr_sdnn_ms, 0);
  $("pnn50").textContent = x.rr_count ? x.pnn50.toFixed(0) : "–";
  const fromRR = typeof x.resp_rate_rr_bpm === "number";
  $("resp").textContent = fixed(fromRR ? x.resp_rate_rr_bpm : x.breathing_rate_bpm, 1);
  $("resp-source").textContent = fromRR ? "from RR" : typeof x.breathing_rate_bpm === "number" ? "camera" : "";
  $("rsa").textContent = fixed(x.rsa_amplitude_bpm, 1);
  $("adherence").textContent = typeof x.breathing_adherence === "number" ? (100 * x.breathing_adherence).toFixed(0) : "–";
  $("coherence").textContent = typeof x.coherence === "number" ? x.coherence.toFixed(2) : "–";
  // Live DFA alpha1 (from 2 minutes of beats on; docs/hrv.md §10) against 0.75 (aerobic threshold) and 0.5
  // (anaerobic threshold), or why it is withheld.
  const a = x.live_dfa_alpha1;
  $("dfa").textContent = typeof a === "number" ? a.toFixed(2) : "–";
  $("dfa-zone").textContent = typeof a === "number"
    ? (a >= 0.75 ? "aerobic" : a >= 0.5 ? "past the aerobic threshold" : "past the anaerobic threshold")
    : x.live_dfa_withheld ? "withheld: " + x.live_dfa_withheld : "";
  showStraps(x);
  $("frame").textContent = "· frame " + m.seq + " at " + new Date(m.emitted_at_ms).toLocaleTimeString();
  addFramePoints(m);
}

// With several straps (a team, a lab's placements), each one's own window values; the top-level one marked.
function showStraps(x) {
  const devices = x.devices || {};
  const ids = Object.keys(devices).sort();
  $("straps-tile").hidden = ids.length < 2;
  const rows = ids.map((id) => {
    const d = devices[id], tr = document.createElement("tr");
    tr.dataset.device = id;
    if (id === x.primary_device) tr.dataset.primary = "1";
    const cells = [(id === x.primary_device ? "★ " : "") + id, fixed(d.hr_mean_bpm, 0) + " bpm",
      d.rr_count ? fixed(d.rmssd_ms, 0) + " ms" : "–",
      typeof d.live_dfa_alpha1 === "number" ? d.live_dfa_alpha1.toFixed(2) : "–"];
    for (const c of cells) tr.appendChild(Object.assign(document.createElement("td"), {textContent: c}));
    return tr;
  });
  $("straps").replaceChildren(...rows);
}

// A frame's points on the charts, in time order: a replayed frame (hello recent_frames_ms) can arrive after a live one
// that was published while the page's hello was on its way.
function addFramePoints(m) {
  const x = m.metrics || {};
  const insert = (points, p) => {
    let i = points.length;
    while (i > 0 && points[i - 1].t > p.t) i--;
    if (i === 0 || points[i - 1].t !== p.t) points.splice(i, 0, p);
  };
  if (x.hr_mean_bpm > 0) insert(hrPoints, {t: m.emitted_at_ms, v: x.hr_mean_bpm});
  while (hrPoints.length && hrPoints[0].t < hrPoints[hrPoints.length - 1].t - HR_SPAN_MS) hrPoints.shift();
  if (m.session_id === sessionId && x.rr_count && x.rmssd_ms > 0) insert(hrvPoints, {t: m.emitted_at_ms, v: x.rmssd_ms});
  drawHR(); drawHRV();
}

function newSession(id) {
  sessionId = id;
  primaryDevice = null;
  hrvPoints.length = 0;
  // The tachogram and its beat count are this session's.
  rrSamples.clear();
  $("beats").textContent = "0";
  plot($("rr-chart"), [], RR_SPAN_MS, 20);
  $("session").textContent = id || "none";
}

// A cue announces a phase a little ahead (starts_at_ms - emitted_at_ms): the animation starts after that lead on
// this device's own clock, so a phone whose clock is off by seconds still breathes in step. A cue sent late (its
// phase began before it was emitted) animates the rest of the phase.
function cue(m) {
  const lead = Math.max(0, Math.min(2000, m.starts_at_ms - m.emitted_at_ms));
  const late = Math.max(0, Math.min(m.phase_duration_ms, m.emitted_at_ms - m.starts_at_ms));
  const p = $("pacer");
  pacerTimers.push(setTimeout(() => {
    p.dataset.active = "1"; p.dataset.phase = m.phase; p.dataset.cycle = String(m.cycle);
    p.dataset.durationMs = String(m.phase_duration_ms);
    const circle = $("pacer-circle");
    circle.style.transitionDuration = (m.phase_duration_ms - late) + "ms";
    if (m.phase === "inhale") circle.style.transform = "scale(1)";
    if (m.phase === "exhale") circle.style.transform = "scale(.4)";
    $("pacer-text").textContent = PHASE_TEXT[m.phase] || m.phase;
    const step = m.assessment_step ? "resonance assessment step " + m.assessment_step + " of " + m.assessment_steps
      : m.pattern;
    $("pacer-info").textContent = "breath " + m.cycle + " · " + (m.phase_duration_ms / 1000).toFixed(1) + " s · "
      + step + " · " + Number(m.paced_rate_bpm).toFixed(2).replace(/\.?0+$/, "") + " /min";
    clearTimeout(pacerIdle);
    pacerIdle = setTimeout(stopPacer, m.phase_duration_ms + 3000);
  }, lead));
}

function stopPacer() {
  pacerTimers.forEach(clearTimeout); pacerTimers = [];
  const p = $("pacer");
  p.dataset.active = "0"; delete p.dataset.phase;
  $("pacer-circle").style.transform = "scale(.4)";
  $("pacer-text").textContent = "–";
  $("pacer-info").textContent = "Pacer stopped.";
}

function duration(ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  return s >= 3600 ? Math.floor(s / 3600) + " h " + Math.floor(s / 60) % 60 + " min"
    : s >= 60 ? Math.floor(s / 60) + " min " + s % 60 + " s" : s + " s";
}

async function loadSessions() {
  const note = $("sessions-note"), body = $("sessions");
  let r;
  try { r = await hrRelay.fetch("/v1/sessions?limit=20"); } catch (e) { note.textContent = "Sessions could not be loaded: the gateway is unreachable."; return; }
  if (r.status === 401) { note.textContent = "Sessions need a valid token."; return; }
  if (r.status === 404) { note.textContent = "This gateway does not offer its recorded sessions."; return; }
  if (!r.ok) { note.textContent = "Sessions could not be loaded: " + (await r.text()); return; }
  const list = await r.json();
  body.replaceChildren();
  for (const s of list) {
    const tr = document.createElement("tr");
    tr.dataset.session = s.session_id;
    const cells = [new Date(s.started_at_ms).toLocaleString(), s.ended_at_ms ? duration(s.ended_at_ms - s.started_at_ms) : s.state,
      s.mode, s.pacing || "–"];
    cells.forEach((text, i) => tr.append(Object.assign(document.createElement("td"), {textContent: text, className: i === 2 ? "hide-narrow" : ""})));
    const links = document.createElement("td");
    const waves = (s.waveforms || []).map(w => w + "-csv");
    for (const format of ["csv", "edf", "json", ...waves]) {
      const a = Object.assign(document.createElement("a"), {href: "#", textContent: format.toUpperCase().replace("-CSV", " CSV")});
      a.dataset.format = format;
      a.onclick = (e) => { e.preventDefault(); download(s.session_id, format); };
      links.append(a);
    }
    tr.append(links);
    body.append(tr);
  }
  note.textContent = list.length ? "" : "No recorded sessions yet.";
}

// Downloads go through fetch with the token in a header (never in a URL), then a local blob.
async function download(id, format) {
  const r = await hrRelay.fetch("/v1/sessions/" + encodeURIComponent(id) + "/export?format=" + format);
  if (!r.ok) { $("sessions-note").textContent = "Download failed: " + (await r.text()); return; }
  const url = URL.createObjectURL(await r.blob());
  const a = Object.assign(document.createElement("a"), {href: url, download: "session-" + id + "." + format.replace("-csv", ".csv")});
  document.body.append(a); a.click(); a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

function handle(m) {
  switch (m.type) {
    case "gateway_status":
      if (m.session) { if (m.session.session_id !== sessionId) newSession(m.session.session_id); }
      else $("session").textContent = "none";
      $("empty").hidden = !!m.session || !!$("metrics").dataset.seq;
      sensors.clear();
      for (const s of m.sensors || []) sensors.set(s.source + "|" + (s.device_id || ""), s);
      showSensors(); break;
    case "session_started":
      newSession(m.session_id); $("empty").hidden = true; loadSessions(); break;
    case "sensor_status":
      sensors.set(m.source + "|" + (m.device_id || ""), m);
      showSensors(); break;
    case "session_frame":
      // A replayed frame older than the one shown only adds its points to the charts.
      if (!m.replayed || m.seq > Number($("metrics").dataset.seq || 0)) showFrame(m);
      else addFramePoints(m);
      break;
    case "biosignal_frame": {
      // A replayed frame of an earlier session (hello's recent frames) is not this session's beats.
      if (sessionId && m.session_id !== sessionId) break;
      addSamples(m.samples);
      // With several straps, the newest reading of the one at the frames' top level: the newest of all would show
      // two people's heart rates in turn.
      const newest = (m.samples || []).filter((s) => s.bpm > 0 && s.source !== "camera_rppg"
          && (!primaryDevice || (s.device_id || s.source) === primaryDevice))
        .reduce((a, b) => (!a || b.timestamp_ms >= a.timestamp_ms ? b : a), null);
      if (newest && !m.replayed) {
        showHR(newest.bpm, m.seq, "sample", newest.device_id || newest.source); lastSampleAt = Date.now();
      }
      if (!rrSamples.size) break;
      if (!m.replayed || m.seq > Number($("rr-chart").dataset.seq || 0)) $("rr-chart").dataset.seq = String(m.seq);
      drawRR(); break;
    }
    case "breathing_cue":
      if (!m.replayed) cue(m);
      break;
    case "session_summary": {
      const x = m.metrics || {};
      const resonance = x.resonance_assessment && x.resonance_assessment.resonance_rate_bpm;
      $("summary").textContent = m.session_id + ": " + m.duration_actual_sec + " s, mean " + fixed(x.hr_mean_bpm, 0)
        + " bpm, RMSSD " + fixed(x.rmssd_ms, 0) + " ms" + (resonance ? ", resonance " + resonance + " /min" : "");
      $("summary").dataset.session = m.session_id;
      stopPacer(); loadSessions();
      break;
    }
    case "session_error":
      $("summary").textContent = m.session_id + ": ended with an error: " + m.message;
      $("summary").dataset.session = m.session_id;
      stopPacer(); loadSessions();
      break;
  }
}

function connection(state, detail) {
  const c = $("conn"), auth = $("auth");
  c.dataset.state = state;
  auth.hidden = state !== "refused";
  if (state === "connecting") c.textContent = "connecting…";
  if (state === "connected") { c.textContent = "connected"; loadSessions(); }
  if (state === "disconnected") c.textContent = "connection lost, retrying in " + (detail.retryMs / 1000).toFixed(1) + " s";
  if (state === "refused") {
    c.textContent = "token refused (HTTP 401)";
    auth.replaceChildren(
      (detail.hadToken ? "The gateway refused this token (wrong or revoked). " : "The gateway needs a token. ")
        + "Create one on the gateway with ",
      Object.assign(document.createElement("code"), {textContent: "hr-gateway token create --read-only --name browser"}),
      ", then open this page as /#token=TOKEN.");
  }
}

window.addEventListener("resize", () => { drawHR(); drawHRV(); if (rrSamples.size) drawRR(); });
drawHR(); drawHRV(); plot($("rr-chart"), [], RR_SPAN_MS, 20);
hrRelay.connect({onMessage: handle, onState: connection, recentFramesMs: HR_SPAN_MS});
</script>
</body>
</html>
"""#
}
