// LiveHost avatar preview: plays a room's avatar segments in order and animates the mouth from the
// viseme timeline (t_ms is relative to the segment's audio, so it is compared to audio.currentTime).
// A cancel segment drops the request's queued segments and stops it if it is playing.
// window.preview exposes the page's state (used by the headless-browser test).
"use strict";

// Mouth shape per viseme (docs/visemes.md): lip width/height, inner opening, teeth, tongue.
const SHAPES = {
  sil: { rx: 22, ry: 4, irx: 18, iry: 1 },
  PP: { rx: 20, ry: 3, irx: 16, iry: 0.5 },
  FF: { rx: 22, ry: 6, irx: 17, iry: 3, teeth: true },
  TH: { rx: 22, ry: 8, irx: 17, iry: 5, tongue: true },
  DD: { rx: 24, ry: 10, irx: 19, iry: 6, teeth: true },
  kk: { rx: 24, ry: 11, irx: 19, iry: 7 },
  CH: { rx: 17, ry: 12, irx: 12, iry: 8, teeth: true },
  SS: { rx: 26, ry: 6, irx: 22, iry: 3, teeth: true },
  nn: { rx: 22, ry: 9, irx: 17, iry: 5, tongue: true },
  RR: { rx: 18, ry: 10, irx: 13, iry: 6 },
  aa: { rx: 26, ry: 19, irx: 21, iry: 15, tongue: true },
  E: { rx: 28, ry: 13, irx: 23, iry: 9 },
  ih: { rx: 28, ry: 9, irx: 24, iry: 5, teeth: true },
  oh: { rx: 16, ry: 16, irx: 11, iry: 12 },
  ou: { rx: 11, ry: 11, irx: 7, iry: 7 },
};

const params = new URLSearchParams(location.search);
const room = params.get("room") || "";
const $ = (id) => document.getElementById(id);
const audio = $("audio");
const mouth = $("mouth");

const state = {
  room, connected: false, received: [], played: [], cancelled: [], mouthLog: [],
  current: null, status: "idle", blocked: false, lastEventId: null, opens: 0, keepalives: 0,
};
window.preview = state;

let queue = [];
const cancelledIds = new Set();
let textClock = null; // for segments without audio: performance.now() at start
let current = null;

function setStatus(s, label) {
  state.status = s;
  $("status").dataset.state = s;
  $("status").textContent = label || s;
}

function setMouth(v) {
  const shape = SHAPES[v] || SHAPES.sil;
  if (mouth.dataset.viseme === v) return;
  mouth.dataset.viseme = v;
  mouth.setAttribute("class", "viseme-" + v);
  $("lips").setAttribute("rx", shape.rx);
  $("lips").setAttribute("ry", shape.ry);
  $("mouth-inner").setAttribute("rx", shape.irx);
  $("mouth-inner").setAttribute("ry", shape.iry);
  $("teeth").setAttribute("visibility", shape.teeth ? "visible" : "hidden");
  $("tongue").setAttribute("visibility", shape.tongue ? "visible" : "hidden");
  state.mouthLog.push({ v, t: current ? Math.round(playTimeMs()) : null, at: performance.now() });
}

function visemeAt(visemes, tMs) {
  let v = "sil";
  for (const ev of visemes || []) {
    if (ev.t_ms > tMs) break;
    v = ev.viseme;
  }
  return v;
}

function playTimeMs() {
  if (!current) return 0;
  if (current.audio_url) return audio.currentTime * 1000;
  return textClock === null ? 0 : performance.now() - textClock;
}

function logItem(seg) {
  const li = document.createElement("li");
  li.id = `seg-${seg.request_id}-${seg.seq}`;
  if (seg.cancel) {
    // a text badge drawn with CSS: no symbol glyph that a font may lack (it would render as a box)
    const badge = document.createElement("span");
    badge.className = "badge";
    badge.textContent = "cancelled";
    li.append(badge, ` ${seg.request_id}` + (seg.reason ? ` (${seg.reason})` : ""));
    li.className = "cancel";
  } else {
    li.textContent = `${seg.request_id} #${seg.seq}: ${seg.text}`;
  }
  $("log").appendChild(li);
  li.scrollIntoView({ block: "nearest" });
}

function mark(seg, cls) {
  const li = $(`seg-${seg.request_id}-${seg.seq}`);
  if (li) li.className = cls;
}

function onSegment(seg) {
  state.received.push(seg);
  logItem(seg);
  if (seg.cancel) {
    cancelRequest(seg.request_id);
    return;
  }
  if (cancelledIds.has(seg.request_id)) return;
  queue.push(seg);
  if (!current) playNext();
}

function cancelRequest(requestId) {
  cancelledIds.add(requestId);
  state.cancelled.push(requestId);
  for (const seg of queue) if (seg.request_id === requestId) mark(seg, "dropped");
  queue = queue.filter((s) => s.request_id !== requestId);
  if (current && current.request_id === requestId) {
    audio.pause();
    mark(current, "dropped");
    current = null;
    state.current = null;
    textClock = null;
    setMouth("sil");
    $("caption").textContent = "";
    setStatus("cancelled", `cancelled (${requestId})`);
    playNext(true);
  }
}

function finish() {
  if (!current) return;
  state.played.push({ request_id: current.request_id, seq: current.seq });
  mark(current, "");
  current = null;
  state.current = null;
  textClock = null;
  playNext();
}

function playNext(keepStatus) {
  current = queue.shift() || null;
  state.current = current && { request_id: current.request_id, seq: current.seq };
  if (!current) {
    setMouth("sil");
    if (!keepStatus) setStatus("idle");
    return;
  }
  mark(current, "playing");
  $("caption").textContent = current.text;
  setStatus("playing", `playing ${current.request_id} #${current.seq}`);
  if (current.audio_url) {
    audio.src = current.audio_url;
    const seg = current;
    audio.play().then(() => { state.blocked = false; $("unlock").hidden = true; }).catch((err) => {
      // A play() interrupted by a cancel (pause) or by the next segment is not this segment's failure.
      if (current !== seg || (err && err.name === "AbortError")) return;
      // Autoplay needs a user gesture in most browsers: ask for one click.
      if (err && err.name === "NotAllowedError") {
        state.blocked = true;
        $("unlock").hidden = false;
      } else {
        console.warn("audio failed", err);
        finish();
      }
    });
  } else {
    textClock = performance.now(); // subtitles only: show the text for the segment's duration
  }
}

audio.addEventListener("ended", finish);
audio.addEventListener("error", () => { if (current && current.audio_url) finish(); });
$("unlock").addEventListener("click", () => {
  $("unlock").hidden = true;
  if (current && current.audio_url) audio.play();
});

function tick() {
  if (current) {
    const t = playTimeMs();
    setMouth(visemeAt(current.visemes, t));
    if (!current.audio_url && t >= current.end_ms - current.start_ms) finish();
  }
}
setInterval(tick, 15);

function connect() {
  $("room").textContent = room || "(none: add ?room=ROOM)";
  if (!room) return;
  const replay = params.get("replay") ? "?replay=1" : "";
  const es = new EventSource(`/api/rooms/${encodeURIComponent(room)}/segments${replay}`);
  // EventSource reconnects by itself and sends the last event id it saw (Last-Event-ID): the server
  // resumes after it, so a reconnect loses no segment.
  es.onopen = () => {
    state.connected = true;
    state.opens += 1;
    $("conn").dataset.state = "open";
    $("conn").textContent = "connected";
  };
  es.onerror = () => {
    state.connected = false;
    $("conn").dataset.state = "error";
    $("conn").textContent = "reconnecting…";
  };
  es.addEventListener("segment", (e) => {
    state.lastEventId = e.lastEventId;
    onSegment(JSON.parse(e.data));
  });
}
connect();
