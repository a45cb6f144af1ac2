/// The page served at `GET /`: a live view of the relay in plain HTML and JavaScript, no external resources.
/// The token comes from the URL fragment (`/#token=TOKEN`, never sent to the server) or is asked once, and is kept
/// in the browser's localStorage; it is sent as the `bearer.TOKEN` WebSocket
/// subprotocol, since browsers cannot set an Authorization header on a WebSocket.
enum DashboardPage {
    static let html = #"""
<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>hr-gateway relay</title>
<style>
  body { font: 15px system-ui, sans-serif; margin: 1.5rem; background: #111; color: #eee; }
  h1 { font-size: 1.1rem; font-weight: 600; }
  #hr { font-size: 4rem; font-weight: 700; color: #f55; }
  #hr small { font-size: 1rem; color: #aaa; }
  .row { display: flex; gap: 2rem; flex-wrap: wrap; align-items: baseline; }
  .k { color: #999; }
  canvas { background: #1b1b1b; width: 100%; max-width: 720px; height: 160px; }
  #log { font: 12px ui-monospace, monospace; white-space: pre; max-height: 14rem; overflow: auto; color: #bbb; }
  button, input { font: inherit; }
</style>
</head>
<body>
<h1>hr-gateway relay <span id="conn" class="k">connecting…</span></h1>
<div class="row">
  <div id="hr">–<small> bpm</small></div>
  <div><span class="k">RMSSD</span> <span id="rmssd">–</span> ms</div>
  <div><span class="k">breathing</span> <span id="resp">–</span> /min</div>
  <div><span class="k">session</span> <span id="session">none</span></div>
  <div><span class="k">sensors</span> <span id="sensors">–</span></div>
</div>
<canvas id="plot" width="720" height="160"></canvas>
<p><button id="forget">Forget token</button></p>
<div id="log"></div>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
const points = [];
let lastSeq = 0, epoch = null, retry = 500;

function token() {
  const fromUrl = /[#&]token=([^&]+)/.exec(location.hash);
  if (fromUrl) { localStorage.setItem("hrg-token", decodeURIComponent(fromUrl[1])); history.replaceState(null, "", location.pathname); }
  let t = localStorage.getItem("hrg-token");
  if (!t) { t = prompt("Relay token (hr-gateway token create --read-only --name browser)") || ""; localStorage.setItem("hrg-token", t); }
  return t;
}
$("forget").onclick = () => { localStorage.removeItem("hrg-token"); location.reload(); };

function log(m) {
  const el = $("log");
  el.textContent = (JSON.stringify(m) + "\n" + el.textContent).slice(0, 20000);
}

function draw() {
  const c = $("plot"), g = c.getContext("2d");
  g.clearRect(0, 0, c.width, c.height);
  if (points.length < 2) return;
  const lo = Math.min(...points) - 5, hi = Math.max(...points) + 5;
  g.strokeStyle = "#f55"; g.lineWidth = 2; g.beginPath();
  points.forEach((v, i) => {
    const x = i * c.width / (points.length - 1), y = c.height - (v - lo) * c.height / (hi - lo);
    i ? g.lineTo(x, y) : g.moveTo(x, y);
  });
  g.stroke();
}

function handle(m) {
  if (m.relay_seq) lastSeq = Math.max(lastSeq, m.relay_seq);
  switch (m.type) {
    case "welcome":
      if (epoch === m.epoch && lastSeq) ws.send(JSON.stringify({command: "hello", resume: {epoch, last_seq: lastSeq}}));
      epoch = m.epoch; break;
    case "gateway_status":
      $("session").textContent = m.session ? m.session.session_id : "none";
      $("sensors").textContent = m.sensors.map((s) => s.source + ": " + s.state).join(", ") || "–";
      break;
    case "session_frame": {
      const x = m.metrics || {};
      if (x.hr_mean_bpm) { $("hr").firstChild.textContent = x.hr_mean_bpm.toFixed(0); points.push(x.hr_mean_bpm); }
      if (points.length > 120) points.shift();
      if (x.rmssd_ms) $("rmssd").textContent = x.rmssd_ms.toFixed(0);
      const resp = x.resp_rate_rr_bpm;
      if (resp) $("resp").textContent = resp.toFixed(1);
      draw(); break;
    }
  }
  if (m.delivery === "reliable") ws.send(JSON.stringify({command: "ack", relay_seq: m.relay_seq}));
  if (m.type !== "heartbeat" && m.type !== "biosignal_frame") log(m);
}

let ws;
function connect() {
  const url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/v1/relay";
  ws = new WebSocket(url, ["hrrelay.v1", "bearer." + token()]);
  ws.onopen = () => { $("conn").textContent = "connected"; retry = 500; };
  ws.onmessage = (e) => handle(JSON.parse(e.data));
  ws.onclose = () => {
    $("conn").textContent = "disconnected, retrying…";
    setTimeout(connect, retry); retry = Math.min(retry * 2, 10000);
  };
}
connect();
</script>
</body>
</html>
"""#
}
