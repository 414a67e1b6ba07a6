'use strict';
// The report's page: markup and styles. `title` arrives escaped, `json` safe for a
// <script> element, `script` the client (./client/*.js, inlined by ./index.js).

function page({ title, json, script }) {
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title}</title>
<link rel="icon" href="data:,">
<style>${CSS}</style>
</head>
<body>
<header>
  <h1>${title}</h1>
  <div class="totals">showing <b id="total-samples">0</b><span id="total-unit"> samples</span> &middot; filter: <b id="active-filter">all samples</b>
  &middot; time: <b id="active-range">whole recording</b>
  <button id="reset" type="button" title="Clear the label filter, the time range and the zoom">reset</button>
  <label class="opt" title="V8 records no stack for garbage-collection samples. Checked, each one is shown under the stack of the JS sample just before it (hatched boxes): an attribution, not a measurement."><input type="checkbox" id="gc-attribute"> GC under the code that ran just before it</label></div>
  <div id="summary"></div>
</header>
<section id="blocks-section" hidden>
  <h2>Event-loop blocks <span class="hint" id="blocks-note"></span></h2>
  <div id="blocks-list"><table id="blocks"><thead><tr><th>when</th><th>duration</th><th class="l">requests</th><th class="l">ran in (samples), heaviest stack</th><th>samples</th></tr></thead><tbody></tbody></table></div>
</section>
<section id="timeline-section">
  <div class="toolbar"><b>Timeline</b>
    <label>color by <select id="timeline-color"></select></label>
    <span id="range-text" class="hint">drag across the timeline to select a time range; it filters every view</span>
    <button id="clear-range" type="button" disabled>clear range</button>
    <span class="legend" id="timeline-legend"></span>
  </div>
  <div id="timeline"><canvas id="timeline-canvas" height="90"></canvas><div id="block-marks"></div><div id="brush" hidden></div></div>
  <div id="timeline-axis"></div>
  <div id="timeline-details" class="details">&nbsp;</div>
</section>
<nav class="tabs" id="tabs">
  <button type="button" data-view="flame">Flame graph</button>
  <button type="button" data-view="timeorder">Time order</button>
  <button type="button" data-view="sandwich">Sandwich</button>
  <button type="button" data-view="diff">Diff</button>
</nav>
<section id="view-flame" class="view">
  <div class="toolbar">
    <input id="search" type="search" placeholder="search functions (substring)" autocomplete="off">
    <span id="search-result"></span>
    <button id="reset-zoom" type="button">reset zoom</button>
    <button id="to-sandwich" type="button" disabled title="Callers and callees of the function zoomed into">sandwich of zoomed</button>
    <label class="opt" title="The samples taken while the event loop waited for work. Off, they are left out of the flame graph, the sandwich and the top functions (their share is shown beside this box); the timeline shows them either way."><input type="checkbox" id="show-idle"> show (idle)</label>
    <span id="idle-share" class="hint"></span>
    <span class="legend" id="flame-legend"><i class="c-app"></i>your code <i class="c-dependency"></i>dependencies (node_modules) <i class="c-node"></i>Node (node:) <i class="c-native"></i>native <i class="c-pseudo"></i>not JS <i class="c-attr"></i>GC (attributed)</span>
  </div>
  <div id="flamegraph" class="flame"></div>
  <div id="details" class="details">&nbsp;</div>
</section>
<section id="view-timeorder" class="view" hidden>
  <div class="toolbar"><span class="hint">Each column is a sample, in time order over the selected range (root at the top); a stall is one wide tower. Click a box for its sandwich.</span></div>
  <div id="timeorder"><canvas id="timeorder-canvas"></canvas></div>
  <div id="timeorder-details" class="details">&nbsp;</div>
</section>
<section id="view-sandwich" class="view" hidden>
  <div class="toolbar"><label>function <select id="sandwich-fn"></select></label> <span id="sandwich-stats"></span></div>
  <div id="sandwich-empty" class="hint" hidden>No function selected: pick one above, click a name in the top functions, or zoom into a box in the flame graph.</div>
  <div id="sandwich-body">
    <h3>Callers <span class="hint">(who called it, merged over every call site; outermost call when recursive)</span></h3>
    <div id="sandwich-callers" class="flame"></div>
    <h3>Callees <span class="hint">(what it called)</span></h3>
    <div id="sandwich-callees" class="flame"></div>
    <div id="sandwich-details" class="details">&nbsp;</div>
    <h3>Hot lines <span class="hint" id="lines-note"></span></h3>
    <table id="lines-table"><thead><tr><th>line</th><th>samples</th><th>% of self</th><th class="l">source</th></tr></thead><tbody></tbody></table>
  </div>
</section>
<section id="view-diff" class="view" hidden>
  <div class="toolbar">
    <label>compare <select id="diff-mode"></select></label>
    <span id="diff-label-pick"><label>key <select id="diff-key"></select></label>
      <label>A <select id="diff-a"></select></label> <label>B <select id="diff-b"></select></label></span>
    <label class="opt" title="Match functions by name and file only, so code that moved between the two profiles still matches"><input type="checkbox" id="diff-ignore-lines"> ignore line numbers</label>
    <label class="opt" title="A selfprof trace (.json or .json.gz) to compare this profile with; it is read in the page, nothing is uploaded">baseline file <input type="file" id="diff-file" accept=".json,.gz,application/json,application/gzip"></label>
    <span id="diff-file-status" class="hint"></span>
  </div>
  <div id="diff-legend"></div>
  <div id="diff-summary" class="hint"></div>
  <div id="diff-flame" class="flame"></div>
  <div id="diff-details" class="details">&nbsp;</div>
  <h3>Functions by change in <select id="diff-sort"><option value="self">self share</option><option value="total">total share</option></select> <select id="diff-limit"><option>25</option><option>100</option><option value="0">all</option></select></h3>
  <table id="diff-table"><thead><tr><th>&Delta; self</th><th>self A</th><th>self B</th><th>&Delta; total</th><th>total A</th><th>total B</th><th class="l">function</th><th class="l">location</th></tr></thead><tbody></tbody></table>
</section>
<div class="columns">
<section class="top">
  <h2>Top functions <select id="top-limit"><option>25</option><option>50</option><option>100</option><option value="0">all</option></select>
  <span class="hint">click a name for its sandwich, &#8981; to find it in the flame graph</span></h2>
  <table id="top-functions"><thead><tr><th>self</th><th>self %</th><th>total</th><th>total %</th><th class="l">function</th><th class="l">location</th></tr></thead><tbody></tbody></table>
</section>
<section class="labels">
  <h2>Samples by label <select id="label-key"></select></h2>
  <button id="all-samples" type="button">all samples</button>
  <table id="label-values"><thead><tr><th class="l">value</th><th>samples</th><th>%</th></tr></thead><tbody></tbody></table>
</section>
</div>
<script type="application/json" id="trace-data">${json}</script>
<script>${script}</script>
</body>
</html>
`;
}

const CSS = `
*{box-sizing:border-box}
body{margin:0;padding:12px 16px;font:13px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;color:#1d1d1f;background:#fafafa}
h1{font-size:18px;margin:0 0 4px}
h2{font-size:14px;margin:16px 0 6px}
h3{font-size:13px;margin:10px 0 4px}
header{border-bottom:1px solid #ddd;padding-bottom:8px;margin-bottom:8px}
.totals b{font-variant-numeric:tabular-nums}
#summary{color:#555;margin-top:4px}
.hint{color:#666;font-weight:normal;font-size:12px}
.opt{margin-left:12px;color:#333;cursor:pointer}
button{font:inherit;padding:1px 8px;cursor:pointer}
.toolbar{display:flex;gap:10px;align-items:center;margin-bottom:6px;flex-wrap:wrap}
#search{width:260px;font:inherit;padding:2px 6px}
#search-result{color:#7a1f8a;min-width:12em}
.legend{margin-left:auto;color:#555}
.legend i{display:inline-block;width:10px;height:10px;margin:0 3px 0 8px;vertical-align:-1px;border-radius:2px}
.c-app{background:hsl(24,85%,62%)}.c-dependency{background:hsl(215,55%,70%)}.c-node{background:hsl(150,38%,63%)}.c-native{background:hsl(275,38%,75%)}.c-pseudo{background:#bdbdbd}
.c-attr{background:repeating-linear-gradient(135deg,#9e9e9e 0 3px,#d8d8d8 3px 6px)}
#timeline-section{margin-bottom:8px}
#timeline{position:relative;width:100%;height:90px;background:#fff;border:1px solid #ddd;cursor:crosshair;user-select:none}
#timeline-canvas{display:block;width:100%;height:88px}
#brush{position:absolute;top:0;bottom:0;background:rgba(60,90,220,.14);border-left:2px solid #3c5adc;border-right:2px solid #3c5adc;pointer-events:none}
#timeline-axis{position:relative;height:16px;font-size:11px;color:#555}
#timeline-axis span{position:absolute;top:0;transform:translateX(-50%);white-space:nowrap}
#range-text{font-variant-numeric:tabular-nums}
#block-marks{position:absolute;inset:0;pointer-events:none}
#block-marks div{position:absolute;top:0;height:5px;background:#c62828;opacity:.8}
#blocks-section{margin-bottom:8px}
#blocks-list{max-height:30vh;overflow:auto;border:1px solid #ddd}
#blocks-list table{border:none}
#blocks thead th{position:sticky;top:0}
#blocks tbody tr{cursor:pointer}
#blocks tbody tr:hover{background:#fff0f0}
#blocks tbody tr.active{background:#ffe0e0;font-weight:600}
#blocks tbody tr.static{cursor:default}
#blocks td.stack{font-family:ui-monospace,Menlo,Consolas,monospace;max-width:640px}
#blocks td.stack div{overflow:hidden;text-overflow:ellipsis}
#blocks td.req{max-width:420px}
.tabs{display:flex;gap:2px;border-bottom:1px solid #bbb;margin:10px 0 8px}
.tabs button{border:1px solid #bbb;border-bottom:none;background:#eee;padding:4px 14px;border-radius:4px 4px 0 0;margin-bottom:-1px}
.tabs button.active{background:#fafafa;font-weight:600;border-bottom:1px solid #fafafa}
.flame{position:relative;width:100%;overflow:hidden;background:#fff;border:1px solid #ddd;min-height:40px}
.frame{position:absolute;height:17px;overflow:hidden;white-space:nowrap;text-overflow:ellipsis;font:11.5px/17px ui-monospace,Menlo,Consolas,monospace;color:#1a1a1a;padding:0 3px;border-right:1px solid #fff;border-bottom:1px solid #fff;cursor:pointer}
.frame:hover{filter:brightness(1.12);outline:1px solid #333;z-index:1}
.frame.ancestor{opacity:.55}
.frame.attributed{background-image:repeating-linear-gradient(135deg,rgba(255,255,255,.55) 0 3px,transparent 3px 6px)}
.flame.searching .frame:not(.match){opacity:.35}
.frame.match{background:#e35ef0 !important;color:#000}
.details{color:#333;font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px;margin-top:4px;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
#timeorder{position:relative;width:100%;background:#fff;border:1px solid #ddd;overflow:hidden}
#timeorder-canvas{display:block;width:100%}
#diff-legend{display:flex;align-items:center;gap:8px;margin:4px 0;flex-wrap:wrap}
#diff-legend .bar{width:240px;height:12px;border:1px solid #ccc;background:linear-gradient(90deg,hsl(215,75%,50%),hsl(215,40%,92%) 48%,#e9e9e9 50%,hsl(0,40%,92%) 52%,hsl(0,75%,50%))}
#diff-legend .text{color:#444;max-width:900px}
td.up{color:#b3261e}td.down{color:#0b57d0}
.columns{display:flex;gap:24px;align-items:flex-start;flex-wrap:wrap}
.top{flex:3 1 560px;min-width:0}.labels{flex:1 1 320px}
table{border-collapse:collapse;width:100%;background:#fff;border:1px solid #ddd}
th,td{padding:2px 8px;text-align:right;font-variant-numeric:tabular-nums;border-bottom:1px solid #eee;white-space:nowrap}
th{background:#f0f0f0;font-weight:600}
.l{text-align:left}
td.l{max-width:420px;overflow:hidden;text-overflow:ellipsis}
td.fn{font-family:ui-monospace,Menlo,Consolas,monospace}
#top-functions td.fn span{cursor:pointer;color:#0b57d0}
#top-functions td.fn button{border:none;background:none;padding:0 4px;color:#666}
td.loc{color:#666;font-size:12px}
td.src{font-family:ui-monospace,Menlo,Consolas,monospace;white-space:pre;max-width:760px}
#label-values tbody tr{cursor:pointer}
#label-values tbody tr:hover{background:#f3f0ff}
#label-values tr.active{background:#e4dcff;font-weight:600}
#label-values td.l{font-family:ui-monospace,Menlo,Consolas,monospace}
.none{color:#777;font-style:italic}
#all-samples{margin-bottom:6px}
`;

module.exports = { page };
