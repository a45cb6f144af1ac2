/// The page served at `GET /overlay`: a heart-rate overlay for streaming software (an OBS browser source), on a
/// transparent background, with a heart that beats at the current rate. No external resources.
///
/// Query string (all optional):
/// - `metric`: `hr` (default: the newest reading, else the frame's mean), `rmssd` (ms), `dfa` (live DFA alpha1, two
///   decimals: for a ramp test on stream);
/// - `device`: one device's values (a strap's address, or `camera_rppg`): a stream of a team gets an overlay per
///   rider. Default: the session's, which with several straps is the one at the frames' top level (`primary_device`),
///   and a strap's reading rather than the camera's when both send;
/// - `color`: CSS colour of the number and the heart (`ff4455`, `%23ff4455` or a name; default `#ff4455`);
/// - `size`: height of the number in CSS pixels (16–600, default 120);
/// - `label`: `0` hides the unit;
/// - `heart`: `0` hides the heart;
/// - `shadow`: `0` removes the outline that keeps the number readable on any video.
///
/// The token comes from the URL fragment (`/overlay#token=TOKEN`), as for the dashboard (the connection is
/// `/relay.js`'s, `RelayClientScript`); a read-only token is enough.
/// The number goes blank (`–`) when no reading came for 10 s, and the overlay says nothing else on screen: connection
/// problems are shown as a small mark only (`data-conn` on `<body>` says which; `data-frame-seq` there is the `seq` of
/// the newest `session_frame` handled, shown or not).
/// Stable ids for tests: `value` (with `data-seq` of the event shown, `data-source` and, for a reading, `data-device`),
/// `unit`, `heart`.
enum OverlayPage {
    static let html = #"""
<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>hr-gateway overlay</title>
<link rel="icon" href="data:,">
<style>
  html, body { background: transparent; margin: 0; overflow: hidden; }
  body { font-family: system-ui, sans-serif; font-weight: 800; display: flex; align-items: center; gap: .25em;
         padding: .2em; color: var(--color); font-size: var(--size); line-height: 1; }
  body.shadow { text-shadow: 0 0 .06em #000, 0 0 .12em #000; }
  #heart { font-size: .6em; display: inline-block; transform-origin: center; }
  #heart.beat { animation: beat var(--period) ease-out infinite; }
  @keyframes beat { 0% { transform: scale(1.25); } 25% { transform: scale(1); } 100% { transform: scale(1); } }
  #unit { font-size: .3em; font-weight: 600; opacity: .85; align-self: flex-end; margin-bottom: .35em; }
  #value[data-stale="1"] { opacity: .5; }
  #mark { position: fixed; right: 2px; top: 2px; width: 6px; height: 6px; border-radius: 3px; background: #f80;
          display: none; }
  body[data-conn="refused"] #mark, body[data-conn="disconnected"] #mark { display: block; }
</style>
</head>
<body data-conn="connecting">
<span id="heart">&#x2764;</span><span id="value">–</span><span id="unit"></span><span id="mark"></span>
<script src="/relay.js"></script>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
const q = new URLSearchParams(location.search);
const metric = ["rmssd", "dfa"].includes(q.get("metric")) ? q.get("metric") : "hr";
function colour(v) {
  if (!v) return "#ff4455";
  return /^[0-9a-fA-F]{3,8}$/.test(v) ? "#" + v : v;
}
const size = Math.min(600, Math.max(16, Number(q.get("size")) || 120));
document.body.style.setProperty("--color", colour(q.get("color")));
document.body.style.setProperty("--size", size + "px");
document.body.style.setProperty("--period", "1s");
if (q.get("shadow") !== "0") document.body.classList.add("shadow");
if (q.get("heart") === "0") $("heart").style.display = "none";
$("unit").textContent = q.get("label") === "0" ? "" : {hr: "bpm", rmssd: "ms RMSSD", dfa: "α1"}[metric];
let lastAt = 0;
const device = q.get("device") || null;
let primary = null;  // the frames' primary_device, with several straps
const id = (s) => s.device_id || s.source;

// The reading shown: the asked device's; else the top-level strap's, any strap's, or (only then) the camera's.
function reading(samples) {
  const all = samples.filter((s) => s.bpm > 0);
  const straps = all.filter((s) => s.source !== "camera_rppg");
  const want = device || primary;
  const pool = want ? all.filter((s) => id(s) === want) : straps.length ? straps : all;
  return pool.reduce((a, b) => (!a || b.timestamp_ms >= a.timestamp_ms ? b : a), null);
}

// A frame's metrics for the asked device: its entry under `devices` when several contribute, else the frame's.
// A frame of one device does not name it: the frame is the asked device's only when that device has been seen (a
// status or a sample of it); a mistyped ?device= shows nothing rather than another strap's values.
const seen = new Set();
function metricsOf(m) {
  if (!device) return m;
  if (m.devices) return m.devices[device] || null;
  return seen.has(device) ? m : null;
}

function show(v, seq, source) {
  if (!(typeof v === "number" && isFinite(v) && v > 0)) return;
  $("value").textContent = v.toFixed(metric === "dfa" ? 2 : 0);
  $("value").dataset.seq = String(seq);
  $("value").dataset.source = source;
  $("value").dataset.stale = "0";
  lastAt = Date.now();
  if (metric === "hr") {
    document.body.style.setProperty("--period", (60 / Math.min(240, Math.max(25, v))).toFixed(3) + "s");
    $("heart").classList.add("beat");
  }
}

setInterval(() => {
  if (lastAt && Date.now() - lastAt > 10000) {
    $("value").textContent = "–"; $("value").dataset.stale = "1"; $("heart").classList.remove("beat");
  }
}, 1000);

function handle(m) {
  if (m.type === "session_started") primary = null;
  if (m.type === "sensor_status" && m.device_id) seen.add(m.device_id);
  if (m.type === "gateway_status") for (const s of m.sensors || []) if (s.device_id) seen.add(s.device_id);
  if (m.type === "biosignal_frame") for (const s of m.samples || []) seen.add(id(s));
  const s = m.type === "biosignal_frame" ? reading(m.samples || []) : null;
  if (metric === "hr" && s) {
    show(s.bpm, m.seq, "sample");
    $("value").dataset.device = id(s);
  } else if (m.type === "session_frame" && m.metrics) {
    document.body.dataset.frameSeq = String(m.seq);  // the newest frame handled, shown or not
    primary = m.metrics.primary_device || null;
    const x = metricsOf(m.metrics);
    if (!x) return;
    if (metric === "rmssd") { if (x.rr_count) show(x.rmssd_ms, m.seq, "frame"); }
    else if (metric === "dfa") { if (typeof x.live_dfa_alpha1 === "number") show(x.live_dfa_alpha1, m.seq, "frame"); }
    else if (Date.now() - lastAt > 3000 || $("value").dataset.source !== "sample") show(x.hr_mean_bpm, m.seq, "frame");
  }
}

// The fragment stays in the address: an OBS browser source reloads the URL it was given.
hrRelay.connect({onMessage: handle, keepFragment: true, onState: (state) => { document.body.dataset.conn = state; }});
</script>
</body>
</html>
"""#
}
